"""LeRobot dataset sources (local folders, layouts v2.x and v3.0), read from the format's own files.

The `lerobot` package is not needed: `meta/info.json` names the layout (`codebase_version`),
the path templates (`data_path`, `video_path`), the `features` and `fps`.

- v2.x: `meta/episodes.jsonl` lists the episodes; one data Parquet file per episode
  (`data_path` with `episode_chunk` = episode // `chunks_size`, `episode_index`) and one video
  per episode and camera (`video_path`, plus `video_key`); a frame's time in its video is
  the row's `timestamp`.
- v3.0: `meta/episodes/**/*.parquet` lists the episodes with, per episode, its data file
  (`data/chunk_index`, `data/file_index`) and, per camera, its video file
  (`videos/<key>/chunk_index`, `videos/<key>/file_index`) and `videos/<key>/from_timestamp`;
  many episodes share a file, and a frame's time in the video is `from_timestamp + timestamp`.

A row becomes a frame: `episode_index` -> episode, `frame_index` -> step, pair key
`<episode>/<step>`, `observation.state` -> proprio, `action` -> action. A video camera's frame is
the video frame whose presentation time is nearest the row's time, within half a frame period
(else the row is skipped: its frame is missing from the video); an image camera's frame is the
row's encoded image cell in the data file.

With `depth_camera`, a second camera feature (video or image) holds the depth maps: each row's
depth frame is found as its colour frame is, and catalogued as a depth map inside its container
(`FrameEntry.depth_container`) in the declared `depth_unit` (the format records no unit; a
16-bit PNG cell keeps its values, a video frame is 8-bit grey). A row whose depth frame is
missing keeps its colour frame without depth.

The metadata is untrusted input, read by `lerobot_meta`: paths stay inside the dataset folder and
every file is opened as a regular file. A row whose `frame_index` is not an integer, whose
`timestamp` is not a number or whose action or state cell holds text is a recorded skip naming
the cell; a dataset none of whose rows has a readable frame is one InputError (no set is written).
"""

from __future__ import annotations

import os
from bisect import bisect_left
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perception_gap.errors import FrameError, InputError
from perception_gap.ingest.containers import (
    PARQUET_PREFIX,
    VIDEO_MEMBER,
    ContainerFile,
    ContainerFrame,
    frame_path,
    image_cell,
    probe_video,
)
from perception_gap.ingest.entries import (
    FrameEntry,
    IndexReport,
    Progress,
    content_hash,
    index_entries,
    validate_domain,
    validate_set_name,
)
from perception_gap.ingest.frames import Header, probe_image
from perception_gap.ingest.lerobot_meta import (
    CAMERA_DTYPES,
    cameras,
    check_camera,
    episodes_v2,
    episodes_v3,
    fps_of,
    int_cell,
    read_info,
    read_parquet,
    video_path,
)
from perception_gap.ingest.video import pair_key
from perception_gap.statistics.depth import parse_depth_unit

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

__all__ = ["CAMERA_DTYPES", "cameras", "index_lerobot", "lerobot_source", "parse_lerobot_source", "read_info",
           "scan_lerobot"]
STATE_KEY, ACTION_KEY = "observation.state", "action"
DEPTH_MARK = "?depth="


def _vector(v: Any, what: str = "cell") -> list[float] | None:
    """A state or action cell as floats (nested cells flattened, None inside read as NaN); None
    for a null cell; FrameError for text or anything else that is not numbers."""
    if v is None:
        return None
    if isinstance(v, (str, bytes)):
        raise FrameError(f"{what} cell is text ({v[:40]!r}), not numbers")
    if type(v) is list:  # a flat list cell (what Parquet's lists read as): no array round trip
        try:
            if not any(isinstance(x, (str, bytes)) for x in v):
                return [float(x) for x in v]
        except TypeError:
            pass  # nested or holding None: flattened, None read as NaN, below
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise FrameError(f"{what} cell is not numbers ({str(e).splitlines()[0]})") from None
    return [float(x) for x in np.ravel(a)]


