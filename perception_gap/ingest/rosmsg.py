"""ROS image messages and the bags that hold them, read with the pure-Python `rosbags` package.

A container file is a ROS 1 `.bag` file or one storage file (`.db3` for sqlite3, `.mcap` for
MCAP) of a ROS 2 bag folder (`metadata.yaml` beside it, listing its storage files: several when
rosbag2 split the recording by size or duration, `storage_files`). `open_bag` opens one: a ROS 1
bag or an unsplit ROS 2 bag through its folder (as rosbag2 reads it), a storage file of a split bag
on its own. `topic_messages` walks the messages of several topics in one pass, numbering each
topic's messages 0, 1, ... in the file's order (receive time): a frame's index inside its container.

`sensor_msgs/msg/Image` decodes as `decode_rgb` decodes a file of the same content: rgb8, bgr8
(channels reversed), rgba8 and bgra8 (alpha dropped) and mono8 as 8-bit Pillow images (`RGB`,
`L`); mono16 and 16UC1 as (H, W, 1) uint16 arrays, 32FC1 as (H, W, 1) float32 arrays (depth
maps: millimetres and metres, `DEPTH_UNITS`). `sensor_msgs/msg/CompressedImage` holds a JPEG or
PNG file, decoded as such, or, with format `<encoding>; compressedDepth[ png]` (ROS
image_transport's compressed_depth_image_transport), a 12-byte little-endian header (int32
format, float32 depthParam[2]) then a 16-bit greyscale PNG: for 16UC1 (and mono16) the depth
values themselves; for 32FC1 quantized inverse depth q, depth = depthParam[0] / (q -
depthParam[1]) in float32 and NaN where q = 0 (the plugin's own decoder). Any other encoding
(and compressedDepth's RVL codec) is a `FrameError` naming it.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from perception_gap.errors import FrameError
from perception_gap.ingest.frames import Header, decode_rgb, open_regular, probe

IMAGE = "sensor_msgs/msg/Image"
COMPRESSED = "sensor_msgs/msg/CompressedImage"
IMAGE_TYPES = (IMAGE, COMPRESSED)
ROS2_STORAGE_EXTS = (".db3", ".mcap")
# encoding -> (dtype, channels, channel order to RGB or None)
ENCODINGS: dict[str, tuple[str, int, tuple[int, ...] | None]] = {
    "rgb8": ("uint8", 3, None), "bgr8": ("uint8", 3, (2, 1, 0)), "rgba8": ("uint8", 4, (0, 1, 2)),
    "bgra8": ("uint8", 4, (2, 1, 0)), "mono8": ("uint8", 1, None), "mono16": ("uint16", 1, None),
    "16UC1": ("uint16", 1, None), "32FC1": ("float32", 1, None),
}
DEPTH_UNITS = {"16UC1": "mm", "mono16": "mm", "32FC1": "m"}  # the ROS depth conventions (REP 118)
NOT_COLOUR = ("16UC1", "32FC1")  # depth-only encodings (mono16 is also a grey camera's)
COMPRESSED_DEPTH = {"16UC1": "uint16", "mono16": "uint16", "32FC1": "float32"}  # compressedDepth: encoding -> dtype
METADATA_BYTES = 16 << 20  # a metadata.yaml this large is not rosbag2's
_DEPTH_CONFIG = struct.Struct("<iff")  # compressed_depth_image_transport's ConfigHeader
_MAGIC = {b"\x89PNG": ".png", b"\xff\xd8\xff": ".jpg"}
# what a corrupt or truncated bag makes the rosbags readers raise (its parsers do not wrap them all)
BAG_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError, KeyError, IndexError, TypeError,
                                                AssertionError, struct.error, sqlite3.Error, UnicodeDecodeError)


def _rosbags_errors() -> tuple[type[BaseException], ...]:
    from rosbags.highlevel import AnyReaderError
    from rosbags.rosbag1 import ReaderError as Reader1Error
    from rosbags.rosbag2 import ReaderError as Reader2Error

    return (AnyReaderError, Reader1Error, Reader2Error) + BAG_ERRORS


def read_metadata(path: Path) -> Any:
    """A ROS 2 bag's `metadata.yaml`, parsed safely: a regular file of at most METADATA_BYTES, and
    YAML without aliases (rosbag2 writes none; an alias bomb expands to gigabytes from bytes).

    Raises:
        FrameError: not a regular file, too large, not YAML, or holding an alias.
    """
    from ruamel.yaml import YAML, YAMLError
    from ruamel.yaml.events import AliasEvent

    fd = open_regular(path)
    try:
        with open(fd, "rb", closefd=True) as f:
            data = f.read(METADATA_BYTES + 1)
    except OSError as e:
        raise FrameError(f"cannot read file: {e.strerror or e}") from None
    if len(data) > METADATA_BYTES:
        raise FrameError(f"larger than {METADATA_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8")
        yaml = YAML(typ="safe")
        if any(isinstance(e, AliasEvent) for e in yaml.parse(text)):
            raise FrameError("it uses YAML aliases (`*name`), which rosbag2 never writes")
        return yaml.load(text)
    except (YAMLError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise FrameError(_reason(e)) from None


def storage_files(folder: Path) -> tuple[list[Path], bool]:
    """(storage files in the order `metadata.yaml` lists them, compressed?) of a ROS 2 bag folder.

    Raises:
        FrameError: the metadata cannot be read, lists no storage file or one that is missing.
    """
    try:
        info = read_metadata(folder / "metadata.yaml")["rosbag2_bagfile_information"]
        names = [Path(str(x)).name for x in info["relative_file_paths"]]
        compressed = str(info.get("compression_mode") or "").lower() not in ("", "none")
    except FrameError as e:
        raise FrameError(f"unreadable metadata.yaml: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise FrameError(f"unreadable metadata.yaml: {_reason(e)}") from None
    files = [folder / n for n in names]
    if not files or any(not f.is_file() for f in files):
        missing = [n for n, f in zip(names, files) if not f.is_file()]
        raise FrameError("metadata.yaml lists no storage file" if not files else
                         f"storage file(s) listed in metadata.yaml are missing: {', '.join(missing)}")
    return files, compressed


def bag_target(path: Path) -> Path:
    """What rosbags opens for a container file: the `.bag` itself, an unsplit ROS 2 bag's folder,
    or the storage file itself when its bag is split into several (FrameError when that bag
    compresses its files or messages: they are read through the folder only)."""
    if path.suffix.lower() not in ROS2_STORAGE_EXTS:
        return path
    files, compressed = storage_files(path.parent)
    if len(files) == 1:
        return path.parent
    if compressed:
        raise FrameError("split ROS 2 bags with compression (compression_mode) are not supported")
    return path


def _reason(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def open_bag(path: Path) -> Any:
    """An opened `rosbags.highlevel.AnyReader` of a container file (close it, or use it as a context).

    Raises:
        FrameError: the bag cannot be opened (corrupt, truncated, unsupported), with the reason.
    """
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    ros2 = path.suffix.lower() in ROS2_STORAGE_EXTS
    store = get_typestore(Stores.ROS2_HUMBLE if ros2 else Stores.ROS1_NOETIC)  # for bags without type definitions
    try:
        reader = AnyReader([bag_target(path)], default_typestore=store)
        reader.open()
    except _rosbags_errors() as e:
        raise FrameError(f"not a readable ROS bag (corrupt or truncated?): {_reason(e)}") from None
    try:  # what callers read first, computed from the bag's metadata: malformed values raise here
        _ = reader.message_count, reader.topics, [(c.topic, c.msgtype) for c in reader.connections]
    except _rosbags_errors() as e:
        reader.close()
        raise FrameError(f"not a readable ROS bag (malformed metadata?): {_reason(e)}") from None
    return reader


def topic_messages(reader: Any, topics: list[str], wanted: dict[str, set[int]] | None = None
                   ) -> Iterator[tuple[str, int, int, Any]]:
    """(topic, index in its topic, receive time in ns, deserialized message) of the messages of
    several topics, in one pass over the bag, in its order.

    Args:
        wanted: per topic, the indices to deserialize; the others are yielded with message None
            (their bytes are read, not parsed). None deserializes every message.

    Raises:
        FrameError: a message cannot be read or deserialized (the bag is corrupt past that point).
    """
    conns = [c for c in reader.connections if c.topic in topics]
    if not conns:
        return
    seen = dict.fromkeys(topics, -1)
    n = 0
    try:
        for con, t, raw in reader.messages(connections=conns):
            i = seen[con.topic] = seen[con.topic] + 1
            keep = wanted is None or i in wanted.get(con.topic, ())
            yield con.topic, i, t, reader.deserialize(raw, con.msgtype) if keep else None
            n += 1
    except _rosbags_errors() as e:
        raise FrameError(f"bag unreadable after {n} message(s) of {', '.join(topics)}: {_reason(e)}") from None


def stamp_seconds(msg: Any, receive_ns: int) -> float:
    """The message's header stamp in seconds, or its receive time when the stamp is zero (unset)."""
    st = msg.header.stamp
    ns = int(st.sec) * 1_000_000_000 + int(st.nanosec)
    return (ns if ns else int(receive_ns)) / 1e9


