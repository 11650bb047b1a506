"""Depth diagnoses: depth scale / unit mismatch (`depth_scale`, mm vs m, 1/5000 m, ...) and
invalid-pixel dropout (`depth_dropout`), with the known depth units' names."""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import numpy as np

from perception_gap.diagnoses.common import MIN_PAIRS, dist_clear, excludes_zero, median_ci, num
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.findings import Finding
from perception_gap.statistics.depth import DEPTH_PERCENTILES
from perception_gap.statistics.records import FrameRecord, paired_frames
from perception_gap.wording import pct, points, times

# Depth scale: a paired median depth ratio beyond 1.5x is no scene difference; comparing set
# medians of different scenes, only 3x or more is. A ratio within 25% of a ratio of two known
# units (m, cm, mm, 1/5000 m, 0.1 mm) is named after them.
DEPTH_RATIO = {"pairs": 1.5, "distribution": 3.0}
DEPTH_NAME_TOL = 1.25
DEPTH_UNIT_NAMES = {"m": 1.0, "cm": 100.0, "mm": 1000.0, "1/5000 m (TUM)": 5000.0, "0.1 mm": 10000.0}

# Depth dropout, judged against the sensor's own dropout with an absolute margin (no ratio: a
# sensor that already drops 11% must still show +9 points): paired, the median per-pair
# difference is at least DROPOUT_DIFF["pairs"] and its CI excludes zero; unpaired, at least
# DROPOUT_DIFF["distribution"] and DIST_Z standard errors. Sensor holes on transparent/specular
# objects are 10-50%, clean renders 0%, two halves of one D435 set differ by < 3 points.
DROPOUT_DIFF = {"pairs": 0.04, "distribution": 0.05}

_P50 = DEPTH_PERCENTILES.index(50)


def _depth_frames(frames: Sequence[FrameRecord]) -> list[FrameRecord]:
    return [f for f in frames if f.depth is not None and f.depth.percentiles is not None
            and f.depth.percentiles[_P50] > 0]


def _declared_unit(frames: Sequence[FrameRecord]) -> float | None:
    units = [f.depth_units_per_m for f in frames if f.depth_units_per_m]
    if len(units) < len(frames) / 2:
        return None
    return Counter(units).most_common(1)[0][0]


def _inferred_unit(frames: Sequence[FrameRecord]) -> str:
    return Counter(f.depth.inferred_unit for f in frames).most_common(1)[0][0]


def nearest_depth_unit(units_per_m: float) -> str | None:
    """Name of the known unit within DEPTH_NAME_TOL of `units_per_m`, else None."""
    name, fac = min(DEPTH_UNIT_NAMES.items(), key=lambda kv: abs(math.log(units_per_m / kv[1])))
    return name if abs(math.log(units_per_m / fac)) <= math.log(DEPTH_NAME_TOL) else None


def name_depth_ratio(ratio: float) -> tuple[str, str, float] | None:
    """The pair of known units (sim unit, real unit) whose units-per-metre ratio is closest to
    `ratio` (sim value / real value at the same depth), within DEPTH_NAME_TOL; else None."""
    best = None
    for us, fs in DEPTH_UNIT_NAMES.items():
        for ur, fr in DEPTH_UNIT_NAMES.items():
            if us == ur:
                continue
            err = abs(math.log(ratio / (fs / fr)))
            if err <= math.log(DEPTH_NAME_TOL) and (best is None or err < best[2]):
                best = (us, ur, err)
    return best


