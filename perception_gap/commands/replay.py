"""`replay FILE`: logged real vs open-loop sim end-effector trajectories (see docs/contract.md)."""

from __future__ import annotations

import argparse

from perception_gap.commands.output import check_outputs, finish_check, fmt


def execute(args: argparse.Namespace) -> int:
    from perception_gap.workflows.checks import replay_job

    check_outputs(args.out, args.json)
    res = replay_job(args.file, max_translation_m=args.max_translation_m)
    r = res["replay"]
    onset = "none" if r["divergence_step"] is None else f"step {r['divergence_step']}"
    mean_mm = None if r["translation_error"]["mean"] is None else r["translation_error"]["mean"] * 1000
    summary = [f"replay of {len(r['episodes'])} episode(s), {len(r['steps'])} steps "
               f"({r['n_unmatched']} unmatched rows skipped)",
               (f"  translation error mean {fmt(mean_mm)} mm, rotation error mean "
                f"{fmt(r['rotation_error_deg']['mean'])} deg; divergence onset: {onset}")]
    return finish_check(args, "replay", res, summary)
