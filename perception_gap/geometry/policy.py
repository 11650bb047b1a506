"""A frozen policy's actions on paired sim and real observations, compared per action dimension.

Per dimension: the spread of the actions across frames in each domain (`sim_std`, `real_std`),
the paired difference `real - sim` (mean, and mean absolute `paired_diff_abs`), and
`paired_diff_rel` = mean |real - sim| / sim_std (how far the real action lands from its sim twin,
in units of sim's own action spread). A dimension whose sim action does not vary has no spread to
measure in: `paired_diff_rel` is 0 there when real equals sim on every pair, and undefined (null)
when they differ; the `--max-rel-diff` gate is then not computed (`rel_diff_gate_value`).

Rules (stated): a dimension *collapses* when real's spread is below COLLAPSE_RATIO of sim's
while sim's varies, or when real sits at the dimension's extreme (the min or max over both
domains) in at least SATURATED_SHARE of frames while sim does so in at most 1 - SATURATED_SHARE;
the *whole policy* collapses when no dimension varies in either domain and real equals sim on
every pair (it ignores its input). An output constant within each domain but different between
them is not a collapse: the policy ignores what varies from frame to frame yet reads something
that differs between the domains as a whole, a `policy_obs_mismatch` (`constant_per_domain`).
The spread rule is also applied to the early steps alone (step < EARLY_STEPS, when the frames
carry steps and at least 3 pairs are early): a policy stuck at the start of real episodes
collapses there first. Any of these gives `action_collapse`. A dimension that does not collapse but has `paired_diff_rel` >=
MISMATCH_REL, or whose sim action is constant while real differs from it, gives
`policy_obs_mismatch` (the policy reads sim and real observations differently).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.errors import InputError
from perception_gap.findings import Finding

COLLAPSE_RATIO = 0.1
SATURATED_SHARE = 0.8
MISMATCH_REL = 0.5
CONSTANT_TOL = 1e-6  # a spread below this times (1 + |mean|) is no variation at all
TOP_FRAMES = 5
EARLY_STEPS = 5


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class DimStats:
    """One action dimension (higher `paired_diff_rel` is worse)."""

    sim_std: float
    real_std: float
    paired_diff_mean: float
    paired_diff_rel: float
    paired_diff_abs: float
    sim_quantiles: tuple[float, ...]
    real_quantiles: tuple[float, ...]
    collapsed: bool
    saturated: bool

    def to_dict(self) -> dict[str, Any]:
        return {"sim_std": self.sim_std, "real_std": self.real_std, "paired_diff_mean": self.paired_diff_mean,
                "paired_diff_rel": _num(self.paired_diff_rel), "paired_diff_abs": _num(self.paired_diff_abs),
                "sim_quantiles": list(self.sim_quantiles),
                "real_quantiles": list(self.real_quantiles), "collapsed": self.collapsed, "saturated": self.saturated}


@dataclass(frozen=True)
class PolicyCheck:
    """Sim vs real actions of one policy.

    Attributes:
        per_dim: one entry per action dimension.
        n_pairs: paired frames compared.
        ignores_input: no dimension varies in either domain and real equals sim on every pair.
        constant_per_domain: no dimension varies in either domain, but real differs from sim.
        worst_pairs: the pair keys whose actions differ most (normalized by sim's spread), worst first.
        worst_scores: their root-mean-square normalized difference.
        n_early: pairs at step < EARLY_STEPS (0 without steps).
        early_collapsed: dimensions whose real spread collapses over those early pairs alone.
    """

    per_dim: tuple[DimStats, ...]
    n_pairs: int
    ignores_input: bool
    worst_pairs: tuple[str, ...]
    worst_scores: tuple[float, ...]
    n_early: int = 0
    early_collapsed: tuple[int, ...] = ()
    constant_per_domain: bool = False
    higher_is_gap: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"per_dim": [d.to_dict() for d in self.per_dim], "n_pairs": self.n_pairs,
                "ignores_input": self.ignores_input, "constant_per_domain": self.constant_per_domain,
                "n_early": self.n_early,
                "early_collapsed": list(self.early_collapsed),
                "worst_pairs": [{"pair_key": k, "score": _num(s)} for k, s in zip(self.worst_pairs, self.worst_scores)]}


def _at_extreme(a: np.ndarray, lo: float, hi: float) -> float:
    tol = 1e-6 * max(hi - lo, 1e-12)
    return float(((a <= lo + tol) | (a >= hi - tol)).mean())


def _spread_collapse(sim: np.ndarray, real: np.ndarray) -> np.ndarray:
    """(A,) bool: real's spread below COLLAPSE_RATIO of sim's while sim's varies."""
    s_std, r_std = sim.std(axis=0, ddof=1), real.std(axis=0, ddof=1)
    varies = s_std > CONSTANT_TOL * (1 + np.abs(np.concatenate([sim, real])).mean(axis=0))
    return varies & (r_std < COLLAPSE_RATIO * s_std)


def compare_actions(sim: np.ndarray, real: np.ndarray, pair_keys: list[str],
                    steps: list[int | None] | None = None) -> PolicyCheck:
    """Per-dimension comparison of paired actions.

    Args:
        sim, real: (N, A) actions, row i of each from the same pair.
        pair_keys: (N,) the pairs' keys.
        steps: (N,) each pair's step within its episode (None where unknown), for the early check.

    Raises:
        InputError: shapes differ, or fewer than 2 pairs.
    """
    if sim.shape != real.shape or sim.ndim != 2:
        raise InputError(f"Expected sim and real actions of the same (N, A) shape, got {sim.shape} and {real.shape}.")
    if len(sim) < 2:
        raise InputError(f"Expected at least 2 sim/real pairs for action spreads, got {len(sim)}.")
    # finite actions near the float limit overflow in a spread or a difference: those statistics
    # come out non-finite and are written as null (with the reason) rather than warned about
    with np.errstate(over="ignore", invalid="ignore"):
        return _compare(sim, real, pair_keys, steps)


def _compare(sim: np.ndarray, real: np.ndarray, pair_keys: list[str], steps: list[int | None] | None) -> PolicyCheck:
    s_std, r_std = sim.std(axis=0, ddof=1), real.std(axis=0, ddof=1)
    diff = real - sim
    scale = 1 + np.abs(np.concatenate([sim, real])).mean(axis=0)
    varies = s_std > CONSTANT_TOL * scale
    abs_diff = np.abs(diff).mean(axis=0)
    differs = ~(abs_diff <= CONSTANT_TOL * scale)  # an overflowed (inf/nan) difference differs too
    both = np.concatenate([sim, real])
    lo, hi = both.min(axis=0), both.max(axis=0)
    spread = _spread_collapse(sim, real)
    dims = []
    for j in range(sim.shape[1]):
        # no sim spread to measure in: no difference is 0 in any unit, a difference is undefined
        rel = float(abs_diff[j] / s_std[j]) if varies[j] else (math.nan if differs[j] else 0.0)
        saturated = bool(varies[j] and hi[j] > lo[j] and _at_extreme(real[:, j], lo[j], hi[j]) >= SATURATED_SHARE
                         and _at_extreme(sim[:, j], lo[j], hi[j]) <= 1 - SATURATED_SHARE)
        collapsed = bool(spread[j]) or saturated
        q = (5, 25, 50, 75, 95)
        dims.append(DimStats(float(s_std[j]), float(r_std[j]), float(diff[:, j].mean()), rel, float(abs_diff[j]),
                             tuple(float(v) for v in np.percentile(sim[:, j], q)),
                             tuple(float(v) for v in np.percentile(real[:, j], q)), collapsed, saturated))
    constant = bool(not varies.any() and (r_std <= CONSTANT_TOL * scale).all())
    ignores, per_domain = constant and not differs.any(), constant and bool(differs.any())
    norm = np.where(varies, s_std, np.inf)
    score = np.sqrt(np.mean((diff / norm) ** 2, axis=1)) if varies.any() else np.zeros(len(sim))
    order = np.argsort(-score, kind="stable")[:TOP_FRAMES]
    early = np.array([s is not None and s < EARLY_STEPS for s in steps], bool) if steps else np.zeros(len(sim), bool)
    n_early = int(early.sum())
    early_dims = tuple(int(j) for j in np.flatnonzero(_spread_collapse(sim[early], real[early]))) if n_early >= 3 else ()
    return PolicyCheck(tuple(dims), len(sim), ignores, tuple(pair_keys[i] for i in order),
                       tuple(float(score[i]) for i in order), n_early, early_dims, per_domain)


def rel_diff_gate_value(pc: PolicyCheck) -> tuple[float | None, str | None]:
    """The `max_paired_diff_rel` gate's value: the largest `paired_diff_rel` over EVERY action
    dimension, or (None, why) when one of them is undefined (sim constant, real different) or not
    finite; a gate over the dimensions that could be measured would pass on the one that differs.
    """
    bad = [j for j, d in enumerate(pc.per_dim) if not math.isfinite(d.paired_diff_rel)]
    if not bad:
        return max((d.paired_diff_rel for d in pc.per_dim), default=None), None
    flat = [j for j in bad if math.isfinite(pc.per_dim[j].sim_std) and math.isfinite(pc.per_dim[j].paired_diff_abs)]
    over = [j for j in bad if j not in flat]
    parts = []
    if flat:
        shown = ", ".join(f"{j} (mean |real - sim| {pc.per_dim[j].paired_diff_abs:.3g}, sim std "
                          f"{pc.per_dim[j].sim_std:.3g})" for j in flat[:4])
        parts.append(f"undefined in action dimension(s) {shown}{_more(flat)}: sim's action does not vary "
                     "there while real's differs from it")
    if over:
        parts.append(f"not finite in action dimension(s) {', '.join(map(str, over[:4]))}{_more(over)}: the "
                     "actions are too large for float64 spreads")
    return None, "|real - sim| / sim std is " + "; ".join(parts)


def _more(dims: list[int]) -> str:
    return f" and {len(dims) - 4} more" if len(dims) > 4 else ""


def policy_findings(pc: PolicyCheck) -> list[Finding]:
    """`action_collapse` and `policy_obs_mismatch`, naming the dimensions and frames that differ most."""
    out = []
    collapsed = [j for j, d in enumerate(pc.per_dim) if d.collapsed]
    frames = list(pc.worst_pairs)
    if pc.ignores_input or collapsed or pc.early_collapsed:
        if pc.ignores_input:
            title = f"The policy returns the same action for all {pc.n_pairs} sim and real frames: it ignores its input."
        elif not collapsed:
            title = (f"Real actions collapse over the first {EARLY_STEPS} steps ({pc.n_early} pairs) in dimension(s) "
                     f"{', '.join(map(str, pc.early_collapsed[:8]))} while sim's vary.")
        else:
            title = (f"Real actions collapse in {len(collapsed)} of {len(pc.per_dim)} dimensions "
                     f"({', '.join(map(str, collapsed[:8]))}): near-constant or saturated while sim's vary.")
        out.append(Finding(
            "action_collapse", "gap", title,
            {"dims": collapsed, "ignores_input": pc.ignores_input,
             "sim_std": [pc.per_dim[j].sim_std for j in collapsed], "real_std": [pc.per_dim[j].real_std for j in collapsed],
             "saturated": [j for j in collapsed if pc.per_dim[j].saturated], "frames": frames,
             "early_dims": list(pc.early_collapsed), "n_early": pc.n_early},
            "Check that the real observations reach the policy as in training (camera key, resolution, "
            "normalization, proprio order and units); a policy that ignores its input is not loaded as trained.",
            score=float(len(collapsed) + len(pc.early_collapsed) + 10 * pc.ignores_input)))
    mism = [j for j, d in enumerate(pc.per_dim) if not d.collapsed and math.isfinite(d.paired_diff_rel)
            and d.paired_diff_rel >= MISMATCH_REL]
    # real differs from a sim action that does not vary: no sim spread to measure the difference in
    # (a dimension whose statistics overflowed is not one: its numbers are null, with their reason)
    flat = [j for j, d in enumerate(pc.per_dim) if not d.collapsed and not math.isfinite(d.paired_diff_rel)
            and math.isfinite(d.sim_std) and math.isfinite(d.paired_diff_abs)]
    if mism or flat:
        dims = sorted(mism + flat)
        rel = [pc.per_dim[j].paired_diff_rel for j in mism]
        flat_dims = ", ".join(map(str, flat[:8])) + (f" and {len(flat) - 8} more" if len(flat) > 8 else "")
        flat_abs = ", ".join(f"{pc.per_dim[j].paired_diff_abs:.3g}" for j in flat[:8])
        if pc.constant_per_domain:
            title = (f"The policy returns one constant action for all {pc.n_pairs} sim frames and a different one for "
                     f"all real frames (|real - sim| = {flat_abs} in dimension(s) {flat_dims}): it ignores what varies from "
                     "frame to frame but reads something that differs between sim and real as a whole.")
            action = ("Compare what reaches the policy from each side besides the scene: proprio layout, order and "
                      "units, the frames' value range and normalization, any constant input; a policy that answers "
                      "each domain with one fixed action reacts to that difference, not to the observation.")
        else:
            parts = ([f"up to {max(rel):.3g}x sim's own action spread"] if rel else []) + \
                    ([f"sim's action constant in dimension(s) {flat_dims} while real's differs from it by "
                      f"{flat_abs} on average"] if flat else [])
            title = (f"The policy acts differently on paired real and sim frames in {len(dims)} dimension(s) "
                     f"({'; '.join(parts)}).")
            action = ("Look at the frames that differ most: the gap the policy reacts to is there; fix plumbing "
                      "findings first, then the appearance gap those frames show.")
        out.append(Finding(
            "policy_obs_mismatch", "gap", title,
            {"dims": dims, "paired_diff_rel": [_num(pc.per_dim[j].paired_diff_rel) for j in dims],
             "paired_diff_abs": [_num(pc.per_dim[j].paired_diff_abs) for j in dims],
             "paired_diff_mean": [_num(pc.per_dim[j].paired_diff_mean) for j in dims], "sim_constant_dims": flat,
             "constant_per_domain": pc.constant_per_domain, "frames": frames, "frame_scores": list(pc.worst_scores)},
            # a difference sim shows no spread at all against ranks above any measured in sim spreads
            action, score=max(rel, default=0.0) + (10.0 if flat else 0.0)))
    return out
