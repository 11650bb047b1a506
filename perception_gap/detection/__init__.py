"""Detection gap: COCO boxes, the official COCO summary, and sim-vs-real detection diagnostics.

This folder owns the detection step of the pipeline. Pure functions on in-memory boxes: no
database, no files, no printing. Images are identified by a string key (the engine uses the
frame's file name) and categories by name, because real exports renumber image and category
ids; `parse_coco` maps a COCO file's ids to those keys.

- `boxes`: `Box`; `clip_boxes`: clip boxes to the image, drop the ones left without area;
  `mask_to_boxes`: an instance-id mask (as simulators render them) -> one tight box per id.
- `parse`: `parse_coco`: a COCO ground-truth or detection-results object -> `ParsedCoco` (validated).
- `coco`: `coco_summary`: the 12 official COCO numbers, computed by faster-coco-eval's COCOeval
  (pycocotools' C++ port; equal to pycocotools' numbers within 1e-12, checked in the tests).
- `pairs`: `pair_flips`: objects found in sim but missed in the paired real frame, and the
  reverse; `latching`: false positives that sit on a neighbouring object or on another category.
- `bootstrap`: `ap_difference_ci`: paired bootstrap CI of AP(sim) - AP(real) over frame pairs.
- `practical`: `practical_size`: whether a significant AP difference is big enough to act on
  (under `AP_PRACTICAL`, no flips, overlapping recall intervals: negligible).

Conventions (COCO's): a bbox is (x, y, w, h) in pixels, x/y of the top-left corner, continuous
coordinates (a box covering pixel columns 3..5 is x=3, w=3); IoU has no "+1".
"""

from perception_gap.detection.bootstrap import MAX_N_BOOT, N_BOOT, APDifferenceCI, ap_difference_ci
from perception_gap.detection.boxes import Box, clip_boxes, mask_to_boxes, pairwise_iou, xyxy
from perception_gap.detection.coco import STAT_NAMES, DetectionSummary, coco_eval, coco_summary
from perception_gap.detection.pairs import (
    LATCH_IOU,
    MAX_EXAMPLES,
    FlipExample,
    FlipReport,
    LatchExample,
    LatchReport,
    latching,
    pair_flips,
)
from perception_gap.detection.parse import ParsedCoco, parse_coco
from perception_gap.detection.practical import AP_PRACTICAL, PracticalSize, practical_size

__all__ = [
    "AP_PRACTICAL",
    "LATCH_IOU",
    "MAX_EXAMPLES",
    "MAX_N_BOOT",
    "N_BOOT",
    "STAT_NAMES",
    "APDifferenceCI",
    "Box",
    "DetectionSummary",
    "FlipExample",
    "FlipReport",
    "LatchExample",
    "LatchReport",
    "ParsedCoco",
    "PracticalSize",
    "ap_difference_ci",
    "clip_boxes",
    "coco_eval",
    "coco_summary",
    "latching",
    "mask_to_boxes",
    "pair_flips",
    "pairwise_iou",
    "parse_coco",
    "practical_size",
    "xyxy",
]
