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
    return tuple(float(x) for x in a)
