"""What the workflows share: set-name checks against the catalog."""

from __future__ import annotations

from perception_gap.catalog import Catalog
from perception_gap.errors import InputError


def check_sets(catalog: Catalog, names: list[str], flag: dict[str, str]) -> None:
    for name in names:
        if catalog.get_set(name) is None:
            known = ", ".join(repr(s) for s in catalog.list_sets()) or "none indexed yet"
            raise InputError(f"Unknown set {name!r} for {flag[name]} (known: {known}).")

