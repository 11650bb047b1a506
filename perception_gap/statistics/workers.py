"""Worker-side statistics jobs: decode a file and compute its statistics, in a child process.

Kept free of DuckDB so worker processes start fast; the parent writes the results.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if multiprocessing.parent_process() is not None:
    # In a pool worker (this module is its first import of numpy): the pool already keeps every
    # core busy, and OpenBLAS would start one spinning thread per core at import, ~0.1 CPU-s
    # per worker. The statistics' dot products (~36k floats) gain nothing from BLAS threads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from perception_gap.errors import FrameError  # noqa: E402
from perception_gap.ingest.containers import RGB8Frame, group_sources, verified_container, verified_group  # noqa: E402
from perception_gap.ingest.entries import content_hash  # noqa: E402
from perception_gap.ingest.frames import decode_depth, decode_rgb, read_bytes  # noqa: E402
from perception_gap.ingest.threads import set_decode_threads  # noqa: E402
from perception_gap.statistics.depth import DepthStats, depth_stats
from perception_gap.statistics.image import (
    ImageStats,
    Sampled,
    image_stats_array,
    image_stats_sampled,
    sample_pil,
    sample_rgb8,
)

log = logging.getLogger(__name__)

# glibc malloc tuning for worker processes (see `worker_init`).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 16 << 20
_TRIM_THRESHOLD = 64 << 20
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_WATCH_S = 0.5  # parent-pid poll of the fallback watcher


def worker_init(decode_threads: int | None = None) -> None:
    """Initializer of statistics worker processes: die with the parent; keep malloc's heap; share the cores.

    A worker must not outlive its parent (`kill -9` or SIGTERM of `stats`): orphans would keep
    running under PID 1. Linux delivers SIGKILL to the worker when its parent dies
    (`PR_SET_PDEATHSIG`); elsewhere, or if prctl fails, a daemon thread watches the parent pid.

    Args:
        decode_threads: threads each video decoder of the worker may use (its share of the
            cores); None leaves FFmpeg's choice.
    """
    _die_with_parent()
    _keep_heap()
    set_decode_threads(decode_threads)


def _die_with_parent() -> None:
    parent = os.getppid()
    armed = False
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
            prctl.argtypes, prctl.restype = (ctypes.c_int,) + (ctypes.c_ulong,) * 4, ctypes.c_int
            armed = prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    if not armed:
        threading.Thread(target=_watch_parent, args=(parent,), name="watch-parent", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_WATCH_S)
    os._exit(1)


def _keep_heap() -> None:
    """Stop glibc returning memory after every frame.

    A frame's statistics allocate a dozen numpy temporaries of ~150 KB (the 192x192 float32
    crop, its Laplacian and differences) next to the decoded image. With glibc's defaults,
    freeing them trims the heap (or unmaps them) and the next frame faults the same pages back
    in: ~60 page faults and 0.15-0.25 ms of kernel time per 640x480 JPEG (measured), about a
    tenth of the frame's cost. Serving blocks under 16 MB from the heap and trimming only above
    64 MB free makes them reusable. Workers are short-lived, so the memory kept is bounded by
    one frame's working set. Changes no result; a no-op where mallopt is unavailable.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return  # musl or another libc without mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)


def _verified(h: str, path: str) -> bytes | None:
    """The file's bytes if they still hash to `h` (what `index` catalogued), else None.

    The statistics cache is keyed by content hash and shared by every frame holding that
    content, so bytes that changed since `index` must never be measured under the old hash.
    Hashing the bytes that are read anyway costs ~0.1 ms per 100 KB (BLAKE2b). A file that
    cannot be read any more (gone, replaced by a FIFO) changed too: nothing is recorded under
    `h`, and re-indexing records the frame's reason.
    """
    try:
        data = read_bytes(Path(path))
    except FrameError:
        return None
    return data if content_hash(data) == h else None


# Frames whose crop statistics are computed together (`image_stats_sampled`): 8 cut the crop
# statistics' cost per 640x480 frame by ~40% against one at a time (the batch's numpy passes
# are shared), 16 gained little more; memory holds 8 sampled crops, not 8 frames.
BATCH = 8


def _rgb_stats(h: str, img: object) -> tuple[str, ImageStats | None, str | None]:
    h, st, reason = _sampled(h, img)
    if isinstance(st, Sampled):
        return _measured([(h, st, None)])[0]
    return h, st, reason


def _sampled(h: str, img: object) -> tuple[str, Sampled | ImageStats | None, str | None]:
    """(hash, what the statistics need from an 8-bit frame, or a float frame's statistics, or None,
    skip reason or None) of a decoded frame; the frame itself can be released after this."""
    if img is None:  # changed since `index`: (hash, None, None), nothing measured
        return h, None, None
    try:
        if isinstance(img, FrameError):
            raise img
        if isinstance(img, RGB8Frame):
            return h, sample_rgb8(img.array), None  # a video frame: its Pillow image's numbers
        if isinstance(img, np.ndarray):
            return h, image_stats_array(img), None
        return h, sample_pil(img), None
    except FrameError as e:
        return h, None, str(e)
    except (ValueError, MemoryError) as e:
        return h, None, f"cannot compute statistics: {e}"


