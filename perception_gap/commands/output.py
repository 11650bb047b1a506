"""What every command shares: one-line errors, progress on stderr, number format, and the writers of `perception_gap.outputs`."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Callable

from perception_gap.outputs import (  # noqa: F401  (the commands' writers, named here for them)
    NON_FINITE_REASON,
    atomic_write_text,
    check_outputs,
    dumps,
    finite_json,
    json_default,
    render_check,
    write_files,
    write_outputs,
)
from perception_gap.wording import gate_word


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


def say(args: argparse.Namespace, text: str = "") -> None:
    if not args.quiet:
        print(text)


SKIP_GROUPS_SHOWN = 10


def skip_lines(skipped: Any, more: str) -> list[str]:
    """Skipped frames as `skipped N frames: REASON: a.png, b.png, c.png, ...` lines, one per reason
    (perception_gap.wording.skip_groups), at most SKIP_GROUPS_SHOWN, then one line for the rest
    pointing to `more` (where the full list is)."""
    from perception_gap.wording import skip_groups, skip_line

    groups = skip_groups(skipped)
    lines = [f"skipped {skip_line(g)}" for g in groups[:SKIP_GROUPS_SHOWN]]
    rest = groups[SKIP_GROUPS_SHOWN:]
    if rest:
        lines.append(f"... and {sum(g['count'] for g in rest):,} more skipped for {len(rest)} other reasons "
                     f"(see {more})")
    return lines


def fmt(x: Any, nd: int = 3) -> str:
    """A number for the CLI's text: `nd` significant digits via perception_gap.wording.sig ("-" when absent)."""
    from perception_gap.wording import sig

    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, list):
        return "[" + ", ".join(fmt(v, nd) for v in x) + "]"
    return sig(x, nd)


def encoder_names(spec: list[str] | None) -> list[str] | None:
    """--encoders: None = every available; `none` = raw statistics only."""
    from perception_gap.embed import parse_encoder_list

    if not spec:
        return None
    names = parse_encoder_list(spec)
    return [] if [n.lower() for n in names] == ["none"] else names


def finish_check(args: argparse.Namespace, section: str, res: dict[str, Any], summary: list[str]) -> int:
    """Write a check's `--json` file and `--out` folder, print its summary; 1 when its gate failed."""
    write_outputs(res, getattr(args, "out", None), args.json, render_check)
    g = res[section].get("gate")
    for line in summary + [f"  finding {f['code']} ({f['severity']}): {f['title']}" for f in res["findings"]]:
        say(args, line)
    if g is not None:
        why = f" ({g['reason']})" if g.get("status") in ("not computed", "skipped") and g.get("reason") else ""
        say(args, f"gate {g['name']}: {fmt(g['value'])} vs {fmt(g['threshold'])}: {gate_word(g.get('status') or g['passed'])}{why}")
        return 0 if g["passed"] else 1
    return 0
