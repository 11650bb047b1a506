"""Per-frame depth statistics and depth units: pure functions on a decoded depth map.

Depth is reported in the map's own units, never rescaled; its unit is declared
(`parse_depth_unit`) or inferred from dtype and magnitude (`infer_depth_unit`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from perception_gap.statistics.sampling import edge_profiles, floats, sample_grid, sample_stride

DEPTH_PERCENTILES = (1, 5, 50, 95, 99)
# 10**DEPTH_HIST_LOG10[1] in the map's own units (a mm map sits 30 bins right of a metre map);
# valid values outside the range land in the end bins.
DEPTH_HIST_LOG10 = (-3, 5)
DEPTH_HIST_BINS_PER_DECADE = 10
DEPTH_HIST_BINS = (DEPTH_HIST_LOG10[1] - DEPTH_HIST_LOG10[0]) * DEPTH_HIST_BINS_PER_DECADE


@dataclass(frozen=True)
class DepthStats:
    """Raw statistics of one depth map, in its own units (never rescaled).

    Attributes:
        width, height: pixels.
        dtype: numpy dtype name.
        stride: sampling stride (as for images).
        percentiles: depth at `DEPTH_PERCENTILES` over valid pixels, own units; None if none valid.
        mean: mean over valid pixels, own units; None if none valid.
        dropout: fraction of pixels that are 0, negative, NaN, infinite or an integer dtype's maximum.
        inferred_unit: `m`, `mm` or `unknown`, from dtype and magnitude (see `infer_depth_unit`).
        invalid: fractions of the sampled pixels carrying each invalid marker of `INVALID_MARKERS`
            (0, NaN, inf, negative, the dtype's maximum or a float far-clip spike).
        edges: where the depth discontinuities lie across the width and the height (`edge_profiles`
            of log depth over valid pixels), to compare with the RGB frame's.
        log_hist: histogram of log10(valid depth) in own units, `DEPTH_HIST_BINS` bins over
            `DEPTH_HIST_LOG10`, as fractions of the valid samples; None if none valid.
    """

    width: int
    height: int
    dtype: str
    stride: int
    percentiles: tuple[float, ...] | None
    mean: float | None
    dropout: float
    inferred_unit: str
    log_hist: tuple[float, ...] | None = None
    invalid: tuple[float, ...] | None = None
    edges: tuple[float, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Units per metre of the depth encodings seen in practice.
DEPTH_UNITS = {"m": 1.0, "cm": 100.0, "mm": 1000.0, "tum": 5000.0}


def parse_depth_unit(unit: str | float | None) -> float | None:
    """A declared depth unit -> units per metre. Accepts `m`, `cm`, `mm`, `tum` or a number."""
    if unit is None or (isinstance(unit, str) and unit.strip() == ""):
        return None
    if isinstance(unit, (int, float)):
        value = float(unit)
    else:
        key = unit.strip().lower()
        if key in DEPTH_UNITS:
            return DEPTH_UNITS[key]
        try:
            value = float(key)
        except ValueError:
            raise ValueError(
                f"Expected `depth_unit` to be one of {sorted(DEPTH_UNITS)} or a number of units "
                f"per metre, got {unit!r}."
            ) from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"Expected `depth_unit` > 0 units per metre, got {unit!r}.")
    return value


def infer_depth_unit(dtype: np.dtype, median: float | None) -> str:
    """Guess a depth map's unit from its dtype and median valid depth.

    Indoor and tabletop scenes lie between ~0.2 m and ~20 m. Floats with a median in that
    range are metres; integers (16-bit PNG) are millimetres by convention, unless their
    median only makes sense in metres. `unknown` when neither reading is plausible.
    """
    if median is None or not math.isfinite(median):
        return "unknown"
    if np.issubdtype(np.dtype(dtype), np.floating):
        if 0.05 <= median <= 50:
            return "m"
        if 50 < median <= 50000:
            return "mm"
        return "unknown"
    if 50 <= median <= 65535:
        return "mm"
    if 0 < median < 50:
        return "m"
    return "unknown"


def depth_stats(d: np.ndarray) -> DepthStats:
    """Statistics of an (H, W) depth map of any real dtype; invalid = 0, negative, NaN, inf, integer max."""
    if d.ndim == 3 and d.shape[2] == 1:
        d = d[:, :, 0]
    if d.ndim != 2 or d.size == 0:
        raise ValueError(f"Expected an (H, W) depth map, got shape {d.shape}.")
    h, w = d.shape
    s = sample_stride(h, w)
    g2 = sample_grid(d, s)
    g = g2.ravel()
    if np.issubdtype(g.dtype, np.floating):
        valid = np.isfinite(g) & (g > 0)
    else:  # the dtype's maximum (65535) is a sentinel, never a reading (65.5 m in mm)
        valid = (g > 0) & (g < np.iinfo(g.dtype).max)
    invalid = invalid_markers(g)
    v = g[valid].astype(np.float64)
    dropout = 1.0 - v.size / g.size
    log_hist = None
    if v.size:
        pct = tuple(float(x) for x in np.percentile(v, DEPTH_PERCENTILES))
        mean = float(v.mean())
        median = pct[DEPTH_PERCENTILES.index(50)]
        lo = DEPTH_HIST_LOG10[0]
        idx = np.floor((np.log10(v) - lo) * DEPTH_HIST_BINS_PER_DECADE).astype(np.int64)
        counts = np.bincount(np.clip(idx, 0, DEPTH_HIST_BINS - 1), minlength=DEPTH_HIST_BINS)
        log_hist = floats(counts / v.size)
    else:
        pct, mean, median = None, None, None
    return DepthStats(
        width=w, height=h, dtype=d.dtype.name, stride=s, percentiles=pct, mean=mean,
        dropout=dropout, inferred_unit=infer_depth_unit(d.dtype, median), log_hist=log_hist,
        invalid=invalid, edges=_depth_edges(g2, valid.reshape(g2.shape), s, h, w),
    )


def _depth_edges(g2: np.ndarray, valid: np.ndarray, s: int, h: int, w: int) -> tuple[float, ...]:
    """`edge_profiles` of log depth over the valid samples (an edge is a relative jump in depth)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logd = np.where(valid, np.log(np.where(valid, g2, 1).astype(np.float64)), 0.0)
    return edge_profiles(logd, s, h, w, valid)


# What a depth map can mark invalid pixels with, in the order of `DepthStats.invalid`.
INVALID_MARKERS = ("zero", "nan", "inf", "negative", "max")


def invalid_markers(g: np.ndarray) -> tuple[float, ...]:
    """Fractions of the samples `g` (any shape) carrying each of `INVALID_MARKERS`.

    `max` is the dtype's maximum for integer maps (65535 for uint16), and for float maps a spike
    at the map's largest finite value holding 1-50% of the samples and lying beyond 1.5x the
    median depth (a far clip plane or a sentinel such as 1e4); otherwise 0.
    """
    n = max(g.size, 1)
    if np.issubdtype(g.dtype, np.floating):
        fin = np.isfinite(g)
        nan = float(np.count_nonzero(np.isnan(g))) / n
        inf = float(g.size - np.count_nonzero(fin)) / n - nan
        neg = float(np.count_nonzero(g[fin] < 0)) / n
        pos = g[fin & (g > 0)]
        top = float(pos.max()) if pos.size else 0.0
        at_max = float(np.count_nonzero(g == top)) / n if top > 0 else 0.0
        # a spike: 1-50% of the samples at one value well beyond the typical depth (a constant or
        # flat map's maximum is an ordinary reading)
        spike = 0.01 <= at_max <= 0.5 and top > 1.5 * float(np.median(pos))
        at_max = at_max if spike else 0.0
    else:
        nan = inf = 0.0
        neg = float(np.count_nonzero(g < 0)) / n
        at_max = float(np.count_nonzero(g == np.iinfo(g.dtype).max)) / n
    zero = float(np.count_nonzero(g == 0)) / n
    return (zero, nan, inf, neg, at_max)
