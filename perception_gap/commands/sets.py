"""`sets`: every set of the catalog with its frame counts and source, as a table or JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

from perception_gap.commands.output import atomic_write_text, check_outputs, dumps
from perception_gap.commands.parsing import Parents


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `sets` subparser."""
    ls = sub.add_parser("sets", parents=[parents.common], help="list the catalog's sets: domain, frames, usable, skipped, source",
                        description="List every set of the catalog with its domain, frame counts and source.")
    ls.add_argument("--json", help="also write the list to this JSON file")
    ls.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog

    check_outputs(json_path=args.json)
    with Catalog(args.db, read_only=True, wait=args.wait) as cat:
        sets = cat.set_summaries()
    if args.json:
        atomic_write_text(Path(args.json), dumps({"sets": [s.to_dict() for s in sets]}))
    if args.quiet:
        return 0
    if not sets:
        print("no sets yet (index some frames: `perception-gap index PATH --set NAME --domain sim|real`)")
        return 0
    width = max(4, *(len(s.name) for s in sets))
    print(f"{'name':<{width}}  domain  {'frames':>7} {'usable':>7} {'skipped':>7}  source")
    for s in sets:
        missing = f" ({s.missing} missing)" if s.missing else ""
        print(f"{s.name:<{width}}  {s.domain:<6}  {s.frames:>7} {s.usable:>7} {s.skipped:>7}  {s.source or '-'}{missing}")
    return 0
