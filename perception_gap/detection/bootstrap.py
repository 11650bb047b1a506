"""Paired bootstrap CI of the AP difference (sim - real) over frame pairs."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from perception_gap.detection.boxes import Box
from perception_gap.detection.coco import coco_eval
from perception_gap.errors import InputError, InsufficientData
from perception_gap.metrics.bootstrap import centred_ci
from perception_gap.metrics.settings import REPLICATES
from perception_gap.results import Result

# Bootstrap: default replicates and a hard cap. Each replicate only re-accumulates the
# per-image matches COCOeval computed once (see `ap_difference_ci`), O(detections) numpy work.
N_BOOT = REPLICATES["detection"]
MAX_N_BOOT = 10_000
# Search keys pack (segment, integer count) as segment * _KEY + count: counts stay below 2**40.
_KEY = np.int64(1) << 40
# The same in float64 for the recall lookup, exact while segment * 2**32 + count < 2**53
# (segments = categories x 10 < 2**21, counts = drawn detections < 2**32).
_FKEY = float(2 ** 32)


@dataclass(frozen=True)
class APDifferenceCI(Result):
    """AP@[.5:.95](sim) - AP@[.5:.95](real) over frame pairs, with a paired bootstrap CI.

    Attributes:
        estimate: ap_sim - ap_real on all pairs (> 0: the detector does worse on real).
        low, high: the engine's centred percentile interval (`metrics.bootstrap.centred_ci`) of
            the replicates at `level`; low <= estimate <= high.
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
    method: str = "paired centred percentile bootstrap over pairs"

    name: ClassVar[str] = "ap_difference"
    unit: ClassVar[str] = "AP points (fraction)"
    higher_is_gap: ClassVar[bool] = True

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


# -- bootstrap of the AP difference ---------------------------------------------------------------

