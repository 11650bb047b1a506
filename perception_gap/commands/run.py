"""`run`: the whole analysis of a sim and a real set into results.json and report.html, and its text form."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perception_gap.commands.flags import resampling
from perception_gap.commands.output import analysis, check_outputs, finish, fmt
from perception_gap.commands.parsing import Parents, model_options

if TYPE_CHECKING:
    from perception_gap.schema import Results


def print_run(res: Results, out_dir: Path) -> None:
    from perception_gap.probes import describe_r2  # sklearn loads only when a run prints

    encoders = res.encoders or []
    print(f"sim {res.config.sim!r} vs real {res.config.real!r}: {res.pairs.n_pairs} pairs")
    print(f"{'rank':>4}  {'encoder':<22} {'gap above floor':>15} {'floor':>6} {'distance (95% CI)':<20} {'AUC':>5} "
          f"{'cos':>6} {'probe s->r':>10}")
    for e in encoders:
        ci = e.centroid_distance_norm_ci
        dist = (f"{fmt(e.centroid_distance_norm)} ({fmt(ci.low if ci is not None else None)}-"
                f"{fmt(ci.high if ci is not None else None)})" if e.centroid_distance_norm is not None else "-")
        front = "*" if e.pareto_front else " "
        rank = "ref" if e.reference else fmt(e.rank)
        probe = (describe_r2(e.probe.sim_to_real if e.probe is not None else None)
                 + ("!" if e.probe_informative is False else ""))
        cos = e.paired_cosine.mean if e.paired_cosine is not None else None
        print(f"{rank:>4}{front} {e.name:<22} {fmt(e.gap_above_floor):>15} {fmt(e.noise_floor):>6} "
              f"{dist:<20} {fmt(e.domain_auc):>5} {fmt(cos):>6} {probe:>10}")
    print("(ranked on the gap above the noise floor (lower is better) and the held-out sim->real probe R^2 (higher "
          "is better); * on their Pareto front; distance = normalized PCA centroid distance, floor = real-vs-real)")
    if any(e.reference for e in encoders):
        print("(ref: the weights-free pixel baseline, a reference row, never ranked)")
    alone = [e.name for e in encoders if e.ranking_basis == "gap alone"]
    if alone:
        print(f"(ranked on the gap alone, no informative probe: {', '.join(alone)}; "
              "! = probe uninformative, sim->sim R^2 <= 0)")
    fid = res.fid
    if fid is not None:
        low, high = (fid.ci.low, fid.ci.high) if fid.ci is not None else (None, None)
        print(f"FID (pytorch-fid Inception v3, weights {(fid.weights_sha256 or '')[:8]}"
              f"{'' if fid.reference_weights else ', not the reference file'}): "
              + (f"{fmt(fid.value)} ({fmt(low)}-{fmt(high)}), "
                 f"KID {fmt((fid.kid or {}).get('value'))}" if fid.value is not None
                 else f"not computed ({fid.insufficient})"))
    if not res.findings:
        print("findings: none")
    for i, f in enumerate(res.findings, 1):
        print(f"{i}. [{f.severity}] {f.code}: {f.title}")
        if f.action:
            print(f"   action: {f.action}")
    print(f"results: {out_dir / 'results.json'}, report: {out_dir / 'report.html'}")


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `run` subparser."""
    rn = sub.add_parser("run", parents=[parents.common, parents.engine], help="the whole analysis: statistics, embeddings, gap, probes, ranking",
                        description="Raw statistics and plumbing diagnoses, embeddings, sim-vs-real gap metrics with "
                                    "noise floors and CIs, linear probes, encoder ranking and findings; writes "
                                    "DIR/results.json and DIR/report.html.")
    rn.add_argument("--sim", required=True, help="sim set name")
    rn.add_argument("--real", required=True, help="real set name")
    rn.add_argument("--encoders", action="append",
                    help="encoder name(s), comma-separated or repeated, or @FILE (a candidates TOML file; "
                         "docs/encoders.md, Sweeps) (default: every encoder with weights available)")
    rn.add_argument("--out", required=True, help="output folder (results.json, report.html)")
    rn.add_argument("--json", help="also write results.json to this file")
    model_options(rn, "where the models run")
    rn.add_argument("--no-attribution", dest="attribution", action="store_false",
                    help="skip the camera model and the counterfactual attribution of each encoder's gap")
    rn.add_argument("--rollouts", metavar="FILE", help="also include the rollouts section of this log (see `rollouts`)")
    rn.add_argument("--inception-weights", metavar="FILE",
                    help="a local FID Inception v3 state dict (pytorch-fid's pt_inception-2015-12-05-6726825d.pth): "
                         "also the FID and KID of the reference implementations (nothing downloads)")
    rn.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.candidates import parse_candidates
    from perception_gap.workflows.run import run_job

    names = parse_candidates(args.encoders) if args.encoders else None
    out_dir = Path(args.out)
    check_outputs(out_dir, args.json)
    rollouts = None
    if args.rollouts:
        from perception_gap.evaluation.jobs import rollouts_job

        rollouts = rollouts_job(args.rollouts)  # before the long analysis: bad input fails at once
    with analysis(args, "run") as (cat, eng, progress):
        raw = run_job(cat, args.sim, args.real, encoder_names=names, device=args.device,
                      batch_size=args.batch_size, workers=args.workers, progress=progress,
                      precision=args.precision, engine=eng,
                      inception_weights=getattr(args, "inception_weights", None),
                      attribution=getattr(args, "attribution", True), resampling=resampling(args))
    res = finish(args, raw, out_dir, rollouts)
    if not args.quiet:
        print_run(res, out_dir)
    return 0
