"""Control plumbing: proprio and action vectors that differ in length, scale or sign between the sets.

`control_dims`: the vectors have a different number of dimensions (3 vs 7). `control_scale`: a
dimension is a constant multiple of the other side's (units, a normalization, [-1, 1] vs
physical), other than the degrees/radians factor `joint_units` names. `control_sign`: a dimension
is negated (a gripper open/close convention). Paired: per dimension, the slope and correlation of
sim on real over matched pairs. Unpaired: the ratio of root-mean-square values, and for the sign
a mean that flips while staying far from zero.
"""

from __future__ import annotations

import math

import numpy as np

from perception_gap.diagnoses.common import num, nums
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.joints import DEG_PER_RAD, JOINT_RATIO_LOOSE
from perception_gap.diagnoses.vectors import control_vectors
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


def _per_dim(basis: str, sv: np.ndarray, rv: np.ndarray) -> list[tuple[float, bool]]:
    """Per dimension (ratio sim/real, well determined); ratio NaN where a dim carries nothing."""
    out = []
    for d in range(sv.shape[1]):
        s, r = sv[:, d], rv[:, d]
        if basis == "pairs":
            sc, rc = s - s.mean(), r - r.mean()
            vs, vr = float(sc @ sc), float(rc @ rc)
            if vs < 1e-12 or vr < 1e-12:  # constant dims: compare the values themselves
                ok = abs(float(r.mean())) > 1e-9 and abs(float(s.mean())) > 1e-9
                out.append((float(s.mean() / r.mean()) if ok else math.nan, ok))
                continue
            corr = float(sc @ rc) / math.sqrt(vs * vr)
            out.append((float(sc @ rc) / vr, abs(corr) >= MIN_CORR))
        else:
            rs, rr = math.sqrt(float(np.mean(s * s))), math.sqrt(float(np.mean(r * r)))
            if rs < 1e-9 or rr < 1e-9:
                out.append((math.nan, False))
                continue
            ms, mr, sds, sdr = float(s.mean()), float(r.mean()), float(s.std()), float(r.std())
            flipped = (ms * mr < 0 and abs(ms) >= SIGN_MEAN_SD * sds and abs(mr) >= SIGN_MEAN_SD * sdr
                       and min(len(s), len(r)) >= SIGN_MIN_FRAMES
                       and float(np.mean(np.sign(s) == np.sign(ms))) >= SIGN_SHARE
                       and float(np.mean(np.sign(r) == np.sign(mr))) >= SIGN_SHARE)
            spread_agrees = sds > 1e-9 and sdr > 1e-9 and abs(math.log(sds / sdr)) >= math.log(SCALE_RATIO["distribution"])
            out.append(((-1.0 if flipped else 1.0) * rs / rr, flipped or spread_agrees or abs(math.log(rs / rr)) < 1e-9))
    return out


def _is_joint_units(ratio: float) -> bool:
    lr = abs(math.log(abs(ratio)))
    return abs(lr - math.log(DEG_PER_RAD)) <= math.log(JOINT_RATIO_LOOSE)


def check_control(ctx: Context) -> list[Finding]:
    """`control_dims`, `control_scale` and `control_sign` findings for proprio and action."""
    out = []
    for attr in ("proprio", "action"):
        vec = control_vectors(ctx, attr)
        if vec is None:
            continue
        basis, sv, rv, ds, dr = vec.basis, vec.sim, vec.real, vec.sim_dims, vec.real_dims
        if ds != dr:
            ev = basis_evidence("distribution", 0, ctx)
            ev.update({"field": attr, "sim_dims": ds, "real_dims": dr})
            out.append(Finding(
                "control_dims", "bug", f"Sim {attr} has {ds} dimensions, real {attr} {dr}.", ev,
                f"Make both sides log the same {attr} vector (same joints, same order, gripper included or not) "
                f"before comparing or training; a policy fed the other layout reads the wrong numbers.", num(5.0)))
            continue
        if len(sv) < 2 or len(rv) < 2:
            continue
        per = _per_dim(basis, sv, rv)
        ratios = [r for r, _ in per]
        scaled = [d for d, (r, ok) in enumerate(per) if ok and math.isfinite(r) and abs(math.log(abs(r))) >=
                  math.log(SCALE_RATIO[basis]) and not _is_joint_units(r)]
        flipped = [d for d, (r, ok) in enumerate(per) if ok and math.isfinite(r) and r < 0 and d not in scaled]
        ev = basis_evidence(basis, len(sv) if basis == "pairs" else 0, ctx)
        ev.update({"field": attr, "n_dims": ds, "ratio_sim_over_real": nums(ratios, 4)})
        if scaled:
            vals = [abs(ratios[d]) for d in scaled]
            out.append(Finding(
                "control_scale", "bug",
                f"Sim {attr} dims {scaled} are {', '.join(f'{v:.3g}x' for v in vals)} the real values.",
                {**ev, "dims": scaled, "scales": nums(vals, 4)},
                f"Use one unit and one normalization for {attr} dims {scaled} on both sides (check the "
                f"loader's scaling, [-1, 1] vs physical units, mm vs m); a bug, not a randomization budget.",
                num(max(abs(math.log(v)) for v in vals) / math.log(SCALE_RATIO[basis]))))
        if flipped:
            out.append(Finding(
                "control_sign", "bug", f"Sim {attr} dims {flipped} have the opposite sign of real's.",
                {**ev, "dims": flipped},
                f"Flip the sign convention of {attr} dims {flipped} on one side (a gripper open/close or an "
                f"axis direction); a policy trained on one side pushes the other way on the other.", num(2.0)))
    return out
