"""Diagnoses of how light maps to pixel values: `tone_curve` (the transfer curve) and `vignetting`.

Both read the luma thumbnails in linear light (`diagnoses.thumbs`).

Tone curve. An exposure change multiplies linear light by a gain: every quantile of
log-luminance moves by the same amount (slope 1 between the two sides' log-quantiles). A different
transfer curve (the sRGB encode missing, so linear light is stored as 8-bit; the encode applied
twice; another gamma) raises linear light to a power: the log-quantiles stretch or squeeze
(slope = the exponent, 2.2 or 0.45 for a pure power; a missing encode fits ~1.5-1.7 on real frames,
a double one ~0.5, as the sRGB curve is no pure power). Paired, the slope is fitted per pair on the
quantiles of its two thumbnails, and the reading names a missing or doubled encode when the pairs'
quantiles follow that exact mapping (`ENCODE_RESIDUAL`); unpaired, the same slope is fitted on the
quantile-quantile plot of the two sets' pooled thumbnail pixels, with a bootstrap interval over
frames (or episodes). Quantiles near clipping (highlights over `TONE_CLIP`) are left out, so a
bright exposure that clips stays `brightness`.

Vignetting. Radial falloff: log2 of corner over centre luminance (rings of `thumbs.RING_EDGES`),
paired from the ratio of the two frames' thumbnails, unpaired per frame. A gain moves every ring
alike; vignetting darkens the outer rings only.
"""

from __future__ import annotations

import math

import numpy as np

from perception_gap.diagnoses.common import dist_clear, excludes_zero, median_ci, num, nums
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.thumbs import (
    CENTRE,
    CORNERS,
    aligned_pairs,
    fixed_camera,
    linear,
    radial_profile,
    set_thumbs,
)
from perception_gap.findings import Finding

TONE_QUANTILES = np.arange(0.1, 0.95, 0.1)
# Encoded values beyond these are clipped or crushed: quantiles there say nothing about the curve.
TONE_CLIP = 0.9
TONE_FLOOR = 0.02
# Exponent (slope of log-quantiles, sim against real) named from this far off 1, either way.
# Unpaired, the pooled log-luminance of different scenes of one camera gives slopes within
# 2^+-0.55 of 1 (70 random 8-a-side splits of the VOC and SimplerEnv tune cameras; exposure changes
# of +-1 stop alike), so the bar stays at 2^0.585; sim luminance to the power 0.45 or 2.2 (a doubled
# or missing encode) reads 2^-0.87 to 2^-1.41 and 2^0.53 to 2^1.54; to the power 0.6, 2^-0.51 to
# 2^-1.02, and 1.49, 2^0.05 to 2^0.81 (named when clear, below the documented limit).
TONE_SLOPE = {"pairs": 1.3, "distribution": 1.5}
# Unpaired: quantile levels of the pooled pixels, bootstrap replicates and the interval's level.
QQ_LEVELS = np.arange(0.05, 0.951, 0.05)
QQ_BOOT = 200
QQ_CI = 0.95
QQ_MIN_LEVELS = 5
QQ_MIN_EPISODES = 5  # resample episodes (not frames) when each side has at least this many
# Unpaired frames a side the quantile-quantile reading needs: with 5-6 different photos a side the
# pooled quantiles of random halves of one tune camera reach 2^+-0.68 and 1 split in 40 clears the
# bar (at 8 a side: 2^+-0.55, none of 70).
QQ_MIN_FRAMES = 8
TONE_MIN_POINTS = 4
# Paired, a quantile mapping within this median |log2| distance of a missing sRGB encode (sim stores
# real's linear light) or a doubled one is read as that fault. The sRGB decode is not a pure power:
# its toe flattens the dark end, so a missing encode fits an exponent of only ~1.5-1.7 on real
# frames (the mid-tone quantiles sit on the toe once decoded), below the 2.2 the exponent suggests.
ENCODE_RESIDUAL = 0.2

# Vignetting: corner minus centre in stops (log2), sim minus real.
VIGNETTE_STOPS = {"pairs": 0.3, "distribution": 0.5}
# Unpaired frames a side the falloff comparison needs: four VOC photos with bright skies in the
# corners against four without differ by 2.4 stops corner to centre, fully separated (a clean 4-a-side
# split of a tune camera read a vignetting gap); the rank test needs 8 a side here as the
# quantile-quantile reading does.
VIGNETTE_MIN_FRAMES = QQ_MIN_FRAMES
_LIN_FLOOR = 1e-3


