"""The official COCO bbox summary, computed by faster-coco-eval on in-memory COCO objects.

faster-coco-eval's `COCOeval_faster` is the maintained C++ port of pycocotools' COCOeval: the
same matching, accumulation and 12 summary numbers (tests/test_detection.py checks them equal
to pycocotools', which stays the reference there), several times faster.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from perception_gap.detection.boxes import Box
from perception_gap.errors import InsufficientData
from perception_gap.results import Result

log = logging.getLogger(__name__)

STAT_NAMES = ("AP", "AP50", "AP75", "APsmall", "APmedium", "APlarge",
              "AR1", "AR10", "AR100", "ARsmall", "ARmedium", "ARlarge")


@dataclass(frozen=True)
class DetectionSummary(Result):
    """The 12 COCO bbox summary numbers (COCOeval's, via faster-coco-eval) plus per-class AP.

    Every number is in [0, 1]; None where COCO reports -1 (no ground truth in that bucket).
    AP* are averaged over IoU 0.50:0.05:0.95 (AP50/AP75 at one IoU), AR* are the recall at
    1/10/100 detections per image; small/medium/large split at 32^2 and 96^2 px^2 of GT area.

    Attributes:
        per_class_ap: category name -> AP@[.5:.95] (area all, 100 detections), None when the
            category has no ground truth.
        n_images: images evaluated (those of the ground truth, with or without detections).
        n_gt: ground-truth boxes (crowd included). n_dets: detections evaluated.
        n_images_dets_only: images with detections but no ground-truth entry (ignored).
        n_dets_ignored: detections on those images.
    """

    AP: float | None
    AP50: float | None
    AP75: float | None
    APsmall: float | None
    APmedium: float | None
    APlarge: float | None
    AR1: float | None
    AR10: float | None
    AR100: float | None
    ARsmall: float | None
    ARmedium: float | None
    ARlarge: float | None
    per_class_ap: dict[str, float | None]
    n_images: int
    n_gt: int
    n_dets: int
    n_images_dets_only: int = 0
    n_dets_ignored: int = 0

    name: ClassVar[str] = "coco_bbox"
    unit: ClassVar[str] = "fraction in [0, 1]"
    higher_is_gap: ClassVar[bool] = False

    def stats(self) -> dict[str, float | None]:
        """The 12 numbers under their COCO names."""
        return {k: getattr(self, k) for k in STAT_NAMES}


# -- COCO evaluation -------------------------------------------------------------------------------

def coco_eval(gt: Mapping[str, Sequence[Box]], dets: Mapping[str, Sequence[Box]],
              categories: Sequence[str] | None, keys: Sequence[str] | None = None, *,
              separate_eval: bool = False):
    """Build in-memory COCO objects and a faster-coco-eval `COCOeval_faster` (not yet evaluated).

    Image ids are 1..N in the order of `keys` (default: `gt`'s order); category ids 1..K in
    the order of `categories` (default: sorted names of the GT and the detections). Ids
    start at 1 because COCOeval stores matched ids in its match arrays and reads 0 as
    "unmatched". Detections get area = w * h and iscrowd 0, as `COCO.loadRes` does.

    Args:
        separate_eval: keep the per-image evaluations (`_evalImgs_cpp`) after `evaluate()`
            instead of accumulating in the same C++ call (the bootstrap reads them).

    Returns:
        (evaluator, category names in id order, number of GT boxes, number of detections).
    """
    from faster_coco_eval import COCO, COCOeval_faster

    keys = list(gt) if keys is None else list(keys)
    if categories is None:
        names = {b.category for k in keys for b in gt[k]}
        names |= {b.category for k in keys for b in dets.get(k, ())}
        categories = sorted(names)
    cat_id = {c: i + 1 for i, c in enumerate(categories)}
    images = [{"id": i + 1, "file_name": k} for i, k in enumerate(keys)]
    cats = [{"id": i, "name": c} for c, i in cat_id.items()]
    gt_anns, dt_anns = [], []
    for i, k in enumerate(keys):
        for b in gt[k]:
            if b.category not in cat_id:
                continue
            gt_anns.append({"id": len(gt_anns) + 1, "image_id": i + 1, "category_id": cat_id[b.category],
                            "bbox": list(b.bbox), "area": b.effective_area, "iscrowd": int(b.iscrowd)})
        for b in dets.get(k, ()):
            if b.category not in cat_id:
                continue
            x, y, w, h = b.bbox
            dt_anns.append({"id": len(dt_anns) + 1, "image_id": i + 1, "category_id": cat_id[b.category],
                            "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0,
                            "score": float(b.score) if b.score is not None else 1.0})
    quiet = _quiet
    coco_gt = COCO(print_function=quiet)
    coco_gt.dataset = {"images": images, "categories": cats, "annotations": gt_anns}
    coco_gt.createIndex()
    coco_dt = COCO(print_function=quiet)
    coco_dt.dataset = {"images": images, "categories": cats, "annotations": dt_anns}
    coco_dt.createIndex()
    ev = COCOeval_faster(coco_gt, coco_dt, "bbox", print_function=quiet, separate_eval=separate_eval)
    return ev, list(categories), len(gt_anns), len(dt_anns)


def _quiet(*_args, **_kwargs) -> None:
    """faster-coco-eval's progress and summary lines go nowhere (library code never prints)."""


def _none_if_neg(v: float) -> float | None:
    v = float(v)
    return None if v < 0 or not math.isfinite(v) else v


def coco_summary(gt: Mapping[str, Sequence[Box]], dets: Mapping[str, Sequence[Box]],
                 sizes: Mapping[str, tuple[int, int]] | None = None, *,
                 categories: Sequence[str] | None = None) -> DetectionSummary:
    """The official COCO bbox numbers, by faster-coco-eval's COCOeval on in-memory COCO objects.

    Args:
        gt: image key -> ground-truth boxes. Every key is an evaluated image, boxes or not.
        dets: image key -> detections (score required; None is read as 1.0). Keys not in `gt`
            are ignored and counted.
        sizes: image key -> (width, height); carried into the COCO images for completeness
            (COCOeval does not use them).
        categories: category names to evaluate, in order (default: sorted names present).
            Boxes of other categories are ignored, as COCOeval ignores unknown category ids.

    Raises:
        InsufficientData: no ground-truth image.
    """
    if not gt:
        raise InsufficientData("coco_summary needs at least one ground-truth image, got none.")
    only = [k for k in dets if k not in gt]
    n_ignored = sum(len(dets[k]) for k in only)
    if only:
        log.info("coco_summary: %d detection images are not in the ground truth (%d boxes ignored)",
                 len(only), n_ignored)
    ev, cats, n_gt, n_dt = coco_eval(gt, dets, categories)
    if sizes:
        for im in ev.cocoGt.dataset["images"]:
            if im["file_name"] in sizes:
                im["width"], im["height"] = (int(v) for v in sizes[im["file_name"]])
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    prec = ev.eval["precision"]  # (T, R, K, A, M)
    per_class = {}
    for k, c in enumerate(cats):
        p = prec[:, :, k, 0, -1]
        per_class[c] = float(np.mean(p[p > -1])) if (p > -1).any() else None
    stats = {n: _none_if_neg(v) for n, v in zip(STAT_NAMES, ev.stats)}
    return DetectionSummary(**stats, per_class_ap=per_class, n_images=len(gt), n_gt=n_gt, n_dets=n_dt,
                            n_images_dets_only=len(only), n_dets_ignored=n_ignored)
