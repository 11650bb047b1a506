"""`demo`: build the built-in MuJoCo data set, index it with its boxes, then `run` it."""

from __future__ import annotations

import argparse
from pathlib import Path

from perception_gap.catalog import DEFAULT_DB
from perception_gap.commands.output import check_outputs, fail, say


def execute(args: argparse.Namespace) -> int:
    from perception_gap.demo import INJECTIONS, build_demo

    if args.inject is not None and args.inject not in INJECTIONS:
        return fail(f"demo: expected --inject in {', '.join(INJECTIONS)}, got {args.inject!r}.")
    out_dir = Path(args.out)
    check_outputs(out_dir)
    db = args.db if args.db != DEFAULT_DB else str(out_dir / DEFAULT_DB)
    if Path(db).exists():
        Path(db).unlink()  # the demo rebuilds its data: start from a fresh catalog
    say(args, f"building the demo data set in {out_dir / 'data'} (MuJoCo){' with ' + args.inject if args.inject else ''} ...")
    files = build_demo(out_dir / "data", inject=args.inject)
    common = ["--db", db, "--quiet"]
    steps = [["index", "--manifest", str(files.manifest)],
             ["index", "--masks", str(files.sim_masks), "--set", files.sim_set, "--mask-categories", str(files.mask_categories)],
             ["index", "--coco", str(files.sim_coco), "--set", files.sim_set, "--source", "colour-detector"],
             ["index", "--coco", str(files.real_coco), "--set", files.real_set, "--source", "colour-detector"]]
    if files.real_gt_coco is not None:
        steps.append(["index", "--coco", str(files.real_gt_coco), "--set", files.real_set, "--source", "gt"])
    for step in steps:
        code = args.main(step + common)
        if code != 0:
            return code
    run = ["run", "--sim", files.sim_set, "--real", files.real_set, "--out", str(out_dir), "--db", db]
    if args.encoders:
        run += ["--encoders", ",".join(args.encoders)]
    return args.main(run + (["--quiet"] if args.quiet else []))
