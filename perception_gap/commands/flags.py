"""argparse types for numeric flags: finite numbers within a documented range.

A flag parsed with plain `float` accepts `nan`, `inf` and `1e-308`: a NaN threshold makes every
comparison false (a gate that can never fail), and an extreme value overflows downstream into a
non-finite result. These types refuse such values while parsing, so the CLI answers with one
line naming the flag, the range expected and the text received (exit 2).
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from perception_gap.metrics.settings import Resampling


def resampling(args: argparse.Namespace) -> Resampling | None:
    """The `Resampling` that `--bootstrap` and `--ci-level` ask for (None where neither is given)."""
    n, level = getattr(args, "bootstrap", None), getattr(args, "ci_level", None)
    if n is None and level is None:
        return None
    from perception_gap.metrics.settings import Resampling

    return Resampling(replicates=n, level=level)


def _range_text(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is None and high is None:
        return "a finite number"
    if high is None:
        return f"a finite number {'>' if low_open else '>='} {low:g}"
    if low is None:
        return f"a finite number {'<' if high_open else '<='} {high:g}"
    return f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


def finite_float(low: float | None = None, high: float | None = None, *, low_open: bool = False,
                 high_open: bool = False) -> Callable[[str], float]:
    """An argparse `type` accepting a finite float within [low, high] (either end open or absent)."""
    expected = _range_text(low, high, low_open, high_open)

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = (math.isfinite(value)
              and (low is None or (value > low if low_open else value >= low))
              and (high is None or (value < high if high_open else value <= high)))
        if not ok:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    parse.__name__ = "finite number"  # what argparse names the type in its own messages
    return parse


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse `type` accepting an integer in [low, high] (`1e3` is refused: write 1000)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low}, {high}], got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


# Ranges shared by several commands.
non_negative = finite_float(0.0)
positive = finite_float(0.0, low_open=True)
