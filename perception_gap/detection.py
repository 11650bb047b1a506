"""Detection gap: COCO boxes, the official COCO summary, and sim-vs-real detection diagnostics.

Pure functions on in-memory boxes: no database, no files, no printing. Images are identified
by a string key (the engine uses the frame's file name) and categories by name, because real
exports renumber image and category ids; `parse_coco` maps a COCO file's ids to those keys.

- `parse_coco`: a COCO ground-truth or detection-results object -> `ParsedCoco` (validated).
- `clip_boxes`: clip boxes to the image, drop the ones left without area.
- `mask_to_boxes`: an instance-id mask (as simulators render them) -> one tight box per id.
- `coco_summary`: the 12 official COCO numbers, computed by pycocotools' COCOeval itself.
- `pair_flips`: objects found in sim but missed in the paired real frame, and the reverse.
- `latching`: false positives that sit on a neighbouring object or on another category.
- `ap_difference_ci`: paired bootstrap CI of AP(sim) - AP(real) over frame pairs.

Conventions (COCO's): a bbox is (x, y, w, h) in pixels, x/y of the top-left corner, continuous
coordinates (a box covering pixel columns 3..5 is x=3, w=3); IoU has no "+1".
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from perception_gap.errors import InputError, InsufficientData
from perception_gap.results import Result

log = logging.getLogger(__name__)

STAT_NAMES = ("AP", "AP50", "AP75", "APsmall", "APmedium", "APlarge",
              "AR1", "AR10", "AR100", "ARsmall", "ARmedium", "ARlarge")
MAX_EXAMPLES = 50
# Bootstrap: default replicates and a hard cap. Each replicate only re-accumulates the
# per-image matches COCOeval computed once (see `ap_difference_ci`), O(detections) numpy work.
N_BOOT = 200
MAX_N_BOOT = 10_000
# A false positive "touches" an object when their IoU is at least this (latching).
LATCH_IOU = 0.1


# -- results -----------------------------------------------------------------------------------------



@dataclass(frozen=True)
class Box(Result):
    """One box, ground truth or detection.

    Attributes:
        category: category name.
        bbox: (x, y, w, h) in pixels, COCO convention.
        score: detector confidence in [0, 1] (any finite number is kept); None for ground truth.
        area: area as the file gives it (COCO GT often holds the segmentation's pixel area,
            which sets the small/medium/large bucket); None means w * h.
        iscrowd: COCO crowd region (ground truth only): matches are ignored, never counted.
    """

    category: str
    bbox: tuple[float, float, float, float]
    score: float | None = None
    area: float | None = None
    iscrowd: bool = False

    @property
    def effective_area(self) -> float:
        return float(self.area) if self.area is not None else float(self.bbox[2] * self.bbox[3])


@dataclass(frozen=True)
class ParsedCoco(Result):
    """A validated COCO object, keyed by image file name and category name.

    Attributes:
        kind: `gt` or `det`.
        boxes: file name -> boxes, in file order. Every listed image has an entry (possibly
            empty), so ground-truth images without objects still count in `coco_summary`.
        sizes: file name -> (width, height) in pixels, for images that state both.
        categories: category names in file order (empty for a bare results list).
        image_names: COCO image id -> file name (pass to `parse_coco` for a bare results list).
        category_names: COCO category id -> name (likewise).
        n_boxes: boxes kept.
        n_degenerate: boxes with w <= 0 or h <= 0 (kept here; `clip_boxes` drops them).
        n_crowd: crowd boxes.
        n_images_without_boxes: listed images with no box.
    """

    kind: str
    boxes: dict[str, list[Box]]
    sizes: dict[str, tuple[int, int]]
    categories: list[str]
    image_names: dict[int, str]
    category_names: dict[int, str]
    n_boxes: int
    n_degenerate: int
    n_crowd: int
    n_images_without_boxes: int


@dataclass(frozen=True)
class DetectionSummary(Result):
    """The 12 COCO bbox summary numbers (pycocotools COCOeval) plus per-class AP.

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


@dataclass(frozen=True)
class FlipExample(Result):
    """One flipped object: found on one side of a pair, missed on the other."""

    sim_key: str
    real_key: str
    kind: str  # "sim_only" | "real_only"
    category: str
    bbox_sim: tuple[float, float, float, float]
    bbox_real: tuple[float, float, float, float]


