"""The regular pixel grid that bounds the cost of intensity statistics at any resolution."""

from __future__ import annotations

import math

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
