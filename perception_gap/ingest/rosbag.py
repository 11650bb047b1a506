"""ROS bag sources: the image messages of one topic of a ROS 1 or ROS 2 bag (or of a folder of bags).

`--rosbag PATH` names a ROS 1 `.bag` file, a ROS 2 bag folder (`metadata.yaml` and the `.db3`
or `.mcap` storage files it lists: several for a split recording, read in that order as one
bag), or a folder holding such bags (each bag one episode, in name order; there a bag that
cannot be read is one recorded skip, and only a folder of which no bag can be read is an error).
Every message of `--topic` (`sensor_msgs/msg/Image` or `CompressedImage`, see
`perception_gap.ingest.rosmsg`) becomes a frame inside its container file (the `.bag` or the
storage file; member `rosbag:<topic>`, index = the message's place in that file's topic):
episode = the bag's place in name order (`0` for a single bag, so a sim bag pairs with a real
bag, or with episode 0 of a LeRobot dataset or `demo_0` of an HDF5 file), step = the message's
place in the bag's topic, pair key `<episode>/<step>`, timestamp = the header stamp in seconds
(the receive time when the stamp is zero). A message of an unsupported
encoding is listed as a skipped frame with the reason.

With `--depth-topic`, each colour frame gets the depth message of nearest timestamp within
`--sync-tolerance` seconds (`nearest_within`), in the unit its encoding declares (16UC1 and
mono16 millimetres, 32FC1 metres); a colour frame with none that close keeps no depth, and the
count is reported as a warning.

A topic whose encoding does not fit its role is refused: a depth-only encoding (16UC1, 32FC1,
compressedDepth) as `--topic`, an encoding that declares no depth unit (rgb8, mono8, a JPEG, ...)
as `--depth-topic`. A ROS 2 bag's metadata.yaml is read as a bounded regular file, without YAML
aliases (`rosmsg.read_metadata`).
"""

from __future__ import annotations

import os
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perception_gap.errors import FrameError, InputError
from perception_gap.ingest.containers import ROSBAG_PREFIX, ContainerFile, ContainerFrame, frame_path
from perception_gap.ingest.entries import FrameEntry, IndexReport, Progress, index_entries, validate_set_name
from perception_gap.ingest.frames import Header, not_a_folder
from perception_gap.ingest.rosmsg import (
    IMAGE,
    IMAGE_TYPES,
    NOT_COLOUR,
    ROS2_STORAGE_EXTS,
    message_header,
    message_unit,
    open_bag,
    stamp_seconds,
    storage_files,
    topic_messages,
)
from perception_gap.ingest.video import pair_key

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

SYNC_TOLERANCE = 0.02  # seconds: a depth message this close to a colour frame's stamp is its depth
DEPTH_MARK = "?depth="
# the header of a listed message that cannot be decoded (a recorded skip, still keyed to its bag so
# that an unchanged bag leaves it unchanged)
_UNDECODABLE = Header(width=0, height=0, format="ROS", mode="", dtype="", channels=0)
_SHAPE = "Expected `--rosbag` to be a ROS 1 .bag file, a ROS 2 bag folder (metadata.yaml) or a folder of bags"


@dataclass(frozen=True)
class TopicMessage:
    """One listed message of a topic: its container file, place in that file's topic, place in the
    bag's topic (the step), timestamp (s) and what it decodes to (or why not)."""

    file: Path
    index: int
    step: int
    timestamp: float
    header: Any  # `Header`, or the FrameError text when the message cannot be decoded
    unit: str | None = None
    encoding: str = ""  # `Image.encoding`, or a `CompressedImage`'s format


