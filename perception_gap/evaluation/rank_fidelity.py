"""Does sim rank policies (or checkpoints) as real does? Pearson correlation and the mean maximum
rank violation (MMRV) of the SimplerEnv paper (Li et al. 2024, "Evaluating Real-World Robot
Manipulation Policies in Simulation").

MMRV is not symmetric. With sim rates S and real rates R over N policies:
    RankViolation(i, j) = |R_i - R_j| * 1[(S_i > S_j) != (R_i > R_j)]
    MMRV = (1/N) * sum_i max_j RankViolation(i, j)
The order comes from both sides, the size of a violation from REAL success only: a pair that
sim orders wrongly costs what the mistake is worth on the robot. Swapping the arguments weighs
violations by sim differences instead, a different number.

Pearson is undefined on a task where sim or real success is the same for every policy. The mean
Pearson is taken over the tasks where it is defined (`pearson_undefined` lists the others), but
the `--min-pearson` gate holds every task it names: one undefined task leaves it `not computed`
(`pearson_gate_value`), since a mean over the other tasks says nothing about that one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.errors import InputError
from perception_gap.ingest.tables import label, number, require
from perception_gap.metrics.bootstrap import centred_ci
from perception_gap.metrics.settings import REPLICATES

N_BOOT = REPLICATES["rank_fidelity"]
# A 95% bootstrap interval from fewer than 200 replicates rests on a handful of draws per tail
# (1 replicate gives a zero-width interval); past 100,000 the interval no longer changes while
# the time grows linearly (about a second per 20,000 replicates per task).
MIN_BOOT, MAX_BOOT = 200, 100_000
# Defaults of the `rank_fidelity` finding: sim ranks policies unlike real when the mean Pearson
# over tasks is below MIN_PEARSON (0.7: the usual bound of a strong correlation) or the mean
# MMRV above MAX_MMRV (0.1: on average, a policy that sim misplaces is 10 points of real success
# away from the one it was swapped with).
MIN_PEARSON, MAX_MMRV = 0.7, 0.1
MAX_COUNT = 1_000_000_000  # episodes per policy and side; the bootstrap draws counts as int64


def mmrv(sim: np.ndarray, real: np.ndarray) -> float:
    """Mean maximum rank violation of sim rates against real rates (see the module docstring).

    Args:
        sim: success rate of each policy in sim, shape (N,).
        real: success rate of the same policies on the robot, shape (N,).

    Returns:
        MMRV in [0, 1] (0: sim orders every pair whose order matters as real does).
    """
    s, r = np.asarray(sim, dtype=float), np.asarray(real, dtype=float)
    if s.shape != r.shape or s.ndim != 1 or len(s) < 2:
        raise InputError(f"Expected two equal-length rate vectors of >= 2 policies, got shapes {s.shape}, {r.shape}.")
    wrong = (s[:, None] > s[None, :]) != (r[:, None] > r[None, :])
    return float((np.abs(r[:, None] - r[None, :]) * wrong).max(axis=1).mean())


def violations(sim: np.ndarray, real: np.ndarray) -> list[tuple[int, int]]:
    """Index pairs (i, j), i < j, that sim orders differently from real (ties count as an order)."""
    s, r = np.asarray(sim, dtype=float), np.asarray(real, dtype=float)
    wrong = (s[:, None] > s[None, :]) != (r[:, None] > r[None, :])
    return [(int(i), int(j)) for i, j in np.argwhere(np.triu(wrong | wrong.T, k=1))]


def pearson(sim: np.ndarray, real: np.ndarray) -> float | None:
    """Pearson correlation of sim and real rates; None when either side is constant (undefined)."""
    s, r = np.asarray(sim, dtype=float), np.asarray(real, dtype=float)
    s, r = s - s.mean(), r - r.mean()
    denom = math.sqrt(float((s * s).sum() * (r * r).sum()))
    return float((s * r).sum() / denom) if denom > 0 else None


@dataclass(frozen=True)
class PolicyRates:
    """One policy on one task: sim and real success rates, with episode counts when known."""

    policy: str
    task: str
    sim: float
    real: float
    n_sim: int | None = None
    n_real: int | None = None


@dataclass(frozen=True)
class TaskFidelity:
    """Rank fidelity of one task (or `overall`): lower `mmrv` and higher `pearson` are better."""

    task: str
    n_policies: int
    mmrv: float
    pearson: float | None
    mmrv_ci: tuple[float, float] | None = None
    pearson_ci: tuple[float, float] | None = None
    policies: tuple[PolicyRates, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"mmrv": self.mmrv, "pearson": self.pearson, "n_policies": self.n_policies,
                "mmrv_ci": list(self.mmrv_ci) if self.mmrv_ci else None,
                "pearson_ci": list(self.pearson_ci) if self.pearson_ci else None,
                "policies": [dict(p.__dict__) for p in self.policies],
                "violations": [[self.policies[i].policy, self.policies[j].policy] for i, j in
                               violations([p.sim for p in self.policies], [p.real for p in self.policies])]}


@dataclass(frozen=True)
class RankFidelityResult:
    """`to_dict()` is the `rank_fidelity` section: `tasks`, `mean` (over tasks; Pearson over those
    where it is defined), `pearson_undefined` (the tasks where it is not), `skipped`."""

    tasks: dict[str, TaskFidelity]
    mean_mmrv: float | None
    mean_pearson: float | None
    skipped: tuple[dict[str, str], ...] = ()
    n_boot: int = 0

    @property
    def pearson_undefined(self) -> list[str]:
        """Tasks whose Pearson is undefined (sim or real success equal for every policy)."""
        return [k for k, t in self.tasks.items() if t.pearson is None]

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": {k: v.to_dict() for k, v in self.tasks.items()},
                "mean": {"mmrv": self.mean_mmrv, "pearson": self.mean_pearson},
                "pearson_undefined": self.pearson_undefined,
                "mmrv_sides": "order from sim and real; violation size from real success",
                "n_boot": self.n_boot, "skipped": list(self.skipped)}


def _bootstrap(rates: list[PolicyRates], n_boot: int, confidence: float, rng: np.random.Generator):
    """The engine's centred percentile intervals (`metrics.bootstrap.centred_ci`) of MMRV and
    Pearson, each rate redrawn as Binomial(n, rate) / n; no Pearson interval where its estimate
    is undefined or half the replicates have none."""
    sim = np.array([p.sim for p in rates])
    real = np.array([p.real for p in rates])
    ns = np.array([p.n_sim for p in rates])
    nr = np.array([p.n_real for p in rates])
    bs = rng.binomial(ns[None, :], sim[None, :], size=(n_boot, len(rates))) / ns
    br = rng.binomial(nr[None, :], real[None, :], size=(n_boot, len(rates))) / nr
    m = np.array([mmrv(a, b) for a, b in zip(bs, br)])
    pr = np.array([x for x in (pearson(a, b) for a, b in zip(bs, br)) if x is not None])
    m_ci = centred_ci(m, mmrv(sim, real), confidence)[:2]
    p_est = pearson(sim, real)
    p_ci = centred_ci(pr, p_est, confidence)[:2] if p_est is not None and len(pr) > n_boot // 2 else None
    return m_ci, p_ci


def rank_fidelity(rates: list[PolicyRates], *, n_boot: int = N_BOOT, confidence: float = 0.95,
                  random_state: int = 0) -> RankFidelityResult:
    """MMRV and Pearson per task and their mean over tasks; bootstrap CIs where counts are known.

    A task with fewer than two policies is a recorded skip (no ranking to compare).

    Args:
        rates: one entry per policy and task.
        n_boot: bootstrap replicates, in [MIN_BOOT, MAX_BOOT] = [200, 100000]; 0 computes no
            intervals.
        confidence: two-sided interval level, in (0, 1).
        random_state: seed of the bootstrap.

    Raises:
        InputError: `n_boot` or `confidence` out of range; no task with two or more policies.
    """
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or \
            not (n_boot == 0 or MIN_BOOT <= n_boot <= MAX_BOOT):
        raise InputError(f"Expected `--n-boot` in [{MIN_BOOT}, {MAX_BOOT}] (or 0: no intervals), got {n_boot!r}.")
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise InputError(f"Expected `confidence` in (0, 1), got {confidence!r}.")
    by_task: dict[str, list[PolicyRates]] = {}
    for p in rates:
        by_task.setdefault(p.task, []).append(p)
    rng = np.random.default_rng(random_state)
    tasks, skipped = {}, []
    for task, ps in sorted(by_task.items()):
        if len(ps) < 2:
            skipped.append({"task": task, "reason": f"only {len(ps)} policy; a ranking needs two or more"})
            continue
        sim, real = np.array([p.sim for p in ps]), np.array([p.real for p in ps])
        m_ci = p_ci = None
        counted = all(p.n_sim and p.n_real for p in ps)
        if counted and n_boot > 0:
            m_ci, p_ci = _bootstrap(ps, n_boot, confidence, rng)
        tasks[task] = TaskFidelity(task, len(ps), mmrv(sim, real), pearson(sim, real), m_ci, p_ci, tuple(ps))
    if not tasks:
        raise InputError("No task has two or more policies with both sim and real rates; nothing to rank.")
    pears = [t.pearson for t in tasks.values() if t.pearson is not None]
    return RankFidelityResult(tasks, float(np.mean([t.mmrv for t in tasks.values()])),
                              float(np.mean(pears)) if pears else None, tuple(skipped),
                              n_boot if any(t.mmrv_ci for t in tasks.values()) else 0)


def pearson_gate_value(res: RankFidelityResult) -> tuple[float | None, str | None]:
    """The `min_pearson` gate's value: the mean Pearson over EVERY task, or (None, why) when it is
    undefined on one of them."""
    bad = res.pearson_undefined
    if not bad:
        return res.mean_pearson, None

    def why(task: str) -> str:
        ps = res.tasks[task].policies
        side = "sim" if len({p.sim for p in ps}) == 1 else "real"
        return f"{task!r} ({side} success {getattr(ps[0], side):g} for all {len(ps)} policies)"

    shown = ", ".join(why(t) for t in bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
    return None, (f"Pearson is undefined on {len(bad)} of {len(res.tasks)} task(s): {shown}; a mean over the "
                  "other tasks says nothing about these")


def rank_fidelity_findings(res: RankFidelityResult, *, min_pearson: float = MIN_PEARSON,
                           max_mmrv: float = MAX_MMRV) -> list:
    """`rank_fidelity` (a gap) when sim ranks policies unlike real over the tasks' mean.

    Args:
        res: the analysis.
        min_pearson: a mean Pearson below this is a finding (default 0.7).
        max_mmrv: a mean MMRV above this is a finding (default 0.1: on average, the policy sim
            misplaces most loses 10 points of real success against the one it swapped with).

    Returns:
        One finding, or none when both numbers are within their defaults (or Pearson is
        undefined and MMRV within).
    """
    from perception_gap.findings import Finding

    low_r = res.mean_pearson is not None and res.mean_pearson < min_pearson
    high_m = res.mean_mmrv is not None and res.mean_mmrv > max_mmrv
    if not (low_r or high_m):
        return []
    over = (f" (over {len(res.tasks) - len(res.pearson_undefined)} of {len(res.tasks)} tasks)"
            if res.pearson_undefined else "")
    parts = ([f"mean Pearson {res.mean_pearson:.2f} < {min_pearson:g}{over}"] if low_r else []) + \
            ([f"mean MMRV {res.mean_mmrv:.3f} > {max_mmrv:g}"] if high_m else [])
    worst = max(res.tasks.values(), key=lambda t: t.mmrv)
    score = max((min_pearson - res.mean_pearson) if low_r else 0.0,
                (res.mean_mmrv - max_mmrv) / max_mmrv if high_m else 0.0)
    return [Finding(
        "rank_fidelity", "gap",
        f"Sim does not rank the policies as real does: {' and '.join(parts)}",
        {"mean_pearson": res.mean_pearson, "mean_mmrv": res.mean_mmrv, "min_pearson": min_pearson,
         "max_mmrv": max_mmrv, "worst_task": worst.task, "worst_task_mmrv": worst.mmrv,
         "n_tasks": len(res.tasks), "pearson_undefined": res.pearson_undefined},
        f"Do not pick checkpoints by sim success on these tasks yet (worst: {worst.task!r}, MMRV "
        f"{worst.mmrv:.3f}); close the gap on the swapped policies first, then recheck.", score=float(score))]


def parse_rates(columns: dict[str, list[Any]], source: str = "FILE") -> list[PolicyRates]:
    """Rows `policy`, `task`, `sim`, `real` (rates in [0, 1]); optional `n_sim`, `n_real` counts."""
    require(columns, ("policy", "task", "sim", "real"), source)
    n = len(columns["policy"])
    out, seen = [], set()
    for i in range(n):
        row = i + 1
        key = (label(columns["policy"][i], "policy", row), label(columns["task"][i], "task", row))
        if key in seen:
            raise InputError(f"Row {row}: policy {key[0]!r} on task {key[1]!r} appears twice.")
        seen.add(key)
        counts = []
        for c in ("n_sim", "n_real"):
            v = columns.get(c, [None] * n)[i]
            x = None if v is None else number(v, c, row, low=1, high=MAX_COUNT)
            if x is not None and x != int(x):
                raise InputError(f"Row {row}: expected `{c}` to be a whole number, got {v!r}.")
            counts.append(None if x is None else int(x))
        out.append(PolicyRates(*key, number(columns["sim"][i], "sim", row, low=0, high=1),
                               number(columns["real"][i], "real", row, low=0, high=1), *counts))
    return out


def rates_from_groups(groups: list[dict[str, Any]]) -> tuple[list[PolicyRates], list[dict[str, str]]]:
    """Rates with counts from `rollouts` groups; a policy seen on one side only is a recorded skip."""
    by: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for g in groups:
        by.setdefault((g["policy"], g["task"]), {})[g["domain"]] = g
    out, skipped = [], []
    for (policy, task), sides in sorted(by.items()):
        if set(sides) != {"sim", "real"}:
            skipped.append({"policy": policy, "task": task, "reason": f"only {', '.join(sides)} rollouts"})
            continue
        s, r = sides["sim"], sides["real"]
        out.append(PolicyRates(policy, task, s["rate"], r["rate"], s["n"], r["n"]))
    return out, skipped
