"""`rollouts FILE`: success rates with exact intervals, sim vs real drops, rollouts needed; a `--max-drop` gate."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perception_gap.commands.flags import finite_float
from perception_gap.commands.output import as_results, check_outputs, fmt, write_outputs
from perception_gap.commands.parsing import Parents
from perception_gap.outputs import render_evaluation
from perception_gap.wording import gate_word, signed

if TYPE_CHECKING:
    from perception_gap.schema import Latency, RankFidelity, Results, Rollouts


def print_gates_and_findings(res: Results, section: Rollouts | RankFidelity | Latency, out_dir: str | None) -> None:
    """The lines every evaluation command ends with: findings, gates, where the files went."""
    for f in res.findings:
        print(f"[{f.severity}] {f.code}: {f.title}\n   action: {f.action}")
    if not res.findings:
        print("findings: none")
    for g in section.gates:
        why = f" ({g.reason})" if g.status in ("not computed", "skipped") and g.reason else ""
        print(f"gate {g.name}: {fmt(g.value)} vs {fmt(g.threshold)}: {gate_word(g.status)}{why}")
    if out_dir:
        print(f"results: {Path(out_dir) / 'results.json'}, report: {Path(out_dir) / 'report.html'}")


def _print(res: Results, out_dir: str | None) -> None:
    sec = res.rollouts
    level = f"{sec.confidence * 100:g}%"
    print(f"{'policy':<20} {'task':<18} {'domain':<6} {'n':>6} {'succ':>6} {'rate':>6}  {level} CI ({sec.ci_method})")
    for g in sec.groups:
        print(f"{g.policy[:20]:<20} {g.task[:18]:<18} {g.domain:<6} {g.n:>6} {g.successes:>6} "
              f"{fmt(g.rate):>6}  [{fmt(g.ci_low)}, {fmt(g.ci_high)}]")
    for c in sec.comparisons:
        need = c["rollouts_needed"]
        print(f"{c['policy']}/{c['task']}: drop {signed(c['drop'])} (sim - real), {level} CI "
              f"[{signed(c['drop_ci'][0])}, {signed(c['drop_ci'][1])}] (Newcombe); rollouts needed: "
              f"sim {fmt(need['sim'])}, real {fmt(need['real'])}")
    for s in sec.skipped or []:
        print(f"skipped {s['policy']}/{s['task']}: {s['reason']}")
    print_gates_and_findings(res, sec, out_dir)


def finish(args: argparse.Namespace, job: Callable[[], dict[str, Any]], kind: str,
           show: Callable[[Results, str | None], None]) -> int:
    """Run an evaluation job after checking the outputs, write them, print, and exit 1 when a gate failed."""
    check_outputs(args.out, args.json)
    res = as_results(job())
    write_outputs(res, args.out, args.json, render_evaluation)
    if not args.quiet:
        show(res, args.out)
    return 0 if getattr(res, kind).passed else 1


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `rollouts` subparser."""
    ro = sub.add_parser("rollouts", parents=[parents.common, parents.outputs], help="success rates with exact CIs, sim vs real, rollouts needed",
                        description="Success rates per policy x task x domain with exact (Clopper-Pearson) intervals, "
                                    "the sim-vs-real drop with a Newcombe interval, the rollouts needed per side, "
                                    "failure modes and episode lengths. FILE: CSV, JSONL or Parquet with columns "
                                    "policy, task, domain (sim|real), success (0/1); optional episode_length, "
                                    "failure_mode. Exit 1 when --max-drop is crossed.")
    ro.add_argument("file", metavar="FILE", help="rollouts log (CSV, JSONL or Parquet)")
    ro.add_argument("--ci", choices=("exact", "wilson"), default="exact", help="per-group interval (default exact)")
    ro.add_argument("--confidence", type=finite_float(0.0, 1.0, low_open=True, high_open=True), default=0.95,
                    help="interval level, in (0, 1) (default 0.95)")
    ro.add_argument("--max-drop", type=finite_float(-1.0, 1.0),
                    help="gate: exit 1 when a sim-minus-real success drop exceeds this (in [-1, 1])")
    ro.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.evaluation.jobs import rollouts_job

    return finish(args, lambda: rollouts_job(args.file, method=args.ci, confidence=args.confidence,
                                             max_drop=args.max_drop), "rollouts", _print)
