"""Folder sources: listing a folder's frames (RGB, depth maps, pair keys, episodes, steps) and cataloguing them."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from perception_gap.errors import InputError
from perception_gap.ingest.entries import (
    FrameEntry,
    IndexReport,
    Progress,
    index_entries,
    is_utf8,
    utf8_safe,
    validate_domain,
    validate_set_name,
)
from perception_gap.ingest.frames import DEPTH_EXTS, EXR_EXTS, RGB_EXTS
from perception_gap.statistics.depth import parse_depth_unit

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

log = logging.getLogger(__name__)

_DEPTH_SUFFIXES = ("_depth", "-depth", ".depth")
_TRAILING_INT = re.compile(r"(\d+)(?!.*\d)")


def _walk(root: Path) -> Iterator[Path]:
    """Every regular file below root, sorted; directory symlinks are not followed (no loops)."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=lambda e: log.warning("cannot list %s: %s", e.filename, e.strerror)):
        dirnames.sort()
        # a folder named like a frame (`x.png`) is listed too, so it is reported, not ignored
        names = sorted(filenames + [d for d in dirnames if Path(d).suffix.lower() in RGB_EXTS])
        for name in names:
            yield Path(dirpath) / name


def _is_depth_name(rel: Path) -> bool:
    stem = rel.stem.lower()
    return rel.suffix.lower() in EXR_EXTS or stem.endswith(_DEPTH_SUFFIXES) or (
        len(rel.parts) > 1 and rel.parts[0].lower() == "depth")


def _outside(path: Path, real_root: str) -> str | None:
    """Why a symlink below the folder is not read: it resolves outside the folder (None if inside).

    One rule for every source: what is read must lie in the folder once links are resolved, as
    a manifest path written outside its folder is refused. Only links need resolving (the walk
    does not follow linked folders), so a plain file costs one lstat.
    """
    if not os.path.islink(path):
        return None
    target = os.path.realpath(path)
    if target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep):
        return None
    return f"symbolic link resolves outside the folder (to {utf8_safe(target)})"


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
    real_root = os.path.realpath(root)
    for path, rel in rgb:
        key_path = rel.with_suffix("").as_posix()
        entry = FrameEntry(rgb_path=path, pair_key=key_path, depth_unit=depth_unit)
        entry.error = _outside(path, real_root)
        if not is_utf8(str(rel)):
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
        if entry.depth_path is not None and entry.error is None and _outside(entry.depth_path, real_root):
            entry.error = f"depth: {_outside(entry.depth_path, real_root)}"
        entries.append(entry)
    return entries


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
