"""`replay FILE`: logged real vs open-loop sim end-effector trajectories (see docs/contract.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from perception_gap.commands.output import as_results, check_outputs, finish_check, fmt
from perception_gap.commands.parsing import Parents, file_check_parser

if TYPE_CHECKING:
    from perception_gap.schema import Results


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `replay` subparser."""
    file_check_parser(
        sub, parents, "replay", short="logged real vs open-loop sim end-effector trajectories",
        description=("Per-step translation and geodesic rotation error between real and open-loop sim end-effector "
                     "poses (CSV, JSONL or Parquet rows: episode, step, domain, x, y, z, qw, qx, qy, qz, optional "
                     "contact), the step where divergence starts and whether it starts at first contact. Exit 1 when "
                     "--max-translation-m is crossed."),
        file_help="CSV, JSONL or Parquet pose log",
        gate=("--max-translation-m", "M", "gate: exit 1 when the mean translation error exceeds M m"), execute=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.workflows.checks import replay_job

    check_outputs(args.out, args.json)
    res = as_results(replay_job(args.file, max_translation_m=args.max_translation_m))
    return finish_check(args, "replay", res, summary(res))


def summary(res: Results) -> list[str]:
    """The text summary of a replay's results."""
    r = res.replay
    onset = "none" if r.divergence_step is None else f"step {r.divergence_step}"
    mean_m = r.translation_error["mean"]
    mean_mm = None if mean_m is None else mean_m * 1000
    return [f"replay of {len(r.episodes or [])} episode(s), {len(r.steps or [])} steps "
            f"({r.n_unmatched} unmatched rows skipped)",
            (f"  translation error mean {fmt(mean_mm)} mm, rotation error mean "
             f"{fmt(r.rotation_error_deg['mean'])} deg; divergence onset: {onset}")]