@dataclass(frozen=True)
class FlipReport(Result):
    """Per-object detection outcome across sim/real frame pairs.

    Attributes:
        n_pairs: pairs examined.
        n_objects: ground-truth objects matched across the two frames of a pair.
        n_unmatched_sim, n_unmatched_real: objects without a counterpart on the other side
            (not in the flip counts).
        found_both, sim_only, real_only, missed_both: outcome counts over `n_objects`.
        sim_only_rate, real_only_rate: those counts / n_objects (None when no objects).
            `sim_only_rate` is the gap: objects the detector loses when going to real.
        recall_sim, recall_real: fraction of the matched objects found on each side.
        examples: up to MAX_EXAMPLES flips, in pair order.
    """

    n_pairs: int
    n_objects: int
    n_unmatched_sim: int
    n_unmatched_real: int
    found_both: int
    sim_only: int
    real_only: int
    missed_both: int
    sim_only_rate: float | None
    real_only_rate: float | None
    recall_sim: float | None
    recall_real: float | None
    iou: float
    score_threshold: float
    examples: tuple[FlipExample, ...] = ()

    name: ClassVar[str] = "detection_flips"
    unit: ClassVar[str] = "objects (rates: fraction of matched objects)"
    higher_is_gap: ClassVar[bool] = True


@dataclass(frozen=True)
class LatchExample(Result):
    """One false positive and the ground-truth object it sits on."""

    key: str
    kind: str
    category: str
    bbox: tuple[float, float, float, float]
    score: float
    gt_category: str | None
    gt_bbox: tuple[float, float, float, float] | None
    iou: float


@dataclass(frozen=True)
class LatchReport(Result):
    """False positives (above the score threshold) broken down by what they overlap.

    Detections are matched to ground truth COCO-style (per image and category, by descending
    score, each to the unmatched non-crowd object of highest IoU >= `iou`). Each unmatched
    detection gets the first kind that applies:

    - `latching`: it sits on a neighbour of its category: IoU >= LATCH_IOU with two or more
      objects of its category, or with an object already claimed by another detection while
      another object of its category in the image is left unfound (its box went to the
      neighbour).
    - `wrong_class`: IoU >= `iou` with an object of another category.
    - `duplicate`: IoU >= `iou` with an object of its category already claimed.
    - `localization`: IoU in [LATCH_IOU, iou) with an object of its category.
    - `background`: none of the above.

    Attributes:
        n_images, n_detections (above threshold), n_true_positive, n_false_positive.
        latching, wrong_class, duplicate, localization, background: counts (sum = FPs).
        latching_rate, wrong_class_rate: counts / n_detections (None without detections).
        examples: up to MAX_EXAMPLES latching and wrong-class detections.
    """

    n_images: int
    n_detections: int
    n_true_positive: int
    n_false_positive: int
    latching: int
    wrong_class: int
    duplicate: int
    localization: int
    background: int
    latching_rate: float | None
    wrong_class_rate: float | None
    iou: float
    score_threshold: float
    examples: tuple[LatchExample, ...] = ()

    name: ClassVar[str] = "detection_latching"
    unit: ClassVar[str] = "detections"
    higher_is_gap: ClassVar[bool] = True


@dataclass(frozen=True)
class APDifferenceCI(Result):
    """AP@[.5:.95](sim) - AP@[.5:.95](real) over frame pairs, with a paired bootstrap CI.

    Attributes:
        estimate: ap_sim - ap_real on all pairs (> 0: the detector does worse on real).
        low, high: percentile interval of the bootstrap replicates at `level`.
        ap_sim, ap_real: AP on the sim / real frames of the pairs (equal to COCOeval's AP).
        n_pairs: pairs resampled. n_boot: replicates drawn; n_valid: replicates where both
            APs exist (a replicate without any ground truth on one side is dropped).
    """

    estimate: float
    low: float
    high: float
    level: float
    ap_sim: float
    ap_real: float
    n_pairs: int
    n_boot: int
    n_valid: int
    method: str = "paired percentile bootstrap over pairs"

    name: ClassVar[str] = "ap_difference"
    unit: ClassVar[str] = "AP points (fraction)"
    higher_is_gap: ClassVar[bool] = True

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


# -- parsing -----------------------------------------------------------------------------------------

def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _finite(v: Any, what: str) -> float:
    if not _is_number(v) or not math.isfinite(float(v)):
        raise InputError(f"Expected {what} to be a finite number, got {v!r}.")
    return float(v)


def _bbox(v: Any, what: str) -> tuple[float, float, float, float]:
    if not isinstance(v, (list, tuple)) or len(v) != 4 or not all(_is_number(x) for x in v):
        raise InputError(f"Expected {what} `bbox` to be 4 numbers [x, y, w, h], got {v!r}.")
    out = tuple(float(x) for x in v)
    if not all(math.isfinite(x) for x in out):
        raise InputError(f"Expected {what} `bbox` to hold finite numbers, got {v!r}.")
    return out  # type: ignore[return-value]


def _id(v: Any, what: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer, str)):
        raise InputError(f"Expected {what} to be an integer id, got {v!r}.")
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            raise InputError(f"Expected {what} to be an integer id, got {v!r}.") from None
    return int(v)


