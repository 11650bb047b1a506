"""Success rates of sim and real rollouts: exact intervals, the drop with its interval, the
rollouts still needed, failure modes and episode lengths, and the findings they call for.

`analyze_rollouts(rows)` is pure (rows in, a frozen result out); `read_rollouts(path)` reads and
checks a log file at the boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.errors import InputError
from perception_gap.evaluation.failure_modes import FailureModeTest, failure_mode_test
from perception_gap.evaluation.intervals import interval, newcombe_difference, rollouts_needed
from perception_gap.findings import Finding, order_findings
from perception_gap.ingest.tables import label, number, read_columns, require

REQUIRED = ("policy", "task", "domain", "success")
DOMAINS = ("sim", "real")
SIM_BASELINE_MIN_EPISODES = 1000
SIM_BASELINE_MIN_RATE = 0.85
FAILURE_MODES_ALPHA = 0.05
LENGTH_BINS = 10
# Steps (or seconds) of one episode: a billion is beyond any rollout; sums of larger values overflow.
MAX_EPISODE_LENGTH = 1e9


@dataclass(frozen=True)
class Rollout:
    """One episode: who ran what where, whether it succeeded, and optionally how and how long."""

    policy: str
    task: str
    domain: str
    success: bool
    episode_length: float | None = None
    failure_mode: str | None = None


@dataclass(frozen=True)
class GroupRate:
    """Success of one policy x task x domain: n episodes, `successes`, `rate` and its interval."""

    policy: str
    task: str
    domain: str
    n: int
    successes: int
    rate: float
    ci_low: float
    ci_high: float
    ci_method: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Comparison:
    """Sim vs real for one policy x task. `drop` = sim rate - real rate (positive: real is worse).

    `rollouts_needed` holds, per side, the fewest episodes whose interval (same method and level)
    at the observed rate is narrower than |drop|; None when there is no drop or it is out of reach.
    """

    policy: str
    task: str
    sim_rate: float
    real_rate: float
    drop: float
    drop_ci: tuple[float, float]
    drop_ci_method: str
    rollouts_needed: dict[str, int | None]
    significant: bool

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["drop_ci"] = list(self.drop_ci)
        return d


@dataclass(frozen=True)
class RolloutsResult:
    """Everything `rollouts` measured; `to_dict()` is the `rollouts` section of results.json."""

    groups: tuple[GroupRate, ...]
    comparisons: tuple[Comparison, ...]
    failure_modes: dict[str, FailureModeTest] = field(default_factory=dict)
    episode_lengths: dict[str, Any] = field(default_factory=dict)
    skipped: tuple[dict[str, str], ...] = ()
    confidence: float = 0.95
    ci_method: str = "exact"
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "ci_method": self.ci_method,
                "groups": [g.to_dict() for g in self.groups],
                "comparisons": [c.to_dict() for c in self.comparisons],
                "failure_modes": {k: v.to_dict() for k, v in self.failure_modes.items()},
                "episode_lengths": self.episode_lengths, "skipped": list(self.skipped)}


def _success(value: Any, row: int) -> bool:
    ok = {0: False, 1: True}
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in ok:
        return ok[int(value)]
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "false", "true"):
        return value.strip().lower() in ("1", "true")  # CSV cells are text
    raise InputError(f"Row {row}: expected `success` to be 0 or 1, got {value!r}.")


def parse_rollouts(columns: dict[str, list[Any]], source: str = "FILE") -> list[Rollout]:
    """Rows of a rollouts table checked and typed; any bad cell is one error naming its row."""
    require(columns, REQUIRED, source)
    n = len(columns["policy"])
    lengths = columns.get("episode_length", [None] * n)
    modes = columns.get("failure_mode", [None] * n)
    out = []
    for i in range(n):
        row = i + 1
        domain = label(columns["domain"][i], "domain", row).lower()
        if domain not in DOMAINS:
            raise InputError(f"Row {row}: expected `domain` sim or real, got {columns['domain'][i]!r}.")
        length = lengths[i]
        mode = modes[i]
        out.append(Rollout(
            policy=label(columns["policy"][i], "policy", row), task=label(columns["task"][i], "task", row),
            domain=domain, success=_success(columns["success"][i], row),
            episode_length=None if length is None else number(length, "episode_length", row, low=0,
                                                              high=MAX_EPISODE_LENGTH),
            failure_mode=None if mode is None or str(mode).strip() == "" else str(mode).strip()))
    return out


def read_rollouts(path: str | Path) -> list[Rollout]:
    """Read a CSV, JSONL or Parquet rollouts log (columns `policy`, `task`, `domain`, `success`)."""
    return parse_rollouts(read_columns(path, "FILE"), str(path))


def _length_summary(values: list[float], edges: np.ndarray) -> dict[str, Any]:
    v = np.asarray(values, dtype=float)
    q = np.percentile(v, [10, 50, 90])
    return {"n": len(v), "mean": float(v.mean()), "p10": float(q[0]), "p50": float(q[1]), "p90": float(q[2]),
            "counts": np.histogram(v, bins=edges)[0].astype(int).tolist()}


def _episode_lengths(by_group: dict[tuple[str, str, str], list[Rollout]]) -> dict[str, Any]:
    """Per policy/task: shared histogram edges and each domain's length summary."""
    out: dict[str, Any] = {}
    for policy, task in sorted({(p, t) for p, t, _ in by_group}):
        sides = {d: [r.episode_length for r in by_group.get((policy, task, d), []) if r.episode_length is not None]
                 for d in DOMAINS}
        every = [x for v in sides.values() for x in v]
        if not every:
            continue
        lo, hi = min(every), max(every)
        edges = np.linspace(lo, hi if hi > lo else lo + 1, LENGTH_BINS + 1)
        out[f"{policy}/{task}"] = {"policy": policy, "task": task, "edges": edges.tolist(),
                                   **{d: _length_summary(v, edges) for d, v in sides.items() if v}}
    return out


