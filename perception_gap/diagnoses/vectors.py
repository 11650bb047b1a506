"""The proprio and action vectors of two sets, as the control checks (`joints`, `control`) compare them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from perception_gap.diagnoses.common import MIN_PAIRS
from perception_gap.diagnoses.context import Context


@dataclass(frozen=True)
class ControlVectors:
    """One field's vectors on both sides.

    Attributes:
        basis: `pairs` (rows of `sim` and `real` match by pair key) or `distribution`.
        sim, real: (N, D) and (M, D) float64 rows of the sides' most common length D, finite only
            (on the pairs basis a pair is dropped when either row is not).
        sim_dims, real_dims: each side's most common vector length (they differ: `sim`/`real` empty).
    """

    basis: str
    sim: np.ndarray
    real: np.ndarray
    sim_dims: int
    real_dims: int


def control_vectors(ctx: Context, attr: str) -> ControlVectors | None:
    """`attr` (`proprio` or `action`) of the two sets; None when a side has none."""
    get = lambda f: getattr(f, attr)  # noqa: E731
    fs = [f for f in ctx.sim.frames if get(f) is not None]
    fr = [f for f in ctx.real.frames if get(f) is not None]
    if not fs or not fr:
        return None
    ds = Counter(len(get(f)) for f in fs).most_common(1)[0][0]
    dr = Counter(len(get(f)) for f in fr).most_common(1)[0][0]
    if ds != dr:
        return ControlVectors("distribution", np.empty((0, ds)), np.empty((0, dr)), ds, dr)
    fs = [f for f in fs if len(get(f)) == ds]
    fr = [f for f in fr if len(get(f)) == ds]
    by_key = {f.pair_key: f for f in fr}
    pairs = [(s, by_key[s.pair_key]) for s in fs if s.pair_key in by_key]
    if len(pairs) >= MIN_PAIRS:
        sv = np.array([get(s) for s, _ in pairs], dtype=np.float64).reshape(len(pairs), ds)
        rv = np.array([get(r) for _, r in pairs], dtype=np.float64).reshape(len(pairs), ds)
        keep = np.all(np.isfinite(sv), axis=1) & np.all(np.isfinite(rv), axis=1)
        return ControlVectors("pairs", sv[keep], rv[keep], ds, dr)
    sv = np.array([get(f) for f in fs], dtype=np.float64).reshape(len(fs), ds)
    rv = np.array([get(f) for f in fr], dtype=np.float64).reshape(len(fr), ds)
    return ControlVectors("distribution", sv[np.all(np.isfinite(sv), axis=1)], rv[np.all(np.isfinite(rv), axis=1)],
                          ds, dr)