def _list_of_dicts(obj: Any, key: str) -> list[dict]:
    v = obj.get(key)
    if not isinstance(v, list):
        raise InputError(f"Expected COCO key `{key}` to be a list, got {type(v).__name__}.")
    for i, x in enumerate(v):
        if not isinstance(x, dict):
            raise InputError(f"Expected `{key}[{i}]` to be an object, got {type(x).__name__}.")
    return v


def parse_coco(obj: dict | list, *, kind: Literal["gt", "det"],
               image_names: Mapping[int, str] | None = None,
               category_names: Mapping[int, str] | None = None) -> ParsedCoco:
    """Validate a COCO object and key its boxes by image file name and category name.

    Args:
        obj: a COCO dict with `images` (id, file_name, optional width/height), `annotations`
            (image_id, category_id, bbox; detections also score) and `categories` (id, name);
            or, for `kind="det"`, a bare results list of {image_id, category_id, bbox, score}.
        kind: `gt` (score ignored, kept None) or `det` (score required).
        image_names, category_names: id -> name maps for a bare results list, usually the
            ground truth's `ParsedCoco.image_names` / `.category_names`. Without them a bare
            list is keyed by `str(id)`. Ignored for a dict (it carries its own maps).

    Returns:
        ParsedCoco. `area`, `iscrowd` and `score` are kept exactly as given.

    Raises:
        InputError: one line naming the first problem (missing key, bbox not 4 finite numbers,
            unknown image or category id, duplicate id or file name, missing score...).
    """
    if kind not in ("gt", "det"):
        raise InputError(f"Expected `kind` in ('gt', 'det'), got {kind!r}.")
    sizes: dict[str, tuple[int, int]] = {}
    boxes: dict[str, list[Box]] = {}
    if isinstance(obj, dict):
        for key in ("images", "annotations", "categories"):
            if key not in obj:
                raise InputError(f"COCO {kind} object lacks the `{key}` key.")
        imgs: dict[int, str] = {}
        for i, im in enumerate(_list_of_dicts(obj, "images")):
            for key in ("id", "file_name"):
                if key not in im:
                    raise InputError(f"COCO `images[{i}]` lacks `{key}`.")
            iid = _id(im["id"], f"`images[{i}].id`")
            name = im["file_name"]
            if not isinstance(name, str) or not name:
                raise InputError(f"Expected `images[{i}].file_name` to be a non-empty string, got {name!r}.")
            if iid in imgs:
                raise InputError(f"COCO image id {iid} appears twice in `images`.")
            if name in boxes:
                raise InputError(f"COCO image file_name {name!r} appears twice in `images`.")
            imgs[iid] = name
            boxes[name] = []
            w, h = im.get("width"), im.get("height")
            if w is not None and h is not None:
                if not (_is_number(w) and _is_number(h) and w > 0 and h > 0):
                    raise InputError(f"Expected `images[{i}]` width/height > 0, got {w!r} x {h!r}.")
                sizes[name] = (int(w), int(h))
        cats: dict[int, str] = {}
        for i, c in enumerate(_list_of_dicts(obj, "categories")):
            for key in ("id", "name"):
                if key not in c:
                    raise InputError(f"COCO `categories[{i}]` lacks `{key}`.")
            cid = _id(c["id"], f"`categories[{i}].id`")
            if not isinstance(c["name"], str) or not c["name"]:
                raise InputError(f"Expected `categories[{i}].name` to be a non-empty string, got {c['name']!r}.")
            if cid in cats:
                raise InputError(f"COCO category id {cid} appears twice in `categories`.")
            if c["name"] in cats.values():
                raise InputError(f"COCO category name {c['name']!r} appears twice in `categories`.")
            cats[cid] = c["name"]
        anns = _list_of_dicts(obj, "annotations")
        strict = strict_img = strict_cat = True
    elif isinstance(obj, list):
        if kind != "det":
            raise InputError("Expected a COCO ground-truth dict with images/annotations/categories, got a list.")
        imgs = dict(image_names) if image_names is not None else {}
        cats = dict(category_names) if category_names is not None else {}
        strict_img, strict_cat = image_names is not None, category_names is not None
        for i, a in enumerate(obj):
            if not isinstance(a, dict):
                raise InputError(f"Expected detection [{i}] to be an object, got {type(a).__name__}.")
        anns = obj
        strict = False
    else:
        raise InputError(f"Expected a COCO dict or a list of detections, got {type(obj).__name__}.")

    n_deg = n_crowd = 0
    for i, a in enumerate(anns):
        what = f"annotation [{i}]" if strict else f"detection [{i}]"
        for key in ("image_id", "category_id", "bbox") + (("score",) if kind == "det" else ()):
            if key not in a:
                raise InputError(f"COCO {what} lacks `{key}`.")
        iid = _id(a["image_id"], f"{what} `image_id`")
        cid = _id(a["category_id"], f"{what} `category_id`")
        if iid not in imgs:
            if strict or strict_img:
                raise InputError(f"COCO {what} names image id {iid}, which is not in `images`.")
            imgs[iid] = str(iid)
        if cid not in cats:
            if strict or strict_cat:
                raise InputError(f"COCO {what} names category id {cid}, which is not in `categories`.")
            cats[cid] = str(cid)
        bbox = _bbox(a["bbox"], what)
        area = a.get("area")
        area = None if area is None else _finite(area, f"{what} `area`")
        score = _finite(a["score"], f"{what} `score`") if kind == "det" else None
        crowd = a.get("iscrowd", 0)
        if crowd not in (0, 1, True, False):
            raise InputError(f"Expected {what} `iscrowd` to be 0 or 1, got {crowd!r}.")
        crowd = bool(crowd)
        n_crowd += crowd
        n_deg += bbox[2] <= 0 or bbox[3] <= 0
        boxes.setdefault(imgs[iid], []).append(Box(cats[cid], bbox, score, area, crowd))

    n_boxes = sum(len(v) for v in boxes.values())
    return ParsedCoco(
        kind=kind, boxes=boxes, sizes=sizes,
        categories=list(cats.values()) if isinstance(obj, dict) else [],
        image_names=imgs, category_names=cats, n_boxes=n_boxes, n_degenerate=int(n_deg),
        n_crowd=int(n_crowd), n_images_without_boxes=sum(1 for v in boxes.values() if not v))


