"""ROS image messages and the bags that hold them, read with the pure-Python `rosbags` package.

A bag is one container file: a ROS 1 `.bag` file, or the single storage file (`.db3` for
sqlite3, `.mcap` for MCAP) of a ROS 2 bag folder (`metadata.yaml` beside it). `open_bag` opens
either; `topic_messages` walks one topic front to back, numbering its messages 0, 1, ... in
the bag's order (receive time), which is a frame's index inside the container.

`sensor_msgs/msg/Image` decodes as `decode_rgb` decodes a file of the same content: rgb8, bgr8
(channels reversed), rgba8 and bgra8 (alpha dropped) and mono8 as 8-bit Pillow images (`RGB`,
`L`); mono16 and 16UC1 as (H, W, 1) uint16 arrays, 32FC1 as (H, W, 1) float32 arrays (depth
maps: millimetres and metres, `DEPTH_UNITS`). `sensor_msgs/msg/CompressedImage` holds a JPEG or
PNG file, decoded as such. Any other encoding is a `FrameError` naming it.
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
from perception_gap.ingest.frames import Header, decode_rgb, probe

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
_MAGIC = {b"\x89PNG": ".png", b"\xff\xd8\xff": ".jpg"}
# what a corrupt or truncated bag makes the rosbags readers raise (its parsers do not wrap them all)
BAG_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError, KeyError, IndexError, TypeError,
                                                AssertionError, struct.error, sqlite3.Error, UnicodeDecodeError)


def _rosbags_errors() -> tuple[type[BaseException], ...]:
    from rosbags.highlevel import AnyReaderError
    from rosbags.rosbag1 import ReaderError as Reader1Error
    from rosbags.rosbag2 import ReaderError as Reader2Error

    return (AnyReaderError, Reader1Error, Reader2Error) + BAG_ERRORS


def bag_dir(path: Path) -> Path:
    """What rosbags opens for a container file: the `.bag` itself, or a storage file's ROS 2 folder."""
    return path.parent if path.suffix.lower() in ROS2_STORAGE_EXTS else path


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
        reader = AnyReader([bag_dir(path)], default_typestore=store)
        reader.open()
    except _rosbags_errors() as e:
        raise FrameError(f"not a readable ROS bag (corrupt or truncated?): {_reason(e)}") from None
    return reader


def topic_messages(reader: Any, topic: str) -> Iterator[tuple[int, int, Any]]:
    """(index, receive time in ns, deserialized message) of one topic, in the bag's order.

    Raises:
        FrameError: a message cannot be read or deserialized (the bag is corrupt past that point).
    """
    conns = [c for c in reader.connections if c.topic == topic]
    if not conns:
        return
    i = -1
    try:
        for i, (con, t, raw) in enumerate(reader.messages(connections=conns)):
            yield i, t, reader.deserialize(raw, con.msgtype)
    except _rosbags_errors() as e:
        raise FrameError(f"bag unreadable after message {i} of {topic}: {_reason(e)}") from None


def stamp_seconds(msg: Any, receive_ns: int) -> float:
    """The message's header stamp in seconds, or its receive time when the stamp is zero (unset)."""
    st = msg.header.stamp
    ns = int(st.sec) * 1_000_000_000 + int(st.nanosec)
    return (ns if ns else int(receive_ns)) / 1e9


def _compressed_suffix(msg: Any) -> str:
    fmt = str(msg.format)
    if "compresseddepth" in fmt.lower():
        raise FrameError(f"unsupported CompressedImage format {fmt!r} (compressedDepth)")
    data = bytes(msg.data[:4])
    for magic, suffix in _MAGIC.items():
        if data.startswith(magic):
            return suffix
    raise FrameError(f"CompressedImage format {fmt!r} holds neither JPEG nor PNG data")


def message_header(msg: Any, msgtype: str) -> Header:
    """What a message's frame decodes to (size, mode, dtype), without decoding pixels; FrameError
    for an unsupported encoding or an inconsistent message."""
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


def bag_frames(path: Path, topic: str, wanted: list[int]) -> Iterator[tuple[int, Any]]:
    """Decode the wanted messages (ascending indices) of one topic in one pass over the bag.

    Yields:
        (index, frame or FrameError); a failure to read the bag fails every wanted frame not yet
        yielded, and wanted indices past the topic's end are reported missing.
    """
    want = set(wanted)
    seen = -1
    try:
        reader = open_bag(path)
    except FrameError as e:
        for i in wanted:
            yield i, e
        return
    try:
        with closing(reader):
            msgtypes = {c.topic: c.msgtype for c in reader.connections}
            for i, _, msg in topic_messages(reader, topic):
                seen = i
                if i in want:
                    try:
                        yield i, message_frame(msg, msgtypes[topic])
                    except FrameError as e:
                        yield i, e
                if i >= wanted[-1]:
                    return
    except FrameError as e:
        for i in wanted:
            if i > seen:
                yield i, e
        return
    for i in wanted:
        if i > seen:
            yield i, FrameError(f"message {i} is missing from topic {topic} ({seen + 1} messages)")