def _compressed_suffix(msg: Any) -> str:
    fmt = str(msg.format)
    data = bytes(msg.data[:4])
    for magic, suffix in _MAGIC.items():
        if data.startswith(magic):
            return suffix
    raise FrameError(f"CompressedImage format {fmt!r} holds neither JPEG nor PNG data")


def depth_encoding(msg: Any) -> str | None:
    """The raw encoding (`16UC1`, `32FC1`, ...) of a compressedDepth CompressedImage, else None."""
    enc, sep, rest = str(msg.format).partition(";")
    return enc.strip() if sep and "compresseddepth" in rest.lower() else None


def _compressed_depth(msg: Any) -> tuple[str, float, float, bytes]:
    """(encoding, depthParam[0], depthParam[1], PNG bytes) of a compressedDepth message."""
    enc, fmt = depth_encoding(msg) or "", str(msg.format)
    codec = fmt.partition(";")[2].lower().replace("compresseddepth", "").strip() or "png"
    if codec != "png":
        raise FrameError(f"unsupported compressedDepth codec in format {fmt!r} (supported: png)")
    if enc not in COMPRESSED_DEPTH:
        raise FrameError(f"unsupported compressedDepth encoding {enc!r} (supported: {', '.join(COMPRESSED_DEPTH)})")
    data = bytes(msg.data)
    if len(data) <= _DEPTH_CONFIG.size or not data[_DEPTH_CONFIG.size:].startswith(b"\x89PNG"):
        raise FrameError(f"compressedDepth message of {len(data)} bytes holds no PNG after its 12-byte header")
    _, a, b = _DEPTH_CONFIG.unpack_from(data)
    return enc, a, b, data[_DEPTH_CONFIG.size:]


