"""The shared base of frozen result dataclasses: JSON-safe `to_dict` (None instead of NaN/inf)."""

from __future__ import annotations

import math
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np


def json_safe(v: Any) -> Any:
    """Plain Python values for JSON: numpy scalars unwrapped, non-finite floats as None."""
    if is_dataclass(v) and not isinstance(v, type):
        return v.to_dict()  # type: ignore[attr-defined]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    if isinstance(v, (list, tuple, np.ndarray)):
        return [json_safe(x) for x in v]
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    return v


class Result:
    """Shared `to_dict` of the frozen result dataclasses."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-safe plain Python values (None instead of NaN/inf)."""
        return {f.name: json_safe(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]
