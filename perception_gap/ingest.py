"""Ingest: folders and manifests of frames into the catalog, incrementally.

Cataloguing reads each new or changed file once: it hashes the bytes (the content hash keys
every cached computation) and parses the header (size, mode, dtype, EXIF orientation)
without decoding pixels. Files whose size and modification time are unchanged since the last
index are not read at all. Unreadable files are recorded as skipped with their reason and
indexing goes on.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from perception_gap.catalog import Catalog
from perception_gap.errors import FrameError, InputError
from perception_gap.frames import DEPTH_EXTS, EXR_EXTS, RGB_EXTS, probe, read_bytes
from perception_gap.stats import parse_depth_unit

log = logging.getLogger(__name__)

DOMAINS = ("sim", "real")
MANIFEST_REQUIRED = ("set", "domain", "rgb", "pair_key")
MANIFEST_OPTIONAL = ("depth", "depth_unit", "episode", "step", "action", "proprio")
BATCH = 4096
Progress = Callable[[int, int], None]

_DEPTH_SUFFIXES = ("_depth", "-depth", ".depth")
_TRAILING_INT = re.compile(r"(\d+)(?!.*\d)")


@dataclass
class FrameEntry:
    """One frame as listed by a folder scan or a manifest row, before it is read."""

    rgb_path: Path
    pair_key: str | None
    episode: str | None = None
    step: int | None = None
    depth_path: Path | None = None
    depth_unit: str | None = None
    action: list[float] | None = None
    proprio: list[float] | None = None
    error: str | None = None  # a listing-time problem (bad pair key, path outside folder, ...)


@dataclass(frozen=True)
class IndexReport:
    """What one `index` call did to one set.

    Attributes:
        set_name, domain: the set.
        listed: frames listed by the folder or manifest.
        new, changed, unchanged, vanished: incremental bookkeeping (vanished are marked `missing`).
        usable: frames of the set now usable (status ok).
        skipped: (path, reason) for every frame of this listing that is not usable.
    """

    set_name: str
    domain: str
    listed: int
    new: int
    changed: int
    unchanged: int
    vanished: int
    usable: int
    skipped: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def content_hash(data: bytes) -> str:
    """128-bit BLAKE2b of a file's bytes, hex."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def validate_set_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"Expected a non-empty set name, got {name!r}.")
    if any(ord(ch) < 32 for ch in name):
        raise InputError(f"Expected a set name without control characters, got {name!r}.")
    return name


def validate_domain(domain: str) -> str:
    if domain not in DOMAINS:
        raise InputError(f"Expected `domain` in {DOMAINS}, got {domain!r}.")
    return domain


# -- folder listing ----------------------------------------------------------------------------

