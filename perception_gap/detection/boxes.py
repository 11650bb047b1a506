"""Boxes: the `Box` record and its geometry (clipping, boxes from instance masks, IoU).

Conventions (COCO's): a bbox is (x, y, w, h) in pixels, x/y of the top-left corner, continuous
coordinates (a box covering pixel columns 3..5 is x=3, w=3); IoU has no "+1".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from perception_gap.errors import InputError
from perception_gap.results import Result


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


def xyxy(boxes: Sequence[Box]) -> np.ndarray:
    if not boxes:
        return np.zeros((0, 4))
    a = np.array([b.bbox for b in boxes], dtype=np.float64)
    a[:, 2] += a[:, 0]
    a[:, 3] += a[:, 1]
    return a


def pairwise_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of (N, 4) and (M, 4) xyxy boxes -> (N, M)."""
    iw = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    ih = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = iw * ih
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)
