"""`rename OLD NEW`: give a set another name (frames and boxes follow)."""

from __future__ import annotations

import argparse

from perception_gap.commands.output import say


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest import validate_set_name

    validate_set_name(args.new)
    with Catalog(args.db, wait=args.wait, create=False) as cat:
        cat.rename_set(args.old, args.new)
    say(args, f"renamed set {args.old!r} to {args.new!r}")
    return 0
