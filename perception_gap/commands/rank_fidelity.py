"""`rank-fidelity FILE`: MMRV and Pearson of sim vs real success across policies; a `--min-pearson` gate."""

from __future__ import annotations

import argparse
from typing import Any

from perception_gap.commands.output import fmt
from perception_gap.commands.rollouts import finish, print_gates_and_findings


def _print(res: dict[str, Any], out_dir: str | None) -> None:
    sec = res["rank_fidelity"]
    print(f"{'task':<28} {'policies':>8} {'MMRV':>7} {'MMRV CI':<17} {'Pearson':>8} {'Pearson CI':<17}")
    for task, t in sec["tasks"].items():
        mci = "[{}, {}]".format(*map(fmt, t["mmrv_ci"])) if t["mmrv_ci"] else "-"
        pci = "[{}, {}]".format(*map(fmt, t["pearson_ci"])) if t["pearson_ci"] else "-"
        print(f"{task[:28]:<28} {t['n_policies']:>8} {fmt(t['mmrv']):>7} {mci:<17} {fmt(t['pearson']):>8} {pci:<17}")
    undefined = sec.get("pearson_undefined") or []
    over = (f" over {len(sec['tasks']) - len(undefined)} of {len(sec['tasks'])} tasks (undefined on "
            f"{', '.join(map(repr, undefined[:4]))}{' ...' if len(undefined) > 4 else ''})" if undefined else "")
    print(f"mean over tasks: MMRV {fmt(sec['mean']['mmrv'])}, Pearson {fmt(sec['mean']['pearson'])}{over} "
          "(MMRV: order from sim and real, violation size from real success; lower is better)")
    for s in sec["skipped"]:
        print(f"skipped {s.get('policy', '')}{'/' if s.get('policy') else ''}{s['task']}: {s['reason']}")
    print_gates_and_findings(res, sec, out_dir)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.evaluation.jobs import rank_fidelity_job

    return finish(args, lambda: rank_fidelity_job(args.file, n_boot=args.n_boot, min_pearson=args.min_pearson),
                  "rank_fidelity", _print)
