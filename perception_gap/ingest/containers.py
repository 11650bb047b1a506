"""Frames that live inside a container file: a video stream, or an image column of a Parquet file.

A container frame is named by (container path, member, index): the member says what inside the
file holds the frame (`video` for the first video stream; `parquet:<column>` for the encoded
images of a Parquet column; `hdf5:<dataset path>` for an (N, H, W[, C]) array of an HDF5 file;
`rosbag:<topic>` for the image messages of a ROS bag topic, see `perception_gap.ingest.rosmsg`),
the index is its position (the frame's place in the stream's presentation order; the row
number in the file; the index along the dataset's first axis; the message's place in its topic). Its content hash is derived from the
container's content hash, the member and the index (`frame_hash`), so statistics and
embeddings cache as for files and a changed container re-indexes every frame it holds. An
encoded image cell of a Parquet file is hashed from its own bytes instead: it is a file stored
inline, and the same PNG as a file or as a cell shares one cache entry.

Decoding is sequential per container: `decode_members` opens a file once and walks it front to
back, yielding the requested frames as it passes them; it never seeks per frame. The stages that
measure (statistics, embedding) decode through `verified_group`: the container's bytes must
still hash to the container hash `index` recorded, and the file must not change during the
pass, else its frames come back as changed (nothing is measured under their old hashes; see
`perception_gap.ingest.changes`); `verified_container` does the same for several members of one
file (a bag's colour and depth topics) with one hash and one pass. Only regular files are read
(`open_regular`).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
from PIL import Image

from perception_gap.errors import FrameError
from perception_gap.ingest.frames import MAX_PIXELS, Header, array_layout, decode_rgb, open_regular
from perception_gap.ingest.hdf5_links import local_dataset
from perception_gap.ingest.threads import configure_decoder, rgb24_options

VIDEO_EXTS = frozenset({".mp4", ".mkv", ".mov", ".avi", ".webm", ".m4v"})
VIDEO_MEMBER = "video"
PARQUET_PREFIX = "parquet:"
HDF5_PREFIX = "hdf5:"
ROSBAG_PREFIX = "rosbag:"
HDF5_BLOCK = 32  # frames read from an HDF5 dataset per slice: sequential, bounded memory
_HASH_BLOCK = 1 << 22
_STILL = re.compile(r"(^|,)(image2|[a-z0-9]+_pipe)(,|$)")  # FFmpeg's still-image demuxers (jpeg_pipe, ...)


def frame_hash(container_hash: str, member: str, index: int) -> str:
    """Content hash of a container frame: BLAKE2b-128 of `<container hash>:<member>:<index>`."""
    return hashlib.blake2b(f"{container_hash}:{member}:{index}".encode(), digest_size=16).hexdigest()


def frame_path(container: Path, member: str, index: int) -> str:
    """The catalog's `rgb_path` of a container frame: `<file>#<index>` (video), `<file>#<column or dataset>:<index>`."""
    if member == VIDEO_MEMBER:
        return f"{container}#{index}"
    return f"{container}#{member.split(':', 1)[1]}:{index}"


class ContainerFile:
    """One container file, hashed at most once however many frames name it (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._hash: str | None = None
        self._lock = threading.Lock()

    def content_hash(self) -> str:
        """BLAKE2b-128 of the file's bytes (read in blocks), or FrameError naming why not."""
        with self._lock:
            if self._hash is None:
                self._hash = hash_file(self.path)[0]
            return self._hash


Signature = tuple[int, int, int, int]


def _signature(st: os.stat_result) -> Signature:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def hash_file(path: Path) -> tuple[str, Signature]:
    """BLAKE2b-128 of a regular file's bytes (read in blocks) and its (device, inode, size, mtime)
    as it was read; FrameError naming why it cannot be read (not a regular file, gone, ...)."""
    fd = open_regular(path)
    h = hashlib.blake2b(digest_size=16)
    try:
        with open(fd, "rb", closefd=True) as f:
            sig = _signature(os.fstat(f.fileno()))
            while block := f.read(_HASH_BLOCK):
                h.update(block)
    except OSError as e:
        raise FrameError(f"cannot read file: {e.strerror or e}") from None
    return h.hexdigest(), sig


def _current(path: Path) -> Signature | None:
    try:
        return _signature(os.stat(path))
    except OSError:
        return None


@dataclass(frozen=True)
class ContainerFrame:
    """Where a listed frame lives in its container, and what is known of it before decoding.

    Attributes:
        file: the container (shared by its frames; hashes lazily).
        member: `video` or `parquet:<column>`.
        index: presentation-order frame number (video) or row number (Parquet).
        header: size, format and dtype of the decoded frame.
        own_hash: the frame's content hash when it has its own bytes (a Parquet image cell);
            None derives it from the container's (`frame_hash`).
    """

    file: ContainerFile
    member: str
    index: int
    header: Header
    own_hash: str | None = None

    def content_hash(self) -> str:
        return self.own_hash or frame_hash(self.file.content_hash(), self.member, self.index)