def _quantiles(t: np.ndarray) -> np.ndarray:
    """(n, Q) encoded `TONE_QUANTILES` of (n, H, W) thumbnails, NaN pixels left out."""
    flat = t.reshape(len(t), -1)
    if np.isnan(flat).any():
        return np.nanquantile(flat, TONE_QUANTILES, axis=1).T
    return np.quantile(flat, TONE_QUANTILES, axis=1).T  # vectorized: nanquantile loops over rows


def _log_quantiles(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log2 linear quantiles, usable mask) of (n, Q) encoded quantiles (`_quantiles`)."""
    ok = (q > TONE_FLOOR) & (q < TONE_CLIP)
    return np.log2(np.maximum(linear(q), _LIN_FLOOR)), ok


def _slopes(ls: np.ndarray, lr: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Per pair, the least-squares slope of sim log-quantiles on real's over the usable quantiles
    (NaN with fewer than TONE_MIN_POINTS of them or no spread in real's)."""
    m = ok.astype(np.float64)
    n = m.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (lr * m).sum(axis=1) / n
        my = (ls * m).sum(axis=1) / n
        dx = (lr - mx[:, None]) * m
        vx = (dx * dx).sum(axis=1) / n
        cxy = (dx * (ls - my[:, None])).sum(axis=1) / n
        out = cxy / vx
    return np.where((n >= TONE_MIN_POINTS) & (vx > 1e-4), out, np.nan)


def _frame_quantiles(ctx: Context, frames: list, t: np.ndarray) -> np.ndarray:
    """`_quantiles` of the thumbnails `t` of `frames`, kept per frame across resamples (`ctx.cache`);
    quantiles do not change under the flips `aligned_pairs` applies."""
    cache = ctx.cache.setdefault("tone_quantiles", {})
    todo = [i for i, f in enumerate(frames) if id(f.image) not in cache]
    if todo:
        for i, row in zip(todo, _quantiles(t[todo])):
            cache[id(frames[i].image)] = row
    return np.stack([cache[id(f.image)] for f in frames])


def _encode_residuals(qs: np.ndarray, qr: np.ndarray, ok: np.ndarray) -> dict[str, float]:
    """Median |log2| distance of the pairs' encoded quantiles from a missing sRGB encode (sim's value is
    real's linear light) and from a doubled one (sim's linear light is real's value); {} without usable points."""
    if not ok.any():
        return {}
    lg = lambda v: np.log2(np.maximum(v, _LIN_FLOOR))  # noqa: E731
    return {"missing_encode_residual_log2": float(np.median(np.abs(lg(qs) - lg(linear(qr)))[ok])),
            "double_encode_residual_log2": float(np.median(np.abs(lg(linear(qs)) - lg(qr))[ok]))}


def qq_slope(ts: np.ndarray, tr: np.ndarray) -> float:
    """Slope of sim's log2 linear-light quantiles on real's, over the pooled pixels of (n, H, W)
    encoded thumbnails, at the `QQ_LEVELS` where neither side is crushed or clipped; NaN with fewer
    than `QQ_MIN_LEVELS` such levels. A gain gives 1, luminance to a power g gives g."""
    a, b = ts[np.isfinite(ts)], tr[np.isfinite(tr)]
    if a.size == 0 or b.size == 0:
        return math.nan
    qa, qb = np.quantile(a, QQ_LEVELS), np.quantile(b, QQ_LEVELS)
    ok = (qa > TONE_FLOOR) & (qa < TONE_CLIP) & (qb > TONE_FLOOR) & (qb < TONE_CLIP)
    if ok.sum() < QQ_MIN_LEVELS:
        return math.nan
    x, y = np.log2(linear(qb[ok])), np.log2(linear(qa[ok]))
    vx = float(np.var(x))
    return float(np.cov(x, y, bias=True)[0, 1]) / vx if vx > 1e-4 else math.nan


