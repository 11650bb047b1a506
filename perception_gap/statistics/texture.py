"""Texture of a frame beyond its sharpness: sensor noise, the radial power spectrum, chroma detail, JPEG quality.

These are what tell the high-frequency causes apart (see `perception_gap.diagnoses.sharpness` and
`.texture`): aliasing from a resize filter, optical blur, sensor noise and lossy compression all move
the Laplacian energy, but each leaves its own signature in these numbers. Pure functions on a
decoded crop; the image statistics call them on the central crop.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from perception_gap.statistics.sampling import mean32

# Radial frequency bands of `spectrum`, cycles per pixel (Nyquist = 0.5 along an axis): three
# octaves below the top one, the top octave in two halves, and the corners beyond the axis
# Nyquist (diagonal frequencies up to 0.71). Aliasing lifts the top half and the corners most.
SPECTRUM_BANDS = ((1 / 32, 1 / 16), (1 / 16, 1 / 8), (1 / 8, 1 / 4), (1 / 4, 0.35), (0.35, 0.5), (0.5, 0.72))
SPECTRUM_FLOOR = -12.0  # log10 power recorded for an empty band (a constant crop)
NOISE_FLAT_PERCENT = 30
NOISE_FLAT_BIAS = 0.815
# JPEG (BT.601 full range) chroma weights of R, G, B: Cb and Cr.
_CHROMA = (np.array([-0.168736, -0.331264, 0.5], dtype=np.float32), np.array([0.5, -0.418688, -0.081312], dtype=np.float32))
# Rows: Pillow's fixed-point luma weights (convert("L"): x 2^16), then the Cb and Cr weights.
_PLANES = np.stack([np.array([19595.0, 38470.0, 7471.0], dtype=np.float32), *_CHROMA])
# The IJG standard luminance quantization table (ITU-T T.81 Annex K), natural order.
_IJG_LUMA = np.array([16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
                      14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
                      49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99], dtype=np.float64)


def fft_module():
    """scipy's FFT, imported on first use: ~0.3 s that commands computing no spectrum (`sets`,
    `report`, `embed`, ...) need not pay. The statistics stage calls it before forking its
    workers, so that they inherit it instead of each importing it."""
    from scipy import fft

    return fft


def _box3_valid(z: np.ndarray) -> np.ndarray:
    """3x3 box sum over the interior of the last two axes, shape (..., h-2, w-2) (separable: two passes)."""
    row = z[..., :-2] + z[..., 1:-1]
    row += z[..., 2:]
    out = row[..., :-2, :] + row[..., 1:-1, :]
    out += row[..., 2:, :]
    return out


@lru_cache(maxsize=8)
def _spectrum_plan(h: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Hann window / sqrt(its energy), band indicator matrix, bins per band) for an h x w crop.

    The indicator matrix is (bands, h * 2 * (w // 2 + 1)) float32, 1 where a part (real or
    imaginary, side by side as a complex64 array's float32 view holds them) of an rfft2 bin lies
    in the band: one matrix-vector product sums the power per band (a weighted `np.bincount`
    over the same bins took 4-5x longer: it converts the weights to float64 and scatters).
    """
    win = np.outer(np.hanning(h), np.hanning(w))
    win = (win / math.sqrt(float((win ** 2).sum()))).astype(np.float32)
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    fr = np.repeat(np.sqrt(fx * fx + fy * fy), 2, axis=1).ravel()  # per part: re, im of each bin
    bands = np.stack([(fr >= lo) & (fr < hi) for lo, hi in SPECTRUM_BANDS]).astype(np.float32)
    return win, bands, bands.sum(axis=1) / 2


def _no_features() -> dict[str, Any]:
    return {"sharpness": 0.0, "hf_ratio": None, "grad_ratio": None, "dup_frac": 0.0, "dup_parity": 0.0,
            "blockiness": None, "noise_sigma": None, "spectrum": None, "chroma_hf": None,
            "grad_xy": None}


