"""`reprojection FILE`: sim vs real camera models over a workspace grid (see docs/contract.md)."""

from __future__ import annotations

import argparse

from perception_gap.commands.output import check_outputs, finish_check, fmt


def execute(args: argparse.Namespace) -> int:
    from perception_gap.workflows.checks import reprojection_job

    check_outputs(args.out, args.json)
    res = reprojection_job(args.file, initial_states=getattr(args, "initial_states", None),
                           max_mean_px=args.max_mean_px)
    r = res["reprojection"]
    summary = [(f"reprojection over {r['n_valid']} of {r['n_points']} grid points "
                f"({r['n_behind']} behind a camera, {r['n_outside']} outside an image)"),
               (f"  error px: mean {fmt(r['mean'])}, median {fmt(r['median'])}, max {fmt(r['max'])}; "
                f"slope {fmt(r['slope_px_per_m'])} px/m ({'structured' if r['structured'] else 'flat'})")]
    fit = r.get("camera_fit")
    if fit is not None:
        summary.append(f"  camera fit: {', '.join(fit['named']) or 'nothing'} named ({fit['chosen']} model, residual "
                       f"{fmt(fit['fits'][fit['chosen']]['residual_rms_px'], 2)} px of {fmt(fit['error_rms_px'])} px RMS)")
    cov = r.get("coverage")
    if cov is not None:
        summary.append(f"  initial states: {cov['n_states']} ({cov['n_outside']} outside the grid), {cov['n_failures']} "
                       f"failures of {cov['n_outcomes']} outcomes; verdict {cov['verdict']}")
    return finish_check(args, "reprojection", res, summary)
