"""Why an encoder has no embedding of a whole set, said in words a user can act on.

`run` records, per encoder, metrics it could not compute (`insufficient`). When an encoder has no
embedding at all of one set, the usual cause is not too few frames but frames no image encoder
reads: observation arrays stored as floats (already scaled or normalized), which `embed` refuses
rather than guess their constants. `refusal_findings` names the dtype and what to do, and takes
those entries' "all metrics" reason off the generic `insufficient_data` list.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from perception_gap.findings import Finding

# What image encoders read (`perception_gap.embed._to_uint8`): anything else is refused.
ENCODER_DTYPES = ("uint8", "uint16")
ALL_METRICS = "all metrics"


def _refused_sides(entry: Mapping[str, Any]) -> list[str]:
    """The sides of which the encoder has no embedding at all."""
    if ALL_METRICS not in (entry.get("insufficient") or {}):
        return []
    return [side for side in ("sim", "real") if not entry.get(f"n_{side}")]


def refusal_findings(entries: list[dict[str, Any]], dtypes: Mapping[str, Mapping[str, int]],
                     sets: Mapping[str, str]) -> tuple[list[Finding], list[dict[str, Any]]]:
    """One `insufficient_data` info per set that encoders refused for its frames' dtype.

    Args:
        entries: the run's `encoders[]` entries (`name`, `n_sim`, `n_real`, `insufficient`).
        dtypes: set name -> {dtype: frame count} (`stats[NAME]["dtypes"]`).
        sets: role (`sim`, `real`) -> set name.

    Returns:
        (findings, entries): the entries are copies without the "all metrics" reason where a
        finding here explains it (the rest unchanged), for `insufficient_findings`.
    """
    refused: dict[str, list[str]] = {}
    for e in entries:
        for side in _refused_sides(e):
            refused.setdefault(side, []).append(e["name"])
    findings, explained = [], set()
    for side, names in refused.items():
        name = sets[side]
        counts = Counter({str(k): int(v) for k, v in (dtypes.get(name) or {}).items()})
        odd = {k: v for k, v in counts.items() if k not in ENCODER_DTYPES}
        if not odd:
            continue  # not a dtype refusal (decode errors, channels): the generic reason stands
        n, total = sum(odd.values()), sum(counts.values())
        kinds = " and ".join(sorted(odd))
        who = (f"every encoder ({', '.join(names)})" if len(names) == len(entries) else ", ".join(names))
        findings.append(Finding(
            code="insufficient_data", severity="info",
            title=(f"No embedding metric computed: {who} refused the {kinds} observation arrays of the {side} set "
                   f"{name!r} ({n} of {total} frames); image encoders read 8- or 16-bit images only"),
            evidence={"metric": ALL_METRICS, "set": name, "side": side, "dtypes": dict(odd), "n_frames": total,
                      "encoders": names, "encoder_dtypes": list(ENCODER_DTYPES)},
            action=(f"Index the {side} frames as 8- or 16-bit images: the PNG or JPEG files the camera or renderer "
                    "wrote, or these arrays saved as uint8 once their scaling is undone (round(x * 255) for floats "
                    "in [0, 1], round(x) for floats in [0, 255], round((x * std + mean) * 255) for normalized "
                    "ones); "
                    "an encoder never guesses an array's scaling. The statistics findings need no encoder."),
            score=0.0))
        explained.update((n_, side) for n_ in names)
    out = []
    for e in entries:
        sides = _refused_sides(e)
        if sides and all((e["name"], side) in explained for side in sides):
            e = {**e, "insufficient": {k: v for k, v in e["insufficient"].items() if k != ALL_METRICS}}
        out.append(e)
    return findings, out
