"""JSON-safe values: the one sanitizer every writer uses (NaN and infinity become null, noted by path).

A module of its own, below `outputs` and the result classes, so that both can use it without
importing each other."""

from __future__ import annotations

import math
from typing import Any


def json_default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


NON_FINITE_REASON = "not a finite number (JSON has none): written as null"


def _finite(o: Any, path: str, bad: list[dict[str, str]]) -> Any:
    """`o` as plain JSON values with each NaN or infinity replaced by None and its path noted in `bad`."""
    if isinstance(o, float):  # numpy float64 too
        if math.isfinite(o):
            return o
        bad.append({"path": path or "$", "value": repr(float(o)), "reason": NON_FINITE_REASON})
        return None
    if o is None or isinstance(o, (str, int, bool)):
        return o
    if isinstance(o, dict):
        return {str(k): _finite(v, f"{path}.{k}" if path else str(k), bad) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v, f"{path}[{i}]", bad) for i, v in enumerate(o)]
    if hasattr(o, "tolist"):  # numpy arrays and scalars
        return _finite(o.tolist(), path, bad)
    converted = json_default(o)
    return converted if isinstance(converted, str) else _finite(converted, path, bad)


def finite_json(obj: Any) -> tuple[Any, list[dict[str, str]]]:
    """`obj` with every non-finite float replaced by None, and where each was.

    JSON has no NaN or infinity: a statistic that came out non-finite (a zero variance, an
    overflow on extreme input) is written as null, and the returned list names it by its path
    (`rank_fidelity.tasks.pick.pearson`) with the value it had.

    Returns:
        (the cleaned object, a list of {"path", "value", "reason"}).
    """
    bad: list[dict[str, str]] = []
    return _finite(obj, "", bad), bad
