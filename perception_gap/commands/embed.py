"""`encoders` (what is registered, with its preprocessing) and `embed` (cached embeddings)."""

from __future__ import annotations

import argparse
from pathlib import Path

from perception_gap.commands.output import atomic_write_text, check_outputs, dumps, fmt, progress_bar, say
from perception_gap.commands.parsing import Parents, model_options


def add_encoders_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `encoders` subparser."""
    en = sub.add_parser("encoders", parents=[parents.common], help="list encoders: width, preprocessing, weights available",
                        description="List registered encoders with their width, preprocessing and whether weights are available.")
    en.add_argument("--json", help="also write the list to this JSON file")
    en.set_defaults(func=execute_encoders)


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `embed` subparser."""
    em = sub.add_parser("embed", parents=[parents.common, parents.engine], help="embed frames through encoders (cached by content)",
                        description="Embed every usable frame through each encoder; cached by (content hash, "
                                    "encoder fingerprint), resumable, only missing frames are embedded.")
    em.add_argument("--encoder", "--encoders", dest="encoder", required=True, action="append",
                    help="encoder name(s), comma-separated or repeated (see `encoders`), or @FILE: a candidates "
                         "file of [[encoder]] tables (docs/encoders.md, Sweeps)")
    em.add_argument("--set", action="append", help="set to embed (repeatable; default: every set)")
    model_options(em, "where the model runs")
    em.set_defaults(func=execute)


def execute_encoders(args: argparse.Namespace) -> int:
    from perception_gap import encoders

    check_outputs(json_path=args.json)
    infos = encoders.describe_encoders()
    if args.json:
        atomic_write_text(Path(args.json), dumps([i.to_dict() for i in infos]))
    if not args.quiet:
        print(f"{'name':<20} {'family':<9} {'dim':>5}  {'input':<8} {'resize':<22} {'mean / std':<34} weights")
        for i in infos:
            p = i.preprocessing
            ms = f"{fmt(list(p.mean))} / {fmt(list(p.std))}"
            print(f"{i.name:<20} {i.family:<9} {i.dim:>5}  {p.size[0]}x{p.size[1]:<5} "
                  f"{p.interpolation + ' ' + p.resize_mode:<22} {ms:<34} {'yes' if i.weights_available else 'NO'}")
        from perception_gap.encoders.registry import list_forms

        print("also, by name (docs/encoders.md):")
        for form in list_forms():
            print(f"  {form}")
    return 0


def execute(args: argparse.Namespace) -> int:
    from perception_gap.candidates import parse_candidates
    from perception_gap.catalog import Catalog
    from perception_gap.embed import embed_sets
    from perception_gap.engines import open_engine

    names = parse_candidates(args.encoder, "--encoder")
    progress, close = progress_bar(args, "embed")
    with Catalog(args.db, wait=args.wait, create=False) as cat, \
            open_engine(cat, args.engine, address=args.address, workers=args.workers, device=args.device) as eng:
        try:
            reports = embed_sets(cat, names, args.set, device=args.device, batch_size=args.batch_size,
                                 workers=args.workers or 2, progress=progress, precision=args.precision,
                                 runner=eng.embed_runner if eng else None)
        finally:
            close()
    for r in reports:
        rate = f", {r.embedded / r.seconds:.1f} frames/s" if r.embedded and r.seconds > 0 else ""
        at = f", {r.precision}, batch {r.batch_size}" if r.model_loaded else f", {r.precision}"
        shown = r.encoder if r.label in ("", r.encoder) else f"{r.label} = {r.encoder}"
        say(args, f"{shown} ({r.dim}-d{at}, fingerprint {r.fingerprint[:12]}): {r.embedded} embedded, "
                   f"{r.skipped} skipped, {r.todo - r.embedded - r.skipped} left{rate}; "
                   f"{'all cached' if not r.todo else f'{r.seconds:.1f}s'}")
    return 0
