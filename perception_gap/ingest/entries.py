"""Frame entries (what a source lists) and their cataloguing into the catalog, incrementally.

Cataloguing reads each new or changed file once: it hashes the bytes (the content hash keys
every cached computation) and parses the header (size, mode, dtype, EXIF orientation)
without decoding pixels. Files whose size and modification time are unchanged since the last
index are not read at all. Unreadable files are recorded as skipped with their reason and
indexing goes on.
"""

from __future__ import annotations

import hashlib
import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from perception_gap.errors import FrameError, InputError
from perception_gap.ingest.containers import ContainerFrame
from perception_gap.ingest.frames import Header, probe, read_bytes

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

log = logging.getLogger(__name__)

DOMAINS = ("sim", "real")
BATCH = 4096
Progress = Callable[[int, int], None]


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
    container: ContainerFrame | None = None  # set for a frame inside a video or Parquet file
    depth_container: ContainerFrame | None = None  # a depth map inside a container (depth_path: that file)
    timestamp: float | None = None  # seconds, when the source records one (a ROS message's stamp)


def _data_path(entry: FrameEntry) -> Path:
    """The file whose size and mtime decide whether the entry changed: its container, or itself."""
    return entry.container.file.path if entry.container is not None else entry.rgb_path


@dataclass(frozen=True)
class IndexReport:
    """What one `index` call did to one set.

    Attributes:
        set_name, domain: the set.
        listed: frames listed by the folder or manifest.
        new, changed, unchanged, vanished: incremental bookkeeping (vanished: usable frames whose
            file is gone, marked `missing`).
        usable: frames of the set now usable (status ok).
        skipped: (path, reason) for every frame of this listing that is not usable, and one
            entry per file the listing names more than once (its reason says how often).
        repeats: (path, extra listings) for each file listed more than once (one catalog row each).
        removed: rows of an earlier listing that this one no longer names and whose file still
            exists (or that were never usable): deleted, so the set is what this listing says.
        warnings: what the caller should tell the user (a depth unit with no depth map, depth
            maps that matched no frame); indexing went on.
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
    repeats: tuple[tuple[str, int], ...] = field(default_factory=tuple)
    removed: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def n_skipped(self) -> int:
        """Listed rows not usable: skipped frames plus every extra listing of a repeated file."""
        return len(self.skipped) - len(self.repeats) + sum(n for _, n in self.repeats)


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




def is_utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes of a file name surface as lone surrogates
        return False
    return True


def utf8_safe(s: str) -> str:
    """A file name as storable text: undecodable bytes shown as \\xNN escapes."""
    return s if is_utf8(s) else s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# -- cataloguing ---------------------------------------------------------------------------------

def _stat(path: Path | None) -> tuple[int | None, int | None]:
    if path is None:
        return None, None
    try:
        st = path.stat()
    except OSError:
        return None, None
    return st.st_size, st.st_mtime_ns


def _probe_source(c: ContainerFrame | None, path: Path) -> tuple[Header, str, str | None]:
    """(header, content hash, container hash or None) of a frame or depth map: from its container
    (listed with its header; hashing reads the container once for all its frames), else its file."""
    if c is not None:
        return c.header, c.content_hash(), c.file.content_hash()
    data = read_bytes(path)
    return probe(path, data), content_hash(data), None


def _read_entry(entry: FrameEntry, set_name: str) -> dict[str, Any]:
    """Hash and probe one listed frame (and its depth map) into a catalog row."""
    row: dict[str, Any] = {
        "set_name": set_name, "rgb_path": utf8_safe(str(entry.rgb_path)), "pair_key": entry.pair_key,
        "episode": entry.episode, "step": entry.step,
        "depth_path": utf8_safe(str(entry.depth_path)) if entry.depth_path else None,
        "depth_unit": entry.depth_unit, "action": entry.action, "proprio": entry.proprio,
        "status": "ok", "error": None, "timestamp": entry.timestamp,
    }
    c = entry.container
    if c is not None:
        row.update(container_path=utf8_safe(str(c.file.path)), member=c.member, frame_index=c.index)
    row["file_size"], row["mtime_ns"] = _stat(_data_path(entry))
    row["depth_size"], row["depth_mtime_ns"] = _stat(entry.depth_path)
    if entry.error:
        row.update(status="skipped", error=entry.error)
        return row
    try:
        header, row["content_hash"], row["container_hash"] = _probe_source(c, entry.rgb_path)
        row.update(width=header.width, height=header.height, format=header.format, mode=header.mode,
                   dtype=header.dtype, channels=header.channels, exif_orientation=header.exif_orientation)
        for name in ("action", "proprio"):
            v = row[name]
            if v is not None and not all(math.isfinite(x) for x in v):
                raise FrameError(f"non-finite value in `{name}`")
    except FrameError as e:
        row.update(status="skipped", error=str(e))
        return row
    dc = entry.depth_container
    if dc is not None:
        row.update(depth_member=dc.member, depth_index=dc.index)
    if entry.depth_path is not None:
        try:
            dheader, row["depth_hash"], row["depth_container_hash"] = _probe_source(dc, entry.depth_path)
            if (dheader.width, dheader.height) != (header.width, header.height):
                log.info("depth %s is %dx%d, rgb is %dx%d", entry.depth_path, dheader.width, dheader.height, header.width, header.height)
        except FrameError as e:
            row.update(status="skipped", error=f"depth: {e}")
    return row


def _unchanged(entry: FrameEntry, old: dict[str, Any] | None) -> bool:
    if old is None or old["status"] == "missing":
        return False
    size, mtime = _stat(_data_path(entry))
    dsize, dmtime = _stat(entry.depth_path)
    same_files = (size, mtime) == (old["file_size"], old["mtime_ns"]) and (
        (str(entry.depth_path) if entry.depth_path else None) == old["depth_path"]
        and (dsize, dmtime) == (old["depth_size"], old["depth_mtime_ns"]))
    same_meta = (entry.pair_key == old["pair_key"] and entry.episode == old["episode"]
                 and entry.step == old["step"] and entry.depth_unit == old["depth_unit"]
                 and entry.action == old["action"] and entry.proprio == old["proprio"])
    c = entry.container
    same_place = (old["member"], old["frame_index"]) == ((c.member, c.index) if c is not None else (None, None))
    d = entry.depth_container
    same_depth = (old["depth_member"], old["depth_index"]) == ((d.member, d.index) if d is not None else (None, None))
    same_meta = same_meta and same_place and same_depth and entry.timestamp == old["timestamp"]
    return same_files and same_meta and size is not None


def _mark_duplicate_keys(rows: list[dict[str, Any]], kept: dict[str, str]) -> None:
    """Two usable frames of one set with one pair key: keep the first path, skip the others."""
    for row in sorted(rows, key=lambda r: r["rgb_path"]):
        if row["status"] != "ok":
            continue
        first = kept.setdefault(row["pair_key"], row["rgb_path"])
        if first != row["rgb_path"]:
            row.update(status="skipped", error=f"duplicate pair key {row['pair_key']!r} (also {first})")


def _depth_unit_warning(catalog: Catalog, set_name: str) -> str | None:
    """A depth unit given for usable frames that have no depth map: it measures nothing, say so."""
    lacking, declared, example, units = catalog.depth_unit_gaps(set_name)
    if not lacking:
        return None
    return (f"depth unit {', '.join(units)} given, but no depth map was found for {lacking} of {declared} usable "
            f"frame(s) (e.g. {example})")


def _unlisted(old: dict[str, dict[str, Any]], listed: dict[str, FrameEntry]) -> tuple[list[str], list[str]]:
    """Rows of an earlier listing that this one does not name: (vanished, removed) paths.

    Vanished: usable before and its file is gone (kept, marked `missing`). Removed: its file still
    exists (the listing dropped it: a corrected manifest), or it was never usable; deleted.
    """
    vanished, removed = [], []
    # a container member (a topic, a dataset, a stream) this listing still reads no longer holds
    # the frame: the frame vanished from it; a member it no longer reads (the set now lists another
    # topic of the same bag) is not the set's any more: its rows are removed
    read_now = {(utf8_safe(str(e.container.file.path)), e.container.member) for e in listed.values()
                if e.container is not None}
    for p, r in old.items():
        if p in listed:
            continue
        where = r.get("container_path")
        exists = (where, r.get("member")) not in read_now and _stat(Path(where or p))[0] is not None
        if exists or r["status"] == "skipped":
            removed.append(p)
        elif r["status"] == "ok":
            vanished.append(p)
    return vanished, removed


def index_entries(catalog: Catalog, set_name: str, domain: str, entries: list[FrameEntry], *,
                  source: str | None = None, tags: list[str] | None = None, root: str | None = None,
                  workers: int | None = None, progress: Progress | None = None,
                  warnings: list[str] | None = None) -> IndexReport:
    """Catalogue a set's listing incrementally; returns what changed.

    Frames already catalogued with the same size, mtime and metadata are not read again.
    The set becomes what the listing names: usable frames whose file vanished are marked
    `missing`; rows the listing no longer names whose file exists are deleted (see `_unlisted`).
    Rows are written in batches of `BATCH`, each one transaction, so an interrupted call keeps
    every finished batch.
    """
    validate_set_name(set_name)
    validate_domain(domain)
    listed: dict[str, FrameEntry] = {}
    again: dict[str, list[str | None]] = {}  # one file named by several rows: one catalog row, one summary
    for e in entries:
        p = utf8_safe(str(e.rgb_path))
        if p in listed:
            again.setdefault(p, []).append(e.pair_key)
        else:
            listed[p] = e
    repeats = [(p, len(keys), _repeat_reason(keys, listed[p].pair_key)) for p, keys in again.items()]
    # the steps before and after the reading each open the file once, not once a step (each open
    # reads the file's metadata and takes its lock); the batches in between open it each, so that
    # readers get in while files are read
    with catalog.session():
        catalog.ensure_set(set_name, domain, source=source, tags=tags, root=root)
        old = catalog.existing_frames(set_name)
        catalog.replace_repeats(set_name, repeats)
    todo = [e for p, e in listed.items() if not _unchanged(e, old.get(p))]
    n_new = sum(1 for e in todo if utf8_safe(str(e.rgb_path)) not in old)
    vanished, removed = _unlisted(old, listed)
    todo_paths = {utf8_safe(str(e.rgb_path)) for e in todo}  # built once: rebuilt per row it was O(old x todo)
    kept = {r["pair_key"]: p for p, r in old.items()
            if p in listed and r["status"] == "ok" and p not in todo_paths}
    done = 0
    last: list[dict[str, Any]] = []
    n_threads = max(1, workers or 4)

    def read(part: list[FrameEntry]) -> list[dict[str, Any]]:
        return [_read_entry(e, set_name) for e in part]

    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        for start in range(0, len(todo), BATCH):
            chunk = todo[start : start + BATCH]
            # a few runs of files a thread, not a task a file: a task's hand-over costs about what
            # reading, hashing and probing a small file does (bench/README.md, "1,000,000 frames,
            # the first check under 60 s")
            step = max(1, -(-len(chunk) // (4 * n_threads)))
            rows = [r for part in pool.map(read, [chunk[i : i + step] for i in range(0, len(chunk), step)]) for r in part]
            _mark_duplicate_keys(rows, kept)
            if start + BATCH < len(todo):
                catalog.write_frames(rows)
                done += len(chunk)
                if progress:
                    progress(done, len(todo))
            else:
                last = rows  # written with the steps after it, in one open of the file
    with catalog.session():
        if last:
            catalog.write_frames(last)
            if progress:
                progress(len(todo), len(todo))
        catalog.mark_missing(set_name, vanished)
        catalog.remove_frames(set_name, removed)
        counts = catalog.set_counts(set_name)
        skipped = tuple((s["path"], s["reason"]) for s in catalog.skipped_frames(set_name) if s["path"] in listed)
        notes = tuple(warnings or ()) + tuple(w for w in (_depth_unit_warning(catalog, set_name),) if w)
    for w in notes:
        log.info("set %s: %s", set_name, w)  # the caller shows it (`IndexReport.warnings`)
    return IndexReport(set_name=set_name, domain=domain, listed=len(entries), new=n_new,
                       changed=len(todo) - n_new, unchanged=len(listed) - len(todo),
                       vanished=len(vanished), usable=counts["ok"],
                       skipped=skipped + tuple((p, r) for p, _, r in repeats),
                       repeats=tuple((p, n) for p, n, _ in repeats),
                       removed=len(removed), warnings=notes)


def _repeat_reason(keys: list[str | None], first: str | None) -> str:
    """Why the extra listings of one file are skipped (one line, whatever their number)."""
    shown = ", ".join(repr(k) for k in keys[:3]) + (", ..." if len(keys) > 3 else "")
    times = "" if len(keys) == 1 else f" {len(keys):,} more times"
    return (f"the same file is listed again{times} (pair key{'s' if len(keys) > 1 else ''} {shown}); "
            f"its first listing (pair key {first!r}) is kept")