# -- video -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VideoInfo:
    """A video file's first video stream, from its packets (no frame is decoded).

    Attributes:
        width, height: pixels.
        codec: FFmpeg codec name (`h264`, `av1`, `hevc`, ...).
        timestamps: (N,) presentation times in seconds, ascending; N is the frame count.
    """

    width: int
    height: int
    codec: str
    timestamps: np.ndarray

    def header(self) -> Header:
        return Header(width=self.width, height=self.height, format=self.codec.upper(), mode="RGB",
                      dtype="uint8", channels=3)


def _av() -> Any:
    import av

    return av


def _check_decoder(codec: str) -> None:
    av = _av()
    try:
        av.codec.Codec(codec, "r")
    except Exception:
        raise FrameError(f"unsupported video codec {codec!r}: this PyAV build has no decoder for it") from None


def probe_video(path: Path) -> VideoInfo:
    """Frame count, size and codec of a video file from its packets; FrameError when unreadable."""
    av = _av()
    os.close(open_regular(path))  # a folder, FIFO or device is refused before FFmpeg opens it
    try:
        with av.open(str(path)) as c:
            if _STILL.search(c.format.name or ""):
                raise FrameError(f"an image file ({c.format.name}), not a video")
            if not c.streams.video:
                raise FrameError("no video stream in the file")
            st = c.streams.video[0]
            codec = st.codec_context.name
            _check_decoder(codec)
            w, h = st.codec_context.width, st.codec_context.height
            tb = st.time_base
            pts = [p.pts for p in c.demux(st) if p.pts is not None and p.size > 0]
    except FrameError:
        raise
    except (av.error.FFmpegError, OSError, ValueError) as e:
        raise FrameError(f"not a readable video (truncated or corrupt?): {_reason(e)}") from None
    if not pts:
        raise FrameError("the video stream holds no frame")
    if w <= 0 or h <= 0 or w * h > MAX_PIXELS:
        raise FrameError(f"video stream of size {w}x{h}" + (f" (more than {MAX_PIXELS} pixels)" if w * h > 0 else ""))
    return VideoInfo(width=w, height=h, codec=codec, timestamps=np.sort(np.asarray(pts, np.float64) * float(tb)))


def _reason(e: BaseException) -> str:
    return (getattr(e, "strerror", None) or str(e)).splitlines()[0] if str(e) else type(e).__name__


@dataclass(frozen=True)
class RGB8Frame:
    """A decoded 8-bit RGB video frame left as the (H, W, 3) uint8 array the decoder gave, for a
    consumer that reads arrays (the statistics: `image_stats_rgb8` gives the numbers of its Pillow
    image without the full-frame copy that making one costs)."""

    array: np.ndarray


def _video_frames(path: Path, wanted: list[int], arrays: bool = False) -> Iterator[tuple[int, Any]]:
    """Decode a video front to back once, yielding (index, 8-bit RGB Pillow image) for the wanted indices.

    An image, as an 8-bit PNG decodes to, so a frame's statistics do not depend on whether it
    was stored as a file or in a video (numpy and Pillow paths round differently in the last bits).
    The RGB pixels come from `to_ndarray(format="rgb24")`, the same swscale conversion as PyAV's
    `to_image()` (identical pixels) without its per-row Python copy, single-threaded: 0.18 ms of
    CPU per 640x480 frame against 1.2 ms for `to_image()`, then `Image.fromarray` (0.16 ms).
    swscale's own threads (FFmpeg's default) cost more than they save here: a pool started per
    call, ~0.13 ms, and up to 0.5 ms of CPU per frame right after decoding, where the stages'
    processes already keep every core busy.

    A decode failure fails the frame being decoded and every later wanted frame (the decoder
    cannot resume reliably after corrupt data); wanted frames past the end are reported missing.
    """
    av = _av()
    rgb24 = rgb24_options(av)
    want = set(wanted)
    last = max(wanted)
    seen = -1
    try:
        with av.open(str(path)) as c:
            st = c.streams.video[0]
            configure_decoder(st)  # this process's share of the cores (`ingest.threads`)
            for i, frame in enumerate(c.decode(st)):
                seen = i
                if i in want:
                    rgb = frame.to_ndarray(format="rgb24", **rgb24)
                    yield i, RGB8Frame(rgb) if arrays else Image.fromarray(rgb)
                if i >= last:
                    return
    except (av.error.FFmpegError, OSError, ValueError, IndexError) as e:
        err = FrameError(f"video decode failed after frame {seen}: {_reason(e)}")
        for i in sorted(want):
            if i > seen:
                yield i, err
        return
    for i in sorted(want):
        if i > seen:
            yield i, FrameError(f"frame {i} is missing from the video (it decodes {seen + 1} frames)")


