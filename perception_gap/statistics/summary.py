"""Set-level summaries of per-frame statistics (pure functions, JSON-ready output)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.statistics.depth import DEPTH_HIST_LOG10, DEPTH_PERCENTILES
from perception_gap.statistics.image import HIST_BINS, LUM_PERCENTILES
from perception_gap.statistics.records import SetRecords


def _f(x: float | None, nd: int = 6) -> float | None:
    """A JSON-safe float: None for missing or non-finite values."""
    if x is None:
        return None
    x = float(x)
    return round(x, nd) if math.isfinite(x) else None


def _med(values: list[float]) -> float | None:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return _f(float(np.median(v))) if v else None


def _vector_ranges(vectors: list[tuple[float, ...] | None]) -> dict[str, Any] | None:
    """Per-dimension min/max/mean/std over the frames that carry the vector."""
    rows = [v for v in vectors if v is not None]
    if not rows:
        return None
    widths = Counter(len(v) for v in rows)
    dim = widths.most_common(1)[0][0]
    a = np.asarray([v for v in rows if len(v) == dim], dtype=np.float64)
    k = np.ldexp(1.0, np.maximum(np.frexp(np.abs(a).max(0))[1], 0))  # a power of two: a / k is exact, no sum overflows
    return {
        "n": int(a.shape[0]), "dim": int(dim), "inconsistent_length": int(len(rows) - a.shape[0]),
        "min": [_f(x) for x in a.min(0)], "max": [_f(x) for x in a.max(0)],
        "mean": [_f(x) for x in (a / k).mean(0) * k], "std": [_f(x) for x in (a / k).std(0) * k],
    }


def _mean_hist(hists: list[tuple[float, ...] | None]) -> list[float] | None:
    """Mean of per-frame normalized histograms (every frame weighs the same), or None."""
    rows = [h for h in hists if h is not None]
    if not rows:
        return None
    return [_f(x, 5) for x in np.mean(np.asarray(rows, dtype=np.float64), axis=0)]


def _mean_channel_hist(imgs: list, c: int) -> dict[str, Any] | None:
    """Set-level channel histograms: `HIST_BINS` bins over [0, full scale] per channel.

    Frames of one full scale only (the most common); float arrays have none."""
    with_hist = [s for s in imgs if s.hist is not None and len(s.hist) == c * HIST_BINS]
    if not with_hist:
        return None
    scale = Counter(s.nominal_max for s in with_hist).most_common(1)[0][0]
    same = [s.hist for s in with_hist if s.nominal_max == scale]
    mean = _mean_hist(same)
    return {"full_scale": scale, "bins": HIST_BINS, "n_frames": len(same),
            "channels": [mean[i * HIST_BINS:(i + 1) * HIST_BINS] for i in range(c)]}


@dataclass(frozen=True)
class SetSummary:
    """Aggregates of one set's per-frame statistics; every number is a median over frames
    unless named otherwise. Units are the frames' own (see `stats.ImageStats`)."""

    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.data


def summarize_set(records: SetRecords) -> SetSummary:
    """Summarize a set: sizes, dtypes, channel moments, luma, sharpness, depth, vectors."""
    imgs = [f.image for f in records.frames if f.image is not None]
    deps = [f.depth for f in records.frames if f.depth is not None]
    out: dict[str, Any] = {"name": records.name, "domain": records.domain,
                           "n_frames": len(records.frames), "n_images": len(imgs), "n_depth": len(deps)}
    if imgs:
        sizes = Counter(f"{s.width}x{s.height}" for s in imgs)
        out["sizes"] = dict(sizes.most_common(5))
        out["dtypes"] = dict(Counter(s.dtype for s in imgs))
        out["modes"] = dict(Counter(s.mode for s in imgs))
        out["jpeg_fraction"] = _f(sum(f.is_jpeg for f in records.frames if f.image is not None) / len(imgs))
        c = Counter(s.channels for s in imgs).most_common(1)[0][0]
        same_c = [s for s in imgs if s.channels == c]
        out["channels"] = c
        out["channel_mean"] = [_med([s.mean[i] for s in same_c]) for i in range(c)]
        out["channel_std"] = [_med([s.std[i] for s in same_c]) for i in range(c)]
        out["channel_min"] = [_f(min(s.min[i] for s in same_c)) for i in range(c)]
        out["channel_max"] = [_f(max(s.max[i] for s in same_c)) for i in range(c)]
        out["lum_percentiles"] = {f"p{q}": _med([s.lum_percentiles[j] for s in imgs]) for j, q in enumerate(LUM_PERCENTILES)}
        out["lum_mean"] = _med([s.lum_mean for s in imgs])
        lin = [s.lin_mean for s in same_c if s.lin_mean is not None]
        out["lin_mean"] = [_med([v[i] for v in lin]) for i in range(len(lin[0]))] if lin else None
        for k in ("sharpness", "hf_ratio", "grad_ratio", "dup_frac", "blockiness", "nonfinite_frac"):
            out[k] = _med([getattr(s, k) for s in imgs])
        out["channel_hist"] = _mean_channel_hist(same_c, c)
    if deps:
        valid = [d for d in deps if d.percentiles is not None]
        out["depth"] = {
            "dtypes": dict(Counter(d.dtype for d in deps)),
            "inferred_units": dict(Counter(d.inferred_unit for d in deps)),
            "declared_units_per_m": sorted({f.depth_units_per_m for f in records.frames if f.depth is not None and f.depth_units_per_m}),
            "percentiles": {f"p{q}": _med([d.percentiles[j] for d in valid]) for j, q in enumerate(DEPTH_PERCENTILES)} if valid else None,
            "dropout_mean": _f(float(np.mean([d.dropout for d in deps]))),
            "dropout_max": _f(max(d.dropout for d in deps)),
            "log_hist": _mean_hist([d.log_hist for d in deps]),
            "log_hist_range": list(DEPTH_HIST_LOG10),
        }
    out["action"] = _vector_ranges([f.action for f in records.frames])
    out["proprio"] = _vector_ranges([f.proprio for f in records.frames])
    return SetSummary(out)