class _APAccumulator:
    """AP@[.5:.95] (area all, 100 detections) of any multiset of images, from one COCOeval run.

    COCOeval's matching (`evaluate`) is per image and category and does not depend on the
    other images, so a bootstrap replicate only needs the accumulate step over the drawn
    images. Per category, the detections of all images are put in COCOeval's order once
    (score descending, ties by image then by rank in the image, as COCOeval's stable sort of
    the concatenation does), with their true/false-positive flags per IoU threshold: the
    per-image match tables. A multiset of images is then a weight per image (how often it
    was drawn), and the cumulative TP / FP counts of the replicate are cumulative weighted
    sums over that fixed order (`ap`). A duplicated draw repeats its image's matches, which is
    what evaluating a copy under a fresh image id gives. Detections of undrawn images get
    weight 0 and repeat the previous point of the curve, which changes neither the precision
    envelope nor the recall lookup, so `ap(range(n_images))` equals COCOeval's `stats[0]`.
    """

    def __init__(self, gt: Mapping[str, Sequence[Box]], dets: Mapping[str, Sequence[Box]],
                 keys: Sequence[str], categories: Sequence[str] | None):
        ev, _, _, _ = coco_eval(gt, dets, categories, keys, separate_eval=True)
        p = ev.params
        p.areaRng, p.areaRngLbl, p.maxDets = [[0, 1e5 ** 2]], ["all"], [100]
        ev.evaluate()
        self.rec_thrs = np.asarray(p.recThrs, dtype=float)
        n_img, n_thr = len(p.imgIds), len(p.iouThrs)
        evals = ev._evalImgs_cpp  # per (category, image): ImageEvaluation, see `_category_table`
        if len(evals) != len(p.catIds) * n_img:
            raise RuntimeError(f"faster-coco-eval returned {len(evals)} image evaluations, "
                               f"expected {len(p.catIds) * n_img}.")
        # an (image, category) without GT and detections has an empty evaluation: not read
        present = {(a["image_id"], a["category_id"]) for coco in (ev.cocoGt, ev.cocoDt) for a in coco.anns.values()}
        empty = ((), (), (), (), ())
        tables = [_category_table([evals[k * n_img + i].__getstate__() if (img_id, cat) in present else empty
                                   for i, img_id in enumerate(p.imgIds)], n_thr)
                  for k, cat in enumerate(p.catIds)]
        self.n_images, self.n_thr = n_img, n_thr
        self.npig = np.array([t[3] for t in tables]).reshape(len(tables), n_img)  # (K, images)
        # all categories' detections end to end; segment s = (category s // T, threshold s % T)
        n_det = np.array([t[0].size for t in tables], dtype=np.int64)
        det_start = np.concatenate([[0], np.cumsum(n_det)])
        self.img = np.concatenate([t[0] for t in tables] + [np.zeros(0, np.int64)])
        # true positives of every segment, as global detection positions, segment after segment
        self.tp_pos = np.concatenate([det_start[k] + t[1] for k, t in enumerate(tables)] + [np.zeros(0, np.int64)])
        n_tp = np.concatenate([np.diff(t[2]) for t in tables] + [np.zeros(0, np.int64)])
        self.seg_bounds = np.concatenate([[0], np.cumsum(n_tp)])
        self.tp_seg = np.repeat(np.arange(n_tp.size), n_tp)
        # per TP entry: start of its category's detections and of its segment's TPs, the
        # segment as a search key (see `ap_weighted`)
        self.tp_cat_start = det_start[self.tp_seg // n_thr]
        self.tp_seg_start = self.seg_bounds[self.tp_seg]
        self.tp_pos1 = self.tp_pos + 1
        self.tp_key = self.tp_seg * _KEY
        self.tp_fkey = self.tp_seg * _FKEY
        # ignored detections (matched to a crowd box) by segment, for the tp + fp counts
        ig = [(k * n_thr + t, det_start[k] + j) for k, tb in enumerate(tables) for t, j in zip(*np.nonzero(tb[4]))]
        self.ig_seg = np.array([g[0] for g in ig], dtype=np.int64)
        self.ig_pos = np.array([g[1] for g in ig], dtype=np.int64)

    def ap(self, draw: Sequence[int]) -> float | None:
        """AP of the images `draw` (indices, repeats allowed), None without non-ignored GT."""
        return self.ap_weighted(np.bincount(np.asarray(draw, dtype=int), minlength=self.n_images))

    def ap_weighted(self, weights: np.ndarray) -> float | None:
        """AP of the multiset where image i appears `weights[i]` times (COCOeval's accumulate).

        All categories and IoU thresholds at once. The precision envelope and the recall
        lookup are evaluated at the true positives only: the recall rises only there (so the
        lookup, the first point reaching each recall threshold, lands on one, or on the first
        point of the curve at recall 0), and a false positive or an undrawn detection never
        has a higher precision than the point before it, so the envelope's maxima lie on
        true positives too. Counts are integer weighted sums, exact in float, so the
        precision and recall are COCOeval's numbers on the expanded image list.
        """
        w = np.asarray(weights, dtype=float)
        n_thr, rec = self.n_thr, self.rec_thrs
        npig = self.npig @ w  # (K,)
        has_gt = npig > 0
        if not has_gt.any():
            return None
        wd = w[self.img]
        csum = np.empty(wd.size + 1)
        csum[0] = 0.0
        np.cumsum(wd, out=csum[1:])
        tot = csum[self.tp_pos1] - csum[self.tp_cat_start]  # tp + fp up to each TP
        if self.ig_pos.size:
            tot -= self._ignored_weight(wd)
        tcs = np.empty(self.tp_pos.size + 1)
        tcs[0] = 0.0
        np.cumsum(wd[self.tp_pos], out=tcs[1:])
        tp = tcs[1:] - tcs[self.tp_seg_start]
        pr = tp / (tot + np.spacing(1))
        # recall tp / npig >= r  <=>  tp >= k_r (division is monotone in tp): the least such
        # integer, so the lookup is an exact integer search over all segments at once
        n = np.where(has_gt, npig, 1.0)[:, None]
        k = np.ceil(rec[None, :] * n)
        for _ in range(2):
            k = np.where((k - 1) / n >= rec[None, :], k - 1, k)
            k = np.where(k / n < rec[None, :], k + 1, k)
        n_seg = self.seg_bounds.size - 1
        queries = np.arange(n_seg)[:, None] * _FKEY + np.repeat(k, n_thr, axis=0)
        pi = np.searchsorted(self.tp_fkey + tp, queries.ravel(), side="left")
        pi = pi.reshape(n_seg, -1)
        ends = self.seg_bounds[1:, None]
        ok = pi < ends
        # envelope at each lookup: max of the chunks [pi_j, pi_j+1) up to the segment's end
        cut = np.concatenate([pi, ends], axis=1).ravel()
        chunk = np.maximum.reduceat(np.append(pr, 0.0), cut).reshape(n_seg, -1)[:, :-1]
        chunk = np.where(ok, chunk, 0.0)
        env = np.maximum.accumulate(chunk[:, ::-1], axis=1)[:, ::-1]
        q = np.where(ok, env, 0.0).reshape(npig.size, -1)
        return float(np.mean(q.mean(axis=1)[has_gt]))

    def _ignored_weight(self, wd: np.ndarray) -> np.ndarray:
        """Per TP entry: weight of its segment's ignored detections at or before it."""
        key_ig = self.ig_seg * _KEY + self.ig_pos
        order = np.argsort(key_ig, kind="mergesort")
        key_ig = key_ig[order]
        cum = np.concatenate([[0.0], np.cumsum(wd[self.ig_pos[order]])])
        upto = np.searchsorted(key_ig, self.tp_key + self.tp_pos, side="right")
        before = np.searchsorted(key_ig, self.tp_key, side="left")
        return cum[upto] - cum[before]


def _category_table(states: list[tuple], n_thr: int):
    """One category's per-image match tables, concatenated in COCOeval's accumulate order.

    `states` are faster-coco-eval's `ImageEvaluation` pickle states, one per image:
    (detection matches (T*D, threshold-major), GT matches (T*G), detection scores (D,
    sorted as COCOeval sorts them, cut at maxDets), GT ignore flags (G), detection ignore
    flags (T*D), ...), the same arrays as pycocotools' `evalImgs` entries (tests compare).

    Returns:
        (image of each detection (D,), TP positions of every threshold, threshold after
        threshold, their bounds (T + 1,), non-ignored GT per image, ignored flags (T, D)).
    """
    n_img = len(states)
    d_per = np.fromiter((len(s[2]) for s in states), dtype=np.int64, count=n_img)
    npig = np.fromiter((len(s[3]) - sum(s[3]) for s in states), dtype=float, count=n_img)
    nd = int(d_per.sum())
    if nd == 0 or not npig.any():
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(n_thr + 1, np.int64), npig,
                np.zeros((n_thr, 0), bool))
    scores = np.fromiter(itertools.chain.from_iterable(s[2] for s in states), dtype=float, count=nd)
    matched = np.fromiter(itertools.chain.from_iterable(s[0] for s in states), dtype=np.int64,
                          count=nd * n_thr) != 0
    ignored = np.fromiter(itertools.chain.from_iterable(s[4] for s in states), dtype=bool, count=nd * n_thr)
    img = np.repeat(np.arange(n_img), d_per)
    start = np.cumsum(d_per) - d_per  # first detection of each image
    local = np.arange(nd) - start[img]
    # flat position of (t, detection): image block start + t * D_image + local index
    flat = (n_thr * start[img])[None, :] + np.arange(n_thr)[:, None] * d_per[img][None, :] + local[None, :]
    m, ig = matched[flat], ignored[flat]
    order = np.argsort(-scores, kind="mergesort")
    tp = (m & ~ig)[:, order]
    rows, pos = np.nonzero(tp)  # row-major: threshold after threshold, positions ascending
    bounds = np.searchsorted(rows, np.arange(n_thr + 1), side="left")
    return img[order], pos, bounds, npig, ig[:, order]


