"""`demo`: build the built-in MuJoCo data set, index it with its boxes, then `run` it."""

from __future__ import annotations

import argparse
from pathlib import Path

from perception_gap.commands.output import as_results, check_lines, check_outputs, fail, progress_bar, say
from perception_gap.commands.parsing import Parents


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `demo` subparser."""
    dm = sub.add_parser("demo", parents=[parents.common], help="build the built-in paired MuJoCo demo set, then run it",
                        description="Render a small paired tabletop data set with MuJoCo (sim: RGB, depth, "
                                    "segmentation; real: the same states through a camera model), run a colour "
                                    "detector on both, then run the whole analysis into DIR/report.html and "
                                    "policy-check, replay and reprojection on the demo's own inputs into DIR/after/.")
    dm.add_argument("--out", required=True, help="output folder (data, catalog, results.json, report.html)")
    dm.add_argument("--inject", help="add one plumbing fault to the demo (a finding code, e.g. channel_swap)")
    dm.add_argument("--encoders", action="append", help="encoders for the run (default: every available one)")
    dm.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.candidates import parse_candidates
    from perception_gap.catalog import DEFAULT_DB
    from perception_gap.commands import policy_check, replay, reprojection
    from perception_gap.commands.flags import resampling
    from perception_gap.commands.run import print_run
    from perception_gap.demo import INJECTIONS
    from perception_gap.workflows.demo import demo_job

    if args.inject is not None and args.inject not in INJECTIONS:
        return fail(f"demo: expected --inject in {', '.join(INJECTIONS)}, got {args.inject!r}.")
    out_dir = Path(args.out)
    check_outputs(out_dir)
    db = args.db if args.db != DEFAULT_DB else str(out_dir / DEFAULT_DB)
    say(args, f"building the demo data set in {out_dir / 'data'} (MuJoCo){' with ' + args.inject if args.inject else ''} ...")
    progress, close = progress_bar(args, "run")
    try:
        demo = demo_job(out_dir, inject=args.inject, encoders=parse_candidates(args.encoders) if args.encoders else None,
                        workers=args.workers, db=db, wait=args.wait, progress=progress, resampling=resampling(args))
    finally:
        close()
    if not args.quiet:
        print_run(as_results(demo.results), out_dir)
    say(args, "\nafter the gap hunt: policy-check, replay, reprojection on the demo's inputs")
    summaries = {"policy_check": policy_check.summary, "replay": replay.summary, "reprojection": reprojection.summary}
    for section, raw in demo.after.items():
        res = as_results(raw)
        for line in check_lines(res, summaries[section](res)):
            say(args, line)
    say(args, f"after-the-gap-hunt report: {out_dir / 'after' / 'report.html'}")
    return 0
