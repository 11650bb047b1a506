"""Folder sources: listing a folder's frames (RGB, depth maps, pair keys, episodes, steps) and cataloguing them."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
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
from perception_gap.ingest.frames import DEPTH_EXTS, EXR_EXTS, RGB_EXTS, not_a_folder
from perception_gap.ingest.steps import STEP_SOURCES, repeated_steps
from perception_gap.statistics.depth import parse_depth_unit

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

log = logging.getLogger(__name__)

_DEPTH_SUFFIXES = ("_depth", "-depth", ".depth")
_COLOR_SUFFIXES = ("_color", "-color", "_colour", "-colour", "_rgb", "-rgb")
DEPTH_DIR = "depth"
COLOR_DIRS = ("color", "colour", "rgb", "image", "images")
_TRAILING_INT = re.compile(r"(\d+)(?!.*\d)")


@dataclass(frozen=True)
class FolderScan:
    """A folder's listing.

    Attributes:
        entries: the frames, in path order (depth maps attached).
        unmatched_depth: depth maps that no RGB frame claimed (relative paths, sorted).
    """

    entries: list[FrameEntry]
    unmatched_depth: tuple[str, ...] = ()


def _walk(root: Path) -> Iterator[Path]:
    """Every regular file below root, sorted; directory symlinks are not followed (no loops)."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=lambda e: log.warning("cannot list %s: %s", e.filename, e.strerror)):
        dirnames.sort()
        # a folder named like a frame (`x.png`) is listed too, so it is reported, not ignored
        names = sorted(filenames + [d for d in dirnames if Path(d).suffix.lower() in RGB_EXTS])
        for name in names:
            yield Path(dirpath) / name


def _strip_suffix(stem: str, suffixes: tuple[str, ...]) -> str | None:
    low = stem.lower()
    for suf in suffixes:
        if low.endswith(suf) and len(stem) > len(suf):
            return stem[: -len(suf)]
    return None


def _outside(path: Path, real_root: str) -> str | None:
    """Why a symlink below the folder is not read: it resolves outside the folder (None if inside).

    Folder scans only: a folder names its frames by what lies below it, so a link out of it is
    refused (a manifest names its files explicitly and may point anywhere). Only links need
    resolving (the walk does not follow linked folders), so a plain file costs one lstat.
    """
    if not os.path.islink(path):
        return None
    target = os.path.realpath(path)
    if target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep):
        return None
    return f"symbolic link resolves outside the folder (to {utf8_safe(target)})"


def _depth_key(rel: Path) -> str | None:
    """The key a depth map pairs by, or None when `rel` is not named as a depth map.

    A depth map is an EXR file, a file under a folder named `depth` (the folder is dropped from
    the key), or a file whose stem ends in `_depth` (or `-depth`, `.depth`; the suffix is dropped).
    """
    dirs = [d.lower() for d in rel.parts[:-1]]
    in_dir = DEPTH_DIR in dirs
    stripped = _strip_suffix(rel.stem, _DEPTH_SUFFIXES)
    if not (in_dir or stripped is not None or rel.suffix.lower() in EXR_EXTS):
        return None  # most files: decided without building the key
    parts = list(rel.with_suffix("").parts)
    if in_dir:
        del parts[len(dirs) - 1 - dirs[::-1].index(DEPTH_DIR)]  # the innermost `depth/`
    if stripped is not None:
        parts[-1] = stripped
    return Path(*parts).as_posix()


