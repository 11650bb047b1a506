"""`drop NAME`: remove a set (its frames and boxes) from the catalog."""

from __future__ import annotations

import argparse

from perception_gap.commands.output import say
from perception_gap.commands.parsing import Parents


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `drop` subparser."""
    dp = sub.add_parser("drop", parents=[parents.common], help="remove a set (its frames and boxes) from the catalog",
                        description="Remove a set, its frames and its boxes; cached statistics and embeddings stay "
                                    "(keyed by content).")
    dp.add_argument("name", metavar="NAME", help="the set to remove")
    dp.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog

    with Catalog(args.db, wait=args.wait, create=False) as cat:
        n = cat.drop_set(args.name)
    say(args, f"dropped set {args.name!r} ({n} frames); cached statistics and embeddings stay, keyed by content")
    return 0
