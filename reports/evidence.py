"""A finding's evidence as a reader sees it: human labels and units, the telling numbers first.

results.json keeps its keys (`stops_sim_minus_real`, `flips.n_pairs`, ...); the report shows each as
a label with its unit (`exposure, sim − real (stops)`), the raw key kept as a tooltip. The first
`TOP` rows that measure the gap are shown; bookkeeping (basis, sample sizes, thresholds, methods)
and the rest fold into a `<details>` block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from perception_gap.diagnoses.checks import evidence_labels
from perception_gap.reports.format import compact

TOP = 4

# Exact labels: each check's own (its `Check.labels`), then keys several findings share; anything
# else is humanized by rule.
LABELS = {
    **evidence_labels(),
    "ap_sim": "AP on sim", "ap_real": "AP on real",
    "n_pairs": "pairs", "basis": "compared on",
}
_BOOKKEEPING = re.compile(r"(^|\.)(basis|n_\w+|threshold\w*|method|source|level|n_boot|n_valid|compared_in|"
                          r"\w*declared\w*|\w*inferred\w*|iou|score_threshold|likely_wrong_side|unit_conflict)$")
_UNITS = ((r"_stops$|^stops_", "stops"), (r"(^|_)ratio(_|$)", "ratio"), (r"dropout|_rate$|_frac(tion)?$", "fraction"),
          (r"(^|_)px$|_pixels$", "px"), (r"_m$", "m"))


# The settled reading of a finding (diagnoses/verdicts.py): shown as one line beside the title
# (`reading`), so not repeated in the evidence table.
READING_KEYS = frozenset({"value", "ci", "bar", "bug_bar", "unit", "margin", "stability", "n_resamples",
                          "bug_basis", "borderline", "stability_basis", "read_without"})


def reading(ev: Mapping[str, Any]) -> str:
    """`value [low, high] unit · bar B (bug beyond C) · fires in S of N resamples` for a settled
    finding; the empty string for one without a settled value or stability."""
    parts = []
    v, c, unit = ev.get("value"), ev.get("ci"), ev.get("unit")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        text = compact(v)
        if isinstance(c, (list, tuple)) and len(c) == 2 and all(isinstance(x, (int, float)) for x in c):
            text += f" [{compact(c[0])}, {compact(c[1])}]"
        parts.append(f"{text} {unit}" if unit else text)
        if isinstance(ev.get("bar"), (int, float)):
            bar = f"bar {compact(ev['bar'])}"
            if isinstance(ev.get("bug_bar"), (int, float)):
                bar += f" (a bug beyond {compact(ev['bug_bar'])})"
            parts.append(bar)
    st, n = ev.get("stability"), ev.get("n_resamples")
    if isinstance(st, (int, float)) and isinstance(n, int) and n > 0:
        word = "borderline: " if ev.get("borderline") else ""
        parts.append(f"{word}fires in {st:.0%} of {n} resamples")
    if ev.get("bug_basis"):
        parts.append(f"bug by {ev['bug_basis']}")
    return " · ".join(parts)


def label(key: str) -> str:
    """A human label with its unit for an evidence key (`flips.sim_only` -> `flips: sim only`)."""
    if key in LABELS:
        return LABELS[key]
    head, _, tail = key.rpartition(".")
    words = tail.replace("_minus_", " \u2212 ").replace("_over_", " / ").replace("_", " ")
    words = re.sub(r"^n ", "number of ", words)
    unit = next((u for pat, u in _UNITS if re.search(pat, tail)), None)
    text = f"{head.replace('_', ' ')}: {words}" if head else words
    return f"{text} ({unit})" if unit and unit not in words else text


def rows(evidence: Mapping[str, Any], text_limit: int, cap: int) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]], int]:
    """(telling rows, folded rows, rows left out) for a flattened evidence mapping; each row is
    (label, raw key, value text). Order: telling numbers in results order, then the rest."""
    flat: list[tuple[str, Any]] = []
    for k, v in evidence.items():
        if k in READING_KEYS:
            continue
        if isinstance(v, Mapping):
            for k2, v2 in v.items():
                if isinstance(v2, list) and v2 and all(isinstance(x, Mapping) for x in v2):
                    flat.append((f"{k}.{k2}", f"{len(v2)} (listed below)"))
                else:
                    flat.append((f"{k}.{k2}", v2))
        else:
            flat.append((str(k), v))
    telling = [kv for kv in flat if not _BOOKKEEPING.search(kv[0]) and isinstance(kv[1], (int, float, list))]
    top = telling[:TOP]
    rest = [kv for kv in flat if kv not in top]
    shown = [(label(k), k, compact(v, text_limit)) for k, v in (top + rest)[:cap]]
    return shown[: len(top)], shown[len(top):], max(0, len(flat) - cap)