def _measured(items: list[tuple[str, Sampled, None]]) -> list[tuple[str, ImageStats | None, str | None]]:
    """The statistics of sampled frames as one batch; frame by frame, each with its own skip
    reason, if the batch fails."""
    try:
        stats = image_stats_sampled([s for _, s, _ in items])
        return [(h, st, None) for (h, _, _), st in zip(items, stats)]
    except (ValueError, MemoryError) as e:
        if len(items) == 1:
            return [(items[0][0], None, f"cannot compute statistics: {e}")]
    return [r for item in items for r in _measured([item])]


def _in_batches(frames: Iterator[tuple[str, object]]) -> list[tuple[str, ImageStats | None, str | None]]:
    """`_rgb_stats` of each (hash, decoded frame), in order, the 8-bit ones measured `BATCH` at a time."""
    out: list[tuple[str, Any, str | None]] = []
    pending: list[int] = []  # positions in `out` holding a Sampled

    def flush() -> None:
        for i, result in zip(pending, _measured([out[i] for i in pending])):
            out[i] = result
        pending.clear()

    for h, img in frames:
        out.append(_sampled(h, img))
        if isinstance(out[-1][1], Sampled):
            pending.append(len(out) - 1)
            if len(pending) == BATCH:
                flush()
    flush()
    return out


def _decoded(h: str, path: str) -> object:
    """The file decoded from the bytes that hash to `h`; None when it changed since `index`."""
    data = _verified(h, path)
    if data is None:
        return None
    try:
        return decode_rgb(Path(path), data)
    except FrameError as e:
        return e
    except (ValueError, MemoryError) as e:
        return FrameError(f"cannot compute statistics: {e}")


def rgb_stats_job(items: list[tuple]) -> list[tuple[str, ImageStats | None, str | None]]:
    """[(content_hash, path)] or [(content_hash, path, member, frame_index, container_hash)] ->
    [(content_hash, stats or None, skip reason or None)].

    Files are read once, hashed and decoded from those bytes, one by one; the frames of a
    container (member not None) are decoded in one sequential pass over it after its hash is
    verified (`perception_gap.ingest.containers.verified_group`), each frame's statistics
    computed as it comes, so memory holds one frame at a time. A frame whose file or container
    no longer hashes to what `index` catalogued comes back as (hash, None, None): changed since
    `index`, not measured (the caller re-indexes it).
    """
    files, groups = group_sources(items)
    out = _in_batches((h, _decoded(h, path)) for h, path in files)
    for (path, member), frames in groups.items():
        out.extend(_in_batches(verified_group(path, member, frames, arrays=True)))
    return out


def _depth_stats(h: str, frame: Any) -> tuple[str, DepthStats | None, str | None]:
    if frame is None:
        return h, None, None
    if isinstance(frame, FrameError):
        return h, None, str(frame)
    if isinstance(frame, RGB8Frame):
        frame = Image.fromarray(frame.array)
    if isinstance(frame, Image.Image) and frame.mode == "RGB":  # a depth video's frame: grey, R = G = B
        frame = frame.convert("L")
    try:
        return h, depth_stats(np.asarray(frame)), None
    except (ValueError, MemoryError) as e:
        return h, None, f"cannot compute depth statistics: {e}"


def depth_stats_job(items: list[tuple]) -> list[tuple[str, DepthStats | None, str | None]]:
    """[(depth_hash, path)] or [(depth_hash, path, member, index, container_hash)] -> [(depth_hash,
    stats or None, skip reason or None)]; (hash, None, None) for a file or container changed since
    `index`, as in `rgb_stats_job` (depth maps inside a container decode in one verified pass)."""
    files, groups = group_sources(items)
    out = []
    for (path, member), frames in groups.items():
        out.extend(_depth_stats(h, frame) for h, frame in verified_group(path, member, frames))
    for h, path in files:
        try:
            data = _verified(h, path)
            if data is None:
                out.append((h, None, None))
                continue
            out.append((h, depth_stats(decode_depth(Path(path), data)), None))
        except FrameError as e:
            out.append((h, None, str(e)))
        except (ValueError, MemoryError) as e:
            out.append((h, None, f"cannot compute depth statistics: {e}"))
    return out


RGB, DEPTH = "rgb", "depth"  # the kinds of `joint_stats_job`'s items: statistics table they go to


def joint_stats_job(items: list[tuple]) -> list[tuple[str, str, ImageStats | DepthStats | None, str | None]]:
    """[(hash, container path, member, index, container hash, kind)], kind `RGB` or `DEPTH` ->
    [(kind, hash, stats or None, skip reason or None)].

    The colour frames and depth maps that live in the same containers (a ROS bag's colour and
    depth topics): each container is hashed once and decoded in one pass for both kinds
    (`perception_gap.ingest.containers.verified_container`), where `rgb_stats_job` and
    `depth_stats_job` would each hash it and read it. Results as theirs: (kind, hash, None,
    None) for a frame whose container changed since `index`.
    """
    kinds: dict[tuple[str, str], str] = {}
    by_path: dict[str, dict[str, list[tuple[str, int, str | None]]]] = {}
    for h, path, member, index, container_hash, kind in items:
        kinds[(member, h)] = kind
        by_path.setdefault(path, {}).setdefault(member, []).append((h, int(index), container_hash))
    out = []
    for path, members in by_path.items():
        for member, h, frame in verified_container(path, members, arrays=True):
            kind = kinds[(member, h)]
            out.append((kind,) + (_rgb_stats(h, frame) if kind == RGB else _depth_stats(h, frame)))
    return out
