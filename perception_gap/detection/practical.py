"""Whether a significant sim-vs-real AP difference is large enough to act on.

A paired bootstrap separates very small AP differences once there are enough pairs: a box a
pixel tighter on a few real objects moves AP@[.5:.95] by thousandths, with every object still
found on both sides. Such a difference is not a reason to retrain a detector. It is negligible
when all of these hold:

- |AP(sim) - AP(real)| is under `AP_PRACTICAL` (0.02 AP@[.5:.95], a stated convention: two
  points on the scale detectors are reported in; `practical_size` takes another);
- no matched object flips (found on one side of a pair, missed on the other);
- the exact (Clopper-Pearson) recall intervals of the two sides overlap.

Pure: counts in, a frozen result out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from perception_gap.detection.pairs import FlipReport
from perception_gap.evaluation.intervals import clopper_pearson
from perception_gap.results import Result

AP_PRACTICAL = 0.02


@dataclass(frozen=True)
class PracticalSize(Result):
    """The practical-size test of one detector's AP difference.

    Attributes:
        negligible: every condition above holds.
        ap_difference: AP(sim) - AP(real).
        size: the practical size it is held against.
        n_flips: objects found on one side of a pair and missed on the other.
        n_objects: objects matched across pairs (the recall denominators).
        recall_sim_ci, recall_real_ci: 95% exact intervals of each side's recall, None without objects.
        recall_overlap: whether those intervals overlap (False without objects).
    """

    negligible: bool
    ap_difference: float
    size: float
    n_flips: int
    n_objects: int
    recall_sim_ci: tuple[float, float] | None
    recall_real_ci: tuple[float, float] | None
    recall_overlap: bool

    name: ClassVar[str] = "detector_practical_size"
    unit: ClassVar[str] = "AP"
    higher_is_gap: ClassVar[bool] = True


def practical_size(ap_sim: float, ap_real: float, flips: FlipReport, *, size: float = AP_PRACTICAL,
                   confidence: float = 0.95) -> PracticalSize:
    """Hold an AP difference against `size`, the pairs' flips and the two sides' recall intervals."""
    n = flips.n_objects
    n_flips = flips.sim_only + flips.real_only
    ci_s = ci_r = None
    overlap = False
    if n > 0:
        a = clopper_pearson(flips.found_both + flips.sim_only, n, confidence)
        b = clopper_pearson(flips.found_both + flips.real_only, n, confidence)
        ci_s, ci_r = (a.low, a.high), (b.low, b.high)
        overlap = a.low <= b.high and b.low <= a.high
    diff = float(ap_sim - ap_real)
    return PracticalSize(negligible=bool(abs(diff) < size and n_flips == 0 and overlap), ap_difference=diff,
                         size=float(size), n_flips=int(n_flips), n_objects=int(n), recall_sim_ci=ci_s,
                         recall_real_ci=ci_r, recall_overlap=bool(overlap))
