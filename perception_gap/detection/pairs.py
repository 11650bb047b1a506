"""Sim-vs-real detection diagnostics on boxes: per-pair flips and false positives that latch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from perception_gap.detection.boxes import Box, pairwise_iou, xyxy
from perception_gap.errors import InputError
from perception_gap.results import Result

MAX_EXAMPLES = 50

# A false positive "touches" an object when their IoU is at least this (latching).
LATCH_IOU = 0.1


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


# -- flips across pairs --------------------------------------------------------------------------------

def _found(gt_boxes: Sequence[Box], dets: Sequence[Box], iou: float, thr: float) -> np.ndarray:
    """For each GT box: is there a detection of its category, score >= thr, IoU >= iou."""
    found = np.zeros(len(gt_boxes), dtype=bool)
    d = [b for b in dets if b.score is None or b.score >= thr]
    if not gt_boxes or not d:
        return found
    m = pairwise_iou(xyxy(gt_boxes), xyxy(d))
    same = np.array([[g.category == x.category for x in d] for g in gt_boxes])
    return ((m >= iou) & same).any(axis=1)


def _extent(key: str, boxes: Sequence[Box], sizes: Mapping[str, tuple[int, int]] | None) -> tuple[float, float]:
    if sizes and key in sizes:
        return float(sizes[key][0]), float(sizes[key][1])
    # No size: normalize by the extent of the GT boxes (a stand-in for the frame).
    a = xyxy(boxes)
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
        m = pairwise_iou(xyxy([d[i] for i in order]), xyxy(g)) if g else np.zeros((len(d), 0))
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
