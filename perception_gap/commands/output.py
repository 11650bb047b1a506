"""What every command shares: one-line errors, progress on stderr, number format, and the writers of `perception_gap.outputs`."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Callable

from perception_gap.outputs import (  # noqa: F401  (the commands' writers, named here for them)
    NON_FINITE_REASON,
    as_results,
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

if TYPE_CHECKING:
    from perception_gap.catalog import Catalog
    from perception_gap.schema import Results


def fail(message: str) -> int:
    print(f"perception-gap: error: {message}", file=sys.stderr)
    return 2


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class _Bars:
    """One tqdm bar on stderr for a stage, and one per encoder when the embed stage reports a sweep
    (`perception_gap.embed.SweepStatus`): `[i/n] label`, with the frames and time left over the sweep."""

    def __init__(self, desc: str) -> None:
        from tqdm import tqdm

        self._tqdm, self._desc = tqdm, desc
        self._bar = tqdm(desc=desc, unit="frame", file=sys.stderr, leave=False)
        self._index: int | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._index is None:  # inside a sweep, `sweep` draws the encoder's bar
            self._show(done, total)

    def _show(self, done: int, total: int, postfix: str | None = None) -> None:
        self._bar.total = total
        self._bar.n = done
        if postfix is not None:
            self._bar.set_postfix_str(postfix, refresh=False)
        self._bar.refresh()

    def sweep(self, st: Any) -> None:
        if st.index != self._index:
            self._bar.close()
            self._index = st.index
            self._bar = self._tqdm(desc=f"[{st.index}/{st.count}] {st.label}", unit="frame", file=sys.stderr,
                                   leave=True, total=st.total)
        self._show(st.done, st.total, f"sweep {st.sweep_done}/{st.sweep_total} frames, {_duration(st.eta_s)} left")

    def close(self) -> None:
        self._bar.close()


def progress_bar(args: argparse.Namespace, desc: str) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A progress callback on stderr, or None when quiet or stderr is not a terminal. The callback
    also takes the embed stage's sweep reports (a bar per encoder, time left over the sweep)."""
    if args.quiet or not sys.stderr.isatty():
        return None, lambda: None
    bars = _Bars(desc)
    return bars, bars.close


@contextmanager
def analysis(args: argparse.Namespace, desc: str, *, engine: bool = True
             ) -> Iterator[tuple[Catalog, Any, Callable[[int, int], None] | None]]:
    """(catalog, engine or None, progress) for a long command: the catalog opened for writing, the
    `--engine` opened on it, the progress bar closed however the job ends."""
    from perception_gap.catalog import Catalog
    from perception_gap.engines import open_engine

    progress, close = progress_bar(args, desc)
    with Catalog(args.db, wait=args.wait, create=False) as cat, \
            (open_engine(cat, args.engine, address=args.address, workers=args.workers, device=args.device)
             if engine else nullcontext()) as eng:
        try:
            yield cat, eng, progress
        finally:
            close()


def finish(args: argparse.Namespace, raw: dict[str, Any], out_dir: Any, rollouts: Any = None) -> Results:
    """A long command's results, `--rollouts` merged in, written to `--out` (and `--json`) and returned typed."""
    if rollouts is not None:
        from perception_gap.evaluation.jobs import merge_rollouts

        merge_rollouts(raw, rollouts)
    res = as_results(raw)
    write_outputs(res, out_dir, args.json)
    return res


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


def encoder_names(spec: list[str] | None) -> list[Any] | None:
    """--encoders: None = every available; `none` = raw statistics only; names and `@FILE`
    candidates files as `perception_gap.candidates.Candidate`s."""
    from perception_gap.candidates import parse_candidates

    if not spec:
        return None
    names = parse_candidates(spec)
    return [] if [n.name.lower() for n in names] == ["none"] else names


def check_lines(res: Results, summary: list[str]) -> list[str]:
    """A check's summary lines, then one line per finding."""
    return summary + [f"  finding {f.code} ({f.severity}): {f.title}" for f in res.findings]


def finish_check(args: argparse.Namespace, section: str, res: Results, summary: list[str]) -> int:
    """Write a check's `--json` file and `--out` folder, print its summary; 1 when its gate failed."""
    write_outputs(res, getattr(args, "out", None), args.json, render_check)
    g = getattr(res, section).gate
    for line in check_lines(res, summary):
        say(args, line)
    if g is not None:
        why = f" ({g.reason})" if g.status in ("not computed", "skipped") and g.reason else ""
        say(args, f"gate {g.name}: {fmt(g.value)} vs {fmt(g.threshold)}: {gate_word(g.status or g.passed)}{why}")
        return 0 if g.passed else 1
    return 0
