"""`screen`: which of several renderings is closest to real, and its text form."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perception_gap.commands.flags import bounded_int, resampling
from perception_gap.commands.output import (
    analysis,
    check_outputs,
    encoder_names,
    finish,
    fmt,
)
from perception_gap.commands.parsing import Parents, model_options
from perception_gap.wording import FAIL, NOT_COMPUTED, gate_word

if TYPE_CHECKING:
    from perception_gap.schema import Results


def _print_screen(res: Results, out_dir: Path) -> None:
    from perception_gap.workflows.screening import views_disagree_words

    scr = res.screen
    views = scr.views or []
    print(f"screening {len(scr.ranking)} renderings against real {res.config.real!r} "
          f"over {len(views)} views ({', '.join(views)}); {scr.n_pairs} paired scenes, resampled as "
          + ", ".join(f"{n} {kind}" for kind, n in (scr.resampling_units or {}).items()))
    print(f"{'rank':>4}  {'sim set':<28} {'distance (95% CI)':<26}")
    for r in scr.ranking:
        c = r.ci
        print(f"{r.rank:>4}  {r.set:<28} {fmt(r.distance)} ({fmt(c.low)}-{fmt(c.high)})")
    for p in scr.pairwise or []:
        c = p["ci"]
        verdict = "significant" if p["significant"] else "not significant"
        if p.get("views_disagree"):
            verdict += f" on average, but the views disagree: {views_disagree_words(p)}"
        print(f"  {p['closer']} closer than {p['farther']} by {fmt(p['difference'])} "
              f"(95% CI {fmt(c.get('low'))} to {fmt(c.get('high'))}): {verdict}")
    print(f"closest: {scr.closest!r}" if scr.closest else "closest: no rendering is significantly closer than every other")
    if scr.baseline is not None:
        gate = scr.gate
        word = gate_word(gate.status) if gate is not None else gate_word(bool(scr.passed))
        why = {FAIL: " (significantly farther: " + ", ".join(scr.worse_than_baseline or []) + ")",
               NOT_COMPUTED: f" ({gate.reason if gate is not None else None})"}.get(word, "")
        print(f"--fail-if-worse {scr.baseline!r}: {word}{why}")
    print(f"results: {out_dir / 'results.json'}, report: {out_dir / 'report.html'}")


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `screen` subparser."""
    sc = sub.add_parser("screen", parents=[parents.common], help="which rendering is closer to real, with confidence",
                        description="Screen two or more renderings (sim sets of the same scenes) against one real set: "
                                    "distance to real in raw statistics and in each encoder, a paired bootstrap over "
                                    "scenes for confidence; writes DIR/results.json and DIR/report.html. Exit 1 with "
                                    "--fail-if-worse A when another rendering is significantly farther from real than A.")
    sc.add_argument("--sim", required=True, action="append", help="a sim set (repeat, or comma-separate; at least two)")
    sc.add_argument("--real", required=True, help="real set name")
    sc.add_argument("--encoders", action="append",
                    help="encoder name(s), comma-separated or repeated, or @FILE (a candidates TOML file) "
                         "(default: every available one; `none`: raw statistics only)")
    sc.add_argument("--fail-if-worse", metavar="SIM", help="exit 1 when another rendering is significantly farther "
                                                            "from real than this one (for CI on a renderer)")
    sc.add_argument("--n-boot", type=bounded_int(10, 100_000), default=1000,
                    help="bootstrap replicates, 10 to 100000 (default 1000)")
    sc.add_argument("--out", required=True, help="output folder (results.json, report.html)")
    sc.add_argument("--json", help="also write results.json to this file")
    model_options(sc, "where the models run")
    sc.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.workflows import screen_job

    sims = [s for item in args.sim for s in item.split(",") if s]
    out_dir = Path(args.out)
    check_outputs(out_dir, args.json)
    with analysis(args, "screen", engine=False) as (cat, _, progress):
        raw = screen_job(cat, sims, args.real, encoder_names=encoder_names(args.encoders),
                         baseline=args.fail_if_worse, device=args.device, batch_size=args.batch_size,
                         workers=args.workers, n_boot=args.n_boot, progress=progress,
                         precision=args.precision, resampling=resampling(args))
    res = finish(args, raw, out_dir)
    if not args.quiet:
        _print_screen(res, out_dir)
    return 1 if res.screen.passed is False else 0