def _walk(root: Path) -> Iterator[Path]:
    """Every regular file below root, sorted; directory symlinks are not followed (no loops)."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=lambda e: log.warning("cannot list %s: %s", e.filename, e.strerror)):
        dirnames.sort()
        # a folder named like a frame (`x.png`) is listed too, so it is reported, not ignored
        names = sorted(filenames + [d for d in dirnames if Path(d).suffix.lower() in RGB_EXTS])
        for name in names:
            yield Path(dirpath) / name


def _is_utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes of a file name surface as lone surrogates
        return False
    return True


def utf8_safe(s: str) -> str:
    """A file name as storable text: undecodable bytes shown as \\xNN escapes."""
    return s if _is_utf8(s) else s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _is_depth_name(rel: Path) -> bool:
    stem = rel.stem.lower()
    return rel.suffix.lower() in EXR_EXTS or stem.endswith(_DEPTH_SUFFIXES) or (
        len(rel.parts) > 1 and rel.parts[0].lower() == "depth")


def scan_folder(root: Path, *, pair_regex: str | None = None, depth_unit: str | None = None) -> list[FrameEntry]:
    """List the frames of a folder.

    RGB frames are images and `.npy` arrays anywhere below `root`. A frame's depth map, when
    present, is `depth/<same relative path>.{png,npy,exr,tif}` or a sibling named
    `<stem>_depth.*` (or `-depth`, `.depth`). The pair key is the path relative to `root`
    without its extension (the file stem for a flat folder), or the first group of
    `pair_regex` (named group `key` if present) searched in that relative path without extension. The episode is
    the relative parent folder (None for a flat folder); the step, the last integer in the stem.
    """
    if not root.exists():
        raise InputError(f"Expected `PATH` to be an existing folder, got {str(root)!r} (not found).")
    root = Path(os.path.abspath(root))
    if not root.is_dir():
        raise InputError(f"Expected `PATH` to be a folder, got {str(root)!r} (a file).")
    regex = None
    if pair_regex is not None:
        try:
            regex = re.compile(pair_regex)
        except re.error as e:
            raise InputError(f"Expected `--pair-regex` to be a valid regular expression, got {pair_regex!r} ({e}).") from None
    rgb: list[tuple[Path, Path]] = []
    depth_by_key: dict[str, Path] = {}
    for path in _walk(root):
        rel = path.relative_to(root)
        ext = path.suffix.lower()
        if _is_depth_name(rel) and ext in DEPTH_EXTS:
            parts = rel.parts[1:] if rel.parts[0].lower() == "depth" and len(rel.parts) > 1 else rel.parts
            key_path = Path(*parts).with_suffix("")
            stem = key_path.name
            for suf in _DEPTH_SUFFIXES:
                if stem.lower().endswith(suf):
                    key_path = key_path.with_name(stem[: -len(suf)])
                    break
            depth_by_key[key_path.as_posix()] = path
            continue
        if ext in RGB_EXTS:
            rgb.append((path, rel))
        elif path.name.startswith("."):
            continue
        else:
            rgb.append((path, rel))  # recorded as skipped: unsupported type
    entries = []
    for path, rel in rgb:
        key_path = rel.with_suffix("").as_posix()
        entry = FrameEntry(rgb_path=path, pair_key=key_path, depth_unit=depth_unit)
        if not _is_utf8(str(rel)):
            entry.pair_key = utf8_safe(key_path)
            entry.error = "file name is not valid UTF-8 (rename the file; the catalog stores names as UTF-8 text)"
            entries.append(entry)
            continue
        if regex is not None:
            m = regex.search(key_path)
            if m is None:
                entry.pair_key = None
                entry.error = f"file name does not match --pair-regex {pair_regex!r}"
            else:
                entry.pair_key = m.group("key") if "key" in regex.groupindex else (m.group(1) if m.groups() else m.group(0))
        if len(rel.parts) > 1:
            entry.episode = Path(*rel.parts[:-1]).as_posix()
        m = _TRAILING_INT.search(rel.stem)
        entry.step = int(m.group(1)) if m and len(m.group(1)) < 18 else None
        entry.depth_path = depth_by_key.get(key_path)
        entries.append(entry)
    return entries


# -- manifests -----------------------------------------------------------------------------------

def _read_manifest_rows(path: Path) -> list[dict[str, Any]]:
    ext = path.suffix.lower()
    try:
        if ext == ".csv":
            with open(path, newline="", encoding="utf-8") as f:
                return [dict(r) for r in csv.DictReader(f)]
        if ext in (".jsonl", ".ndjson"):
            rows = []
            with open(path, encoding="utf-8") as f:
                for i, line in enumerate(f, 1):
                    if line.strip():
                        obj = json.loads(line)
                        if not isinstance(obj, dict):
                            raise InputError(f"Manifest {str(path)!r} line {i}: expected a JSON object, got {type(obj).__name__}.")
                        rows.append(obj)
            return rows
        if ext == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
    except InputError:
        raise
    except FileNotFoundError:
        raise InputError(f"Expected `--manifest` to be an existing file, got {str(path)!r} (not found).") from None
    except (UnicodeDecodeError, json.JSONDecodeError, csv.Error, OSError, ValueError) as e:
        raise InputError(f"Cannot read manifest {str(path)!r}: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    except Exception as e:  # pyarrow's errors
        raise InputError(f"Cannot read manifest {str(path)!r}: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    raise InputError(f"Expected `--manifest` to end in .csv, .jsonl or .parquet, got {str(path)!r}.")


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
        return [float(v) for v in value]
    keys = sorted((k for k in row if re.fullmatch(rf"{name}_\d+", str(k))), key=lambda k: int(k.rsplit("_", 1)[1]))
    if not keys:
        return None
    vals = [row[k] for k in keys]
    if all(v in (None, "") for v in vals):
        return None
    return [float(v) for v in vals]


def read_manifest(path: Path) -> dict[tuple[str, str], list[FrameEntry]]:
    """Parse a manifest into frame entries per (set, domain).

    Raises:
        InputError: unreadable file, a missing required column, a bad domain, or a set named
            with both domains.
    """
    rows = _read_manifest_rows(path)
    if not rows:
        raise InputError(f"Manifest {str(path)!r} has no rows.")
    columns = set().union(*(r.keys() for r in rows))
    missing = [c for c in MANIFEST_REQUIRED if c not in columns]
    if missing:
        raise InputError(f"Manifest {str(path)!r} is missing required column(s) {', '.join(missing)} (has: {', '.join(sorted(map(str, columns)))}).")
    known = set(MANIFEST_REQUIRED) | set(MANIFEST_OPTIONAL)
    extra = sorted(str(c) for c in columns
                   if str(c) not in known and not re.fullmatch(r"(action|proprio)_\d+", str(c)))
    if extra:  # a typo (`dpeth`) would otherwise drop a column silently
        log.warning("manifest %s: ignored column(s) %s (not manifest columns: %s)", path, ", ".join(extra),
                    ", ".join(MANIFEST_REQUIRED + MANIFEST_OPTIONAL))
    base = Path(os.path.abspath(path)).parent
    domains: dict[str, str] = {}
    out: dict[tuple[str, str], list[FrameEntry]] = {}
    for i, row in enumerate(rows, 2 if path.suffix.lower() == ".csv" else 1):
        set_name = str(row.get("set") or "").strip()
        domain = str(row.get("domain") or "").strip()
        if not set_name:
            raise InputError(f"Manifest {str(path)!r} row {i}: empty `set`.")
        if domain not in DOMAINS:
            raise InputError(f"Manifest {str(path)!r} row {i}: expected `domain` in {DOMAINS}, got {domain!r}.")
        if domains.setdefault(set_name, domain) != domain:
            raise InputError(f"Manifest {str(path)!r} names set {set_name!r} as both domains ({domains[set_name]!r} and {domain!r}).")
        entry = FrameEntry(rgb_path=base, pair_key=None)
        rgb = str(row.get("rgb") or "").strip()
        rgb_path = Path(os.path.normpath(base / rgb)) if rgb else None
        entry.rgb_path = rgb_path or base / f"<row {i}: empty rgb>"
        if not rgb:
            entry.error = "empty `rgb` column"
        elif not _inside(rgb_path, base):
            entry.error = "path points outside the manifest's folder"
        key = row.get("pair_key")
        entry.pair_key = None if key in (None, "") else str(key)
        if entry.pair_key is None and entry.error is None:
            entry.error = "empty `pair_key`"
        ep = row.get("episode")
        entry.episode = None if ep in (None, "") else str(ep)
        try:
            step = row.get("step")
            entry.step = None if step in (None, "") else int(float(step))
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
            dp = Path(os.path.normpath(base / str(depth)))
            if not _inside(dp, base):
                entry.error = entry.error or "depth path points outside the manifest's folder"
            entry.depth_path = dp
        out.setdefault((set_name, domain), []).append(entry)
    return out


def _inside(path: Path, base: Path) -> bool:
    try:
        path.relative_to(base)
        return True
    except ValueError:
        return False


# -- cataloguing ---------------------------------------------------------------------------------

def _stat(path: Path | None) -> tuple[int | None, int | None]:
    if path is None:
        return None, None
    try:
        st = path.stat()
    except OSError:
        return None, None
    return st.st_size, st.st_mtime_ns


def _read_entry(entry: FrameEntry, set_name: str) -> dict[str, Any]:
    """Hash and probe one listed frame (and its depth map) into a catalog row."""
    row: dict[str, Any] = {
        "set_name": set_name, "rgb_path": utf8_safe(str(entry.rgb_path)), "pair_key": entry.pair_key,
        "episode": entry.episode, "step": entry.step,
        "depth_path": utf8_safe(str(entry.depth_path)) if entry.depth_path else None,
        "depth_unit": entry.depth_unit, "action": entry.action, "proprio": entry.proprio,
        "status": "ok", "error": None,
    }
    row["file_size"], row["mtime_ns"] = _stat(entry.rgb_path)
    row["depth_size"], row["depth_mtime_ns"] = _stat(entry.depth_path)
    if entry.error:
        row.update(status="skipped", error=entry.error)
        return row
    try:
        data = read_bytes(entry.rgb_path)
        header = probe(entry.rgb_path, data)
        row["content_hash"] = content_hash(data)
        row.update(width=header.width, height=header.height, format=header.format, mode=header.mode,
                   dtype=header.dtype, channels=header.channels, exif_orientation=header.exif_orientation)
        for name in ("action", "proprio"):
            v = row[name]
            if v is not None and not all(math.isfinite(x) for x in v):
                raise FrameError(f"non-finite value in `{name}`")
    except FrameError as e:
        row.update(status="skipped", error=str(e))
        return row
    if entry.depth_path is not None:
        try:
            ddata = read_bytes(entry.depth_path)
            dheader = probe(entry.depth_path, ddata)
            row["depth_hash"] = content_hash(ddata)
            if (dheader.width, dheader.height) != (header.width, header.height):
                log.info("depth %s is %dx%d, rgb is %dx%d", entry.depth_path, dheader.width, dheader.height, header.width, header.height)
        except FrameError as e:
            row.update(status="skipped", error=f"depth: {e}")
    return row


def _unchanged(entry: FrameEntry, old: dict[str, Any] | None) -> bool:
    if old is None or old["status"] == "missing":
        return False
    size, mtime = _stat(entry.rgb_path)
    dsize, dmtime = _stat(entry.depth_path)
    same_files = (size, mtime) == (old["file_size"], old["mtime_ns"]) and (
        (str(entry.depth_path) if entry.depth_path else None) == old["depth_path"]
        and (dsize, dmtime) == (old["depth_size"], old["depth_mtime_ns"]))
    same_meta = (entry.pair_key == old["pair_key"] and entry.episode == old["episode"]
                 and entry.step == old["step"] and entry.depth_unit == old["depth_unit"]
                 and entry.action == old["action"] and entry.proprio == old["proprio"])
    return same_files and same_meta and size is not None


def _mark_duplicate_keys(rows: list[dict[str, Any]], kept: dict[str, str]) -> None:
    """Two usable frames of one set with one pair key: keep the first path, skip the others."""
    for row in sorted(rows, key=lambda r: r["rgb_path"]):
        if row["status"] != "ok":
            continue
        first = kept.setdefault(row["pair_key"], row["rgb_path"])
        if first != row["rgb_path"]:
            row.update(status="skipped", error=f"duplicate pair key {row['pair_key']!r} (also {first})")


def index_entries(catalog: Catalog, set_name: str, domain: str, entries: list[FrameEntry], *,
                  source: str | None = None, tags: list[str] | None = None, root: str | None = None,
                  workers: int | None = None, progress: Progress | None = None) -> IndexReport:
    """Catalogue a set's listing incrementally; returns what changed.

    Frames already catalogued with the same size, mtime and metadata are not read again.
    Vanished frames are marked `missing`. Rows are written in batches of `BATCH`, each one
    transaction, so an interrupted call keeps every finished batch.
    """
    validate_set_name(set_name)
    validate_domain(domain)
    catalog.ensure_set(set_name, domain, source=source, tags=tags, root=root)
    old = catalog.existing_frames(set_name)
    listed: dict[str, FrameEntry] = {}
    repeats: list[tuple[str, str]] = []  # one file named by several manifest rows: one catalog row
    for e in entries:
        p = utf8_safe(str(e.rgb_path))
        if p in listed:
            repeats.append((p, f"the same file is listed again (pair key {e.pair_key!r}); its first listing "
                               f"(pair key {listed[p].pair_key!r}) is kept"))
        else:
            listed[p] = e
    todo = [e for p, e in listed.items() if not _unchanged(e, old.get(p))]
    n_new = sum(1 for e in todo if utf8_safe(str(e.rgb_path)) not in old)
    vanished = [p for p, r in old.items() if p not in listed and r["status"] != "missing"]
    todo_paths = {utf8_safe(str(e.rgb_path)) for e in todo}  # built once: rebuilt per row it was O(old x todo)
    kept = {r["pair_key"]: p for p, r in old.items()
            if p in listed and r["status"] == "ok" and p not in todo_paths}
    done = 0
    with ThreadPoolExecutor(max_workers=max(1, workers or 4)) as pool:
        for start in range(0, len(todo), BATCH):
            chunk = todo[start : start + BATCH]
            rows = list(pool.map(lambda e: _read_entry(e, set_name), chunk))
            _mark_duplicate_keys(rows, kept)
            catalog.write_frames(rows)
            done += len(chunk)
            if progress:
                progress(done, len(todo))
    catalog.mark_missing(set_name, vanished)
    counts = catalog.set_counts(set_name)
    skipped = tuple((s["path"], s["reason"]) for s in catalog.skipped_frames(set_name) if s["path"] in listed)
    return IndexReport(set_name=set_name, domain=domain, listed=len(entries), new=n_new,
                       changed=len(todo) - n_new, unchanged=len(listed) - len(todo),
                       vanished=len(vanished), usable=counts["ok"], skipped=skipped + tuple(repeats))


def index_folder(catalog: Catalog, root: Path, set_name: str, domain: str, *,
                 pair_regex: str | None = None, depth_unit: str | None = None,
                 tags: list[str] | None = None, workers: int | None = None,
                 progress: Progress | None = None) -> IndexReport:
    """Catalogue a folder of frames as one set (see `scan_folder` for the conventions)."""
    validate_set_name(set_name)
    validate_domain(domain)
    if depth_unit is not None:
        try:
            parse_depth_unit(depth_unit)
        except ValueError as e:
            raise InputError(str(e).replace("`depth_unit`", "`--depth-unit`")) from None
    entries = scan_folder(root, pair_regex=pair_regex, depth_unit=depth_unit)
    return index_entries(catalog, set_name, domain, entries, source=f"folder:{root.resolve()}",
                         tags=tags, root=str(root.resolve()), workers=workers, progress=progress)


def index_manifest(catalog: Catalog, manifest: Path, *, tags: list[str] | None = None,
                   workers: int | None = None, progress: Progress | None = None) -> list[IndexReport]:
    """Catalogue every set a manifest names."""
    groups = read_manifest(manifest)
    for set_name, domain in groups:
        existing = catalog.get_set(set_name)
        if existing is not None and existing["domain"] != domain:
            raise InputError(f"Set {set_name!r} is already indexed as domain {existing['domain']!r}; the manifest says {domain!r}.")
    return [index_entries(catalog, s, d, entries, source=f"manifest:{manifest.resolve()}", tags=tags,
                          root=str(manifest.resolve().parent), workers=workers, progress=progress)
            for (s, d), entries in groups.items()]