def _explain_depth_ratio(ratio: float, f_s: float, f_r: float, both_converted: bool,
                         inferred: tuple[str, str]) -> tuple[str, tuple[str, str] | None]:
    """(side most likely wrong, (sim unit, real unit) names or None) for a depth `ratio`
    (sim / real after dividing by the units-per-metre factors `f_s`, `f_r`; `inferred` holds
    the stats' unit guesses, which break ties)."""
    if not both_converted:
        named = name_depth_ratio(ratio)
        looks = (named[0], named[1]) if named else None
        # Metres is the usual target; the side not in metres is the one to convert.
        if looks and "m" in looks:
            return ("real" if looks[0] == "m" else "sim"), looks
        return ("sim" if ratio >= 1 else "real"), looks
    # Units were declared (or inferred for one side): one side's factor is right, the other's
    # is not. Each hypothesis implies a true unit for the wrong side; keep those that are known.
    options = []
    sim_true, real_right = nearest_depth_unit(ratio * f_s), nearest_depth_unit(f_r)
    if sim_true and real_right:
        options.append(("sim", (sim_true, real_right), sim_true == inferred[0]))
    sim_right, real_true = nearest_depth_unit(f_s), nearest_depth_unit(f_r / ratio)
    if real_true and sim_right:
        options.append(("real", (sim_right, real_true), real_true == inferred[1]))
    if not options:
        return ("sim" if ratio >= 1 else "real"), None
    options.sort(key=lambda o: not o[2])  # the one the magnitudes agree with first
    return options[0][0], options[0][1]


def check_depth_scale(ctx: Context) -> Finding | None:
    """Median depth of matching frames differs by a unit factor (mm vs m, 1/5000 m, ...)."""
    ds, dr = _depth_frames(ctx.sim.frames), _depth_frames(ctx.real.frames)
    if not ds or not dr:
        return None
    decl_s, decl_r = _declared_unit(ds), _declared_unit(dr)
    inf_s, inf_r = _inferred_unit(ds), _inferred_unit(dr)
    conv = {"m": 1.0, "mm": 1000.0}

    def factor(decl: float | None, inferred: str, other_decl: float | None) -> tuple[float, str]:
        if decl is not None:
            return decl, "declared"
        if other_decl is not None and inferred in conv:
            return conv[inferred], "inferred"
        return 1.0, "raw"

    f_s, how_s = factor(decl_s, inf_s, decl_r)
    f_r, how_r = factor(decl_r, inf_r, decl_s)
    pairs = paired_frames(ds, dr)
    if len(pairs) >= MIN_PAIRS:
        basis = "pairs"
        ratios = np.array([(s.depth.percentiles[_P50] / f_s) / (r.depth.percentiles[_P50] / f_r)
                           for s, r in pairs])
        ratio = float(np.exp(np.median(np.log(ratios))))
        agree = float(np.mean(np.abs(np.log(ratios / ratio)) < math.log(1.25)))
    else:
        basis = "distribution"
        med_s = float(np.median([f.depth.percentiles[_P50] for f in ds])) / f_s
        med_r = float(np.median([f.depth.percentiles[_P50] for f in dr])) / f_r
        ratio = med_s / med_r
        agree = None
    unit_conflict = (decl_s is None and decl_r is None and "unknown" not in (inf_s, inf_r)
                     and inf_s != inf_r)
    far = abs(math.log(ratio)) >= math.log(DEPTH_RATIO[basis])
    if not far and not unit_conflict:
        return None
    compared = "metres" if how_s != "raw" and how_r != "raw" else "raw values"
    wrong, looks = _explain_depth_ratio(ratio, f_s, f_r, compared == "metres", (inf_s, inf_r))

    def unit_desc(decl: float | None, inferred: str) -> str:
        if decl is not None:
            return f"declared {nearest_depth_unit(decl) or f'{decl:g} units/m'}"
        return f"undeclared (looks like {inferred})"

    ev = basis_evidence(basis, len(pairs) if basis == "pairs" else 0, ctx)
    ev.update({
        "ratio_sim_over_real": num(ratio, 6), "compared_in": compared,
        "sim_unit": unit_desc(decl_s, inf_s), "real_unit": unit_desc(decl_r, inf_r),
        "sim_inferred_unit": inf_s, "real_inferred_unit": inf_r,
        "sim_declared_units_per_m": num(decl_s) if decl_s is not None else None,
        "real_declared_units_per_m": num(decl_r) if decl_r is not None else None,
        "sim_median_depth": num(float(np.median([f.depth.percentiles[_P50] for f in ds])), 5),
        "real_median_depth": num(float(np.median([f.depth.percentiles[_P50] for f in dr])), 5),
        "unit_conflict": unit_conflict, "likely_wrong_side": wrong,
    })
    if agree is not None:
        ev["pair_agreement"] = num(agree)
    if looks:
        ev["sim_looks_like"], ev["real_looks_like"] = looks
        what = f" ({looks[0]} vs {looks[1]})"
    else:
        what = ""
    big, small, fac = ("sim", "real", ratio) if ratio >= 1 else ("real", "sim", 1 / ratio)
    where = " at matching frames" if basis == "pairs" else ""
    title = f"{big.capitalize()} depth values are {times(fac)} the {small} ones{where}{what}."
    decl_wrong = decl_s if wrong == "sim" else decl_r
    true_unit = (looks[0] if wrong == "sim" else looks[1]) if looks else None
    if true_unit and decl_wrong is not None:
        action = (f"The {wrong} set's depth is in {true_unit} but its declared `depth_unit` says "
                  f"{nearest_depth_unit(decl_wrong) or f'{decl_wrong:g} units/m'}: declare "
                  f"{DEPTH_UNIT_NAMES[true_unit]:g} units per metre (or convert in its loader); this is "
                  f"a bug, not a randomization budget.")
    elif true_unit:
        action = (f"Convert {wrong} depth from {true_unit} to metres in its loader (divide by "
                  f"{DEPTH_UNIT_NAMES[true_unit]:g}) and declare `depth_unit` for both sets; this is a "
                  f"bug, not a randomization budget.")
    else:
        action = (f"Find the scale error in the depth pipelines ({big} values are {times(fac)} the "
                  f"{small} ones) and declare `depth_unit` for both sets.")
    score = abs(math.log(ratio)) / math.log(DEPTH_RATIO[basis]) + (1.0 if unit_conflict else 0.0)
    return Finding("depth_scale", "bug", title, ev, action, num(score))


