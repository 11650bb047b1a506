"""Worker-side statistics jobs: decode a file and compute its statistics, in a child process.

Kept free of DuckDB so worker processes start fast; the parent writes the results.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import os
import sys
from pathlib import Path

if multiprocessing.parent_process() is not None:
    # In a pool worker (this module is its first import of numpy): the pool already keeps every
    # core busy, and OpenBLAS would start one spinning thread per core at import, ~0.1 CPU-s
    # per worker. The statistics' dot products (~36k floats) gain nothing from BLAS threads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from perception_gap.errors import FrameError  # noqa: E402
from perception_gap.ingest.containers import decode_group, group_sources  # noqa: E402
from perception_gap.ingest.frames import decode_depth, decode_rgb
from perception_gap.statistics.depth import DepthStats, depth_stats
from perception_gap.statistics.image import ImageStats, image_stats_array, image_stats_pil

log = logging.getLogger(__name__)

# glibc malloc tuning for worker processes (see `worker_init`).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 16 << 20
_TRIM_THRESHOLD = 64 << 20


def worker_init() -> None:
    """Initializer of statistics worker processes: stop glibc returning memory after every frame.

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


def _rgb_stats(h: str, img: object) -> tuple[str, ImageStats | None, str | None]:
    try:
        if isinstance(img, FrameError):
            raise img
        st = image_stats_array(img) if isinstance(img, np.ndarray) else image_stats_pil(img)
        return h, st, None
    except FrameError as e:
        return h, None, str(e)
    except (ValueError, MemoryError) as e:
        return h, None, f"cannot compute statistics: {e}"


def _decoded(path: str) -> object:
    try:
        return decode_rgb(Path(path))
    except FrameError as e:
        return e


def rgb_stats_job(items: list[tuple]) -> list[tuple[str, ImageStats | None, str | None]]:
    """[(content_hash, path)] or [(content_hash, path, member, frame_index)] ->
    [(content_hash, stats or None, skip reason or None)].

    Files are decoded one by one; the frames of a container (member not None) are decoded in one
    sequential pass over it (`perception_gap.ingest.containers.decode_group`), each frame's
    statistics computed as it comes, so memory holds one frame at a time.
    """
    files, groups = group_sources(items)
    out = [_rgb_stats(h, _decoded(path)) for h, path in files]
    for (path, member), frames in groups.items():
        out.extend(_rgb_stats(h, img) for h, img in decode_group(path, member, frames))
    return out


def depth_stats_job(items: list[tuple[str, str]]) -> list[tuple[str, DepthStats | None, str | None]]:
    """[(depth_hash, path)] -> [(depth_hash, stats or None, skip reason or None)]."""
    out = []
    for h, path in items:
        try:
            out.append((h, depth_stats(decode_depth(Path(path))), None))
        except FrameError as e:
            out.append((h, None, str(e)))
        except (ValueError, MemoryError) as e:
            out.append((h, None, f"cannot compute depth statistics: {e}"))
    return out