def _compressed_depth_header(msg: Any) -> Header:
    enc, _, _, png = _compressed_depth(msg)
    h = probe(Path("depth.png"), png)
    if h.channels != 1 or h.dtype != "uint16":
        raise FrameError(f"compressedDepth PNG is {h.mode} ({h.dtype}, {h.channels} channel(s)), not 16-bit greyscale")
    return Header(width=h.width, height=h.height, format="compressedDepth", mode="HWC",
                  dtype=COMPRESSED_DEPTH[enc], channels=1)


def _compressed_depth_frame(msg: Any) -> np.ndarray:
    """(H, W, 1) uint16 depth values (16UC1, mono16) or float32 depth (32FC1, NaN where unknown)."""
    _compressed_depth_header(msg)  # the encoding and PNG checks
    enc, qa, qb, png = _compressed_depth(msg)
    a = decode_rgb(Path("depth.png"), png)
    q = np.asarray(a).reshape(a.size[1], a.size[0], 1) if isinstance(a, Image.Image) else np.asarray(a)
    q = q.astype(np.uint16, copy=False)  # a 16-bit PNG: Pillow may hand it over as int32 (mode I)
    if COMPRESSED_DEPTH[enc] == "uint16":
        return q
    with np.errstate(divide="ignore"):
        depth = np.float32(qa) / (q.astype(np.float32) - np.float32(qb))
    return np.where(q == 0, np.float32(np.nan), depth).astype(np.float32)


def message_header(msg: Any, msgtype: str) -> Header:
    """What a message's frame decodes to (size, mode, dtype), without decoding pixels; FrameError
    for an unsupported encoding or an inconsistent message."""
    if msgtype == COMPRESSED and depth_encoding(msg) is not None:
        return _compressed_depth_header(msg)
    if msgtype == COMPRESSED:
        suffix = _compressed_suffix(msg)
        return probe(Path(f"msg{suffix}"), bytes(msg.data))
    enc = str(msg.encoding)
    if enc not in ENCODINGS:
        raise FrameError(f"unsupported image encoding {enc!r} (supported: {', '.join(ENCODINGS)})")
    dtype, c, order = ENCODINGS[enc]
    _layout(msg)  # the size check, before anything is catalogued
    c_out = 3 if order is not None else c
    mode = {"uint8": {1: "L", 3: "RGB"}[c_out]}.get(dtype, "HWC")
    return Header(width=int(msg.width), height=int(msg.height), format="ROS", mode=mode, dtype=dtype, channels=c_out)


