"""Frames whose files changed after `index`: re-indexed (or skipped) before anything is measured.

Statistics and embeddings are cached by content hash and shared by every frame holding that
content, so the stages that decode a file hash the bytes they read and compare with the
catalog: a mismatch stores nothing under the old hash and hands the file's path here. Its
frames (in every set that lists the file) are read again like `index` reads them (new hash,
size, mtime, header), and the stage measures the new content under its own hash.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from perception_gap.ingest.entries import FrameEntry, _read_entry

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

ROUNDS = 3  # re-index and measure again at most this often; a file changing faster is skipped
KEEPS_CHANGING = "the file keeps changing while it is read; index it again once it is written"


def _entry(row: dict[str, Any]) -> FrameEntry:
    depth = row["depth_path"]
    return FrameEntry(rgb_path=Path(row["rgb_path"]), pair_key=row["pair_key"], episode=row["episode"],
                      step=row["step"], depth_path=Path(depth) if depth else None, depth_unit=row["depth_unit"],
                      action=row["action"], proprio=row["proprio"])


def reread_frames(catalog: Catalog, paths: Iterable[str]) -> tuple[str, ...]:
    """Re-index the usable frames (of any set) whose RGB or depth file is one of `paths`.

    Returns:
        The RGB paths of the frames re-indexed (each once, sorted).
    """
    rows = catalog.frames_at_paths(sorted(set(paths)))
    catalog.write_frames([_read_entry(_entry(r), r["set_name"]) for r in rows])
    return tuple(sorted({r["rgb_path"] for r in rows}))


def skip_frames(catalog: Catalog, paths: Iterable[str], reason: str = KEEPS_CHANGING) -> tuple[str, ...]:
    """Mark the usable frames whose RGB or depth file is one of `paths` as skipped with `reason`."""
    rows = catalog.frames_at_paths(sorted(set(paths)))
    catalog.write_frames([{**r, "status": "skipped", "error": reason} for r in rows])
    return tuple(sorted({r["rgb_path"] for r in rows}))