# -- Parquet image columns ----------------------------------------------------------------------------

def image_cell(value: Any) -> tuple[bytes, str]:
    """(encoded bytes, file suffix) of a Parquet image cell: a {bytes, path} struct or raw bytes."""
    if isinstance(value, dict):
        data, name = value.get("bytes"), value.get("path") or ""
    else:
        data, name = value, ""
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise FrameError("image cell holds no encoded bytes")
    suffix = Path(str(name)).suffix.lower() or ".png"
    return bytes(data), suffix


def _parquet_frames(path: Path, column: str, wanted: list[int]) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path).read(columns=[column])
    except Exception as e:
        err = FrameError(f"cannot read column {column!r} of {path.name}: {_reason(e)}")
        for i in wanted:
            yield i, err
        return
    cells = table.column(0)
    for i in sorted(set(wanted)):
        if i >= len(cells):
            yield i, FrameError(f"row {i} is missing from {path.name} ({len(cells)} rows)")
            continue
        try:
            data, suffix = image_cell(cells[i].as_py())
            yield i, decode_rgb(Path(f"cell{suffix}"), data)
        except FrameError as e:
            yield i, e


# -- HDF5 arrays --------------------------------------------------------------------------------------

def array_frame(a: np.ndarray, layout: str) -> Image.Image | np.ndarray:
    """One observation array as `decode_rgb` gives it for a file: 8-bit grey or RGB as a Pillow image
    (as the same frame's PNG decodes), anything else an (H, W, C) array with its own dtype and values."""
    if layout == "CHW":
        a = np.moveaxis(a, 0, -1)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.dtype == np.uint8 and a.shape[-1] in (1, 3):
        return Image.fromarray(np.ascontiguousarray(a[:, :, 0] if a.shape[-1] == 1 else a))
    return np.ascontiguousarray(a)


def _hdf5_frames(path: Path, dataset: str, wanted: list[int]) -> Iterator[tuple[int, Any]]:
    """Read the wanted frames of an (N, ...) HDF5 dataset front to back, `HDF5_BLOCK` frames per slice."""
    import h5py

    try:
        f = h5py.File(path, "r")
    except (OSError, ValueError) as e:
        err = FrameError(f"not a readable HDF5 file: {_reason(e)}")
        for i in wanted:
            yield i, err
        return
    with f:
        try:
            ds = local_dataset(f, dataset)  # never a value stored outside the file (`hdf5_links`)
        except FrameError as e:
            err = FrameError(f"dataset {dataset!r} of {path.name}: {e}")
            for i in wanted:
                yield i, err
            return
        layout = array_layout(tuple(ds.shape[1:]))
        pending = list(wanted)
        while pending:
            lo = pending[0]
            block = [i for i in pending if i < lo + HDF5_BLOCK]
            pending = pending[len(block):]
            try:
                data = ds[lo : min(block[-1] + 1, ds.shape[0])]
            except (OSError, ValueError) as e:
                data, err = None, FrameError(f"cannot read {dataset}[{lo}:{block[-1] + 1}]: {_reason(e)}")
            for i in block:
                if data is None:
                    yield i, err
                elif i - lo >= len(data):
                    yield i, FrameError(f"frame {i} is missing from {dataset} ({ds.shape[0]} frames)")
                else:
                    yield i, array_frame(data[i - lo], layout)


# -- decoding per container ----------------------------------------------------------------------------

def decode_members(path: Path, member: str, indices: Iterable[int], *, arrays: bool = False) -> Iterator[tuple[int, Any]]:
    """Decode the given frames of one container in one sequential pass.

    Yields:
        (index, frame or FrameError) in ascending index order; a frame is what `decode_rgb`
        returns for a file (an 8-bit Pillow image or an (H, W, C) array), or with `arrays` a
        video's frame as an `RGB8Frame`.
    """
    wanted = sorted(set(indices))
    if not wanted:
        return
    if member == VIDEO_MEMBER:
        yield from _video_frames(path, wanted, arrays)
    elif member.startswith(PARQUET_PREFIX):
        yield from _parquet_frames(path, member[len(PARQUET_PREFIX):], wanted)
    elif member.startswith(HDF5_PREFIX):
        yield from _hdf5_frames(path, member[len(HDF5_PREFIX):], wanted)
    elif member.startswith(ROSBAG_PREFIX):
        from perception_gap.ingest.rosmsg import bag_frames

        yield from bag_frames(path, member[len(ROSBAG_PREFIX):], wanted)
    else:
        err = FrameError(f"unknown container member {member!r}")
        for i in wanted:
            yield i, err


Frame = tuple[str, int, "str | None"]  # (content hash, index, container hash at `index` or None)