def find_bags(path: Path) -> list[Path]:
    """The bags of `--rosbag PATH` in episode order (see the module docstring): `.bag` files and
    ROS 2 bag folders.

    Raises:
        InputError: PATH does not exist, or is not a bag nor a folder holding bags.
    """
    if not path.exists():
        raise InputError(f"{_SHAPE}, got {str(path)!r} (not found).")
    if path.is_file():
        if path.suffix.lower() == ".bag":
            return [path]
        if path.suffix.lower() in ROS2_STORAGE_EXTS:
            if (path.parent / "metadata.yaml").is_file():
                return [path.parent]
            raise InputError(f"{_SHAPE}, got {str(path)!r}: a ROS 2 storage file whose folder has no metadata.yaml "
                             "(rosbag2 writes it beside the storage files; it is needed to read them).")
        raise InputError(f"{_SHAPE}, got {str(path)!r} (a {path.suffix or 'suffix-less'} file).")
    why = not_a_folder(path)
    if why is not None:
        raise InputError(f"{_SHAPE}, got {str(path)!r} ({why.replace(', not a folder', ', neither a regular file nor a folder')}).")
    if (path / "metadata.yaml").is_file():
        return [path]
    if (path / "metadata.yaml").exists():
        raise InputError(f"{_SHAPE}, got {str(path)!r}: its metadata.yaml is not a regular file.")
    bags = sorted((p for p in path.iterdir() if (p.is_file() and p.suffix.lower() == ".bag")
                   or (p.is_dir() and (p / "metadata.yaml").is_file())), key=lambda p: p.name)
    if not bags:
        storage = sorted(p.name for p in path.iterdir() if p.suffix.lower() in ROS2_STORAGE_EXTS)
        if storage:
            raise InputError(f"{_SHAPE}, got {str(path)!r}: a ROS 2 bag folder without metadata.yaml (it holds "
                             f"{', '.join(storage[:3])}{', ...' if len(storage) > 3 else ''}; rosbag2 writes "
                             "metadata.yaml beside them and it is needed to read them).")
        raise InputError(f"{_SHAPE}, got {str(path)!r} (a folder holding no bag).")
    return bags


def containers(bag: Path) -> list[Path]:
    """The container files of one bag: the `.bag`, or a ROS 2 bag's storage files in order.

    Raises:
        InputError: a ROS 2 bag's metadata.yaml is unreadable or names missing files.
    """
    if bag.is_file():
        return [bag]
    try:
        files, _ = storage_files(bag)
    except FrameError as e:
        raise InputError(f"Cannot read `--rosbag` {str(bag)!r}: {e}.") from None
    bad = [f.name for f in files if f.suffix.lower() not in ROS2_STORAGE_EXTS]
    if bad:
        raise InputError(f"Cannot read `--rosbag` {str(bag)!r}: storage file(s) {', '.join(bad)} are neither "
                         ".db3 nor .mcap (compressed whole files are not supported).")
    return files


def _image_topics(topics: dict[str, Any]) -> str:
    names = sorted(t for t, info in topics.items() if info.msgtype in IMAGE_TYPES)
    return ", ".join(names) or "none"


def _check_topics(bag: Path, topics: dict[str, Any], asked: list[tuple[str, str]]) -> None:
    for flag, name in asked:
        info = topics.get(name)
        if info is None:
            raise InputError(f"Unknown {flag} {name!r} in {str(bag)!r}; its image topics: {_image_topics(topics)}.")
        if info.msgtype not in IMAGE_TYPES:
            raise InputError(f"{flag} {name!r} carries {info.msgtype}, not an image; "
                             f"the image topics of {str(bag)!r}: {_image_topics(topics)}.")


def read_bag(bag: Path, topic: str, depth_topic: str | None = None) -> tuple[list[TopicMessage], list[TopicMessage] | None]:
    """(colour messages, depth messages or None) of one bag, each of its container files read
    once for both topics.

    Raises:
        InputError: the bag cannot be read, holds no message, lacks a topic (the message lists
            its image topics) or the topic is not an image topic.
    """
    asked = [("--topic", topic)] + ([("--depth-topic", depth_topic)] if depth_topic else [])
    names = [name for _, name in asked]
    lists: dict[str, list[TopicMessage]] = {name: [] for name in names}
    topics: dict[str, Any] = {}
    count = 0
    for file in containers(bag):
        try:
            reader = open_bag(file)
        except FrameError as e:
            raise InputError(f"Cannot read `--rosbag` {str(bag)!r}: {e}.") from None
        with closing(reader):
            count += reader.message_count
            topics.update(reader.topics)
            msgtypes = {c.topic: c.msgtype for c in reader.connections}
            offset = {name: len(lists[name]) for name in names}
            _check_topics(bag, topics, [(flag, name) for flag, name in asked if name in msgtypes])
            try:
                for name, i, t, msg in topic_messages(reader, [n for n in names if n in msgtypes]):
                    lists[name].append(_listed(file, i, offset[name] + i, t, msg, msgtypes[name]))
            except FrameError as e:
                raise InputError(f"Cannot read `--rosbag` {str(bag)!r}: {e}.") from None
    if count == 0:
        raise InputError(f"Bag {str(bag)!r} is empty (it holds no message).")
    _check_topics(bag, topics, asked)
    _check_role(bag, "--topic", topic, lists[topic], depth=False)
    if depth_topic:
        _check_role(bag, "--depth-topic", depth_topic, lists[depth_topic], depth=True)
    return lists[topic], lists[depth_topic] if depth_topic else None


