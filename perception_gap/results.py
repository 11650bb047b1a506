"""The shared base of frozen result dataclasses: JSON-safe `to_dict` (None instead of NaN/inf)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from perception_gap.jsonsafe import finite_json


def json_safe(v: Any) -> Any:
    """Plain Python values for JSON: numpy values unwrapped, results as their `to_dict`, non-finite
    floats as None (`perception_gap.jsonsafe.finite_json`, without the list of where they were)."""
    return finite_json(v)[0]


class Result:
    """Shared `to_dict` of the frozen result dataclasses."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-safe plain Python values (None instead of NaN/inf)."""
        return {f.name: json_safe(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]
