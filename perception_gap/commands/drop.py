"""`drop NAME`: remove a set (its frames and boxes) from the catalog."""

from __future__ import annotations

import argparse

from perception_gap.commands.output import say


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog

    with Catalog(args.db, wait=args.wait, create=False) as cat:
        n = cat.drop_set(args.name)
    say(args, f"dropped set {args.name!r} ({n} frames); cached statistics and embeddings stay, keyed by content")
    return 0