def _listed(file: Path, index: int, step: int, t: int, msg: Any, msgtype: str) -> TopicMessage:
    try:
        header: Any = message_header(msg, msgtype)
    except FrameError as e:
        header = str(e)
    encoding = str(getattr(msg, "encoding", "") if msgtype == IMAGE else getattr(msg, "format", ""))
    return TopicMessage(file, index, step, stamp_seconds(msg, t), header, message_unit(msg, msgtype), encoding)


def _check_role(bag: Path, flag: str, topic: str, messages: list[TopicMessage], depth: bool) -> None:
    """InputError when a message's encoding does not fit the topic's role: a colour frame in a
    depth-only encoding (16UC1, 32FC1, compressedDepth), a depth map in one that declares no depth
    unit (rgb8, mono8, a JPEG, ...)."""
    for m in messages:
        if isinstance(m.header, str):
            continue  # undecodable: a recorded skip either way
        is_depth_only = m.unit is not None and (m.encoding in NOT_COLOUR or "compresseddepth" in m.encoding.lower())
        if (m.unit is None) if depth else is_depth_only:
            want = ("depth images (16UC1, mono16, 32FC1 or compressedDepth)" if depth
                    else "colour or grey images (rgb8, bgr8, mono8, mono16, JPEG or PNG, ...)")
            raise InputError(f"Expected {flag} {topic!r} of {str(bag)!r} to carry {want}, got {m.encoding or 'no encoding'!r} "
                             f"(message {m.step}).")


def nearest_within(stamps: np.ndarray, targets: np.ndarray, tolerance: float) -> np.ndarray:
    """For each target time, the index of the nearest stamp within `tolerance` seconds, else -1.

    Args:
        stamps: (M,) times in seconds, any order.
        targets: (N,) times in seconds.
        tolerance: the largest |stamp - target| that pairs (seconds, >= 0).

    Returns:
        (N,) int64 indices into `stamps` (the earlier one on a tie), -1 where none is close enough.
    """
    targets = np.asarray(targets, np.float64)
    if len(stamps) == 0:
        return np.full(len(targets), -1, np.int64)
    order = np.argsort(stamps, kind="stable")
    s = np.asarray(stamps, np.float64)[order]
    hi = np.clip(np.searchsorted(s, targets), 1, len(s) - 1) if len(s) > 1 else np.zeros(len(targets), np.int64)
    lo = np.maximum(hi - 1, 0)
    pick = np.where(np.abs(s[lo] - targets) <= np.abs(s[hi] - targets), lo, hi)
    return np.where(np.abs(s[pick] - targets) <= tolerance, order[pick], -1).astype(np.int64)


def _bag_entries(bag: Path, episode: str, topic: str, depth_topic: str | None,
                 tolerance: float) -> tuple[list[FrameEntry], int]:
    """A bag's frame entries, and how many usable colour frames found no depth within tolerance."""
    colour, depth = read_bag(bag, topic, depth_topic)
    files: dict[Path, ContainerFile] = {}
    member = f"{ROSBAG_PREFIX}{topic}"
    paired = np.full(len(colour), -1, np.int64)
    if depth is not None:
        usable = [k for k, d in enumerate(depth) if not isinstance(d.header, str)]
        pick = nearest_within(np.array([depth[k].timestamp for k in usable]),
                              np.array([m.timestamp for m in colour]), tolerance)
        paired = np.array([usable[k] if k >= 0 else -1 for k in pick], np.int64)
    entries, unpaired = [], 0
    for m, j in zip(colour, paired):
        ok = not isinstance(m.header, str)
        file = files.setdefault(m.file, ContainerFile(m.file))
        entry = FrameEntry(rgb_path=Path(frame_path(m.file, member, m.index)), pair_key=pair_key(episode, m.step),
                           episode=episode, step=m.step, timestamp=m.timestamp,
                           container=ContainerFrame(file, member, m.index, m.header if ok else _UNDECODABLE),
                           error=None if ok else m.header)
        if depth is not None and ok:
            if j < 0:
                unpaired += 1
            else:
                d = depth[int(j)]
                dfile = files.setdefault(d.file, ContainerFile(d.file))
                entry.depth_container = ContainerFrame(dfile, f"{ROSBAG_PREFIX}{depth_topic}", d.index, d.header)
                entry.depth_path, entry.depth_unit = d.file, d.unit
        entries.append(entry)
    return entries, unpaired


