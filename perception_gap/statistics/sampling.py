"""The regular pixel grid that bounds the cost of intensity statistics at any resolution."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

SAMPLE_PIXELS = 8192


def sample_stride(height: int, width: int) -> int:
    """Stride of the regular sampling grid for an image of this size (>= 1)."""
    return max(1, int(math.floor(math.sqrt(height * width / SAMPLE_PIXELS))))


def sample_grid(a: np.ndarray, stride: int) -> np.ndarray:
    """The sampling grid of an (H, W, ...) array: rows/cols `stride//2 + k*stride`."""
    if stride == 1:
        return a
    h, w = a.shape[0] // stride, a.shape[1] // stride
    o = stride // 2
    return a[o : o + h * stride : stride, o : o + w * stride : stride]



def floats(a: np.ndarray) -> tuple[float, ...]:
    """A 1-D array (or sequence) of real numbers as a tuple of Python floats (exact: via float64)."""
    return tuple(np.asarray(a, dtype=np.float64).tolist())


def mean32(a: np.ndarray) -> float:
    """`float(np.mean(a))` of a float32 array, bit for bit, without `np.mean`'s Python wrapper.

    np.mean sums with `np.add.reduce` (pairwise, in float32) and divides by the count as an
    intp, i.e. in float64, then casts back to float32; this does the same, ~8 us faster per call
    (a frame's statistics take a dozen such means).
    """
    return float(np.float32(float(np.add.reduce(a, axis=None)) / a.size))


# Bins of the edge profiles (`edge_profiles`) across the frame's width and height.
EDGE_BINS = 96


def edge_profiles(g: np.ndarray, stride: int, height: int, width: int,
                  valid: np.ndarray | None = None) -> tuple[float, ...]:
    """Where a frame's edges lie, across its width and its height: 2 x `EDGE_BINS` values.

    The mean absolute difference between horizontally adjacent samples of the sampling grid `g`,
    per grid column, then the same vertically per grid row, each placed at its position as a
    fraction of the frame's width (height) and resampled onto `EDGE_BINS` equal bins. Depth and
    colour of one frame are compared through these (a depth map shifted against its RGB moves
    its profile), at any resolution of either.

    Args:
        g: (h, w) sampling grid (`sample_grid` at `stride`) of luma or depth, float.
        stride: the grid's stride in pixels.
        height, width: the frame's size in pixels.
        valid: optional (h, w) mask of the samples that hold a value. A difference is averaged
            over the valid neighbour pairs of its column (row) only, so where holes gather (a
            depth camera's invalid pixels cluster along object edges) the profile keeps the
            edges that remain instead of sinking with the share of holes; a column (row) with
            no valid pair reads 0.
    """
    g = np.asarray(g)
    h, w = g.shape
    if h < 2 or w < 2:
        return tuple(0.0 for _ in range(2 * EDGE_BINS))
    if valid is None and g.dtype.kind in "ui" and g.itemsize <= 2:
        # 8- or 16-bit samples: exact integer sums, the same numbers as the float64 means below
        z = g.astype(np.int32)
        dx = np.abs(z[:, 1:] - z[:, :-1]).sum(axis=0) / h
        dy = np.abs(z[1:] - z[:-1]).sum(axis=1) / w
    else:
        g = g.astype(np.float64, copy=False)
        if valid is None and bool(np.isfinite(g).all()):
            dx = np.abs(np.diff(g, axis=1)).mean(axis=0)
            dy = np.abs(np.diff(g, axis=0)).mean(axis=1)
        else:
            ok = np.isfinite(g) if valid is None else (valid & np.isfinite(g))
            z = np.where(ok, g, 0.0)
            px, py = ok[:, 1:] & ok[:, :-1], ok[1:] & ok[:-1]
            nx, ny = px.sum(axis=0), py.sum(axis=1)
            dx = np.where(px, np.abs(z[:, 1:] - z[:, :-1]), 0.0).sum(axis=0) / np.maximum(nx, 1)
            dy = np.where(py, np.abs(z[1:] - z[:-1]), 0.0).sum(axis=1) / np.maximum(ny, 1)
    centres, px, py = _edge_positions(stride, h, w, height, width)
    return tuple(np.interp(centres, px, dx).tolist()) + tuple(np.interp(centres, py, dy).tolist())


@lru_cache(maxsize=64)
def _edge_positions(stride: int, h: int, w: int, height: int, width: int) -> tuple[np.ndarray, ...]:
    """`edge_profiles`' bin centres and the positions of an (h, w) grid's column and row differences."""
    o = stride // 2 if stride > 1 else 0
    centres = (np.arange(EDGE_BINS) + 0.5) / EDGE_BINS
    px = (o + (np.arange(w - 1) + 0.5) * stride) / width
    py = (o + (np.arange(h - 1) + 0.5) * stride) / height
    return centres, px, py
