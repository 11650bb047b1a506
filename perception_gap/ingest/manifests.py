"""Manifest sources: CSV, JSONL and Parquet manifests of frame sets, and cataloguing them.

A manifest is the user's own list of their frames: its paths are absolute, or relative to the
manifest's folder (or to `root`, `--root DIR`), and may point anywhere, outside that folder too.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perception_gap.errors import InputError
from perception_gap.ingest.entries import DOMAINS, FrameEntry, IndexReport, Progress, index_entries
from perception_gap.ingest.tables import as_float, read_table
from perception_gap.statistics.depth import parse_depth_unit

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

log = logging.getLogger(__name__)

MANIFEST_REQUIRED = ("set", "domain", "rgb", "pair_key")
MANIFEST_OPTIONAL = ("depth", "depth_unit", "episode", "step", "action", "proprio")
STEP_MIN, STEP_MAX = -(2**63), 2**63 - 1  # the catalog stores steps as BIGINT
# Rows of one manifest: every row is held as Python objects while the set is indexed (about
# 1.2 KB at peak for a row of six columns), so the cap keeps one manifest under about 2.5 GB;
# larger collections are split into several manifests.
MAX_MANIFEST_ROWS = 2_000_000


def _number(value: Any, what: str) -> float:
    """One element of an action or proprio vector: a number (or its text), never null or a list."""
    if isinstance(value, (bool, list, tuple, dict)) or value is None or value == "":
        shown = "null" if value is None else json.dumps(value, default=str)[:40]
        raise ValueError(f"{what} is {shown}, expected a number")
    try:
        return as_float(value)
    except ValueError:
        raise ValueError(f"{what} is {str(value)[:40]!r}, expected a number") from None


def _step(value: Any) -> int | None:
    """The `step` column: a whole number within 64 bits (text such as `12` or `12.0` included)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"column 'step' is {str(value)[:40]!r} ({type(value).__name__}), expected a whole number")
    try:
        x = as_float(value) if not isinstance(value, int) else value
    except ValueError:
        raise ValueError(f"column 'step' is {str(value)[:40]!r}, expected a whole number") from None
    if isinstance(x, float) and not (math.isfinite(x) and x == int(x)):
        raise ValueError(f"column 'step' is {str(value)[:40]!r}, expected a whole number")
    if not STEP_MIN <= int(x) <= STEP_MAX:
        raise ValueError(f"column 'step' is {str(value)[:40]!r}, outside the 64-bit range of a step")
    return int(x)


def _vector(row: dict[str, Any], name: str) -> list[float] | None:
    """A manifest's `action` (JSON list) or `action_0..n` columns as floats; None if absent."""
    value = row.get(name)
    if value not in (None, ""):
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ValueError(f"column {name!r} is not a JSON list: {value[:40]!r}") from None
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"column {name!r} is not a list")
        return [_number(v, f"{name}[{i}]") for i, v in enumerate(value)]
    keys = sorted((k for k in row if re.fullmatch(rf"{name}_\d+", str(k))), key=lambda k: int(k.rsplit("_", 1)[1]))
    if not keys:
        return None
    vals = [row[k] for k in keys]
    if all(v in (None, "") for v in vals):
        return None
    return [_number(v, k) for k, v in zip(keys, vals)]


def _cell_or_flag(row: dict[str, Any], column: str, flag_value: str | None, where: str) -> str:
    """A row's `set` or `domain`: the manifest's cell decides; the flag fills an empty or absent one
    and must not contradict a given one (a silently ignored flag would index under another name)."""
    cell = str(row.get(column) or "").strip()
    if flag_value is None or not cell:
        return cell or (flag_value or "")
    if cell != flag_value:
        raise InputError(f"{where}: the manifest's `{column}` column says {cell!r} but `--{column}` says "
                         f"{flag_value!r}; the manifest's column decides: drop `--{column}`, or fix the row.")
    return cell


