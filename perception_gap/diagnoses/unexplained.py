"""`unexplained_gap` and the spatial gap maps: where in the frame the sets differ.

Gap maps (`gap_maps`): per set, the mean thumbnail in linear light with its radial, row and column
luminance profiles; for paired sets, the mean signed difference (sim minus real, linear light) and
the mean absolute difference over pairs. They are what a person reads to see a vignette, a flipped
frame, a zoom or a local object/lighting difference; `results.json` keeps them at `THUMB` x `THUMB`.

`unexplained_gap` is the honest answer when the sets clearly differ and no named check fired:
paired, a consistent local difference (a per-pixel t statistic over pairs of the thumbnails);
unpaired, a per-pixel Welch t between the sets' thumbnails, with a higher bar since scenes differ.
It names the region, never the nearest code.
"""

from __future__ import annotations

import numpy as np

from perception_gap.diagnoses.common import num
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.thumbs import RING_EDGES, aligned_pairs, linear, radial_profile, region_name, set_thumbs
from perception_gap.findings import Finding

# Paired: pixels whose mean difference is T_PAIRS standard errors from 0 and at least DIFF_PAIRS of
# full scale; named when they cover AREA_PAIRS of the frame.
T_PAIRS, DIFF_PAIRS, AREA_PAIRS = 4.0, 0.03, 0.05
# Unpaired (different scenes on the two sides): stricter.
T_SETS, DIFF_SETS, AREA_SETS = 6.0, 0.06, 0.10
MIN_FRAMES = 8


def _round(a: np.ndarray, nd: int = 4) -> list:
    return np.round(np.nan_to_num(np.asarray(a, dtype=np.float64)), nd).tolist()


def _set_map(lin: np.ndarray) -> dict:
    mean = np.nanmean(lin, axis=0)
    return {"mean_linear": _round(mean), "radial": _round(radial_profile(mean)),
            "rows": _round(np.nanmean(mean, axis=1)), "cols": _round(np.nanmean(mean, axis=0)),
            "n_frames": int(len(lin))}


def gap_maps(ctx: Context) -> dict | None:
    """The gap maps of a diagnosed pair of sets (see the module docstring); None without thumbnails."""
    sides = set_thumbs(ctx)
    if sides is None:
        return None
    ts, tr = sides
    out = {"size": int(ts.shape[-1]), "ring_edges": list(RING_EDGES[:-1]) + [1.0],
           "sim": _set_map(linear(ts)), "real": _set_map(linear(tr)), "paired": None,
           "orientation_applied": ctx.memo.get("orientation")}
    al = aligned_pairs(ctx)
    if al is not None:
        d = linear(al[1]) - linear(al[2])
        out["paired"] = {"n_pairs": int(len(d)), "mean_signed_diff": _round(np.mean(d, axis=0)),
                         "mean_abs_diff": _round(np.mean(np.abs(d), axis=0))}
    return out


def _t_area(t: np.ndarray, diff: np.ndarray, t_bar: float, d_bar: float) -> tuple[float, np.ndarray]:
    hit = (np.abs(t) >= t_bar) & (np.abs(diff) >= d_bar)
    return float(hit.mean()), hit


def check_unexplained(ctx: Context, named: set[str]) -> Finding | None:
    """The sets differ clearly in where or how bright things are, and no named check (`named`) fired."""
    if named:
        return None
    al = aligned_pairs(ctx)
    if al is not None and len(al[0]) >= MIN_FRAMES:
        basis, n = "pairs", len(al[0])
        d = al[1] - al[2]
        mean = d.mean(axis=0)
        se = d.std(axis=0, ddof=1) / np.sqrt(n)
        t = mean / np.maximum(se, 1e-6)
        area, hit = _t_area(t, mean, T_PAIRS, DIFF_PAIRS)
        bar = AREA_PAIRS
    else:
        sides = set_thumbs(ctx, MIN_FRAMES)
        if sides is None:
            return None
        ts, tr = sides
        basis, n = "distribution", 0
        mean = np.nanmean(ts, axis=0) - np.nanmean(tr, axis=0)
        se = np.sqrt(np.nanvar(ts, axis=0, ddof=1) / len(ts) + np.nanvar(tr, axis=0, ddof=1) / len(tr))
        t = mean / np.maximum(se, 1e-6)
        area, hit = _t_area(t, mean, T_SETS, DIFF_SETS)
        bar = AREA_SETS
    if area < bar:
        return None
    ys, xs = np.nonzero(hit)
    w = np.abs(mean[ys, xs])
    cy, cx = float(np.average(ys, weights=w)), float(np.average(xs, weights=w))
    where = region_name(cy, cx) if area < 0.6 else "whole frame"
    sign = float(np.average(np.sign(mean[ys, xs]), weights=w))
    word = "brighter" if sign > 0.3 else ("darker" if sign < -0.3 else "different (brighter and darker parts)")
    ev = basis_evidence(basis, n, ctx)
    ev.update({"area_share": num(area, 3), "where": where, "centroid_xy_share": [num(cx / 31, 3), num(cy / 31, 3)],
               "mean_diff_in_area": num(float(np.mean(mean[ys, xs])), 4), "t_threshold": T_PAIRS if basis == "pairs"
               else T_SETS, "see": "maps (mean signed and absolute difference)"})
    title = (f"Sim and real frames differ in a way no named check explains: sim is {word} over "
             f"{area:.0%} of the frame, mostly at the {where}.")
    action = ("Look at the gap maps for what lies there (a missing or differently placed object, a light, a "
              "reflection, a background); fix the scene or asset in sim, then rerun. Not a randomization budget "
              "until the cause is known.")
    return Finding("unexplained_gap", "gap", title, ev, action, num(area / bar))
