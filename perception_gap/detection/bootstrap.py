"""Paired bootstrap CI of the AP difference (sim - real) over frame pairs."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from perception_gap.detection.boxes import Box
from perception_gap.detection.coco import coco_eval
from perception_gap.errors import InputError, InsufficientData
from perception_gap.results import Result

# Bootstrap: default replicates and a hard cap. Each replicate only re-accumulates the
# per-image matches COCOeval computed once (see `ap_difference_ci`), O(detections) numpy work.
N_BOOT = 200
MAX_N_BOOT = 10_000


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
        ev, cats, _, _ = coco_eval(gt, dets, categories, keys)
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