def group_sources(items: Iterable[tuple]) -> tuple[list[tuple[str, str]], dict[tuple[str, str], list[Frame]]]:
    """Split decode items into files and containers.

    Args:
        items: (content_hash, path) for files, or (content_hash, path, member, index[,
            container_hash]), where a None member marks a file.

    Returns:
        ([(hash, path)] of files, {(container path, member): [(hash, index, container hash)]} in
        first-seen order).
    """
    files: list[tuple[str, str]] = []
    groups: dict[tuple[str, str], list[Frame]] = {}
    for item in items:
        if len(item) < 4 or item[2] is None:
            files.append((item[0], item[1]))
        else:
            groups.setdefault((item[1], item[2]), []).append((item[0], int(item[3]), item[4] if len(item) > 4 else None))
    return files, groups


def decode_group(path: str, member: str, frames: list[tuple], *, arrays: bool = False) -> Iterator[tuple[str, Any]]:
    """(content_hash, frame or FrameError) for the frames (hash, index, ...) of one container,
    decoded in one pass, in ascending index order (frames of one index in the order given)."""
    by_index: dict[int, list[str]] = {}
    for f in frames:
        by_index.setdefault(f[1], []).append(f[0])
    for i, frame in decode_members(Path(path), member, by_index, arrays=arrays):
        for h in by_index[i]:
            yield h, frame


def verified_group(path: str, member: str, frames: list[Frame], *, arrays: bool = False) -> Iterator[tuple[str, Any]]:
    """`decode_group`, but only under the container hash `index` recorded.

    The container file is hashed first (a block read, far cheaper than decoding it). A frame
    whose recorded container hash differs, or any frame once the file is unreadable or changes
    (device, inode, size or mtime) during the pass, comes back as (hash, None): changed since
    `index`, not to be measured under its hash. Order as in `decode_group`.
    """
    try:
        actual, sig = hash_file(Path(path))
    except FrameError:
        actual, sig = None, None  # unreadable now, readable at `index`: changed (re-indexing says why)
    ordered = sorted(frames, key=lambda f: f[1])
    decoded = decode_group(path, member, [f for f in ordered if actual is not None and f[2] == actual], arrays=arrays)
    changed = False
    try:
        for h, _, expected in ordered:
            if actual is None or expected != actual:
                yield h, None
                continue
            got, frame = next(decoded) if not changed else (h, None)
            assert got == h, "container frames out of order"
            changed = changed or _current(Path(path)) != sig
            yield h, None if changed else frame
    finally:
        decoded.close()


def _decode_container(path: Path, wanted: dict[str, list[int]], arrays: bool) -> Iterator[tuple[str, int, Any]]:
    """(member, index, frame or FrameError) of several members of one container: the topics of a
    ROS bag in one pass over it, other members one sequential pass each."""
    if all(m.startswith(ROSBAG_PREFIX) for m in wanted):
        from perception_gap.ingest.rosmsg import bag_topics_frames

        n = len(ROSBAG_PREFIX)
        for topic, i, frame in bag_topics_frames(path, {m[n:]: w for m, w in wanted.items()}):
            yield ROSBAG_PREFIX + topic, i, frame
        return
    for member, w in wanted.items():
        for i, frame in decode_members(path, member, w, arrays=arrays):
            yield member, i, frame


def verified_container(path: str, members: dict[str, list[Frame]], *, arrays: bool = False
                       ) -> Iterator[tuple[str, str, Any]]:
    """The frames of several members of one container (a bag's colour and depth topics), under
    the container hash `index` recorded, the file hashed once and decoded in one pass.

    As `verified_group` for each member: a frame whose recorded container hash differs, or every
    frame not yet yielded once the file is unreadable or changes (device, inode, size or mtime)
    during the pass, comes back with frame None (changed since `index`, not to be measured).

    Yields:
        (member, content hash, frame or FrameError or None), frames in the container's order
        (the frames that cannot be measured under their recorded hash first).
    """
    try:
        actual, sig = hash_file(Path(path))
    except FrameError:
        actual, sig = None, None  # unreadable now, readable at `index`: changed (re-indexing says why)
    todo: dict[tuple[str, int], list[str]] = {}
    for member, frames in members.items():
        for h, i, expected in frames:
            if actual is None or expected != actual:
                yield member, h, None
            else:
                todo.setdefault((member, i), []).append(h)
    wanted: dict[str, list[int]] = {}
    for member, i in sorted(todo):
        wanted.setdefault(member, []).append(i)
    decoded = _decode_container(Path(path), wanted, arrays)
    try:
        for member, i, frame in decoded:
            if _current(Path(path)) != sig:
                break
            for h in todo.pop((member, i), ()):
                yield member, h, frame
    finally:
        decoded.close()
    for (member, _), hashes in todo.items():  # the file changed during the pass
        for h in hashes:
            yield member, h, None
