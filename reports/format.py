"""Pure text formatting of numbers and values found in results.json (no statistics here)."""

from __future__ import annotations

import json
import math
from typing import Any

from perception_gap.wording import MISSING, finite, sig

__all__ = ["MISSING", "R2_WORDS", "ci", "compact", "labelled", "num", "num_list", "r2", "signed"]

# An R² below the floor results give (`probe.r2_display_floor`, -1) reads only as these words.
R2_WORDS = "worse than predicting the mean"
R2_FLOOR = -1.0

# Depth units per metre by name, as perception_gap.diagnoses.depth.DEPTH_UNIT_NAMES (a test keeps
# the two equal; of the core package, reports imports only perception_gap.wording).
DEPTH_UNIT_NAMES = {"m": 1.0, "cm": 100.0, "mm": 1000.0, "1/5000 m (TUM)": 5000.0, "0.1 mm": 10000.0}


def num(x: Any, nd: int = 3) -> str:
    """A number for a table cell: max(nd, 3) significant digits, trailing zeros kept (`0.520`), scientific
    only below 1e-3 (perception_gap.wording.sig); None, NaN and non-numbers as a dash or their text."""
    return sig(x, max(nd, 3), keep_zeros=True)


def ci(low: Any, high: Any, level: Any = None, nd: int = 3) -> str:
    """A confidence interval as `[low, high]`, prefixed with its level when given (`95% [..]`)."""
    if low is None and high is None:
        return MISSING
    prefix = ""
    if finite(level):
        prefix = f"{level * 100:g}% " if level <= 1 else f"{level:g}% "
    return f"{prefix}[{num(low, nd)}, {num(high, nd)}]"


def r2(x: Any, floor: Any = None) -> str:
    """A probe R² for a table cell: the number, or `R2_WORDS` below `floor` (default -1), where a
    ridge extrapolating off its training range reads -4,000,000 and the digits mean nothing."""
    f = floor if isinstance(floor, (int, float)) and not isinstance(floor, bool) else R2_FLOOR
    if finite(x) and x < f:
        return R2_WORDS
    return num(x)


def signed(x: Any, nd: int = 3) -> str:
    """A difference with its sign (`+0.120`)."""
    t = num(x, nd)
    return "+" + t if finite(x) and x > 0 else t


def _short_floats(v: Any) -> Any:
    """Nested values with their floats at 4 significant digits (display only)."""
    if isinstance(v, float):
        return float(f"{v:.4g}") if math.isfinite(v) else v
    if isinstance(v, dict):
        return {k: _short_floats(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_short_floats(x) for x in v]
    return v


def compact(v: Any, limit: int = 400) -> str:
    """Any evidence value as short text: numbers formatted, a list of names as the names joined by
    commas, other lists (an interval's `[low, high]`) and nested values as compact JSON."""
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, str) for x in v):
        s = ", ".join(v)
    elif isinstance(v, (dict, list, tuple)):
        try:
            s = json.dumps(_short_floats(v), separators=(", ", ": "), default=str, allow_nan=True)
        except (TypeError, ValueError):
            s = str(v)
    elif isinstance(v, float):
        s = sig(v, 4)
    else:
        s = MISSING if v is None else str(v)
    return s if len(s) <= limit else s[: limit - 1] + "\u2026"


def labelled(values: Any, nd: int = 3) -> str:
    """A small mapping of named numbers as text (`sim 120, real 45`; `p50 1, p95 2, max 3`), each
    number at `nd` significant digits (perception_gap.wording.sig); anything else as `compact` does."""
    if not isinstance(values, dict):
        return compact(values)
    return ", ".join(f"{k} {sig(v, nd) if not isinstance(v, (dict, list, tuple)) else compact(v)}"
                     for k, v in values.items()) or MISSING


def num_list(values: Any, nd: int = 2) -> str:
    """A short list of numbers (`12.00, 3.50, 4.00`)."""
    if not isinstance(values, (list, tuple)):
        return num(values, nd)
    return ", ".join(num(v, nd) for v in values)


def depth_unit(depth: Any) -> tuple[float | None, str]:
    """(units per metre, native unit name) of a set's `depth` summary: the declared unit when there is
    one, else the unit most of its frames were inferred to be in; (None, "unknown") otherwise."""
    d = depth if isinstance(depth, dict) else {}
    names = {v: k for k, v in DEPTH_UNIT_NAMES.items()}
    declared = d.get("declared_units_per_m") or []
    if declared and isinstance(declared[0], (int, float)) and math.isfinite(declared[0]) and declared[0] > 0:
        u = float(declared[0])
        return u, names.get(u, f"1/{u:g} m")
    inferred = d.get("inferred_units") if isinstance(d.get("inferred_units"), dict) else {}
    best = max(((n, k) for k, n in inferred.items() if k in DEPTH_UNIT_NAMES), default=None)
    if best is None:
        return None, "unknown"
    return DEPTH_UNIT_NAMES[best[1]], best[1]


def metres(value: Any, units_per_m: float | None) -> str:
    """A native depth value in metres (`0.543 m`); the dash when the unit is unknown."""
    if units_per_m is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return MISSING
    return f"{num(value / units_per_m)} m"