def crop_features(planes: np.ndarray, scale: float = 1.0) -> dict[str, Any]:
    """Every high-frequency statistic of a central crop, from its luma and (optionally) chroma planes.

    One pass over a (C, h, w) float32 stack: plane 0 is luma in any units, planes 1-2 (when
    C == 3) the Cb and Cr planes. The first differences, second differences and Laplacian of
    all planes are computed once, in one numpy operation each, and every statistic is read off
    them: `sharpness`, `hf_ratio`, `grad_ratio`, `dup_frac`, `dup_parity`, `blockiness` (luma,
    see `ImageStats`), `noise_sigma` and `spectrum` (luma, see `texture_features`), `chroma_hf`
    (see `chroma_hf`). This runs once per frame and must stay cheap next to decoding it: the
    separate functions took ~75 small numpy passes, this takes ~40 (`crop_features_batch`
    shares them between the frames of a batch).

    The values are those of the separate definitions up to float32 summation order (relative
    differences under 1e-5, tested against a float64 reference): luma differences of integer
    luma are exact, sums of squares are pairwise float32 sums (`mean32`).

    Args:
        planes: (1, h, w) luma or (3, h, w) luma, Cb, Cr; float32.
        scale: full-scale value of the luma: `sharpness` and `noise_sigma` are in fractions of it,
            `spectrum` in its square.
    """
    return crop_features_batch(planes[None], scale)[0]


def crop_features_batch(planes: np.ndarray, scale: float = 1.0) -> list[dict[str, Any]]:
    """`crop_features` of n same-sized crops at once, bit for bit: an (n, C, h, w) float32 stack.

    Each numpy operation runs once for the whole batch instead of once per frame: per frame,
    ~40 small passes cost more in dispatch and in cache misses (after a JPEG decode has
    flushed the caches) than in arithmetic. Every per-frame sum is still the same operation
    on the same values (a BLAS dot per plane, a pairwise reduction per row, a selection per
    frame), so the numbers do not depend on the batch (tested).
    """
    n, c, h, w = planes.shape
    outs = [_no_features() for _ in range(n)]
    if h < 3 or w < 3:
        return outs
    dx = planes[..., 1:] - planes[..., :-1]  # (n, c, h, w-1)
    dy = planes[:, :, 1:, :] - planes[:, :, :-1, :]  # (n, c, h-1, w)
    lapx = dx[..., 1:] - dx[..., :-1]  # second difference in x, (n, c, h, w-2)
    # 4-neighbour Laplacian at interior pixels = -(second difference in x + in y); the y part
    # only where it is used, the sum in place (IEEE addition commutes: the same bits)
    lap = dy[:, :, 1:, 1:-1] - dy[:, :, :-1, 1:-1]
    lap += lapx[:, :, 1:-1]
    e_lap, e_dx, e_dy = (_mean_squares(a, n * c) for a in (lap, dx, dy))
    d2 = dx[:, 0, :, 1:] + dx[:, 0, :, :-1]  # x[i+2] - x[i]
    e_d2 = _mean_squares(d2, n)
    e_d2y = _mean_squares(dy[:, 0, 1:, :] + dy[:, 0, :-1, :], n)  # y[j+2] - y[j]
    inv = 1.0 / (scale * scale)
    for i, out in enumerate(outs):
        j = i * c
        out["sharpness"] = e_lap[j] * inv
        out["grad_xy"] = (e_dx[j] * inv, e_dy[j] * inv, e_d2[i] * inv, e_d2y[i] * inv)
        if e_dx[j] + e_dy[j] > 0:
            out["hf_ratio"] = e_lap[j] / (e_dx[j] + e_dy[j])
        if e_dx[j] > 0:
            out["grad_ratio"] = e_d2[i] / e_dx[j]
        if c == 3:
            grad_e = e_dx[j + 1] + e_dy[j + 1] + e_dx[j + 2] + e_dy[j + 2]
            out["chroma_hf"] = (e_lap[j + 1] + e_lap[j + 2]) / grad_e if grad_e > 0 else None
    _duplicates(dx[:, 0], outs)
    if h >= 16 and w >= 16:
        for out, extra in zip(outs, _noise_and_spectrum(planes[:, 0], lapx[:, 0], scale)):
            out.update(extra)
    return outs


def _mean_squares(a: np.ndarray, c: int) -> list[float]:
    """Per plane, the mean square of each of the c leading planes of a contiguous array (float32 sums).

    One batched matrix product (a BLAS dot per plane): ~5x faster than squaring and summing.
    """
    v = a.reshape(c, 1, -1)
    return (np.matmul(v, v.transpose(0, 2, 1)).ravel() / np.float32(v.shape[2])).tolist()


