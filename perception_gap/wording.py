"""The one place that turns numbers into words: significant digits, percent, stops, percentage points.

Findings' titles and actions, the CLI tables and the HTML report all format their numbers here, so
that one value reads the same everywhere. Rules: 3 significant digits; scientific notation only
below 1e-3 in magnitude (`5.57e-6`); large values in full with thousands separators (`-76,496`);
ratios of exposure in stops (log2) with the linear ratio in percent of the other side; differences
of two percentages in percentage points, signed by their direction, never "+" on a decrease.
Findings, the CLI and the reports (perception_gap.reports) import this module; it imports nothing else of the package.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

MISSING = "\u2014"  # em dash: a value that is absent or not finite

# A gate's outcome as printed by the CLI and shown in every report: one word each, whatever the
# check (drift, screen --fail-if-worse, rollouts, latency, replay, ...). results.json keeps its
# `passed` flag and `status` (`passed`, `failed`, `not computed`, `skipped`) as they are.
PASS, FAIL, SKIP, NOT_COMPUTED = "PASS", "FAIL", "SKIP", "NOT COMPUTED"

# A finding's severity, most urgent first: plumbing bugs contaminate every later measurement.
SEVERITIES = ("bug", "gap", "info")


def severity_rank(severity: Any) -> int:
    """Where a severity sorts (0 most urgent); one that is not in `SEVERITIES` sorts last."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def finite(x: Any) -> bool:
    """Whether `x` is a finite int or float (a bool, None, text, NaN or inf is not): the one test
    the library and the reports use before showing or drawing a number."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def sig(x: Any, digits: int = 3, *, keep_zeros: bool = False) -> str:
    """A number at `digits` significant digits.

    Args:
        x: any value; None, NaN and inf give a dash, other non-numbers their text.
        digits: significant digits (integers at or above 10**digits are shown in full).
        keep_zeros: keep trailing zeros (`0.520`, for table columns) instead of dropping them (`0.52`).

    Returns:
        `0` for zero, scientific (`5.57e-6`) only when 0 < |x| < 1e-3, thousands separators from 1e4.
    """
    if x is None:
        return MISSING
    if isinstance(x, bool):
        return "yes" if x else "no"
    if not isinstance(x, (int, float)):
        return str(x)
    if not math.isfinite(x):
        return MISSING
    if x == 0:
        return "0"
    ax = abs(x)
    if ax < 1e-3:
        mant, exp = f"{x:.{digits - 1}e}".split("e")
        if not keep_zeros and "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        return f"{mant}e{int(exp)}"
    if isinstance(x, int) or ax >= 10 ** digits:
        r = round(x) if ax >= 10 ** digits else x
        return f"{r:,}" if abs(r) >= 1e4 else str(r)
    decimals = max(0, digits - 1 - math.floor(math.log10(ax)))
    s = f"{x:.{decimals}f}"
    if float(s) != 0 and abs(float(s)) >= 10 ** digits:  # rounding carried into a new digit
        s = f"{round(x):,}" if ax >= 1e4 else str(round(x))
    if not keep_zeros and "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def gate_word(outcome: Any) -> str:
    """`PASS`, `FAIL`, `SKIP` or `NOT COMPUTED` for a gate's `status` string, or `PASS`/`FAIL` for
    its `passed` flag (True/False)."""
    if outcome == "skipped":
        return SKIP
    if outcome == "not computed":  # the gate applies but has no value: it holds the verdict back
        return NOT_COMPUTED
    return PASS if outcome is True or outcome == "passed" else FAIL


def signed(x: Any, digits: int = 3) -> str:
    """A difference with its sign: `+0.12`, `-3.4e-4`, `0` (a true minus sign is left to the font)."""
    s = sig(x, digits)
    return "+" + s if finite(x) and x > 0 else s


def pct(fraction: Any, digits: int = 2) -> str:
    """A fraction as percent: 0.28 -> `28%`, 0.004 -> `0.4%`, 1.14 -> `114%`, 0 -> `0%`."""
    if not finite(fraction):
        return MISSING
    v = fraction * 100
    return f"{sig(v, max(digits, len(str(int(abs(v))))))}%"


def points(a: Any, b: Any) -> str:
    """The difference of two fractions in percentage points, worded by its direction.

    `points(0.28, 0.04)` -> `24 percentage points more`, `points(0.04, 0.28)` -> `24 percentage points
    fewer`; the magnitude is computed from the same two values, so it matches them when both are shown.
    """
    if not (finite(a) and finite(b)):
        return MISSING
    d = (a - b) * 100
    if d == 0:
        return "the same share"
    return f"{sig(abs(d), max(2, len(str(int(abs(d))))))} percentage points {'more' if d > 0 else 'fewer'}"


def times(ratio: Any, digits: int = 3) -> str:
    """A ratio as a factor: 1001.2 -> `1,000x`, 0.47 -> `0.47x`."""
    if not finite(ratio):
        return MISSING
    if abs(ratio) >= 10 ** digits:  # 1001.2 -> 1,000: the digits beyond `digits` are noise
        return f"{round(float(f'{ratio:.{digits}g}')):,}x"
    return f"{sig(ratio, digits)}x"


def stops(s: Any) -> str:
    """An exposure difference in stops with its linear meaning, for `<a> is ... than <b>` sentences.

    `stops(-1.09)` -> `1.09 stops darker (luminance 47% of the other's)`; `stops(0.5)` -> `0.5 stops
    brighter (luminance 141% of the other's)`. The sign decides the word; the percent is 2**s.
    """
    if not finite(s):
        return MISSING
    word = "brighter" if s > 0 else "darker"
    return f"{sig(abs(s))} stops {word} (luminance {pct(2.0 ** s)} of the other's)"


def skip_groups(skipped: Iterable[Any], examples: int = 3) -> list[dict[str, Any]]:
    """Skipped frames grouped by reason, the largest group first (ties in order of appearance), so
    that 1,000 files skipped for one reason read as one line, in the CLI and the reports alike.

    Args:
        skipped: `(path, reason)` pairs or mappings with `path` and `reason` (a `repeats` count, as
            results.json gives a file listed again, counts that many frames).
        examples: paths kept per group.

    Returns:
        Dicts with `reason`, `count` (frames), `examples` (the first paths, relative to `folder`)
        and `folder` (the folder every path of the group lies in, "" when there is none).
    """
    groups: dict[str, dict[str, Any]] = {}
    for s in skipped:
        path, reason, n = ((s.get("path"), s.get("reason"), s.get("repeats") or 1) if isinstance(s, Mapping)
                           else (s[0], s[1], 1))
        g = groups.setdefault(str(reason), {"reason": str(reason), "count": 0, "paths": [], "folder": None})
        g["count"] += int(n)
        path = str(path)
        if len(g["paths"]) < examples:
            g["paths"].append(path)
        parent = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        folder = g["folder"]
        while folder and not parent.startswith(folder):  # shorten to the folder both lie in
            folder = folder[:-1].rsplit("/", 1)[0] + "/" if "/" in folder[:-1] else ""
        g["folder"] = parent if folder is None else folder
    out = []
    for g in sorted(groups.values(), key=lambda g: -g["count"]):
        folder = g["folder"] or ""
        out.append({"reason": g["reason"], "count": g["count"], "folder": folder.rstrip("/") or folder,
                    "examples": [p[len(folder):] for p in g["paths"]]})
    return out


def skip_line(group: Mapping[str, Any]) -> str:
    """One group of `skip_groups` as text: `12 frames: not a readable image: a.png, b.png, c.png, ... (in /data/sim)`."""
    n, names = group["count"], list(group["examples"])
    more = ", ..." if n > len(names) else ""
    where = f" (in {group['folder']})" if group.get("folder") else ""
    return f"{n:,} frame{'' if n == 1 else 's'}: {group['reason']}: {', '.join(names)}{more}{where}"