# -- box geometry --------------------------------------------------------------------------------------

def clip_boxes(boxes: Sequence[Box], width: float, height: float) -> tuple[list[Box], int, int]:
    """Clip boxes to the image [0, width] x [0, height].

    A box partly outside is clipped; one wholly outside, or with w <= 0 or h <= 0, is dropped.
    Area: an untouched box keeps its given `area`. A clipped box with a given area gets it
    scaled by the fraction of the box that remains (a GT area is usually the mask's pixel
    count, and the visible part of the mask is unknown; proportional scaling keeps the
    mask-to-box ratio and so the size bucket as close as the box allows); None stays None.

    Returns:
        (kept boxes in input order, n_clipped, n_dropped).
    """
    if not (width > 0 and height > 0):
        raise InputError(f"Expected image width and height > 0, got {width!r} x {height!r}.")
    out: list[Box] = []
    n_clip = n_drop = 0
    for b in boxes:
        x, y, w, h = b.bbox
        if w <= 0 or h <= 0:
            n_drop += 1
            continue
        x0, y0 = max(x, 0.0), max(y, 0.0)
        x1, y1 = min(x + w, float(width)), min(y + h, float(height))
        if x1 <= x0 or y1 <= y0:
            n_drop += 1
            continue
        if (x0, y0, x1, y1) == (x, y, x + w, y + h):
            out.append(b)
            continue
        n_clip += 1
        nw, nh = x1 - x0, y1 - y0
        area = None if b.area is None else b.area * (nw * nh) / (w * h)
        out.append(Box(b.category, (x0, y0, nw, nh), b.score, area, b.iscrowd))
    return out, n_clip, n_drop


def mask_to_boxes(instance_ids: np.ndarray, *, categories: Mapping[int, str] | None = None,
                  background: int = 0, min_pixels: int = 1) -> list[Box]:
    """One tight box per instance id of a rendered instance mask.

    Args:
        instance_ids: (H, W) integer (or bool) array, one id per pixel.
        categories: instance id -> category name. When given, ids missing from it are skipped
            (unlabelled render layers such as walls or the robot); when None every id is
            "object".
        background: the id of no instance (skipped).
        min_pixels: instances with fewer pixels are skipped (specks at occlusion edges).

    Returns:
        Ground-truth boxes in ascending id order: bbox (x0, y0, x1 + 1 - x0, y1 + 1 - y0)
        in pixels, area = pixel count, score None.
    """
    m = np.asarray(instance_ids)
    if m.ndim != 2:
        raise InputError(f"Expected `instance_ids` of shape (H, W), got shape {m.shape}.")
    if not (np.issubdtype(m.dtype, np.integer) or m.dtype == bool):
        raise InputError(f"Expected `instance_ids` of an integer dtype, got {m.dtype}.")
    if m.size == 0:
        return []
    flat = m.ravel().astype(np.int64)
    sel = flat != background
    if not sel.any():
        return []
    idx = np.flatnonzero(sel)
    ids, inv, counts = np.unique(flat[idx], return_inverse=True, return_counts=True)
    ys, xs = np.divmod(idx, m.shape[1])
    n = len(ids)
    big = np.iinfo(np.int64).max
    x0 = np.full(n, big); y0 = np.full(n, big)
    x1 = np.full(n, -1); y1 = np.full(n, -1)
    np.minimum.at(x0, inv, xs); np.minimum.at(y0, inv, ys)
    np.maximum.at(x1, inv, xs); np.maximum.at(y1, inv, ys)
    out = []
    for k, iid in enumerate(ids.tolist()):
        if counts[k] < min_pixels:
            continue
        if categories is not None:
            if iid not in categories:
                continue
            cat = categories[iid]
        else:
            cat = "object"
        out.append(Box(cat, (float(x0[k]), float(y0[k]), float(x1[k] + 1 - x0[k]), float(y1[k] + 1 - y0[k])),
                       None, float(counts[k]), False))
    return out


