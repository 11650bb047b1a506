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
from scipy import fft as scipy_fft

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
# The IJG standard luminance quantization table (ITU-T T.81 Annex K), natural order.
_IJG_LUMA = np.array([16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
                      14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
                      49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99], dtype=np.float64)


def _box3_valid(z: np.ndarray) -> np.ndarray:
    """3x3 box sum of a 2-D array over its interior, shape (h-2, w-2) (separable: two passes)."""
    row = z[:, :-2] + z[:, 1:-1] + z[:, 2:]
    return row[:-2] + row[1:-1] + row[2:]


@lru_cache(maxsize=8)
def _spectrum_plan(h: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Hann window / sqrt(its energy), band label per rfft2 bin, bins per band) for an h x w crop."""
    win = np.outer(np.hanning(h), np.hanning(w))
    win = (win / math.sqrt(float((win ** 2).sum()))).astype(np.float32)
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    fr = np.sqrt(fx * fx + fy * fy)
    labels = np.full(fr.shape, len(SPECTRUM_BANDS), dtype=np.intp)
    for i, (lo, hi) in enumerate(SPECTRUM_BANDS):
        labels[(fr >= lo) & (fr < hi)] = i
    counts = np.bincount(labels.ravel(), minlength=len(SPECTRUM_BANDS) + 1)[:len(SPECTRUM_BANDS)]
    return win, labels.ravel(), counts


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
    h, w = lum.shape
    if h < 16 or w < 16:
        return {"noise_sigma": None, "spectrum": None}
    y = np.asarray(lum, dtype=np.float32) / np.float32(scale)  # no copy of a float32 crop before dividing
    d2x = y[:, :-2] - 2 * y[:, 1:-1] + y[:, 2:]
    r = d2x[:-2] - 2 * d2x[1:-1] + d2x[2:]  # (h-2, w-2), centred on the interior pixels
    gx = y[1:-1, 2:] - y[1:-1, :-2]
    gy = y[2:, 1:-1] - y[:-2, 1:-1]
    g2 = _box3_valid(gx * gx + gy * gy).ravel()  # (h-4, w-4): the interior of r
    k = g2.size * NOISE_FLAT_PERCENT // 100
    flat = g2 <= np.partition(g2, k)[k]
    a = np.abs(r[1:-1, 1:-1].ravel()[flat])
    # the mean, not the median: on 8-bit data the responses are integers and their median moves
    # in steps of 1/6 level; for Gaussian noise E|r| = 6 sigma sqrt(2/pi)
    noise = math.sqrt(math.pi / 2.0) * mean32(a) / 6.0 / NOISE_FLAT_BIAS
    win, labels, counts = _spectrum_plan(h, w)
    f = scipy_fft.rfft2((y - np.float32(mean32(y))) * win)
    power = (f.real * f.real + f.imag * f.imag).ravel()
    sums = np.bincount(labels, weights=power, minlength=len(SPECTRUM_BANDS) + 1)[:len(SPECTRUM_BANDS)]
    spectrum = tuple(math.log10(b) if b > 0 else SPECTRUM_FLOOR
                     for b in (sums / np.maximum(counts, 1)).tolist())
    return {"noise_sigma": noise, "spectrum": spectrum}


def chroma_hf(rgb: np.ndarray) -> float | None:
    """E[Laplacian^2] / E[gradient^2] of the Cb and Cr planes of an (h, w, 3) crop; None if flat or tiny."""
    h, w = rgb.shape[:2]
    if h < 3 or w < 3:
        return None
    c = rgb[..., :3].astype(np.float32)
    lap_e = grad_e = 0.0
    for k in _CHROMA:
        z = c @ k
        dx = z[:, 1:] - z[:, :-1]
        dy = z[1:, :] - z[:-1, :]
        lap = (dx[1:-1, 1:] - dx[1:-1, :-1]) + (dy[1:, 1:-1] - dy[:-1, 1:-1])
        lap_e += mean32(lap * lap)
        grad_e += mean32(dx * dx) + mean32(dy * dy)
    return lap_e / grad_e if grad_e > 0 else None


def jpeg_quality(quantization: Any) -> float | None:
    """The IJG quality whose scaled standard luminance table is closest to a JPEG's table 0.

    Distance: the L1 distance between the sorted tables (zigzag or natural order alike); the
    lowest quality wins a tie. A camera writes the same table in every frame, so the answer is
    cached per table (matching it against all 100 scaled tables took ~1.2 ms per frame).
    """
    try:
        q0 = np.asarray(list(quantization[0]), dtype=np.float64)
    except (KeyError, TypeError, IndexError, ValueError):
        return None
    if q0.size != 64:
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