def _findings(comparisons: list[Comparison], groups: dict[tuple[str, str, str], GroupRate],
              modes: dict[str, FailureModeTest], confidence: float) -> list[Finding]:
    out: list[Finding] = []
    level = f"{confidence * 100:g}%"
    unclear = [c for c in comparisons if not c.significant]
    if unclear:
        worst = max(unclear, key=lambda c: abs(c.drop))
        need = worst.rollouts_needed
        more = (f"about {need['sim']} sim and {need['real']} real rollouts would resolve a drop of this size"
                if need.get("sim") and need.get("real") else "no sample size resolves a zero drop")
        out.append(Finding(
            "too_few_rollouts", "info",
            f"{len(unclear)} of {len(comparisons)} sim-vs-real comparisons cannot claim a drop: the {level} interval "
            f"of the drop includes 0 (largest: {worst.policy}/{worst.task}, {worst.drop:+.3f}, "
            f"[{worst.drop_ci[0]:+.3f}, {worst.drop_ci[1]:+.3f}])",
            {"comparisons": [{"policy": c.policy, "task": c.task, "drop": c.drop, "drop_ci": list(c.drop_ci),
                              "rollouts_needed": c.rollouts_needed} for c in unclear]},
            f"Run more rollouts before blaming the perception gap: {more}.", score=float(len(unclear))))
    weak = []
    for (policy, task, domain), g in sorted(groups.items()):
        if domain == "sim" and (g.n < SIM_BASELINE_MIN_EPISODES or g.rate < SIM_BASELINE_MIN_RATE):
            weak.append({"policy": policy, "task": task, "n": g.n, "rate": g.rate})
    if weak:
        w = weak[0]
        out.append(Finding(
            "sim_baseline", "info",
            f"{len(weak)} sim baseline(s) too weak to compare against (e.g. {w['policy']}/{w['task']}: "
            f"{w['n']} episodes, success {w['rate']:.1%}; wanted >= {SIM_BASELINE_MIN_EPISODES} episodes "
            f"and >= {SIM_BASELINE_MIN_RATE:.0%})",
            {"groups": weak, "min_episodes": SIM_BASELINE_MIN_EPISODES, "min_rate": SIM_BASELINE_MIN_RATE},
            "Fix the sim-side training or evaluation first; a real-world drop from a weak or barely measured "
            "sim baseline says little about the perception gap.", score=float(len(weak))))
    for key, t in sorted(modes.items()):
        if t.p_value < FAILURE_MODES_ALPHA:
            out.append(Finding(
                "failure_modes_differ", "gap",
                f"{key}: sim and real fail in different ways (p = {t.p_value:.3g}, {t.test})",
                {"policy_task": key, **t.to_dict()},
                "Different failure categories point at an actuation or sensing gap, not a capability gap of the "
                "policy: look at the categories real has and sim lacks.", score=-math.log10(max(t.p_value, 1e-300))))
    return out