def _xyxy(boxes: Sequence[Box]) -> np.ndarray:
    if not boxes:
        return np.zeros((0, 4))
    a = np.array([b.bbox for b in boxes], dtype=np.float64)
    a[:, 2] += a[:, 0]
    a[:, 3] += a[:, 1]
    return a


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of (N, 4) and (M, 4) xyxy boxes -> (N, M)."""
    iw = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    ih = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = iw * ih
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


# -- COCO evaluation -------------------------------------------------------------------------------

def _coco_eval(gt: Mapping[str, Sequence[Box]], dets: Mapping[str, Sequence[Box]],
               categories: Sequence[str] | None, keys: Sequence[str] | None = None):
    """Build in-memory COCO objects and a COCOeval (not yet evaluated).

    Image ids are 1..N in the order of `keys` (default: `gt`'s order); category ids 1..K in
    the order of `categories` (default: sorted names of the GT and the detections). Ids
    start at 1 because COCOeval stores matched ids in its match arrays and reads 0 as
    "unmatched". Detections get area = w * h and iscrowd 0, as `COCO.loadRes` does.
    """
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

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
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = {"images": images, "categories": cats, "annotations": gt_anns}
        coco_gt.createIndex()
        coco_dt = COCO()
        coco_dt.dataset = {"images": images, "categories": cats, "annotations": dt_anns}
        coco_dt.createIndex()
        ev = COCOeval(coco_gt, coco_dt, "bbox")
    return ev, list(categories), len(gt_anns), len(dt_anns)


def _none_if_neg(v: float) -> float | None:
    v = float(v)
    return None if v < 0 or not math.isfinite(v) else v


def coco_summary(gt: Mapping[str, Sequence[Box]], dets: Mapping[str, Sequence[Box]],
                 sizes: Mapping[str, tuple[int, int]] | None = None, *,
                 categories: Sequence[str] | None = None) -> DetectionSummary:
    """The official COCO bbox numbers, by pycocotools' COCOeval on in-memory COCO objects.

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
    ev, cats, n_gt, n_dt = _coco_eval(gt, dets, categories)
    if sizes:
        for im in ev.cocoGt.dataset["images"]:
            if im["file_name"] in sizes:
                im["width"], im["height"] = (int(v) for v in sizes[im["file_name"]])
    with contextlib.redirect_stdout(io.StringIO()):
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


# -- flips across pairs --------------------------------------------------------------------------------

def _found(gt_boxes: Sequence[Box], dets: Sequence[Box], iou: float, thr: float) -> np.ndarray:
    """For each GT box: is there a detection of its category, score >= thr, IoU >= iou."""
    found = np.zeros(len(gt_boxes), dtype=bool)
    d = [b for b in dets if b.score is None or b.score >= thr]
    if not gt_boxes or not d:
        return found
    m = _iou(_xyxy(gt_boxes), _xyxy(d))
    same = np.array([[g.category == x.category for x in d] for g in gt_boxes])
    return ((m >= iou) & same).any(axis=1)


def _extent(key: str, boxes: Sequence[Box], sizes: Mapping[str, tuple[int, int]] | None) -> tuple[float, float]:
    if sizes and key in sizes:
        return float(sizes[key][0]), float(sizes[key][1])
    # No size: normalize by the extent of the GT boxes (a stand-in for the frame).
    a = _xyxy(boxes)
    return max(float(a[:, 2].max()), 1.0), max(float(a[:, 3].max()), 1.0)


def _match_objects(sim: Sequence[Box], real: Sequence[Box], ext_sim, ext_real) -> tuple[list[tuple[int, int]], int, int]:
    """Pair GT objects of the two frames: same category, greedy nearest normalized centre."""
    pairs: list[tuple[int, int]] = []
    for cat in dict.fromkeys(b.category for b in sim):
        si = [i for i, b in enumerate(sim) if b.category == cat]
        ri = [i for i, b in enumerate(real) if b.category == cat]
        if not ri:
            continue
        cs = np.array([((sim[i].bbox[0] + sim[i].bbox[2] / 2) / ext_sim[0],
                        (sim[i].bbox[1] + sim[i].bbox[3] / 2) / ext_sim[1]) for i in si])
        cr = np.array([((real[i].bbox[0] + real[i].bbox[2] / 2) / ext_real[0],
                        (real[i].bbox[1] + real[i].bbox[3] / 2) / ext_real[1]) for i in ri])
        dist = np.linalg.norm(cs[:, None, :] - cr[None, :, :], axis=2)
        order = np.argsort(dist, axis=None, kind="stable")
        used_s, used_r = set(), set()
        for flat in order.tolist():
            a, b = divmod(flat, len(ri))
            if a in used_s or b in used_r:
                continue
            used_s.add(a); used_r.add(b)
            pairs.append((si[a], ri[b]))
    return pairs, len(sim) - len(pairs), len(real) - len(pairs)


def pair_flips(gt_sim: Mapping[str, Sequence[Box]], det_sim: Mapping[str, Sequence[Box]],
               gt_real: Mapping[str, Sequence[Box]], det_real: Mapping[str, Sequence[Box]],
               pairs: Sequence[tuple[str, str]], *, iou: float = 0.5, score_threshold: float = 0.5,
               sizes: Mapping[str, tuple[int, int]] | None = None) -> FlipReport:
    """Objects the detector finds in a sim frame but misses in its real twin, and the reverse.

    For each (sim key, real key) pair, non-crowd GT objects are matched across the two frames
    by category, and among several of a category greedily by nearest box centre, centres
    normalized by the frame size (`sizes`, keyed by image key; without a size, by the extent
    of that frame's GT boxes). An object is found when some detection of its category with
    score >= `score_threshold` has IoU >= `iou` with it (detections are not used up: this is
    per-object recall, not COCO matching).

    Raises:
        InputError: a pair names a key missing from its side's ground truth, or bad thresholds.
    """
    if not (0 < iou <= 1):
        raise InputError(f"Expected `iou` in (0, 1], got {iou!r}.")
    counts = {"found_both": 0, "sim_only": 0, "real_only": 0, "missed_both": 0}
    n_obj = un_s = un_r = 0
    examples: list[FlipExample] = []
    for ks, kr in pairs:
        if ks not in gt_sim:
            raise InputError(f"Pair ({ks!r}, {kr!r}): sim key {ks!r} has no ground-truth entry.")
        if kr not in gt_real:
            raise InputError(f"Pair ({ks!r}, {kr!r}): real key {kr!r} has no ground-truth entry.")
        gs = [b for b in gt_sim[ks] if not b.iscrowd]
        gr = [b for b in gt_real[kr] if not b.iscrowd]
        if not gs or not gr:
            un_s += len(gs); un_r += len(gr)
            continue
        matched, us, ur = _match_objects(gs, gr, _extent(ks, gs, sizes), _extent(kr, gr, sizes))
        un_s += us; un_r += ur
        fs = _found(gs, det_sim.get(ks, ()), iou, score_threshold)
        fr = _found(gr, det_real.get(kr, ()), iou, score_threshold)
        for a, b in matched:
            n_obj += 1
            kind = ("found_both" if fs[a] and fr[b] else "sim_only" if fs[a] else
                    "real_only" if fr[b] else "missed_both")
            counts[kind] += 1
            if kind in ("sim_only", "real_only") and len(examples) < MAX_EXAMPLES:
                examples.append(FlipExample(ks, kr, kind, gs[a].category, gs[a].bbox, gr[b].bbox))
    rate = (lambda c: c / n_obj if n_obj else None)
    return FlipReport(
        n_pairs=len(pairs), n_objects=n_obj, n_unmatched_sim=un_s, n_unmatched_real=un_r, **counts,
        sim_only_rate=rate(counts["sim_only"]), real_only_rate=rate(counts["real_only"]),
        recall_sim=rate(counts["found_both"] + counts["sim_only"]),
        recall_real=rate(counts["found_both"] + counts["real_only"]),
        iou=float(iou), score_threshold=float(score_threshold), examples=tuple(examples))


# -- latching ------------------------------------------------------------------------------------------

def latching(gt: Mapping[str, Sequence[Box]], dets: Mapping[str, Sequence[Box]], *,
             iou: float = 0.5, score_threshold: float = 0.5) -> LatchReport:
    """Break false positives down by what they sit on; `latching` = boxes on a neighbour.

    See `LatchReport` for the matching and the kinds. Only detections with score >=
    `score_threshold` count; images only in `dets` are examined against no ground truth.
    """
    if not (LATCH_IOU < iou <= 1):
        raise InputError(f"Expected `iou` in ({LATCH_IOU}, 1], got {iou!r}.")
    kinds = dict.fromkeys(("latching", "wrong_class", "duplicate", "localization", "background"), 0)
    n_det = n_tp = 0
    examples: list[LatchExample] = []
    keys = list(dict.fromkeys(list(gt) + list(dets)))
    for key in keys:
        g = [b for b in gt.get(key, ()) if not b.iscrowd]
        d = [b for b in dets.get(key, ()) if b.score is None or b.score >= score_threshold]
        if not d:
            continue
        n_det += len(d)
        order = sorted(range(len(d)), key=lambda i: -(d[i].score if d[i].score is not None else 1.0))
        m = _iou(_xyxy([d[i] for i in order]), _xyxy(g)) if g else np.zeros((len(d), 0))
        gcat = [b.category for b in g]
        claimed = np.zeros(len(g), dtype=bool)
        matched = np.zeros(len(order), dtype=bool)
        for r, i in enumerate(order):  # COCO greedy matching by score
            cand = [j for j in range(len(g)) if gcat[j] == d[i].category and not claimed[j] and m[r, j] >= iou]
            if cand:
                j = max(cand, key=lambda j: m[r, j])
                claimed[j] = True
                matched[r] = True
        n_tp += int(matched.sum())
        for r, i in enumerate(order):
            if matched[r]:
                continue
            b = d[i]
            same = [j for j in range(len(g)) if gcat[j] == b.category]
            other = [j for j in range(len(g)) if gcat[j] != b.category]
            touch = [j for j in same if m[r, j] >= LATCH_IOU]
            unfound = any(not claimed[j] for j in same)
            hit = None
            if len(touch) >= 2 or (unfound and any(claimed[j] for j in touch)):
                kind = "latching"
                hit = max(touch, key=lambda j: m[r, j])
            elif other and max(m[r, j] for j in other) >= iou:
                kind = "wrong_class"
                hit = max(other, key=lambda j: m[r, j])
            elif any(m[r, j] >= iou for j in same):
                kind = "duplicate"
            elif touch:
                kind = "localization"
            else:
                kind = "background"
            kinds[kind] += 1
            if hit is not None and len(examples) < MAX_EXAMPLES:
                examples.append(LatchExample(key, kind, b.category, b.bbox,
                                             float(b.score if b.score is not None else 1.0),
                                             g[hit].category, g[hit].bbox, float(m[r, hit])))
    rate = (lambda c: c / n_det if n_det else None)
    return LatchReport(
        n_images=len(keys), n_detections=n_det, n_true_positive=n_tp, n_false_positive=n_det - n_tp,
        **kinds, latching_rate=rate(kinds["latching"]), wrong_class_rate=rate(kinds["wrong_class"]),
        iou=float(iou), score_threshold=float(score_threshold), examples=tuple(examples))


# -- bootstrap of the AP difference ---------------------------------------------------------------

class _APAccumulator:
    """AP@[.5:.95] (area all, 100 detections) of any multiset of images, from one COCOeval run.

    COCOeval's matching (`evaluate`) is per image and category and does not depend on the
    other images, so a bootstrap replicate only needs the accumulate step over the drawn
    images: this is that step, vectorized, for the AP number alone. A duplicated draw simply
    repeats its image's matches, which is what evaluating a copy under a fresh image id gives.
    `ap(range(n_images))` equals COCOeval's `stats[0]` (checked in the tests).
    """

    def __init__(self, gt: Mapping[str, Sequence[Box]], dets: Mapping[str, Sequence[Box]],
                 keys: Sequence[str], categories: Sequence[str] | None):
        ev, cats, _, _ = _coco_eval(gt, dets, categories, keys)
        with contextlib.redirect_stdout(io.StringIO()):
            ev.evaluate()
        p = ev.params
        self.rec_thrs = np.asarray(p.recThrs)
        self.max_det = p.maxDets[-1]
        n_img, n_area = len(p.imgIds), len(p.areaRng)
        a_all = [tuple(a) for a in p.areaRng].index((0, 1e5 ** 2))
        # per category: per image (scores, tps (T, D), fps (T, D), npig) or None
        self.cells: list[list[tuple | None]] = []
        for k in range(len(p.catIds)):
            row = []
            for i in range(n_img):
                e = ev.evalImgs[k * n_area * n_img + a_all * n_img + i]
                if e is None:
                    row.append(None)
                    continue
                dtm = e["dtMatches"][:, : self.max_det]
                dti = e["dtIgnore"][:, : self.max_det].astype(bool)
                row.append((e["dtScores"][: self.max_det], np.logical_and(dtm, ~dti), np.logical_and(~dtm.astype(bool), ~dti),
                            int(np.count_nonzero(np.asarray(e["gtIgnore"]) == 0))))
            self.cells.append(row)
        self.n_images = n_img

    def ap(self, draw: Sequence[int]) -> float | None:
        per_cat = []
        R = len(self.rec_thrs)
        for row in self.cells:
            E = [row[i] for i in draw if row[i] is not None]
            if not E:
                continue
            npig = sum(e[3] for e in E)
            if npig == 0:
                continue
            scores = np.concatenate([e[0] for e in E])
            inds = np.argsort(-scores, kind="mergesort")
            tp = np.cumsum(np.concatenate([e[1] for e in E], axis=1)[:, inds], axis=1).astype(float)
            fp = np.cumsum(np.concatenate([e[2] for e in E], axis=1)[:, inds], axis=1).astype(float)
            nd = tp.shape[1]
            q = np.zeros((tp.shape[0], R))
            if nd:
                rc = tp / npig
                pr = tp / (fp + tp + np.spacing(1))
                pr = np.maximum.accumulate(pr[:, ::-1], axis=1)[:, ::-1]  # precision envelope
                for t in range(tp.shape[0]):
                    pi = np.searchsorted(rc[t], self.rec_thrs, side="left")
                    ok = pi < nd
                    q[t, ok] = pr[t, pi[ok]]
            per_cat.append(q.mean())
        return float(np.mean(per_cat)) if per_cat else None


def ap_difference_ci(gt_sim: Mapping[str, Sequence[Box]], det_sim: Mapping[str, Sequence[Box]],
                     gt_real: Mapping[str, Sequence[Box]], det_real: Mapping[str, Sequence[Box]],
                     pairs: Sequence[tuple[str, str]], *, n_boot: int = N_BOOT, ci: float = 0.95,
                     random_state: int | np.random.Generator | None = 0,
                     categories: Sequence[str] | None = None) -> APDifferenceCI:
    """Paired bootstrap CI of AP@[.5:.95](sim) - AP@[.5:.95](real) over frame pairs.

    Each replicate draws len(pairs) pair indices with replacement and evaluates AP on the sim
    frames and on the real frames of the same draw, so scene difficulty cancels. The sim (and
    real) frames enter with the multiplicity the pairs give them, also in the point estimate.

    Cost: COCOeval's per-image matching runs once per side; each replicate re-accumulates
    only AP from those matches (`_APAccumulator`, equal to COCOeval's AP on the full set),
    O(detections log detections). `n_boot` is capped at MAX_N_BOOT.

    Raises:
        InputError: bad `n_boot` / `ci`, or a pair key missing from its side's ground truth.
        InsufficientData: fewer than 2 pairs, or no ground truth on a side.
    """
    if not (1 <= n_boot <= MAX_N_BOOT):
        raise InputError(f"Expected `n_boot` in [1, {MAX_N_BOOT}], got {n_boot!r}.")
    if not (0 < ci < 1):
        raise InputError(f"Expected `ci` in (0, 1), got {ci!r}.")
    if len(pairs) < 2:
        raise InsufficientData(f"ap_difference_ci needs at least 2 pairs, got {len(pairs)}.")
    for ks, kr in pairs:
        if ks not in gt_sim:
            raise InputError(f"Pair ({ks!r}, {kr!r}): sim key {ks!r} has no ground-truth entry.")
        if kr not in gt_real:
            raise InputError(f"Pair ({ks!r}, {kr!r}): real key {kr!r} has no ground-truth entry.")
    sides = []
    for gt, det, col in ((gt_sim, det_sim, 0), (gt_real, det_real, 1)):
        keys = list(dict.fromkeys(p[col] for p in pairs))
        pos = {k: i for i, k in enumerate(keys)}
        acc = _APAccumulator(gt, det, keys, categories)
        sides.append((acc, np.array([pos[p[col]] for p in pairs])))
    (acc_s, idx_s), (acc_r, idx_r) = sides
    ap_s, ap_r = acc_s.ap(idx_s), acc_r.ap(idx_r)
    if ap_s is None or ap_r is None:
        raise InsufficientData("ap_difference_ci: a side has no ground-truth objects in the pairs.")
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    n = len(pairs)
    reps = []
    for _ in range(n_boot):
        draw = rng.integers(0, n, n)
        a, b = acc_s.ap(idx_s[draw]), acc_r.ap(idx_r[draw])
        if a is not None and b is not None:
            reps.append(a - b)
    if not reps:
        raise InsufficientData("ap_difference_ci: no bootstrap replicate had ground truth on both sides.")
    lo, hi = np.quantile(np.array(reps), [(1 - ci) / 2, (1 + ci) / 2])
    return APDifferenceCI(estimate=ap_s - ap_r, low=float(lo), high=float(hi), level=float(ci),
                          ap_sim=ap_s, ap_real=ap_r, n_pairs=n, n_boot=n_boot, n_valid=len(reps))
