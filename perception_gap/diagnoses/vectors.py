"""The proprio and action vectors of two sets, as the control checks (`joints`, `control`) compare them.

Vectors of any magnitude a float64 holds are compared: sums of squares and products are taken on
each dimension divided by the power of two at or above its largest |value| (`unit_columns`), and
scales come back as logarithms, so a 1e307x unit mismatch is measured rather than overflowing.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from perception_gap.diagnoses.common import MIN_PAIRS
from perception_gap.diagnoses.context import Context
from perception_gap.statistics.records import paired_frames


@dataclass(frozen=True)
class ControlVectors:
    """One field's vectors on both sides.

    Attributes:
        basis: `pairs` (rows of `sim` and `real` match by pair key) or `distribution`.
        sim, real: (N, D) and (M, D) float64 rows of the sides' most common length D, finite only
            (on the pairs basis a pair is dropped when either row is not).
        sim_dims, real_dims: each side's most common vector length (they differ: `sim`/`real` empty).
        sim_lengths, real_lengths: every vector length on each side with its frame count, most
            common first (more than one: the side mixes layouts, and only `*_dims` rows are compared).
        sim_odd, real_odd: up to ODD_EXAMPLES pair keys of frames whose length is not `*_dims`.
    """

    basis: str
    sim: np.ndarray
    real: np.ndarray
    sim_dims: int
    real_dims: int
    sim_lengths: dict[int, int] = field(default_factory=dict)
    real_lengths: dict[int, int] = field(default_factory=dict)
    sim_odd: tuple[str, ...] = ()
    real_odd: tuple[str, ...] = ()

    @property
    def mixed(self) -> bool:
        """A side holds vectors of more than one length."""
        return len(self.sim_lengths) > 1 or len(self.real_lengths) > 1


ODD_EXAMPLES = 5


def unit_columns(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column divided by the power of two at or above its largest |value|, and the log of
    that divisor.

    A power of two divides exactly, so sums, products and ratios on the scaled values equal those
    on the raw ones times known powers of two, while no square can overflow.

    Args:
        x: (N, D) finite values.

    Returns:
        (N, D) values in [-1, 1] (0 in an all-zero column) and (D,) natural logs of the divisors
        (-inf for an all-zero column): x = scaled * exp(log_k).
    """
    k = np.abs(x).max(axis=0) if len(x) else np.zeros(x.shape[1])
    _, exp = np.frexp(k)
    log_k = np.where(k > 0, exp * math.log(2.0), -np.inf)
    return np.ldexp(x, -exp[None, :]), log_k


def log_abs(x: float) -> float:
    """log |x|, -inf for 0."""
    return math.log(abs(x)) if x else -math.inf


def control_vectors(ctx: Context, attr: str) -> ControlVectors | None:
    """`attr` (`proprio` or `action`) of the two sets; None when a side has none."""
    get = lambda f: getattr(f, attr)  # noqa: E731
    fs = [f for f in ctx.sim.frames if get(f) is not None]
    fr = [f for f in ctx.real.frames if get(f) is not None]
    if not fs or not fr:
        return None
    ls, lr = Counter(len(get(f)) for f in fs).most_common(), Counter(len(get(f)) for f in fr).most_common()
    ds, dr = ls[0][0], lr[0][0]
    shape = {"sim_lengths": dict(ls), "real_lengths": dict(lr),
             "sim_odd": tuple(f.pair_key for f in fs if len(get(f)) != ds)[:ODD_EXAMPLES],
             "real_odd": tuple(f.pair_key for f in fr if len(get(f)) != dr)[:ODD_EXAMPLES]}
    if ds != dr:
        return ControlVectors("distribution", np.empty((0, ds)), np.empty((0, dr)), ds, dr, **shape)
    fs = [f for f in fs if len(get(f)) == ds]
    fr = [f for f in fr if len(get(f)) == ds]
    pairs = paired_frames(fs, fr)
    if len(pairs) >= MIN_PAIRS:
        sv = np.array([get(s) for s, _ in pairs], dtype=np.float64).reshape(len(pairs), ds)
        rv = np.array([get(r) for _, r in pairs], dtype=np.float64).reshape(len(pairs), ds)
        keep = np.all(np.isfinite(sv), axis=1) & np.all(np.isfinite(rv), axis=1)
        return ControlVectors("pairs", sv[keep], rv[keep], ds, dr, **shape)
    sv = np.array([get(f) for f in fs], dtype=np.float64).reshape(len(fs), ds)
    rv = np.array([get(f) for f in fr], dtype=np.float64).reshape(len(fr), ds)
    return ControlVectors("distribution", sv[np.all(np.isfinite(sv), axis=1)], rv[np.all(np.isfinite(rv), axis=1)],
                          ds, dr, **shape)