def _duplicates(dx: np.ndarray, outs: list[dict[str, Any]]) -> None:
    """`dup_frac`, `dup_parity` and `blockiness` of n luma crops from their (n, h, w-1) horizontal differences.

    Overwrites `dx` with its absolute values (the caller is done with it; saves a copy).
    """
    n, rows, w1 = dx.shape
    # exact equality of neighbours, at even and odd columns
    eq = dx == 0
    # per frame: count_nonzero over a whole array is ~2x faster than with `axis`
    c_all = [int(np.count_nonzero(e)) for e in eq]
    c_even = [int(np.count_nonzero(e[:, 0::2])) for e in eq]
    n_even, n_odd = rows * ((w1 + 1) // 2), rows * (w1 // 2)
    for out, ca, ce in zip(outs, c_all, c_even):
        out["dup_frac"] = ca / (rows * w1)
        out["dup_parity"] = abs(ce / max(n_even, 1) - (ca - ce) / max(n_odd, 1))
    if w1 < 16:
        return
    np.abs(dx, out=dx)
    col = (np.ones(rows, dtype=np.float32) @ dx).astype(np.float64)  # (n, w-1): summed over rows
    boundary = col[:, 7::8]  # the steps between columns 8k+7 and 8k+8
    b_mean = np.mean(boundary, axis=1).tolist()
    inner = (col.sum(axis=1) - boundary.sum(axis=1)).tolist()
    for out, bm, inner_sum in zip(outs, b_mean, inner):
        if inner_sum > 0:
            out["blockiness"] = bm / (inner_sum / (w1 - boundary.shape[1]))


def _noise_and_spectrum(lum: np.ndarray, lapx: np.ndarray, scale: float) -> list[dict[str, Any]]:
    """`noise_sigma` and `spectrum` of n (h, w) luma crops (h, w >= 16), given their second x-differences."""
    n, h, w = lum.shape
    y = lum / np.float32(scale)
    gx = y[:, 1:-1, 2:] - y[:, 1:-1, :-2]
    gy = y[:, 2:, 1:-1] - y[:, :-2, 1:-1]
    np.multiply(gx, gx, out=gx)
    np.multiply(gy, gy, out=gy)
    gx += gy
    g2 = _box3_valid(gx)  # (n, h-4, w-4)
    k = (h - 4) * (w - 4) * NOISE_FLAT_PERCENT // 100
    # the k-th smallest as int32 bit patterns: for floats >= 0 (sums of squares) their order is
    # the floats' order, and selecting on integers takes ~40% less time; the same value, bit for bit
    kth = np.partition(g2.reshape(n, -1).view(np.int32), k, axis=1)[:, k].view(np.float32)
    flat = g2 <= kth[:, None, None]
    # Immerkaer's kernel (luma units) on the same (h-4, w-4) pixels: integer sums on 8-bit luma
    r = lapx[:, 1:-3, 1:-1] + lapx[:, 3:-1, 1:-1]
    r -= 2 * lapx[:, 2:-2, 1:-1]
    np.abs(r, out=r)
    win, bands, counts = _spectrum_plan(h, w)
    y -= _means32(y)[:, None, None]
    y *= win
    parts = fft_module().rfft2(y, overwrite_x=True).view(np.float32).reshape(n, -1)  # re, im side by side
    np.multiply(parts, parts, out=parts)
    outs = []
    for i in range(n):
        # the mean, not the median: on 8-bit data the responses are integers and their median
        # moves in steps of 1/6 level; for Gaussian noise E|r| = 6 sigma sqrt(2/pi)
        noise = math.sqrt(math.pi / 2.0) * mean32(r[i][flat[i]]) / scale / 6.0 / NOISE_FLAT_BIAS
        sums = bands @ parts[i]  # power per band
        spectrum = tuple(math.log10(b) if b > 0 else SPECTRUM_FLOOR
                         for b in (sums.astype(np.float64) / np.maximum(counts, 1)).tolist())
        outs.append({"noise_sigma": noise, "spectrum": spectrum})
    return outs


def _means32(a: np.ndarray) -> np.ndarray:
    """`mean32` of each a[i] of a contiguous float32 array, as float32 (the same pairwise sum per row)."""
    n = a.shape[0]
    flat = a.reshape(n, -1)
    return (np.add.reduce(flat, axis=1).astype(np.float64) / flat.shape[1]).astype(np.float32)


def texture_features(lum: np.ndarray, scale: float = 1.0) -> dict[str, Any]:
    """Sensor noise and the radial power spectrum of a 2-D luma crop (what tells noise, blur and aliasing apart).

    Noise: Immerkaer's 3x3 kernel [[1,-2,1],[-2,4,-2],[1,-2,1]] cancels any locally linear signal
    and passes white noise with gain 6; its mean absolute response over the flattest 30% of
    pixels (by 3x3-averaged squared gradient, so that edges and texture are left out) estimates
    the noise standard deviation as sqrt(pi/2) * mean|r| / 6, divided by NOISE_FLAT_BIAS (0.815,
    measured on white Gaussian noise of sigma 0.5-10 levels, rounded or not: choosing the
    flattest pixels also picks quieter ones).
    Spectrum: mean power per radial band of the mean-removed, Hann-windowed crop. Aliasing folds
    energy back below Nyquist (the top band rises, mostly its upper half), optical blur rolls it
    off (every band above the lowest falls, increasingly with frequency), noise is flat (adds the
    same power to each band).

    Args:
        lum: (h, w) float luma crop in any units.
        scale: full-scale value: results are in fractions of it.

    Returns:
        `noise_sigma` (fraction of full scale) and `spectrum` (log10 band powers), None when
        the crop is under 16 pixels on a side.
    """
    lum = np.asarray(lum, dtype=np.float32)
    h, w = lum.shape
    if h < 16 or w < 16:
        return {"noise_sigma": None, "spectrum": None}
    d2x = lum[:, 2:] - 2 * lum[:, 1:-1] + lum[:, :-2]
    return _noise_and_spectrum(lum[None], d2x[None], scale)[0]


def chroma_planes(rgb: np.ndarray, luma: np.ndarray | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """(h, w, 3) RGB crop -> (3, h, w) float32 stack [luma, Cb, Cr] for `crop_features`.

    Args:
        rgb: (h, w, >= 3) crop, any real dtype (the first three channels are used).
        luma: (h, w) luma to put in plane 0; None: the integer BT.601 luma of Pillow's
            `convert("L")` ((19595 R + 38470 G + 7471 B + 2^15) >> 16), exact for 8-bit
            values (every partial sum is an integer under 2^24, exact in float32).
        out: a contiguous (3, h, w) float32 array to write the planes into (luma None only):
            a batch's slot, which saves stacking copies.
    """
    h, w = rgb.shape[:2]
    # pixel-major R, G, B (a contiguous cast: ~3x cheaper than gathering planes first); the
    # matrix product reads it transposed, with the same sums as from planar R, G, B (tested)
    c = rgb[..., :3].astype(np.float32).reshape(h * w, 3)
    if luma is not None:
        planes = _PLANES[1:] @ c.T  # one matrix product, (2, h*w)
        return np.concatenate([np.asarray(luma, dtype=np.float32).reshape(1, h * w), planes]).reshape(3, h, w)
    planes = np.matmul(_PLANES, c.T, out=None if out is None else out.reshape(3, h * w))
    planes[0] += np.float32(32768.0)
    planes[0] *= np.float32(1.0 / 65536.0)
    np.floor(planes[0], out=planes[0])
    return planes.reshape(3, h, w)


def chroma_hf(rgb: np.ndarray) -> float | None:
    """E[Laplacian^2] / E[gradient^2] of the Cb and Cr planes of an (h, w, 3) crop; None if flat or tiny."""
    planes = chroma_planes(rgb)
    return crop_features(planes)["chroma_hf"]


def jpeg_quality(quantization: Any) -> float | None:
    """The IJG quality whose scaled standard luminance table is closest to a JPEG's table 0.

    Distance: the L1 distance between the sorted tables (zigzag or natural order alike); the
    lowest quality wins a tie. A camera writes the same table in every frame, so the answer is
    cached per table (matching it against all 100 scaled tables took ~1.2 ms per frame), keyed
    by the table's own values (sorting it for the key took ~10 us per frame).
    """
    try:
        table = tuple(quantization[0])
        return _table_quality(table)
    except (KeyError, TypeError, IndexError, ValueError):
        return None


@lru_cache(maxsize=256)
def _table_quality(table: tuple) -> float | None:
    q0 = np.asarray(table, dtype=np.float64)
    if q0.ndim != 1 or q0.size != 64:
        return None
    return _nearest_quality(tuple(np.sort(q0).tolist()))


def _ijg_tables() -> np.ndarray:
    """(100, 64): the standard luminance table scaled to quality 1..100 (libjpeg's rule), each sorted."""
    out = np.empty((100, 64))
    for q in range(1, 101):
        sc = 5000.0 / q if q < 50 else 200.0 - 2.0 * q
        out[q - 1] = np.sort(np.clip(np.floor((_IJG_LUMA * sc + 50.0) / 100.0), 1, 255))
    return out


_IJG_SORTED = _ijg_tables()


@lru_cache(maxsize=256)
def _nearest_quality(sorted_table: tuple[float, ...]) -> float:
    err = np.abs(_IJG_SORTED - np.asarray(sorted_table)).sum(axis=1)  # integer-valued: exact in any order
    return float(np.argmin(err) + 1)  # the first (lowest) quality among equal distances
