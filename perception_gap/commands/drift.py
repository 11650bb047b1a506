"""`drift`: new frames gated against a baseline (exit 1 when a gate fails), `--history`, and their text form."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perception_gap.commands.flags import resampling
from perception_gap.commands.output import (
    analysis,
    atomic_write_text,
    check_outputs,
    dumps,
    encoder_names,
    fail,
    finish,
    fmt,
)
from perception_gap.commands.parsing import Parents, model_options
from perception_gap.wording import FAIL, PASS, gate_word

if TYPE_CHECKING:
    from perception_gap.schema import Results


def _print_drift(res: Results, out_dir: Path) -> None:
    from perception_gap.reports.decisions import drift_rule

    d = res.drift
    print(f"drift check: {d.current!r} against baseline {d.baseline!r}")
    print(f"  {'gate':<34} {'value':>9} {'threshold':>9}  result")
    for g in d.gates:
        extra = f" ({g.reason})" if g.status in ("skipped", "not computed") and g.reason else ""
        print(f"  {g.name:<34} {fmt(g.value):>9} {fmt(g.threshold):>9}  {gate_word(g.status)}{extra}")
        if g.status in ("passed", "failed"):  # the rule that decided, as the report states it beside the verdict
            print(f"  {'':<34} why: {drift_rule(g.to_dict())}")
    print(PASS if d.passed else f"{FAIL}: " + ", ".join(g.name for g in d.gates if not g.passed))
    for f in res.findings:
        print(f"- {f.title}\n  action: {f.action}")
    print(f"results: {out_dir / 'results.json'}, report: {out_dir / 'report.html'}")


def _print_history(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("no drift runs recorded yet")
        return
    print(f"{'run':>5}  {'when':<26} {'baseline':<20} {'current':<20} result")
    for h in rows:
        res = PASS if h["passed"] else f"{FAIL}: " + ", ".join(h["failed"])
        print(f"{h['run_id']:>5}  {h['started_at'][:26]:<26} {str(h['baseline'])[:20]:<20} {str(h['current'])[:20]:<20} {res}")


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `drift` subparser."""
    dr = sub.add_parser("drift", parents=[parents.common, parents.engine], help="drift check of new frames against a stored baseline",
                        description="Gate new frames (--current) against a baseline set: format, per-channel shifts "
                                    "in stops, sharpness, depth dropout, embedding distance over the baseline's own "
                                    "noise floor, domain AUC, detector AP. Thresholds from --config (TOML; defaults in "
                                    "the README). Exit 1 when a gate fails, 0 otherwise. Only new frames are "
                                    "decoded and embedded. --history lists earlier checks.")
    dr.add_argument("--baseline", help="the reference set (indexed earlier)")
    dr.add_argument("--current", help="the new set")
    dr.add_argument("--current-dir", help="index this folder into --current first (incremental)")
    dr.add_argument("--domain", choices=("sim", "real"), default="real", help="domain for --current-dir (default real)")
    dr.add_argument("--config", help="TOML file of gate thresholds (see README: Drift checks)")
    dr.add_argument("--encoders", action="append",
                    help="encoder name(s), or @FILE (a candidates TOML file) (default: every available one; "
                         "`none`: statistics gates only)")
    dr.add_argument("--history", action="store_true", help="list earlier drift checks (of --baseline, if given)")
    dr.add_argument("--out", help="output folder (results.json, report.html)")
    dr.add_argument("--json", help="also write results.json to this file")
    model_options(dr, "where the models run")
    dr.add_argument("--rollouts", metavar="FILE", help="also include the rollouts section of this log (see `rollouts`)")
    dr.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.workflows import drift_history, drift_job
    from perception_gap.workflows.drift_gates import load_config

    if args.history:
        check_outputs(json_path=args.json)
        with Catalog(args.db, read_only=True, wait=args.wait) as cat:
            rows = drift_history(cat, args.baseline)
        if args.json:
            atomic_write_text(Path(args.json), dumps({"drift": {"history": rows}}))
        if not args.quiet:
            _print_history(rows)
        return 0
    missing = [f for f, v in (("--baseline", args.baseline), ("--current", args.current), ("--out", args.out)) if not v]
    if missing:
        return fail(f"drift needs {', '.join(missing)} (or --history).")
    cfg = load_config(args.config)
    check_outputs(args.out, args.json)
    rollouts = None
    if args.rollouts:
        from perception_gap.evaluation.jobs import rollouts_job

        rollouts = rollouts_job(args.rollouts)  # before the long analysis: bad input fails at once
    if args.current_dir:
        from perception_gap.ingest import index_folder

        with Catalog(args.db, wait=args.wait) as cat:
            r = index_folder(cat, Path(args.current_dir), args.current, args.domain, workers=args.workers)
        if r.usable == 0:
            return fail(f"set {r.set_name!r} has no usable frame ({r.n_skipped} skipped).")
    out_dir = Path(args.out)
    with analysis(args, "drift") as (cat, eng, progress):
        raw = drift_job(cat, args.baseline, args.current, encoder_names=encoder_names(args.encoders), config=cfg,
                        device=args.device, batch_size=args.batch_size, workers=args.workers, progress=progress,
                        precision=args.precision, engine=eng, resampling=resampling(args))
    res = finish(args, raw, out_dir, rollouts)
    if not args.quiet:
        _print_drift(res, out_dir)
    return 0 if res.drift.passed else 1
