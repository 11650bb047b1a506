"""`demo`: build the built-in MuJoCo data set, index it with its boxes, then `run` it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from perception_gap.catalog import DEFAULT_DB
from perception_gap.commands.output import check_outputs, dumps, fail, say, write_files


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
    code = args.main(run + (["--quiet"] if args.quiet else []))
    return code if code != 0 else _after(args, files, db, out_dir)


def _after(args: argparse.Namespace, files: Any, db: str, out_dir: Path) -> int:
    """policy-check, replay and reprojection on the demo's own inputs, into DIR/after/ (one report)."""
    from perception_gap.demo.after import build_after_inputs
    from perception_gap.reports.geometry import render_geometry_report

    after = build_after_inputs(files.root)
    dest = out_dir / "after"
    checks = {"policy_check": ["policy-check", "--policy", str(after.policy), "--sim", files.sim_set,
                               "--real", files.real_set, "--db", db],
              "replay": ["replay", str(after.replay)], "reprojection": ["reprojection", str(after.cameras), "--initial-states", str(after.initial_states)]}
    merged: dict = {"findings": []}
    say(args, "\nafter the gap hunt: policy-check, replay, reprojection on the demo's inputs")
    for section, argv in checks.items():
        code = args.main(argv + ["--json", str(dest / f"{section}.json")] + (["--quiet"] if args.quiet else []))
        if code != 0:
            return code
        res = json.loads((dest / f"{section}.json").read_text(encoding="utf-8"))
        merged[section] = res[section]
        merged["findings"] += res["findings"]
        merged["version"] = res["version"]
    text = dumps(merged)
    write_files([(dest / "report.html", render_geometry_report(json.loads(text))), (dest / "results.json", text)])
    say(args, f"after-the-gap-hunt report: {dest / 'report.html'}")
    return 0
