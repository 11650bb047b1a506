"""`latency FILE --fps HZ`: per-stage and end-to-end latency against the control tick; a `--max-p95-ms` gate."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from perception_gap.commands.flags import finite_float, positive
from perception_gap.commands.output import fmt
from perception_gap.commands.parsing import Parents
from perception_gap.commands.rollouts import finish, print_gates_and_findings

if TYPE_CHECKING:
    from perception_gap.schema import Results


def _print(res: Results, out_dir: str | None) -> None:
    sec = res.latency
    print(f"{sec.n_ticks} ticks, tick {fmt(sec.tick_ms)} ms; stages: {' -> '.join(sec.stage_order or [])}")
    print(f"{'stage (from previous)':<24} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for s, v in list(sec.stages.items()) + [("end to end", sec.end_to_end)]:
        print(f"{s[:24]:<24} {fmt(v['p50']):>8} {fmt(v['p95']):>8} {fmt(v['p99']):>8}")
    st = sec.staleness_ticks or {}
    overrun = "-" if sec.overrun_fraction is None else f"{sec.overrun_fraction:.1%}"
    print(f"overrun: {overrun} of ticks; staleness p50/p95/max {fmt(st['p50'])}/{fmt(st['p95'])}/"
          f"{fmt(st['max'])} ticks; jitter {fmt(sec.jitter_ms)} ms (period), {fmt(sec.e2e_jitter_ms)} ms (end to end)")
    for s in sec.skipped or []:
        print(f"skipped tick {fmt(s['tick'])}: {s['reason']}")
    print_gates_and_findings(res, sec, out_dir)


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `latency` subparser."""
    la = sub.add_parser("latency", parents=[parents.common, parents.outputs], help="per-stage and end-to-end latency vs the control tick",
                        description="Per-tick timestamp log (one column per stage, in pipeline order): per-stage and "
                                    "end-to-end p50/p95/p99 in ms, overruns of the control tick, staleness in ticks, "
                                    "jitter. Finding latency_unit when the logged tick interval and --fps disagree "
                                    "tenfold or more (a wrong --unit). Exit 1 when the end-to-end p95 exceeds "
                                    "--max-p95-ms.")
    la.add_argument("file", metavar="FILE", help="tick log (CSV, JSONL or Parquet)")
    la.add_argument("--fps", type=finite_float(1e-3, 1e6), required=True,
                    help="control frequency in Hz, 0.001 to 1e6 (tick = 1000/fps ms)")
    la.add_argument("--stages", help="stage columns in pipeline order, comma-separated (default: the columns as "
                                     "they appear, less tick/index/frame/step/episode/seq)")
    la.add_argument("--unit", choices=("s", "ms", "us", "ns"), default="s", help="timestamp unit (default s)")
    la.add_argument("--max-p95-ms", type=positive, help="gate: exit 1 when end-to-end p95 exceeds this many ms")
    la.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.evaluation.jobs import latency_job

    stages = [s.strip() for s in args.stages.split(",") if s.strip()] if args.stages else None
    return finish(args, lambda: latency_job(args.file, args.fps, stages=stages, unit=args.unit,
                                            max_p95_ms=args.max_p95_ms), "latency", _print)
