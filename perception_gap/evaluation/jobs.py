"""The evaluation commands' results.json structures: a section, its findings and its gate.

Each job reads its file, runs the pure analysis and returns the dict the command writes
(`version`, `config`, `findings`, and the section with its `gates` and `passed`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perception_gap.findings import Finding
from perception_gap.gates import threshold_gate
from perception_gap.ingest.tables import read_columns, read_table
from perception_gap.version import __version__
from perception_gap.wording import severity_rank


def _results(kind: str, path: str | Path, section: dict[str, Any], findings: list[Finding],
             gates: list[dict[str, Any] | None], config: dict[str, Any]) -> dict[str, Any]:
    section["gates"] = [g for g in gates if g]
    section["passed"] = all(g["passed"] for g in section["gates"])
    return {"version": __version__, "config": {"kind": kind, "file": str(path), **config},
            "findings": [f.to_dict() for f in findings], kind: section}


def rollouts_job(path: str | Path, *, method: str = "exact", confidence: float = 0.95,
                 max_drop: float | None = None) -> dict[str, Any]:
    """`rollouts FILE`: groups, comparisons, failure modes, episode lengths, findings, `max_drop` gate."""
    from perception_gap.evaluation.rollouts import analyze_rollouts, read_rollouts  # scipy: imported when used

    res = analyze_rollouts(read_rollouts(path), confidence=confidence, method=method)
    drops = [c.drop for c in res.comparisons]
    return _results("rollouts", path, res.to_dict(), list(res.findings),
                    [threshold_gate("max_drop", max(drops) if drops else None, max_drop, reason="no two groups to compare")],
                    {"ci_method": method, "confidence": confidence})


def rank_fidelity_job(path: str | Path, *, n_boot: int = 2000, confidence: float = 0.95,
                      min_pearson: float | None = None) -> dict[str, Any]:
    """`rank-fidelity FILE`: rows of rates (`sim`, `real`) or a rollouts log (`domain`, `success`)."""
    from perception_gap.evaluation.rank_fidelity import (
        parse_rates,
        pearson_gate_value,
        rank_fidelity,
        rank_fidelity_findings,
        rates_from_groups,
    )
    from perception_gap.evaluation.rollouts import analyze_rollouts, parse_rollouts

    cols = read_columns(path, "FILE")
    skipped: list[dict[str, str]] = []
    if "success" in cols and "domain" in cols:  # a rollouts log: rates and counts per policy/task/domain
        groups = analyze_rollouts(parse_rollouts(cols, str(path))).to_dict()["groups"]
        rates, skipped = rates_from_groups(groups)
    else:
        rates = parse_rates(cols, str(path))
    res = rank_fidelity(rates, n_boot=n_boot, confidence=confidence)
    pearson_all, why = pearson_gate_value(res)
    sec = res.to_dict()
    sec["skipped"] = skipped + sec["skipped"]
    return _results("rank_fidelity", path, sec, rank_fidelity_findings(res),
                    [threshold_gate("min_pearson", pearson_all, min_pearson, direction="min", reason=why)],
                    {"n_boot": n_boot, "confidence": confidence})


def latency_job(path: str | Path, fps: float, *, stages: list[str] | None = None, unit: str = "s",
                max_p95_ms: float | None = None) -> dict[str, Any]:
    """`latency FILE --fps HZ`: per-stage and end-to-end percentiles, `latency_budget`, `max_p95_ms` gate."""
    from perception_gap.evaluation.latency import analyze_latency, latency_findings

    table = read_table(path, "FILE")
    table.require(stages or ())  # named stages: a missing one is a missing column, as in every table
    res = analyze_latency(table.columns, fps, stages=stages, unit=unit)
    return _results("latency", path, res.to_dict(), latency_findings(res),
                    [threshold_gate("max_p95_ms", res.end_to_end["p95"], max_p95_ms)],
                    {"fps": fps, "unit": unit, "stages": list(res.stage_order)})


def add_rollouts(results: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """`run`/`drift --rollouts FILE`: the rollouts section and its findings added to `results` in place.

    Findings stay ordered by severity (bugs first); among equals, the analysis's own come first.
    """
    return merge_rollouts(results, rollouts_job(path))


def merge_rollouts(results: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`add_rollouts` for a `rollouts_job` result already computed (read before a long analysis, so bad
    input fails at once and the file is read once)."""
    results["rollouts"] = extra["rollouts"]
    merged = list(results.get("findings") or []) + extra["findings"]
    results["findings"] = sorted(merged, key=lambda f: severity_rank(f.get("severity")))
    return results


def check_rollouts(path: str | Path) -> None:
    """Read and check a rollouts file before a long analysis, so bad input fails at once."""
    from perception_gap.evaluation.rollouts import read_rollouts

    read_rollouts(path)
