"""Worker-side statistics jobs: decode a file and compute its statistics, in a child process.

Kept free of DuckDB so worker processes start fast; the parent writes the results.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from .errors import FrameError
from .frames import decode_depth, decode_rgb
from .stats import DepthStats, ImageStats, depth_stats, image_stats_array, image_stats_pil

log = logging.getLogger(__name__)


def rgb_stats_job(items: list[tuple[str, str]]) -> list[tuple[str, ImageStats | None, str | None]]:
    """[(content_hash, path)] -> [(content_hash, stats or None, skip reason or None)]."""
    out = []
    for h, path in items:
        try:
            img = decode_rgb(Path(path))
            st = image_stats_array(img) if isinstance(img, np.ndarray) else image_stats_pil(img)
            out.append((h, st, None))
        except FrameError as e:
            out.append((h, None, str(e)))
        except (ValueError, MemoryError) as e:
            out.append((h, None, f"cannot compute statistics: {e}"))
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