def _time(v: Any) -> float:
    """A row's `timestamp` cell in seconds; FrameError for a null or text cell."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FrameError(f"timestamp cell is {v!r}, not a number")
    return float(v)


class _Videos:
    """Each video file probed once (its packets; no decoding), its failure remembered.

    `get` gives the file, its frame times as a list of floats (a bisection per row on a list
    costs ~1 us against ~30 us for numpy's scalar searchsorted and clip) and the one frame
    header its frames share.
    """

    def __init__(self) -> None:
        self._seen: dict[Path, tuple[ContainerFile, list[float], Header] | FrameError] = {}

    def get(self, path: Path) -> tuple[ContainerFile, list[float], Header]:
        if path not in self._seen:
            try:
                if not path.exists():
                    raise FrameError(f"video file {path} not found")
                info = probe_video(path)
                self._seen[path] = (ContainerFile(path), info.timestamps.tolist(), info.header())
            except FrameError as e:
                self._seen[path] = FrameError(f"{path.name}: {e}") if str(path) not in str(e) else e
        got = self._seen[path]
        if isinstance(got, FrameError):
            raise got
        return got


def _video_frame(videos: _Videos, path: Path, t: float, fps: float) -> ContainerFrame:
    file, ts, header = videos.get(path)
    n = len(ts)
    i = min(max(bisect_left(ts, t), 1), n - 1) if n > 1 else 0
    if i > 0 and abs(ts[i - 1] - t) <= abs(ts[i] - t):
        i -= 1
    if not abs(ts[i] - t) <= 0.5 / fps:  # `not <=`: a NaN time matches no frame
        raise FrameError(f"frame at t={t:.4f} s is missing from {path.name} ({n} frames, "
                         f"{ts[0]:.4f}-{ts[-1]:.4f} s)")
    return ContainerFrame(file, VIDEO_MEMBER, i, header)


def _image_frame(file: ContainerFile, camera: str, row: int, cell: Any) -> ContainerFrame:
    data, _ = image_cell(cell)
    return ContainerFrame(file, PARQUET_PREFIX + camera, row, probe_image(data), own_hash=content_hash(data))


def _camera_frame(videos: _Videos, file: ContainerFile, t: dict[str, list[Any]], row: int, key: str,
                  video: Path | None, ep: dict[str, Any], fps: float) -> ContainerFrame:
    """A data row's frame of camera `key`: in its episode's video (`video`), else the row's image cell."""
    if video is not None:
        return _video_frame(videos, video, ep["from_timestamp"] + _time(t["timestamp"][row]), fps)
    return _image_frame(file, key, row, t[key][row])


def scan_lerobot(root: Path, camera: str, *, depth_camera: str | None = None,
                 depth_unit: str | None = None) -> list[FrameEntry]:
    """List one camera's frames of a local LeRobot dataset (v2.x or v3.0; see the module docstring),
    with the depth maps of `depth_camera` attached when given."""
    root = Path(os.path.abspath(root))
    info = read_info(root)
    dtype = check_camera(info, camera)
    ddtype = check_camera(info, depth_camera, "--depth-camera") if depth_camera is not None else None
    fps = fps_of(info)
    v3 = str(info["codebase_version"]).startswith("v3.")
    episodes = episodes_v3(root, info, camera) if v3 else episodes_v2(root, info)
    depth_eps = {e["episode_index"]: e for e in episodes_v3(root, info, depth_camera)} if v3 and ddtype else {}
    images = [k for k, d in ((camera, dtype), (depth_camera, ddtype)) if d == "image"]
    cols = ["episode_index", "frame_index", "timestamp", STATE_KEY, ACTION_KEY] + images
    videos, tables, entries = _Videos(), {}, []
    for ep in episodes:
        data = ep["data"]
        if data not in tables:
            tables[data] = _load_data(data, cols, (("timestamp",) if "video" in (dtype, ddtype) else ()) + tuple(images))
        t, rows_of = tables[data]
        video = video_path(root, info, camera, ep) if dtype == "video" else None
        dep = depth_eps.get(ep["episode_index"], ep)
        dvideo = video_path(root, info, depth_camera, dep) if ddtype == "video" else None
        file = ContainerFile(data)
        episode = str(ep["episode_index"])
        for row in rows_of.get(ep["episode_index"], ()):
            try:
                step = int_cell(t["frame_index"][row], "frame_index cell")
                entry = FrameEntry(rgb_path=data, pair_key=pair_key(episode, step), episode=episode, step=step,
                                   action=_vector(t[ACTION_KEY][row], ACTION_KEY) if ACTION_KEY in t else None,
                                   proprio=_vector(t[STATE_KEY][row], STATE_KEY) if STATE_KEY in t else None)
            except FrameError as e:
                entries.append(FrameEntry(rgb_path=Path(f"{data}#episode {episode} row {row}"), pair_key=None,
                                          episode=episode, error=f"row {row} of {data.name}: {e}"))
                continue
            if ddtype is not None:
                try:
                    entry.depth_container = _camera_frame(videos, file, t, row, depth_camera, dvideo, dep, fps)
                    entry.depth_path, entry.depth_unit = entry.depth_container.file.path, depth_unit
                except FrameError:
                    pass  # no depth for this row: it keeps its colour frame (index_lerobot counts these)
            try:
                entry.container = _camera_frame(videos, file, t, row, camera, video, ep, fps)
                c = entry.container
                entry.rgb_path = Path(frame_path(c.file.path, c.member, c.index))
            except FrameError as e:
                entry.rgb_path = Path(f"{video or data}#episode {episode} step {step}")
                entry.error = str(e)
            entries.append(entry)
    return entries


def _load_data(path: Path, cols: list[str], required: tuple[str, ...]) -> tuple[dict[str, list[Any]], dict[int, list[int]]]:
    """A data file's columns and, per episode index, its row numbers (in file order)."""
    t = read_parquet(path, cols)
    need = ("episode_index", "frame_index") + required
    missing = [c for c in need if c not in t]
    if missing:
        raise InputError(f"LeRobot data file {str(path)!r} lacks column(s) {', '.join(missing)}.")
    rows_of: dict[int, list[int]] = {}
    for row, ep in enumerate(t["episode_index"]):
        if isinstance(ep, int) and not isinstance(ep, bool):  # a row of no integer episode belongs to none listed
            rows_of.setdefault(ep, []).append(row)
    return t, rows_of


def index_lerobot(catalog: Catalog, root: Path, camera: str, set_name: str, domain: str, *,
                  depth_camera: str | None = None, depth_unit: str | None = None, tags: list[str] | None = None,
                  workers: int | None = None, progress: Progress | None = None) -> IndexReport:
    """Catalogue one camera of a local LeRobot dataset as one set (see `scan_lerobot`)."""
    validate_set_name(set_name)
    validate_domain(domain)
    try:
        parse_depth_unit(depth_unit)
    except ValueError as e:
        raise InputError(str(e).replace("`depth_unit`", "`--depth-unit`")) from None
    entries = scan_lerobot(root, camera, depth_camera=depth_camera, depth_unit=depth_unit)
    root = Path(os.path.abspath(root))
    _check_usable(root, camera, entries)
    lacking = sum(1 for e in entries if depth_camera and e.error is None and e.depth_container is None)
    notes = [f"{lacking} of {len(entries)} frame(s) have no {depth_camera} frame: they keep no depth"] if lacking else []
    return index_entries(catalog, set_name, domain, entries, source=lerobot_source(root, camera, depth_camera, depth_unit),
                         tags=tags, root=str(root), workers=workers, progress=progress, warnings=notes)


def _check_usable(root: Path, camera: str, entries: list[FrameEntry]) -> None:
    """InputError summarising why when no listed row has a readable frame (no set is written)."""
    if any(e.error is None for e in entries):
        return
    if not entries:
        raise InputError(f"LeRobot dataset {str(root)!r} lists no row for camera {camera!r}.")
    raise InputError(f"No row of LeRobot dataset {str(root)!r} has a readable {camera!r} frame "
                     f"({len(entries)} rows skipped; the first: {entries[0].error}).")


def lerobot_source(root: Path, camera: str, depth_camera: str | None = None, depth_unit: str | None = None) -> str:
    """The set's recorded source: `lerobot:<root>#<camera>[?depth=<depth camera>,<unit>]`."""
    return f"lerobot:{root}#{camera}" + (f"{DEPTH_MARK}{depth_camera},{depth_unit or ''}" if depth_camera else "")


def parse_lerobot_source(where: str) -> tuple[Path, str, str | None, str | None]:
    """(root, camera, depth camera, depth unit) of a source written by `lerobot_source`, without `lerobot:`."""
    depth = unit = None
    if DEPTH_MARK in where:
        where, _, rest = where.rpartition(DEPTH_MARK)
        depth, _, unit = rest.rpartition(",")
    root, _, camera = where.rpartition("#")
    return Path(root), camera, depth, unit or None
