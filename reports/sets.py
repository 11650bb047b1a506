"""The report's sets table and pairing line, read through the typed sections of perception_gap.schema.

An entry that is not a whole section (a hand-made or partial results.json) is shown with the keys
it has, as the rest of the report does (`reports.reading`).
"""

from __future__ import annotations

from typing import Any, Mapping

from perception_gap.reports.format import compact
from perception_gap.reports.reading import blank, given, section
from perception_gap.schema import Pairs, SetInfo


def set_rows(sets: Mapping[str, Any], limit: int) -> list[dict[str, Any]]:
    """One row per set (the first `limit`): name, domain, role, frame counts, tags (shortened)."""
    rows = []
    for name, raw in list(sets.items())[:limit]:
        s = section(SetInfo, raw) or blank(SetInfo)
        rows.append({"name": name, "domain": s.domain, "role": s.role, "n_frames": s.n_frames, "n_usable": s.n_usable,
                     "n_skipped": s.n_skipped, "tags": compact(s.tags, 200)})
    return rows


def pairs_line(raw: Any) -> Pairs | None:
    """The `pairs` section as the template reads it (`pairs.n_pairs`, ...); None when absent or empty."""
    p = section(Pairs, raw)
    return p if given(p) else None
