"""What the workflows share: set-name checks against the catalog, an encoder's identity in results.json."""

from __future__ import annotations

from typing import Any

from perception_gap.catalog import Catalog
from perception_gap.errors import InputError


def check_sets(catalog: Catalog, names: list[str], flag: dict[str, str]) -> None:
    with catalog.session():
        for name in names:
            if catalog.get_set(name) is None:
                known = ", ".join(repr(s) for s in catalog.list_sets()) or "none indexed yet"
                raise InputError(f"Unknown set {name!r} for {flag[name]} (known: {known}).")



def encoder_identity(encoder: Any, *, label: str | None = None, candidate: str | None = None) -> dict[str, Any]:
    """The identity keys of an `encoders[i]` entry: name (a sweep candidate's label, else the encoder's
    name), `encoder` (the registered name, for a candidate), family, dim, fingerprint, preprocessing."""
    out: dict[str, Any] = {"name": label or encoder.name}
    if candidate is not None:
        out["encoder"] = candidate
    out.update(family=encoder.family, dim=encoder.dim, fingerprint=encoder.fingerprint,
               preprocessing=encoder.preprocessing.to_dict())
    return out
