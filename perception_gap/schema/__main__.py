"""`python -m perception_gap.schema --write FILE` writes the results.json JSON Schema; `--check FILE` compares."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perception_gap.schema.export import schema_text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m perception_gap.schema", description=__doc__)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", metavar="FILE", help="write the schema to FILE")
    g.add_argument("--check", metavar="FILE", help="exit 1 when FILE is not the current schema")
    args = p.parse_args(argv)
    text = schema_text()
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    elif args.check:
        path = Path(args.check)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{path} is not the current schema: run python -m perception_gap.schema --write {path}\n")
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
