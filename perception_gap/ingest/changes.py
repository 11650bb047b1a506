"""Frames whose files changed after `index`: re-indexed (or skipped) before anything is measured.

Statistics and embeddings are cached by content hash and shared by every frame holding that
content, so the stages that decode a file hash the bytes they read and compare with the
catalog: a mismatch stores nothing under the old hash and hands the file's path here. Its
frames (in every set that lists the file) are read again like `index` reads them (new hash,
size, mtime, header), and the stage measures the new content under its own hash.

A frame inside a container (a video, a LeRobot Parquet file, an HDF5 file, a ROS bag) is verified through
its container's hash (`verified_group`, or `verified_container`
for a bag's colour and depth topics together, `perception_gap.ingest.containers`); a changed container
re-indexes every frame of it the set holds: the set's source (`video:`, `lerobot:` or `hdf5:`)
(or `rosbag:`) is listed again as `index` lists it, and its entries in that container are read again (new
container hash, so new frame hashes). A frame the new listing no longer holds is skipped with
the reason; so is every frame of a source that cannot be listed again.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from perception_gap.errors import FrameError, InputError
from perception_gap.ingest.entries import FrameEntry, _read_entry, utf8_safe

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

ROUNDS = 3  # re-index and measure again at most this often; a file changing faster is skipped
KEEPS_CHANGING = "the file keeps changing while it is read; index it again once it is written"
LEFT_CONTAINER = "no longer in its container, which changed since `index`"


def _entry(row: dict[str, Any]) -> FrameEntry:
    depth = row["depth_path"]
    return FrameEntry(rgb_path=Path(row["rgb_path"]), pair_key=row["pair_key"], episode=row["episode"],
                      step=row["step"], depth_path=Path(depth) if depth else None, depth_unit=row["depth_unit"],
                      action=row["action"], proprio=row["proprio"])


def reread_frames(catalog: Catalog, paths: Iterable[str]) -> tuple[str, ...]:
    """Re-index the usable frames (of any set) whose RGB, depth or container file is one of `paths`.

    Returns:
        The RGB paths of the frames re-indexed (each once, sorted).
    """
    rows = catalog.frames_at_paths(sorted(set(paths)))
    catalog.write_frames([_read_entry(_entry(r), r["set_name"]) for r in rows if r["container_path"] is None])
    by_set: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["container_path"] is not None:
            by_set.setdefault(r["set_name"], []).append(r)
    for set_name, inside in by_set.items():
        catalog.write_frames(_reread_containers(catalog, set_name, inside))
    return tuple(sorted({r["rgb_path"] for r in rows}))


def _listing(source: str) -> list[FrameEntry]:
    """A container source listed again as `index` lists it (the set's recorded `source`)."""
    from perception_gap.ingest.hdf5 import parse_hdf5_source, scan_hdf5
    from perception_gap.ingest.lerobot import parse_lerobot_source, scan_lerobot
    from perception_gap.ingest.rosbag import parse_rosbag_source, scan_rosbag
    from perception_gap.ingest.video import scan_videos

    kind, _, where = source.partition(":")
    if kind == "video":
        return scan_videos(Path(where))
    if kind == "lerobot":
        root, camera, depth_camera, depth_unit = parse_lerobot_source(where)
        return scan_lerobot(root, camera, depth_camera=depth_camera, depth_unit=depth_unit)
    if kind == "hdf5":
        path, camera, proprio = parse_hdf5_source(where)
        return scan_hdf5(path, camera, proprio=proprio)
    if kind == "rosbag":
        path, topic, depth_topic, tolerance = parse_rosbag_source(where)
        return scan_rosbag(path, topic, depth_topic=depth_topic, tolerance=tolerance)[0]
    raise InputError(f"source {source!r} cannot be listed again")


def _reread_containers(catalog: Catalog, set_name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """New catalog rows for a set's frames inside changed containers (see the module docstring)."""
    changed = {r["container_path"] for r in rows}
    try:
        entries = _listing((catalog.get_set(set_name) or {}).get("source") or "")
    except (InputError, FrameError, OSError) as e:
        why = f"its container changed since `index` and the set cannot be listed again ({e}); index it again"
        return [{**r, "status": "skipped", "error": why} for r in rows]

    def inside(e: FrameEntry) -> bool:
        where = e.container.file.path if e.container is not None else Path(str(e.rgb_path).partition("#")[0])
        return utf8_safe(str(where)) in changed

    fresh = [_read_entry(e, set_name) for e in entries if inside(e)]
    listed = {r["rgb_path"] for r in fresh}
    return fresh + [{**r, "status": "skipped", "error": LEFT_CONTAINER} for r in rows if r["rgb_path"] not in listed]


def skip_frames(catalog: Catalog, paths: Iterable[str], reason: str = KEEPS_CHANGING) -> tuple[str, ...]:
    """Mark the usable frames whose RGB, depth or container file is one of `paths` as skipped with `reason`."""
    rows = catalog.frames_at_paths(sorted(set(paths)))
    catalog.write_frames([{**r, "status": "skipped", "error": reason} for r in rows])
    return tuple(sorted({r["rgb_path"] for r in rows}))
