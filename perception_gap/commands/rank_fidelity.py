"""`rank-fidelity FILE`: MMRV and Pearson of sim vs real success across policies; a `--min-pearson` gate."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from perception_gap.commands.flags import bounded_int, finite_float
from perception_gap.commands.output import fmt
from perception_gap.commands.parsing import Parents
from perception_gap.commands.rollouts import finish, print_gates_and_findings

if TYPE_CHECKING:
    from perception_gap.schema import Results


def _print(res: Results, out_dir: str | None) -> None:
    sec = res.rank_fidelity
    print(f"{'task':<28} {'policies':>8} {'MMRV':>7} {'MMRV CI':<17} {'Pearson':>8} {'Pearson CI':<17}")
    for task, t in sec.tasks.items():
        mci = "[{}, {}]".format(*map(fmt, t["mmrv_ci"])) if t["mmrv_ci"] else "-"
        pci = "[{}, {}]".format(*map(fmt, t["pearson_ci"])) if t["pearson_ci"] else "-"
        print(f"{task[:28]:<28} {t['n_policies']:>8} {fmt(t['mmrv']):>7} {mci:<17} {fmt(t['pearson']):>8} {pci:<17}")
    undefined = sec.pearson_undefined or []
    over = (f" over {len(sec.tasks) - len(undefined)} of {len(sec.tasks)} tasks (undefined on "
            f"{', '.join(map(repr, undefined[:4]))}{' ...' if len(undefined) > 4 else ''})" if undefined else "")
    print(f"mean over tasks: MMRV {fmt(sec.mean['mmrv'])}, Pearson {fmt(sec.mean['pearson'])}{over} "
          "(MMRV: order from sim and real, violation size from real success; lower is better)")
    for s in sec.skipped or []:
        print(f"skipped {s.get('policy', '')}{'/' if s.get('policy') else ''}{s['task']}: {s['reason']}")
    print_gates_and_findings(res, sec, out_dir)


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `rank-fidelity` subparser."""
    rf = sub.add_parser("rank-fidelity", parents=[parents.common, parents.outputs], help="MMRV and Pearson of sim vs real success across policies",
                        description="Does sim rank policies or checkpoints as real does? Pearson correlation and the "
                                    "SimplerEnv mean maximum rank violation (MMRV: order from sim and real, violation "
                                    "size from real success), per task and averaged. FILE: rows policy, task, sim, "
                                    "real (rates; optional n_sim, n_real counts for bootstrap CIs), or a rollouts log. "
                                    "Finding rank_fidelity when the mean Pearson is below 0.7 or the mean MMRV "
                                    "above 0.1. Exit 1 when the mean Pearson is under --min-pearson.")
    rf.add_argument("file", metavar="FILE", help="rates table or rollouts log (CSV, JSONL or Parquet)")
    rf.add_argument("--n-boot", type=bounded_int(200, 100_000), default=2000,
                    help="bootstrap replicates when counts are known, 200 to 100000 (default 2000)")
    rf.add_argument("--min-pearson", type=finite_float(-1.0, 1.0),
                    help="gate: exit 1 when the mean Pearson over tasks is below this (in [-1, 1])")
    rf.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.evaluation.jobs import rank_fidelity_job

    return finish(args, lambda: rank_fidelity_job(args.file, n_boot=args.n_boot, min_pearson=args.min_pearson),
                  "rank_fidelity", _print)