class _ColorDirs:
    """Whether a folder level is an RGB-D layout (`color/` beside `depth/`), looked up once per folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._has_depth: dict[Path, bool] = {}

    def key_path(self, rel: Path) -> Path:
        """`rel` without its innermost colour folder (`color`, `rgb`, `image(s)`) that has a `depth/` sibling."""
        for j in range(len(rel.parts) - 2, -1, -1):
            if rel.parts[j].lower() in COLOR_DIRS:
                parent = Path(*rel.parts[:j]) if j else Path()
                if parent not in self._has_depth:
                    self._has_depth[parent] = any(
                        c.is_dir() and c.name.lower() == DEPTH_DIR for c in (self.root / parent).iterdir())
                if self._has_depth[parent]:
                    return Path(*rel.parts[:j], *rel.parts[j + 1:])
        return rel


def list_folder(root: Path, *, pair_regex: str | None = None, depth_unit: str | None = None) -> FolderScan:
    """List the frames of a folder (see `scan_folder`) and the depth maps no frame claimed."""
    why = not_a_folder(root)
    if why is not None:
        raise InputError(f"Expected `PATH` to be an existing folder, got {str(root)!r} ({why}).")
    root = Path(os.path.abspath(root))
    regex = None
    if pair_regex is not None:
        try:
            regex = re.compile(pair_regex)
        except re.error as e:
            raise InputError(f"Expected `--pair-regex` to be a valid regular expression, got {pair_regex!r} ({e}).") from None
    rgb: list[tuple[Path, Path, str | None]] = []
    depth_by_key: dict[str, Path] = {}
    color_dirs = _ColorDirs(root)
    for path in _walk(root):
        rel = path.relative_to(root)
        ext = path.suffix.lower()
        dkey = _depth_key(rel)
        if dkey is not None and ext in DEPTH_EXTS:
            depth_by_key[dkey] = path
        elif ext in RGB_EXTS and dkey is None:
            rgb.append((path, rel, dkey))
        elif path.name.startswith("."):
            continue
        else:
            rgb.append((path, rel, dkey))  # recorded as skipped: unsupported type (or a depth map's name on one)
    entries = []
    real_root = os.path.realpath(root)
    claimed: set[str] = set()
    for path, rel, named_depth in rgb:
        key_rel = color_dirs.key_path(rel)
        key_path = key_rel.with_suffix("").as_posix()
        entry = FrameEntry(rgb_path=path, pair_key=key_path, depth_unit=depth_unit)
        entry.error = _outside(path, real_root)
        if not is_utf8(str(rel)):
            entry.pair_key = utf8_safe(key_path)
            entry.error = "file name is not valid UTF-8 (rename the file; the catalog stores names as UTF-8 text)"
            entries.append(entry)
            continue
        if named_depth is not None and entry.error is None:
            entry.error = (f"named as a depth map, but {path.suffix or 'no extension'!r} is not a depth format "
                           f"({', '.join(sorted(DEPTH_EXTS))}); not indexed as an RGB frame")
        if regex is not None:
            m = regex.search(key_path)
            if m is None:
                entry.pair_key = None
                entry.error = entry.error or f"file name does not match --pair-regex {pair_regex!r}"
            else:
                entry.pair_key = m.group("key") if "key" in regex.groupindex else (m.group(1) if m.groups() else m.group(0))
        if len(key_rel.parts) > 1:
            entry.episode = Path(*key_rel.parts[:-1]).as_posix()
        m = _TRAILING_INT.search(rel.stem)
        entry.step = int(m.group(1)) if m and len(m.group(1)) < 18 else None
        dkey = key_path
        if dkey not in depth_by_key and (bare := _strip_suffix(key_rel.stem, _COLOR_SUFFIXES)) is not None:
            dkey = key_rel.with_name(bare).as_posix()  # `x_color.png` beside `x_depth.png`
        entry.depth_path = depth_by_key.get(dkey) if entry.error is None else None
        if entry.depth_path is not None:
            claimed.add(dkey)
            if (why := _outside(entry.depth_path, real_root)) is not None:
                entry.error = f"depth: {why}"
        entries.append(entry)
    unmatched = tuple(sorted(depth_by_key[k].relative_to(root).as_posix() for k in depth_by_key if k not in claimed))
    return FolderScan(entries=entries, unmatched_depth=unmatched)


def scan_folder(root: Path, *, pair_regex: str | None = None, depth_unit: str | None = None) -> list[FrameEntry]:
    """List the frames of a folder.

    RGB frames are images and `.npy` arrays anywhere below `root`. A frame's depth map, when
    present, is `depth/<same relative path>.{png,npy,exr,tif,tiff,pgm,pfm}`, a sibling named
    `<stem>_depth.*` (or `-depth`, `.depth`; beside `<stem>_color.*` or `_rgb.*` too), or, in an
    RGB-D layout (a `color/`, `rgb/` or `image(s)/` folder beside a `depth/` folder, at any
    level), `depth/<path>` for `color/<path>`. A file named as a depth map is never an RGB frame.
    The pair key is the path relative to `root` (to the colour folder in an RGB-D layout) without
    its extension (the file stem for a flat folder), or the first group of `pair_regex` (named
    group `key` if present) searched in that relative path without extension. The episode is
    the relative parent folder (None for a flat folder); the step, the last integer in the stem
    (`STEP_SOURCES["folder"]`: a guess; `index_folder` warns when it repeats within an episode).
    """
    return list_folder(root, pair_regex=pair_regex, depth_unit=depth_unit).entries


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
    scan = list_folder(root, pair_regex=pair_regex, depth_unit=depth_unit)
    notes = []
    if scan.unmatched_depth:
        u = scan.unmatched_depth
        notes.append(f"{len(u)} depth map(s) matched no RGB frame (e.g. {u[0]}); a depth map pairs with the RGB "
                     f"frame of the same relative path under depth/, or as <stem>_depth.* beside it")
    rep = repeated_steps((e.episode, e.step) for e in scan.entries if e.error is None)
    if rep.n_frames:
        ep, step, n = rep.examples[0]
        notes.append(f"steps were read from {STEP_SOURCES['folder']} and repeat within an episode ({rep.n_frames} "
                     f"frames share their step, e.g. step {step}{'' if ep is None else f' of {ep!r}'} on {n} "
                     f"frames): frames are time-ordered by step, so name the files with the frame number last, "
                     f"or index a manifest with a `step` column")
    return index_entries(catalog, set_name, domain, scan.entries, source=f"folder:{root.resolve()}",
                         tags=tags, root=str(root.resolve()), workers=workers, progress=progress,
                         warnings=notes)
