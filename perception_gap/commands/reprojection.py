"""`reprojection FILE`: sim vs real camera models over a workspace grid (see docs/contract.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from perception_gap.commands.output import as_results, check_outputs, finish_check, fmt
from perception_gap.commands.parsing import Parents, file_check_parser

if TYPE_CHECKING:
    from perception_gap.schema import Results


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `reprojection` subparser."""
    fc = file_check_parser(
        sub, parents, "reprojection", short="sim vs real camera models: reprojection error surface",
        description=("Project a workspace grid through the sim and the real camera (OpenCV pinhole + k1, k2, p1, p2, "
                     "k3; camera pose in the robot base frame) and measure where they disagree. Exit 1 when "
                     "--max-mean-px is crossed."),
        file_help='JSON: {"sim": CAM, "real": CAM, "grid": {...}, "points": [...]}',
        gate=("--max-mean-px", "PX", "gate: exit 1 when the mean error exceeds PX"), execute=execute)
    fc.add_argument("--initial-states", metavar="STATES.csv",
                    help="training initial states (CSV, JSONL or Parquet; columns x, y, z in metres, "
                         "optional success 0/1): their density and the failures on the grid beside the error surface")


def execute(args: argparse.Namespace) -> int:
    from perception_gap.workflows.checks import reprojection_job

    check_outputs(args.out, args.json)
    res = as_results(reprojection_job(args.file, initial_states=getattr(args, "initial_states", None),
                                      max_mean_px=args.max_mean_px))
    return finish_check(args, "reprojection", res, summary(res))


def summary(res: Results) -> list[str]:
    """The text summary of a reprojection's results."""
    r = res.reprojection
    lines = [(f"reprojection over {r.n_valid} of {r.n_points} grid points "
                f"({r.n_behind} behind a camera, {r.n_outside} outside an image)"),
               (f"  error px: mean {fmt(r.mean)}, median {fmt(r.median)}, max {fmt(r.max)}; "
                f"slope {fmt(r.slope_px_per_m)} px/m ({'structured' if r.structured else 'flat'})")]
    fit = r.camera_fit
    if fit is not None:
        lines.append(f"  camera fit: {', '.join(fit['named']) or 'nothing'} named ({fit['chosen']} model, residual "
                       f"{fmt(fit['fits'][fit['chosen']]['residual_rms_px'], 2)} px of {fmt(fit['error_rms_px'])} px RMS)")
    cov = r.coverage
    if cov is not None:
        lines.append(f"  initial states: {cov['n_states']} ({cov['n_outside']} outside the grid), {cov['n_failures']} "
                       f"failures of {cov['n_outcomes']} outcomes; verdict {cov['verdict']}")
    return lines
