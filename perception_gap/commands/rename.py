"""`rename OLD NEW`: give a set another name (frames and boxes follow)."""

from __future__ import annotations

import argparse

from perception_gap.commands.output import say
from perception_gap.commands.parsing import Parents


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `rename` subparser."""
    rn2 = sub.add_parser("rename", parents=[parents.common], help="rename a set",
                         description="Rename a set; its frames and boxes follow. Earlier runs keep the names they "
                                     "were run with.")
    rn2.add_argument("old", metavar="OLD", help="the set's name")
    rn2.add_argument("new", metavar="NEW", help="its new name (no set may have it)")
    rn2.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest import validate_set_name

    validate_set_name(args.new)
    with Catalog(args.db, wait=args.wait, create=False) as cat:
        cat.rename_set(args.old, args.new)
    say(args, f"renamed set {args.old!r} to {args.new!r}")
    return 0