def scan_rosbag(path: Path, topic: str, *, depth_topic: str | None = None,
                tolerance: float = SYNC_TOLERANCE) -> tuple[list[FrameEntry], list[str]]:
    """List one topic's frames of a bag or folder of bags (see the module docstring).

    In a folder of bags, a bag that cannot be read (corrupt, truncated, empty, without the
    topic) is one skipped entry (its path, the reason) and the others are listed.

    Returns:
        (entries, warnings): the warnings count colour frames left without depth.

    Raises:
        InputError: see `find_bags` and `read_bag` (for a folder: when no bag of it can be read);
            a negative or non-finite tolerance.
    """
    if not (np.isfinite(tolerance) and tolerance >= 0):
        raise InputError(f"Expected `--sync-tolerance` >= 0 seconds, got {tolerance}.")
    root = Path(os.path.abspath(path))
    bags = find_bags(root)
    entries, warnings, failed = [], [], []
    for episode, bag in enumerate(bags):
        try:
            got, unpaired = _bag_entries(bag, str(episode), topic, depth_topic, tolerance)
        except InputError as e:
            if len(bags) == 1:
                raise
            failed.append(str(e))
            entries.append(FrameEntry(rgb_path=bag, pair_key=None, episode=str(episode), error=f"bag skipped: {e}"))
            continue
        entries.extend(got)
        if unpaired:
            warnings.append(f"{unpaired} of {len(got)} frame(s) of {bag.name} have no {depth_topic} message "
                            f"within {tolerance:g} s: they keep no depth")
    if len(failed) == len(bags) > 1:
        raise InputError(f"No bag of {str(root)!r} can be read ({len(bags)} bags); the first: {failed[0]}")
    return entries, warnings


def rosbag_source(path: Path, topic: str, depth_topic: str | None = None, tolerance: float = SYNC_TOLERANCE) -> str:
    """The set's recorded source: `rosbag:<path>#<topic>[?depth=<topic>,<tolerance>]`."""
    return f"rosbag:{path}#{topic}" + (f"{DEPTH_MARK}{depth_topic},{tolerance!r}" if depth_topic else "")


def parse_rosbag_source(where: str) -> tuple[Path, str, str | None, float]:
    """(path, topic, depth topic, tolerance) of a source written by `rosbag_source`, without `rosbag:`."""
    depth, tolerance = None, SYNC_TOLERANCE
    if DEPTH_MARK in where:
        where, _, rest = where.rpartition(DEPTH_MARK)
        depth, _, tol = rest.rpartition(",")
        tolerance = float(tol)
    root, _, topic = where.rpartition("#")
    return Path(root), topic, depth, tolerance


def index_rosbag(catalog: Catalog, path: Path, topic: str, set_name: str, domain: str, *,
                 depth_topic: str | None = None, tolerance: float = SYNC_TOLERANCE, tags: list[str] | None = None,
                 workers: int | None = None, progress: Progress | None = None) -> IndexReport:
    """Catalogue one image topic of a bag or folder of bags as one set (see `scan_rosbag`)."""
    validate_set_name(set_name)  # before reading the bags; `index_entries` checks the domain
    entries, warnings = scan_rosbag(path, topic, depth_topic=depth_topic, tolerance=tolerance)
    root = Path(os.path.abspath(path))
    return index_entries(catalog, set_name, domain, entries, source=rosbag_source(root, topic, depth_topic, tolerance),
                         tags=tags, root=str(root.parent if root.is_file() else root), workers=workers,
                         progress=progress, warnings=warnings)