def analyze_rollouts(rollouts: list[Rollout], *, confidence: float = 0.95, method: str = "exact",
                     random_state: int = 0) -> RolloutsResult:
    """Success rates per policy x task x domain, sim vs real comparisons and findings.

    Args:
        rollouts: checked rows (`read_rollouts`).
        confidence: two-sided level of every interval.
        method: per-group interval, `exact` (Clopper-Pearson) or `wilson`. The drop's interval is
            always Newcombe's hybrid score interval.
        random_state: seed of the failure-mode permutation test.
    """
    if not rollouts:
        raise InputError("No rollouts given; expected rows with policy, task, domain, success.")
    by_group: dict[tuple[str, str, str], list[Rollout]] = {}
    for r in rollouts:
        by_group.setdefault((r.policy, r.task, r.domain), []).append(r)
    groups: dict[tuple[str, str, str], GroupRate] = {}
    for key, rs in sorted(by_group.items()):
        k, n = sum(r.success for r in rs), len(rs)
        ci = interval(k, n, confidence, method)
        groups[key] = GroupRate(*key, n=n, successes=k, rate=k / n, ci_low=ci.low, ci_high=ci.high, ci_method=method)
    comparisons, skipped, modes = [], [], {}
    for policy, task in sorted({(p, t) for p, t, _ in groups}):
        g_sim, g_real = groups.get((policy, task, "sim")), groups.get((policy, task, "real"))
        if g_sim is None or g_real is None:
            only = "sim" if g_real is None else "real"
            skipped.append({"policy": policy, "task": task, "reason": f"only {only} rollouts; no comparison"})
            continue
        drop, ci = newcombe_difference(g_sim.successes, g_sim.n, g_real.successes, g_real.n, confidence)
        need = {d: rollouts_needed(g.rate, abs(drop), confidence, method) for d, g in (("sim", g_sim), ("real", g_real))}
        comparisons.append(Comparison(policy, task, g_sim.rate, g_real.rate, drop, (ci.low, ci.high), "newcombe", need,
                                      significant=ci.low > 0 or ci.high < 0))
        failed = {d: [x.failure_mode for x in by_group[(policy, task, d)] if not x.success and x.failure_mode]
                  for d in DOMAINS}
        if any(failed.values()):
            t = failure_mode_test(failed["sim"], failed["real"], random_state=random_state)
            if isinstance(t, FailureModeTest):
                modes[f"{policy}/{task}"] = t
            else:
                skipped.append({"policy": policy, "task": task, "reason": f"failure modes not compared: {t}"})
    findings = order_findings(_findings(comparisons, groups, modes, confidence))
    return RolloutsResult(tuple(groups.values()), tuple(comparisons), modes, _episode_lengths(by_group),
                          tuple(skipped), confidence, method, tuple(findings))