def _layout(msg: Any) -> tuple[np.dtype, int, int, int, int, int]:
    """(dtype, channels, height, width, step, row bytes) of a raw Image message; FrameError when its
    size, step and data length disagree."""
    dtype, c, _ = ENCODINGS[str(msg.encoding)]
    dt = np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<")
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    row, n = w * c * dt.itemsize, len(msg.data)
    if h <= 0 or w <= 0 or step < row or n < h * step:
        raise FrameError(f"image message of {w}x{h} {msg.encoding}, step {step}, holds {n} bytes "
                         f"(expected at least {h * max(step, row)})")
    return dt, c, h, w, step, row


def _pixels(msg: Any) -> np.ndarray:
    """(H, W, C) array of a raw Image message in its encoding's channel order and dtype."""
    dt, c, h, w, step, row = _layout(msg)
    data = np.asarray(msg.data, np.uint8)
    rows = data[: h * step].reshape(h, step)[:, :row]
    return np.ascontiguousarray(rows).view(dt).reshape(h, w, c).astype(dt.newbyteorder("="), copy=False)


def message_frame(msg: Any, msgtype: str) -> Image.Image | np.ndarray:
    """A message's frame as `decode_rgb` gives a file's: an 8-bit `L`/`RGB` Pillow image, else an
    (H, W, C) array with its own dtype (see the module docstring); FrameError when it cannot."""
    if msgtype == COMPRESSED and depth_encoding(msg) is not None:
        return _compressed_depth_frame(msg)
    if msgtype == COMPRESSED:
        return decode_rgb(Path(f"msg{_compressed_suffix(msg)}"), bytes(msg.data))
    message_header(msg, msgtype)  # the encoding check
    a = _pixels(msg)
    order = ENCODINGS[str(msg.encoding)][2]
    if order is not None:
        a = a[:, :, list(order)]
    if a.dtype == np.uint8:
        return Image.fromarray(np.ascontiguousarray(a[:, :, 0] if a.shape[2] == 1 else a))
    return a


def message_unit(msg: Any, msgtype: str) -> str | None:
    """The depth unit a message's encoding declares (`DEPTH_UNITS`), or None."""
    enc = getattr(msg, "encoding", None) if msgtype == IMAGE else depth_encoding(msg)
    return DEPTH_UNITS.get(enc) if enc else None


def bag_frames(path: Path, topic: str, wanted: list[int]) -> Iterator[tuple[int, Any]]:
    """Decode the wanted messages (ascending indices) of one topic in one pass over the bag
    (the other messages of the topic are read, not deserialized).

    Yields:
        (index, frame or FrameError); a failure to read the bag fails every wanted frame not yet
        yielded, and wanted indices past the topic's end are reported missing.
    """
    for _, i, frame in bag_topics_frames(path, {topic: wanted}):
        yield i, frame


def bag_topics_frames(path: Path, wanted: dict[str, list[int]]) -> Iterator[tuple[str, int, Any]]:
    """Decode the wanted messages (ascending indices per topic) of several topics in one pass
    over the bag, in its order: a colour and a depth topic read together (`bag_frames` for one).

    Yields:
        (topic, index, frame or FrameError); a failure to read the bag fails every wanted frame
        not yet yielded, and wanted indices past a topic's end are reported missing. The pass
        stops once every topic's last wanted message is passed.
    """
    wanted = {t: list(w) for t, w in wanted.items() if w}
    seen = dict.fromkeys(wanted, -1)
    try:
        reader = open_bag(path)
    except FrameError as e:
        for t, w in wanted.items():
            for i in w:
                yield t, i, e
        return
    try:
        with closing(reader):
            msgtypes = {c.topic: c.msgtype for c in reader.connections}
            left = set(wanted)
            for t, i, _, msg in topic_messages(reader, list(wanted), {k: set(w) for k, w in wanted.items()}):
                if t not in left:
                    continue
                seen[t] = i
                if msg is not None:
                    try:
                        yield t, i, message_frame(msg, msgtypes[t])
                    except FrameError as e:
                        yield t, i, e
                if i >= wanted[t][-1]:
                    left.discard(t)
                    if not left:
                        return
    except FrameError as e:
        for t, w in wanted.items():
            for i in w:
                if i > seen[t]:
                    yield t, i, e
        return
    for t, w in wanted.items():
        for i in w:
            if i > seen[t]:
                yield t, i, FrameError(f"message {i} is missing from topic {t} ({seen[t] + 1} messages)")
