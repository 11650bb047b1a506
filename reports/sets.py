"""The report's sets table and pairing line, read through the typed sections of perception_gap.schema.

An entry that is not a whole section (a hand-made or partial results.json) is shown with the keys
it has, as the rest of the report does.
"""

from __future__ import annotations

from typing import Any, Mapping

from perception_gap.errors import InputError
from perception_gap.reports.format import compact
from perception_gap.schema import Pairs, SetInfo

_SET_KEYS = ("domain", "role", "n_frames", "n_usable", "n_skipped", "tags")


def set_rows(sets: Mapping[str, Any], limit: int) -> list[dict[str, Any]]:
    """One row per set (the first `limit`): name, domain, role, frame counts, tags (shortened)."""
    rows = []
    for name, raw in list(sets.items())[:limit]:
        try:
            s = SetInfo.from_dict(raw, where=f"sets.{name}")
            row = {"domain": s.domain, "role": s.role, "n_frames": s.n_frames, "n_usable": s.n_usable,
                   "n_skipped": s.n_skipped, "tags": s.tags}
        except InputError:
            row = {k: raw.get(k) for k in _SET_KEYS} if isinstance(raw, Mapping) else dict.fromkeys(_SET_KEYS)
        rows.append({"name": name, **row, "tags": compact(row["tags"], 200)})
    return rows


def pairs_line(raw: Any) -> Pairs | Mapping[str, Any] | None:
    """The `pairs` section as the template reads it (`pairs.n_pairs`, ...); None when absent."""
    try:
        return Pairs.from_dict(raw, where="pairs")
    except InputError:
        return raw if isinstance(raw, Mapping) and raw else None