def read_manifest(path: Path, *, root: Path | None = None, set_name: str | None = None,
                  domain: str | None = None) -> dict[tuple[str, str], list[FrameEntry]]:
    """Parse a manifest into frame entries per (set, domain).

    Args:
        path: the manifest file.
        root: the folder relative `rgb` and `depth` paths start from (default: the manifest's).
        set_name, domain: `--set` and `--domain`: the set and domain of rows whose manifest
            leaves them out (no such column, or an empty cell). A row that names another set or
            domain is refused.

    Raises:
        InputError: unreadable file, more than MAX_MANIFEST_ROWS rows, a missing required column,
            a bad domain, a set named with both domains, or a row contradicting `set_name` or `domain`.
    """
    table = read_table(path, "--manifest", max_rows=MAX_MANIFEST_ROWS)
    given = {"set": set_name, "domain": domain}
    table.require([c for c in MANIFEST_REQUIRED if given.get(c) is None])
    columns, rows = table.columns, table.rows()
    known = set(MANIFEST_REQUIRED) | set(MANIFEST_OPTIONAL)
    extra = sorted(str(c) for c in columns
                   if str(c) not in known and not re.fullmatch(r"(action|proprio)_\d+", str(c)))
    if extra:  # a typo (`dpeth`) would otherwise drop a column silently
        log.warning("manifest %s: ignored column(s) %s (not manifest columns: %s)", path, ", ".join(extra),
                    ", ".join(MANIFEST_REQUIRED + MANIFEST_OPTIONAL))
    base = manifest_root(path, root)
    domains: dict[str, str] = {}
    out: dict[tuple[str, str], list[FrameEntry]] = {}
    for i, row in enumerate(rows, 1):
        where = f"Manifest {str(path)!r} row {i}"
        row_set = _cell_or_flag(row, "set", set_name, where)
        row_domain = _cell_or_flag(row, "domain", domain, where)
        if not row_set:
            raise InputError(f"{where}: empty `set`.")
        if row_domain not in DOMAINS:
            raise InputError(f"{where}: expected `domain` in {DOMAINS}, got {row_domain!r}.")
        if domains.setdefault(row_set, row_domain) != row_domain:
            raise InputError(f"Manifest {str(path)!r} names set {row_set!r} as both domains "
                             f"({domains[row_set]!r} and {row_domain!r}).")
        entry = FrameEntry(rgb_path=base, pair_key=None)
        rgb = str(row.get("rgb") or "").strip()
        entry.rgb_path = _resolve(base, rgb) if rgb else base / f"<row {i}: empty rgb>"
        if not rgb:
            entry.error = "empty `rgb` column"
        key = row.get("pair_key")
        entry.pair_key = None if key in (None, "") else str(key)
        if entry.pair_key is None and entry.error is None:
            entry.error = "empty `pair_key`"
        ep = row.get("episode")
        entry.episode = None if ep in (None, "") else str(ep)
        try:
            entry.step = _step(row.get("step"))
            entry.action = _vector(row, "action")
            entry.proprio = _vector(row, "proprio")
            unit = row.get("depth_unit")
            if unit not in (None, ""):
                parse_depth_unit(str(unit))
                entry.depth_unit = str(unit)
        except ValueError as e:
            entry.error = entry.error or f"bad value: {e}"
        depth = row.get("depth")
        if depth not in (None, ""):
            entry.depth_path = _resolve(base, str(depth).strip())
        out.setdefault((row_set, row_domain), []).append(entry)
    return out


def manifest_root(manifest: Path, root: Path | None = None) -> Path:
    """The absolute folder a manifest's relative paths start from; InputError when `root` is no folder."""
    if root is None:
        return Path(os.path.abspath(manifest)).parent
    if not root.is_dir():
        raise InputError(f"Expected `--root` to be an existing folder, got {str(root)!r} "
                         f"({'a file' if root.exists() else 'not found'}).")
    return Path(os.path.abspath(root))


def _resolve(base: Path, name: str) -> Path:
    """A manifest path: absolute as written (`~` expanded), or relative to `base`; normalized."""
    p = Path(name).expanduser()
    return Path(os.path.normpath(p if p.is_absolute() else base / p))


def index_manifest(catalog: Catalog, manifest: Path, *, root: Path | None = None, tags: list[str] | None = None,
                   workers: int | None = None, progress: Progress | None = None, set_name: str | None = None,
                   domain: str | None = None) -> list[IndexReport]:
    """Catalogue every set a manifest names (relative paths start at `root`, default the manifest's folder).

    `set_name` and `domain` fill rows the manifest leaves without them (see `read_manifest`).
    """
    groups = read_manifest(manifest, root=root, set_name=set_name, domain=domain)
    base = manifest_root(manifest, root)
    for set_name, domain in groups:
        existing = catalog.get_set(set_name)
        if existing is not None and existing["domain"] != domain:
            raise InputError(f"Set {set_name!r} is already indexed as domain {existing['domain']!r}; the manifest says {domain!r}.")
    return [index_entries(catalog, s, d, entries, source=f"manifest:{manifest.resolve()}", tags=tags,
                          root=str(base), workers=workers, progress=progress)
            for (s, d), entries in groups.items()]