def check_depth_dropout(ctx: Context) -> Finding | None:
    """Invalid-depth fraction (0, NaN, inf) much higher on one side."""
    ds = [f for f in ctx.sim.frames if f.depth is not None]
    dr = [f for f in ctx.real.frames if f.depth is not None]
    if not ds or not dr:
        return None
    pairs = paired_frames(ds, dr)
    dos = np.array([f.depth.dropout for f in ds])
    dor = np.array([f.depth.dropout for f in dr])
    ci = None
    if len(pairs) >= MIN_PAIRS:
        basis = "pairs"
        per_pair = np.array([r.depth.dropout - s.depth.dropout for s, r in pairs])
        diff = float(np.median(per_pair))
        ci = median_ci(per_pair)
        z_ok = excludes_zero(ci)
        mean_s = float(np.mean([s.depth.dropout for s, _ in pairs]))
        mean_r = float(np.mean([r.depth.dropout for _, r in pairs]))
    else:
        basis = "distribution"
        diff = float(np.median(dor) - np.median(dos))
        z_ok = dist_clear(dor, dos, DROPOUT_DIFF["distribution"])
        mean_s, mean_r = float(dos.mean()), float(dor.mean())
    if abs(diff) < DROPOUT_DIFF[basis] or not z_ok:
        return None
    ev = basis_evidence(basis, len(pairs) if basis == "pairs" else 0, ctx)
    ev.update({"sim_dropout": num(mean_s), "real_dropout": num(mean_r),
               "dropout_diff_real_minus_sim": num(diff), "threshold": DROPOUT_DIFF[basis]})
    if ci is not None:
        ev["dropout_diff_ci"] = [num(ci[0]), num(ci[1])]
    if diff > 0:
        title = (f"Real depth has {pct(mean_r)} invalid pixels vs {pct(mean_s)} in sim "
                 f"({points(mean_r, mean_s)} in real).")
        action = ("Add a depth-noise/dropout model to the sim depth (holes at depth edges and on "
                  "transparent/specular surfaces, at the measured rate), or filter/inpaint real "
                  "depth before the policy sees it.")
    else:
        title = (f"Sim depth has {pct(mean_s)} invalid pixels vs {pct(mean_r)} in real "
                 f"({points(mean_s, mean_r)} in sim).")
        action = ("Check the sim depth's near/far clipping planes and invalid-value encoding, or "
                  "match the dropout model to the real sensor's measured rate.")
    return Finding("depth_dropout", "gap", title, ev, action, num(abs(diff) / DROPOUT_DIFF[basis]))