def _units(frames) -> list[np.ndarray]:
    """Row indices of each resampling unit: episodes when there are QQ_MIN_EPISODES of them, else frames."""
    eps: dict = {}
    for i, f in enumerate(frames):
        eps.setdefault(f.episode, []).append(i)
    if None not in eps and len(eps) >= QQ_MIN_EPISODES:
        return [np.array(v) for v in eps.values()]
    return [np.array([i]) for i in range(len(frames))]


def qq_interval(ts: np.ndarray, tr: np.ndarray, units_s: list[np.ndarray], units_r: list[np.ndarray],
                seed: int = 0) -> tuple[float, float]:
    """Bootstrap interval (`QQ_CI`) of log2 `qq_slope`, resampling each side's units with replacement."""
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(QQ_BOOT):
        i = np.concatenate([units_s[k] for k in rng.integers(0, len(units_s), len(units_s))])
        j = np.concatenate([units_r[k] for k in rng.integers(0, len(units_r), len(units_r))])
        v = qq_slope(ts[i], tr[j])
        if math.isfinite(v) and v > 0:
            reps.append(math.log2(v))
    if len(reps) < QQ_BOOT // 2:
        return (-math.inf, math.inf)
    tail = 100 * (1 - QQ_CI) / 2
    lo, hi = np.percentile(reps, [tail, 100 - tail])
    return float(lo), float(hi)


def check_tone_curve(ctx: Context) -> Finding | None:
    """A transfer curve that differs between the sides (an exponent on linear light), told from exposure."""
    al = aligned_pairs(ctx)
    if al is not None and len(al[0]) >= 3:
        basis, n_pairs = "pairs", len(al[0])
        qs = _frame_quantiles(ctx, [s for s, _ in al[0]], al[1])
        qr = _frame_quantiles(ctx, [r for _, r in al[0]], al[2])
        ls, oks = _log_quantiles(qs)
        lr, okr = _log_quantiles(qr)
        slopes = _slopes(ls, lr, oks & okr)
        fits = _encode_residuals(qs, qr, oks & okr)
        slopes = slopes[np.isfinite(slopes) & (slopes > 0)]
        if slopes.size < 3:
            return None
        lg = np.log2(slopes)
        slope = 2.0 ** float(np.median(lg))
        clear = excludes_zero(median_ci(lg))
        extra = {"per_pair_exponent_iqr": nums([2 ** np.percentile(lg, 25), 2 ** np.percentile(lg, 75)], 3),
                 **{k: num(v, 3) for k, v in fits.items()}}
        missing = fits.get("missing_encode_residual_log2", math.inf) <= ENCODE_RESIDUAL
        double = fits.get("double_encode_residual_log2", math.inf) <= ENCODE_RESIDUAL
    else:
        basis, n_pairs = "distribution", 0
        sides = set_thumbs(ctx, QQ_MIN_FRAMES)
        if sides is None:
            return None
        ts, tr = sides
        slope = qq_slope(ts, tr)
        if not (math.isfinite(slope) and slope > 0):
            return None
        if ctx.resampled:  # within a resample of `verdicts`: the full sets' interval decides clarity
            ci, clear = (math.nan, math.nan), ctx.cache.get("tone_unpaired_clear", False)
        else:
            ci = qq_interval(ts, tr, _units(ctx.images("sim")), _units(ctx.images("real")))
            clear = excludes_zero(ci)
            ctx.cache["tone_unpaired_clear"] = clear
        extra = {"method": "quantile-quantile of pooled log2 luminance", "log2_exponent_ci95": nums(list(ci), 3),
                 "quantile_levels": nums(QQ_LEVELS.tolist(), 2)}
        missing, double = slope > 1.7, slope < 0.6
    if not clear or abs(math.log(slope)) < math.log(TONE_SLOPE[basis]):
        return None
    ev = basis_evidence(basis, n_pairs, ctx)
    ev.update({"exponent_sim_over_real": num(slope, 3), "threshold": TONE_SLOPE[basis], **extra})
    if slope > 1:
        cause = ("sim frames look like linear light stored without the sRGB encode" if missing
                 else "sim has more contrast in the mid-tones (a steeper curve or a tone mapper)")
    else:
        cause = ("sim frames look sRGB-encoded twice" if double
                 else "sim has flatter mid-tones (a gentler curve or a tone mapper)")
    ev["reading"] = cause
    title = (f"The transfer curve differs: sim luminance goes as real luminance to the power {slope:.2f} "
             f"({cause}).")
    action = ("Fix the renderer's colour pipeline, not the exposure: write sRGB-encoded 8-bit frames exactly once "
              "(check the framebuffer's sRGB flag and any gamma or tone-mapping step) so that sim and real share "
              f"one transfer curve. Fitted exponent sim/real = {slope:.2f}; a bug, not a randomization budget.")
    ctx.memo["tone_exponent"] = slope
    return Finding("tone_curve", "bug", title, ev, action, num(abs(math.log(slope)) / math.log(TONE_SLOPE[basis])))


