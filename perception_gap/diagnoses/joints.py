"""Joint diagnosis: proprio / action dims in degrees on one side, radians on the other
(`joint_units`)."""

from __future__ import annotations

import math

import numpy as np

from perception_gap.diagnoses.common import num, nums
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.vectors import control_vectors, log_abs, unit_columns
from perception_gap.findings import Finding

# Joint units: a per-dimension scale ratio within 30% of 180/pi (57.3) means degrees vs radians.
DEG_PER_RAD = 180.0 / math.pi
JOINT_RATIO_TOL = 1.3
# Once two dims match that closely, other dims within 2x of 57.3 join them: a deg/rad bug hits all
# revolute joints at once, and set-level spreads of a few episodes scatter by +-30% on their own.
JOINT_RATIO_LOOSE = 2.0
# Below these (in the data's own units) a dimension carries nothing: a sum of squares (paired) or a
# root-mean-square value (unpaired). Compared as logarithms.
LOG_TINY_SS, LOG_TINY = math.log(1e-12), math.log(1e-9)


def joint_scale_ratios(sim_vals: np.ndarray, real_vals: np.ndarray, paired_rows: bool) -> np.ndarray:
    """Per-dimension scale of sim relative to real, shape (D,); NaN where a dim carries nothing.

    Paired: least-squares slope through the origin of sim on real. Unpaired: ratio of
    root-mean-square values (deg vs rad scales offsets and spread alike). Sums are taken on
    power-of-two-scaled columns (`vectors.unit_columns`): any finite magnitude gives its ratio
    (inf past the float range) instead of overflowing."""
    us, ks = unit_columns(np.asarray(sim_vals, dtype=np.float64))
    ur, kr = unit_columns(np.asarray(real_vals, dtype=np.float64))
    out = np.full(us.shape[1], np.nan)
    for d in range(us.shape[1]):
        s, r = us[:, d], ur[:, d]
        if paired_rows:
            den, num_ = float(r @ r), float(s @ r)
            if log_abs(den) + 2 * kr[d] > LOG_TINY_SS and log_abs(float(s @ s)) + 2 * ks[d] > LOG_TINY_SS:
                out[d] = _signed_exp(log_abs(num_) - log_abs(den) + ks[d] - kr[d], num_)
        else:
            lrs = log_abs(math.sqrt(float(np.mean(s * s)))) + ks[d]
            lrr = log_abs(math.sqrt(float(np.mean(r * r)))) + kr[d]
            if lrs > LOG_TINY and lrr > LOG_TINY:
                out[d] = _signed_exp(lrs - lrr, 1.0)
    return out


def _signed_exp(log_value: float, sign: float) -> float:
    """exp(log_value) with the sign of `sign`; 0 for -inf, inf past the float range."""
    if log_value == -math.inf:
        return 0.0
    return math.copysign(math.exp(log_value) if log_value < 709.0 else math.inf, sign)


def _joint_check(ctx: Context, attr: str) -> Finding | None:
    vec = control_vectors(ctx, attr)
    if vec is None or vec.sim_dims != vec.real_dims or vec.sim_dims == 0:
        return None
    basis, sv, rv, dims = vec.basis, vec.sim, vec.real, vec.sim_dims
    if len(sv) == 0 or len(rv) == 0:
        return None
    ratios = joint_scale_ratios(sv, rv, basis == "pairs")
    with np.errstate(invalid="ignore", divide="ignore"):
        lr = np.log(np.abs(ratios))

    def near(sign: float, tol: float) -> list[int]:
        return [d for d in range(dims)
                if np.isfinite(lr[d]) and abs(lr[d] - sign * math.log(DEG_PER_RAD)) <= math.log(tol)]

    sim_deg, real_deg = near(1.0, JOINT_RATIO_TOL), near(-1.0, JOINT_RATIO_TOL)
    if len(sim_deg) >= 2:
        sim_deg = near(1.0, JOINT_RATIO_LOOSE)
    if len(real_deg) >= 2:
        real_deg = near(-1.0, JOINT_RATIO_LOOSE)
    if not sim_deg and not real_deg:
        return None
    deg_side, flagged = ("sim", sim_deg) if len(sim_deg) >= len(real_deg) else ("real", real_deg)
    rad_side = "real" if deg_side == "sim" else "sim"
    ratio_list = [abs(float(ratios[d])) ** (1.0 if deg_side == "sim" else -1.0) for d in flagged]
    ev = basis_evidence(basis, len(sv) if basis == "pairs" else 0, ctx)
    ev.update({"field": attr, "dims": [int(d) for d in flagged], "n_dims": dims,
               "degrees_side": deg_side,
               "ratios_degrees_over_radians": nums(ratio_list, 3),
               "median_ratio": num(float(np.median(ratio_list)), 3),
               "expected_ratio": num(DEG_PER_RAD, 3),
               "all_dim_ratios_sim_over_real": [num(float(x), 5) for x in ratios]})
    title = (f"{deg_side.capitalize()} {attr} dims {ev['dims']} are {ev['median_ratio']:.1f}x the "
             f"{rad_side} values: degrees vs radians.")
    action = (f"Convert {deg_side} {attr} dims {ev['dims']} from degrees to radians (x pi/180) in its "
              f"loader; this is a unit bug, not a randomization budget.")
    return Finding("joint_units", "bug", title, ev, action, num(len(flagged)))


def check_joint_units(ctx: Context) -> Finding | None:
    """Proprio and action dims in degrees on one side and radians on the other (one finding;
    the action field's evidence rides along when both are off)."""
    proprio, action = _joint_check(ctx, "proprio"), _joint_check(ctx, "action")
    if proprio is None or action is None:
        return proprio or action
    ev = dict(proprio.evidence)
    ev["action"] = {k: action.evidence[k] for k in ("dims", "degrees_side", "median_ratio")}
    title = proprio.title[:-1] + f" (action dims {action.evidence['dims']} too)."
    action_text = (proprio.action + f" Do the same for {action.evidence['degrees_side']} action dims "
                   f"{action.evidence['dims']}.")
    return Finding("joint_units", "bug", title, ev, action_text, proprio.score + action.score)
