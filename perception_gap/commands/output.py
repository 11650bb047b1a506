"""What every command shares: one-line errors, progress on stderr, atomic output files, number format."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable


def fail(message: str) -> int:
    print(f"perception-gap: error: {message}", file=sys.stderr)
    return 2


def progress_bar(args: argparse.Namespace, desc: str) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A progress callback on stderr, or None when quiet or stderr is not a terminal."""
    if args.quiet or not sys.stderr.isatty():
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(desc=desc, unit="frame", file=sys.stderr, leave=False)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    return update, bar.close


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file so readers see the old or the new content, never a partial one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=json_default, allow_nan=False, ensure_ascii=False)


def say(args: argparse.Namespace, text: str = "") -> None:
    if not args.quiet:
        print(text)


def fmt(x: Any, nd: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "-"
        return f"{x:.{nd}g}" if abs(x) < 1e4 else f"{x:.0f}"
    if isinstance(x, list):
        return "[" + ", ".join(fmt(v, nd) for v in x) + "]"
    return str(x)


def write_outputs(res: dict[str, Any], out_dir: Path, json_path: str | None) -> None:
    """results.json, the optional --json copy and report.html, each written atomically."""
    text = dumps(res)
    atomic_write_text(out_dir / "results.json", text)
    if json_path:
        atomic_write_text(Path(json_path), text)
    from reports import write_report

    write_report(json.loads(text), out_dir / "report.html")  # from the JSON form: what the report may read


def encoder_names(spec: list[str] | None) -> list[str] | None:
    """--encoders: None = every available; `none` = raw statistics only."""
    from perception_gap.embed import parse_encoder_list

    if not spec:
        return None
    names = parse_encoder_list(spec)
    return [] if [n.lower() for n in names] == ["none"] else names