def _falloff(lin: np.ndarray) -> np.ndarray:
    """log2(corner ring / centre ring) of (n, H, W) linear thumbnails (ratio maps or frames)."""
    c = np.nanmean(np.where(CENTRE, lin, np.nan), axis=(1, 2))
    k = np.nanmean(np.where(CORNERS, lin, np.nan), axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log2(np.maximum(k, _LIN_FLOOR) / np.maximum(c, _LIN_FLOOR))


def check_vignetting(ctx: Context) -> Finding | None:
    """A radial falloff (corners darker than the centre) that differs between the sides."""
    al = aligned_pairs(ctx)
    if al is not None and len(al[0]) >= 3:
        basis, n_pairs = "pairs", len(al[0])
        ls, lr = linear(al[1]), linear(al[2])
        valid = (ls > _LIN_FLOOR) & (lr > _LIN_FLOOR)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(valid, np.log2(np.maximum(ls, _LIN_FLOOR) / np.maximum(lr, _LIN_FLOOR)), np.nan)
        rings = radial_profile(ratio)  # (n, rings), stops sim over real
        per = rings[:, -1] - rings[:, 0]
        per = per[np.isfinite(per)]
        if per.size < 3:
            return None
        stops = float(np.median(per))
        clear = excludes_zero(median_ci(per))
        profile = np.nanmedian(rings, axis=0)
        centre = float(profile[0])
    else:
        basis, n_pairs = "distribution", 0
        sides = set_thumbs(ctx, VIGNETTE_MIN_FRAMES)
        if sides is None:
            return None
        ts, tr = sides
        if not fixed_camera(ctx, ts, tr)["passed"]:  # corners of different views hold different things
            ctx.memo.setdefault("skipped_for_moving_camera", []).append("vignetting")
            return None
        es, er = _falloff(linear(ts)), _falloff(linear(tr))
        es, er = es[np.isfinite(es)], er[np.isfinite(er)]
        if es.size < 2 or er.size < 2:
            return None
        stops = float(np.median(es) - np.median(er))
        clear = dist_clear(es, er, VIGNETTE_STOPS[basis])
        profile = (np.log2(np.maximum(radial_profile(np.nanmean(linear(ts), axis=0)), _LIN_FLOOR))
                   - np.log2(np.maximum(radial_profile(np.nanmean(linear(tr), axis=0)), _LIN_FLOOR)))
        centre = float(profile[0])
    if not clear or abs(stops) < VIGNETTE_STOPS[basis]:
        return None
    ctx.memo["vignetting_centre_stops"] = centre
    side = "sim" if stops < 0 else "real"
    darker = 1.0 - 2.0 ** -abs(stops)
    ev = basis_evidence(basis, n_pairs, ctx)
    ev.update({"corner_minus_centre_stops_sim_minus_real": num(stops, 3), "threshold_stops": VIGNETTE_STOPS[basis],
               "radial_profile_stops_sim_minus_real": nums(np.asarray(profile).tolist(), 3),
               "centre_stops_sim_minus_real": num(centre, 3), "darker_side": side,
               "see": "maps (radial profiles and difference maps)"})
    title = (f"{side.capitalize()} frames fall off toward the corners: corners {darker:.0%} darker relative to "
             f"the centre than the other side's ({abs(stops):.2f} stops).")
    action = (f"Model the lens' vignetting in the sim camera (a radial gain falling {abs(stops):.2f} stops to the "
              "corners) or flat-field the real frames; randomize the falloff if cameras vary. "
              "Exposure is not the fix: the centre differs by only "
              f"{abs(centre):.2f} stops.")
    return Finding("vignetting", "gap", title, ev, action, num(abs(stops) / VIGNETTE_STOPS[basis]))
