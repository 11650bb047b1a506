"""Plain video sources: a video file, or a folder of them, one episode per file.

Every frame of a file's first video stream is a catalog frame (see `containers`): episode =
the file's path relative to the folder without its extension (its stem for a single file),
step = the frame's presentation-order number, pair key = `<episode>/<step>` (the pairing rule
of every episode-structured source, so a sim video pairs with a real LeRobot episode).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from perception_gap.errors import FrameError, InputError
from perception_gap.ingest.containers import (
    VIDEO_EXTS,
    VIDEO_MEMBER,
    ContainerFile,
    ContainerFrame,
    frame_path,
    probe_video,
)
from perception_gap.ingest.entries import (
    FrameEntry,
    IndexReport,
    Progress,
    index_entries,
    validate_domain,
    validate_set_name,
)
from perception_gap.ingest.frames import not_a_folder

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog


def pair_key(episode: str, step: int) -> str:
    """The pair key of a frame of an episode-structured source: `<episode>/<step>`."""
    return f"{episode}/{step}"


def video_entries(path: Path, episode: str) -> list[FrameEntry]:
    """One entry per frame of a video file; one skipped entry naming the reason when it is unreadable."""
    try:
        info = probe_video(path)
    except FrameError as e:
        return [FrameEntry(rgb_path=path, pair_key=pair_key(episode, 0), episode=episode, step=0, error=str(e))]
    file, header = ContainerFile(path), info.header()
    return [FrameEntry(rgb_path=Path(frame_path(path, VIDEO_MEMBER, i)), pair_key=pair_key(episode, i),
                       episode=episode, step=i, container=ContainerFrame(file, VIDEO_MEMBER, i, header))
            for i in range(len(info.timestamps))]


def scan_videos(path: Path) -> list[FrameEntry]:
    """List the frames of a video file or of every video file below a folder (sorted)."""
    why = not_a_folder(path)
    if why is not None and not path.is_file():
        raise InputError(f"Expected `--video` to be a video file or a folder of them, got {str(path)!r} "
                         f"({why.replace(', not a folder', ', neither a regular file nor a folder')}).")
    path = Path(os.path.abspath(path))
    if path.is_file():
        return video_entries(path, path.stem)
    files = sorted(p for p in path.rglob("*") if p.suffix.lower() in VIDEO_EXTS and p.is_file())
    if not files:
        raise InputError(f"Expected `--video` folder {str(path)!r} to hold video files ({', '.join(sorted(VIDEO_EXTS))}), found none.")
    return [e for f in files for e in video_entries(f, f.relative_to(path).with_suffix("").as_posix())]


def index_video(catalog: Catalog, path: Path, set_name: str, domain: str, *, tags: list[str] | None = None,
                workers: int | None = None, progress: Progress | None = None) -> IndexReport:
    """Catalogue a video file or a folder of videos as one set (see `scan_videos`)."""
    validate_set_name(set_name)
    validate_domain(domain)
    entries = scan_videos(path)
    root = Path(os.path.abspath(path))
    return index_entries(catalog, set_name, domain, entries, source=f"video:{root}", tags=tags,
                         root=str(root if root.is_dir() else root.parent), workers=workers, progress=progress)
