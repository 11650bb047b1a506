"""Antialiased bilinear resize of uint8 images in numpy, as torch computes it, for installs without torch.

The filter follows torch's uint8 antialiased bilinear resize (the path `preprocess_images` takes
through torchvision, itself after Pillow's): per output index a triangle window of half-width
max(scale, 1) input pixels, weights normalized to sum to 1 and quantized to integers with the
largest precision that keeps the largest weight within int16; the width pass runs first and is
rounded to uint8, then the height pass. Each pass is a sparse integer matrix product carried in
float64, where every sum is exact (at most 255 * 2**22 < 2**53), so the pixels are the same
integers torch gives (tested against it on many sizes).
"""

from __future__ import annotations

import numpy as np


def _weights(in_size: int, out_size: int) -> tuple[np.ndarray, int]:
    """(in_size, out_size) integer weights (float64 holding integers) and their precision in bits."""
    scale = in_size / out_size
    support = scale if scale >= 1.0 else 1.0
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    centers = scale * (np.arange(out_size) + 0.5)
    first = np.maximum((centers - support + 0.5).astype(np.int64), 0)
    stop = np.minimum((centers + support + 0.5).astype(np.int64), in_size)
    pos = np.arange(in_size)[:, None]
    w = np.maximum(1.0 - np.abs((pos - centers[None, :] + 0.5) * invscale), 0.0)
    w[(pos < first[None, :]) | (pos >= stop[None, :])] = 0.0
    total = w.sum(axis=0, keepdims=True)
    w = w / np.where(total != 0, total, 1.0)
    w_max = float(w.max())
    precision = 0
    for precision in range(22):
        if int(0.5 + w_max * (1 << (precision + 1))) >= (1 << 15):
            break
    return np.trunc(w * (1 << precision) + 0.5), precision  # bilinear weights are >= 0: round half up


def _resample_rows(a: np.ndarray, out_size: int) -> np.ndarray:
    """Resample axis 0 of a 2-D uint8 array (in_size, M) -> (out_size, M) uint8."""
    if a.shape[0] == out_size:
        return a
    from scipy import sparse

    q, precision = _weights(a.shape[0], out_size)
    acc = sparse.csr_matrix(q.T) @ a.astype(np.float64)
    acc += float(1 << (precision - 1)) if precision else 0.0
    acc *= 0.5**precision
    np.floor(acc, out=acc)
    return np.clip(acc, 0, 255).astype(np.uint8)


def resize_bilinear_uint8(images: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Antialiased bilinear resize of a batch, aspect ratio not kept.

    Args:
        images: (N, H, W, C) uint8.
        size: (out_H, out_W), pixels.

    Returns:
        (N, out_H, out_W, C) uint8, C-contiguous.
    """
    n, h, w, c = images.shape
    th, tw = int(size[0]), int(size[1])
    t = _resample_rows(images.transpose(2, 0, 1, 3).reshape(w, n * h * c), tw)  # (tw, n*h*c)
    t = t.reshape(tw, n, h, c).transpose(2, 1, 0, 3).reshape(h, n * tw * c)
    t = _resample_rows(t, th).reshape(th, n, tw, c)
    return np.ascontiguousarray(t.transpose(1, 0, 2, 3))