def ap_difference_ci(gt_sim: Mapping[str, Sequence[Box]], det_sim: Mapping[str, Sequence[Box]],
                     gt_real: Mapping[str, Sequence[Box]], det_real: Mapping[str, Sequence[Box]],
                     pairs: Sequence[tuple[str, str]], *, n_boot: int = N_BOOT, ci: float = 0.95,
                     random_state: int | np.random.Generator | None = 0,
                     categories: Sequence[str] | None = None) -> APDifferenceCI:
    """Paired bootstrap CI of AP@[.5:.95](sim) - AP@[.5:.95](real) over frame pairs.

    Each replicate draws len(pairs) pair indices with replacement and evaluates AP on the sim
    frames and on the real frames of the same draw, so scene difficulty cancels. The sim (and
    real) frames enter with the multiplicity the pairs give them, also in the point estimate.

    Cost: COCOeval's per-image matching (faster-coco-eval) runs once per side; each replicate
    re-accumulates only AP from those matches as weighted sums over a fixed order
    (`_APAccumulator`, equal to COCOeval's AP on the full set), O(detections), no sort.
    Replicates equal the direct accumulate over the drawn list (the previous implementation)
    exactly, except that exactly tied scores of different images are ordered by image instead
    of by draw position. `n_boot` is capped at MAX_N_BOOT.

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
    lo, hi, _ = centred_ci(np.array(reps), ap_s - ap_r, ci)
    return APDifferenceCI(estimate=ap_s - ap_r, low=float(lo), high=float(hi), level=float(ci),
                          ap_sim=ap_s, ap_real=ap_r, n_pairs=n, n_boot=n_boot, n_valid=len(reps))
