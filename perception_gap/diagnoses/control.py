"""Control plumbing: proprio and action vectors that differ in length, scale or sign between the sets.

`control_dims`: the vectors have a different number of dimensions (3 vs 7), or one set mixes
vectors of several lengths (some frames 3-d, others 7-d; the checks below then compare the
most common length only). `control_scale`: a dimension is a constant multiple of the other
side's (units, a normalization, [-1, 1] vs physical), other than the degrees/radians factor
`joint_units` names. `control_sign`: a dimension is negated (a gripper open/close convention).
Paired: per dimension, the slope and correlation of sim on real over matched pairs. Unpaired: the
ratio of root-mean-square values, and for the sign a mean that flips while staying far from zero.
Scales are computed as logarithms on power-of-two-scaled values (`vectors.unit_columns`), so
any finite magnitude is measured: a 1e307x mismatch is a `control_scale`, not an overflow.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perception_gap.diagnoses.common import num, nums
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.joints import DEG_PER_RAD, JOINT_RATIO_LOOSE
from perception_gap.diagnoses.vectors import ControlVectors, control_vectors, log_abs, unit_columns
from perception_gap.findings import Finding

# A dimension scaled by this factor or more (either way) is named; paired dims must also correlate.
# Unpaired, sets of different stretches of a trajectory differ in level and spread by up to ~4x on
# their own (random disjoint stretches of one robot's joints), so both must differ by 5x.
SCALE_RATIO = {"pairs": 2.5, "distribution": 5.0}
MIN_CORR = 0.9
# Unpaired sign flip: the means are opposite, each at least this many standard deviations from
# zero, with SIGN_SHARE of each side's values on its mean's side of zero and SIGN_MIN_FRAMES a side
# (two or three frames of a joint stretch lie on one side of zero by chance: a clean control of 2
# and 3 frames a side read a flip).
SIGN_MEAN_SD = 1.5
SIGN_SHARE = 0.9
SIGN_MIN_FRAMES = 5


# Below these (in the data's own units) a dimension carries nothing: a sum of squared deviations
# (paired) and a mean or root-mean-square value (unpaired). Compared as logarithms.
LOG_FLAT_SS, LOG_FLAT = math.log(1e-12), math.log(1e-9)


def _per_dim(basis: str, sv: np.ndarray, rv: np.ndarray) -> list[tuple[float, float, bool]]:
    """Per dimension (log |ratio sim/real|, sign of the ratio, well determined); the log is NaN
    where a dim carries nothing. Computed on `unit_columns`, so no magnitude overflows."""
    us, ks = unit_columns(sv)
    ur, kr = unit_columns(rv)
    out = []
    for d in range(sv.shape[1]):
        s, r = us[:, d], ur[:, d]
        if basis == "pairs":
            sc, rc = s - s.mean(), r - r.mean()
            vs, vr = float(sc @ sc), float(rc @ rc)
            if log_abs(vs) + 2 * ks[d] < LOG_FLAT_SS or log_abs(vr) + 2 * kr[d] < LOG_FLAT_SS:
                # constant dims: compare the values themselves
                ms, mr = float(s.mean()), float(r.mean())
                lms, lmr = log_abs(ms) + ks[d], log_abs(mr) + kr[d]
                ok = lms > LOG_FLAT and lmr > LOG_FLAT
                out.append((lms - lmr if ok else math.nan, float(np.sign(ms) * np.sign(mr)), ok))
                continue
            cov = float(sc @ rc)
            corr = cov / math.sqrt(vs * vr)
            out.append((log_abs(cov) - log_abs(vr) + ks[d] - kr[d], float(np.sign(cov)), abs(corr) >= MIN_CORR))
        else:
            lrs = log_abs(math.sqrt(float(np.mean(s * s)))) + ks[d]
            lrr = log_abs(math.sqrt(float(np.mean(r * r)))) + kr[d]
            if lrs < LOG_FLAT or lrr < LOG_FLAT:
                out.append((math.nan, 1.0, False))
                continue
            # means and spreads in each side's scaled units: only compared within a side or by sign
            ms, mr, sds, sdr = float(s.mean()), float(r.mean()), float(s.std()), float(r.std())
            flipped = (np.sign(ms) * np.sign(mr) < 0 and abs(ms) >= SIGN_MEAN_SD * sds
                       and abs(mr) >= SIGN_MEAN_SD * sdr and min(len(s), len(r)) >= SIGN_MIN_FRAMES
                       and float(np.mean(np.sign(s) == np.sign(ms))) >= SIGN_SHARE
                       and float(np.mean(np.sign(r) == np.sign(mr))) >= SIGN_SHARE)
            lsds, lsdr = log_abs(sds) + ks[d], log_abs(sdr) + kr[d]
            spread_agrees = (lsds > LOG_FLAT and lsdr > LOG_FLAT
                             and abs(lsds - lsdr) >= math.log(SCALE_RATIO["distribution"]))
            lr = lrs - lrr
            out.append((lr, -1.0 if flipped else 1.0, bool(flipped or spread_agrees or abs(lr) < 1e-9)))
    return out


def _is_joint_units(log_ratio: float) -> bool:
    return abs(abs(log_ratio) - math.log(DEG_PER_RAD)) <= math.log(JOINT_RATIO_LOOSE)


def _ratio(log_ratio: float, sign: float) -> float:
    """sign * exp(log_ratio); inf past the float range (written as null in evidence)."""
    if not math.isfinite(log_ratio):
        return math.nan if math.isnan(log_ratio) else 0.0 * sign if log_ratio < 0 else sign * math.inf
    return sign * math.exp(log_ratio) if log_ratio < 709.0 else sign * math.inf


def _times(log_ratio: float) -> str:
    """`12.3x`, `0.1x`, or `1e+320x` / `1e-320x` for a factor past the float range."""
    v = _ratio(log_ratio, 1.0)
    return f"{v:.3g}x" if math.isfinite(v) and v > 0 else f"1e{log_ratio / math.log(10):+.0f}x"


def control_dims_finding(attr: str, sim_dims: int, real_dims: int, evidence: dict[str, Any],
                         where: str = "") -> Finding:
    """`control_dims` for sim and real `attr` vectors of different lengths (also `policy-check`'s,
    on the proprio it feeds the policy: `where` says so)."""
    return Finding(
        "control_dims", "bug", f"Sim {attr} has {sim_dims} dimensions, real {attr} {real_dims}{where}.",
        {**evidence, "field": attr, "sim_dims": sim_dims, "real_dims": real_dims},
        f"Make both sides log the same {attr} vector (same joints, same order, gripper included or not) "
        f"before comparing or training; a policy fed the other layout reads the wrong numbers.", num(5.0))


def _mixed_finding(attr: str, vec: ControlVectors, ev: dict[str, Any]) -> Finding:
    """`control_dims` for a set whose frames carry `attr` vectors of several lengths."""
    parts, odd = [], []
    for side, lengths, keys in (("sim", vec.sim_lengths, vec.sim_odd), ("real", vec.real_lengths, vec.real_odd)):
        if len(lengths) > 1:
            parts.append(f"{side.capitalize()} {attr} vectors mix lengths "
                         + ", ".join(f"{n}-d ({c} frames)" for n, c in lengths.items()))
            odd += list(keys)
    if vec.sim_dims != vec.real_dims:
        parts.append(f"the most common are {vec.sim_dims}-d in sim and {vec.real_dims}-d in real")
    else:
        parts.append(f"only the {vec.sim_dims}-d ones are compared")
    return Finding(
        "control_dims", "bug", "; ".join(parts) + ".",
        {**ev, "field": attr, "sim_dims": vec.sim_dims, "real_dims": vec.real_dims,
         "sim_lengths": {str(n): c for n, c in vec.sim_lengths.items()},
         "real_lengths": {str(n): c for n, c in vec.real_lengths.items()},
         "sim_odd_frames": list(vec.sim_odd), "real_odd_frames": list(vec.real_odd)},
        f"Log one {attr} layout for every frame of a set (same joints, same order, gripper included or not); "
        f"frames of another length (e.g. {', '.join(odd[:3])}) feed a policy numbers in the wrong places.", num(5.0))


def check_control(ctx: Context) -> list[Finding]:
    """`control_dims`, `control_scale` and `control_sign` findings for proprio and action."""
    out = []
    for attr in ("proprio", "action"):
        vec = control_vectors(ctx, attr)
        if vec is None:
            continue
        basis, sv, rv, ds, dr = vec.basis, vec.sim, vec.real, vec.sim_dims, vec.real_dims
        if vec.mixed:
            out.append(_mixed_finding(attr, vec, basis_evidence("distribution", 0, ctx)))
        elif ds != dr:
            out.append(control_dims_finding(attr, ds, dr, basis_evidence("distribution", 0, ctx)))
        if ds != dr or len(sv) < 2 or len(rv) < 2:
            continue
        per = _per_dim(basis, sv, rv)
        logs = [lr for lr, _, _ in per]
        scaled = [d for d, (lr, _, ok) in enumerate(per) if ok and math.isfinite(lr) and abs(lr) >=
                  math.log(SCALE_RATIO[basis]) and not _is_joint_units(lr)]
        flipped = [d for d, (lr, sign, ok) in enumerate(per) if ok and math.isfinite(lr) and sign < 0
                   and d not in scaled]
        ev = basis_evidence(basis, len(sv) if basis == "pairs" else 0, ctx)
        ev.update({"field": attr, "n_dims": ds, "ratio_sim_over_real": nums([_ratio(lr, sg) for lr, sg, _ in per], 4)})
        if scaled:
            vals = [_ratio(logs[d], 1.0) for d in scaled]
            out.append(Finding(
                "control_scale", "bug",
                f"Sim {attr} dims {scaled} are {', '.join(_times(logs[d]) for d in scaled)} the real values.",
                {**ev, "dims": scaled, "scales": nums(vals, 4),
                 "log10_scales": nums([logs[d] / math.log(10) for d in scaled], 4)},
                f"Use one unit and one normalization for {attr} dims {scaled} on both sides (check the "
                f"loader's scaling, [-1, 1] vs physical units, mm vs m); a bug, not a randomization budget.",
                num(max(abs(logs[d]) for d in scaled) / math.log(SCALE_RATIO[basis]))))
        if flipped:
            out.append(Finding(
                "control_sign", "bug", f"Sim {attr} dims {flipped} have the opposite sign of real's.",
                {**ev, "dims": flipped},
                f"Flip the sign convention of {attr} dims {flipped} on one side (a gripper open/close or an "
                f"axis direction); a policy trained on one side pushes the other way on the other.", num(2.0)))
    return out
