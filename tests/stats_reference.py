"""A plain, unoptimised implementation of the per-frame crop statistics, the reference for the fast one.

A frozen copy, kept only as the reference of tests/test_statistics_speed_parity.py: the
engine's `statistics.texture` was rewritten for speed, and its values must stay those of this
code (statistic values are tuned against bench/bench_truth.py). Do not edit it to follow the
engine. It imports nothing private from the engine: the helpers it needs (histogram moments,
percentiles from a histogram, the sampling grid, the central crop box, Pillow's fixed-point
luma, the spectrum plan, float32 mean squares, the IJG quality tables) are written out here as
they were, so that a change to one of the engine's helpers shows as a difference instead of
moving the reference with it. Only the result type and the tuned public constants are shared.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from PIL import Image
from scipy import fft as scipy_fft

from perception_gap.statistics.image import LUM_PERCENTILES, ImageStats
from perception_gap.statistics.texture import NOISE_FLAT_BIAS, NOISE_FLAT_PERCENT, SPECTRUM_BANDS, SPECTRUM_FLOOR

# -- helpers, written out (frozen) -----------------------------------------------------------------------

SAMPLE_PIXELS = 8192  # the sampling grid's target number of pixels
HF_CROP = 128  # side of the central crop of the high-frequency statistics
HIST_BINS = 32
_V = np.arange(256, dtype=np.float64)
_SRGB_LUT_8 = np.where(_V / 255.0 <= 0.04045, _V / 255.0 / 12.92, ((_V / 255.0 + 0.055) / 1.055) ** 2.4)
# Pillow's convert("L") weights (x 2^16), then JPEG's full-range Cb and Cr weights
_LUMA_FIXED = (19595, 38470, 7471)
_PLANES = np.stack([np.array([19595.0, 38470.0, 7471.0], dtype=np.float32),
                    np.array([-0.168736, -0.331264, 0.5], dtype=np.float32),
                    np.array([0.5, -0.418688, -0.081312], dtype=np.float32)])
# ITU-T T.81 Annex K standard luminance quantization table, natural order
_IJG_LUMA = np.array([16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55, 14, 13, 16, 24, 40, 57, 69, 56,
                      14, 17, 22, 29, 51, 87, 80, 62, 18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
                      49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99], dtype=np.float64)


def sample_stride(h: int, w: int) -> int:
    return max(1, int(math.floor(math.sqrt(h * w / SAMPLE_PIXELS))))


def sample_grid(a: np.ndarray, s: int) -> np.ndarray:
    """Rows and columns s // 2 + k s (k < H // s, W // s)."""
    if s == 1:
        return a
    o = s // 2
    return a[o:o + (a.shape[0] // s) * s:s, o:o + (a.shape[1] // s) * s:s]


def floats(a: Any) -> tuple[float, ...]:
    return tuple(float(x) for x in np.asarray(a, dtype=np.float64).ravel())


def mean32(a: np.ndarray) -> float:
    """np.mean of a float32 array (float32 pairwise sum, divided in float64, back to float32)."""
    return float(np.mean(a))


def _centre_crop_box(h: int, w: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the central HF_CROP crop, its origin on the 8x8 JPEG grid."""
    cw, ch = min(w, HF_CROP), min(h, HF_CROP)
    left, top = (w - cw) // 2 // 8 * 8, (h - ch) // 2 // 8 * 8
    return left, top, left + cw, top + ch


def _luma_u8(a: np.ndarray) -> np.ndarray:
    """Pillow's convert("L"): (R 19595 + G 38470 + B 7471 + 2^15) >> 16."""
    r, g, b = (a[..., i].astype(np.uint32) for i in range(3))
    return ((r * _LUMA_FIXED[0] + g * _LUMA_FIXED[1] + b * _LUMA_FIXED[2] + 0x8000) >> 16).astype(np.uint8)


def _channel_moments(hist: np.ndarray):
    """Per channel (mean, std, min, max, linear-light mean) of 8-bit data from (C, 256) counts.

    The sums as one product with a (256, 4) basis, as the frozen code took them: a separate
    matrix-vector product per sum rounds the linear-light mean differently in the last bit."""
    sums = hist @ np.stack([np.ones(256), _V, _V * _V, _SRGB_LUT_8], axis=1)  # n, sum v, sum v^2, sum linear
    n = sums[:, 0]
    mean = sums[:, 1] / n
    std = np.sqrt(np.maximum(sums[:, 2] / n - mean * mean, 0.0))
    nz = hist > 0
    lo = np.array([np.flatnonzero(r)[0] for r in nz])
    hi = np.array([np.flatnonzero(r)[-1] for r in nz])
    return mean, std, lo, hi, sums[:, 3] / n


def _coarse_hist_u8(hist: np.ndarray) -> tuple[float, ...]:
    coarse = hist.reshape(hist.shape[0], HIST_BINS, 256 // HIST_BINS).sum(axis=2)
    return floats(coarse / coarse.sum(axis=1, keepdims=True))


def _percentiles_from_hist(hist: np.ndarray, qs: tuple[float, ...]) -> tuple[float, ...]:
    """numpy's inverted-CDF percentile of integer data, from its histogram."""
    cdf = np.cumsum(hist)
    return tuple(float(np.searchsorted(cdf, q / 100.0 * cdf[-1], side="left")) for q in qs)


def _mean_squares(a: np.ndarray, c: int) -> list[float]:
    """Mean square of each of the c leading planes (a float32 dot product per plane)."""
    v = a.reshape(c, -1)
    return [float(np.dot(p, p) / np.float32(p.size)) for p in v]


def _spectrum_plan(h: int, w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unit-energy Hann window, band indicator over rfft2 parts (re, im side by side), bins per band)."""
    win = np.outer(np.hanning(h), np.hanning(w))
    win = (win / math.sqrt(float((win ** 2).sum()))).astype(np.float32)
    fr = np.hypot(np.fft.rfftfreq(w)[None, :], np.fft.fftfreq(h)[:, None])
    fr = np.repeat(np.sqrt(fr * fr), 2, axis=1).ravel()
    bands = np.stack([(fr >= lo) & (fr < hi) for lo, hi in SPECTRUM_BANDS]).astype(np.float32)
    return win, bands, bands.sum(axis=1) / 2


def _nearest_quality(sorted_table: tuple[float, ...]) -> float:
    """The IJG quality 1..100 whose sorted scaled table is nearest (L1; the lowest among ties)."""
    q = np.arange(1, 101, dtype=np.float64)[:, None]
    sc = np.where(q < 50, 5000.0 / q, 200.0 - 2.0 * q)
    tables = np.sort(np.clip(np.floor((_IJG_LUMA * sc + 50.0) / 100.0), 1, 255), axis=1)
    return float(np.argmin(np.abs(tables - np.asarray(sorted_table)).sum(axis=1)) + 1)


# -- the frozen statistics ------------------------------------------------------------------------------


def _ref_box3_valid(z: np.ndarray) -> np.ndarray:
    """3x3 box sum of a 2-D array over its interior, shape (h-2, w-2) (separable: two passes) (frozen reference)."""
    row = z[:, :-2] + z[:, 1:-1] + z[:, 2:]
    return row[:-2] + row[1:-1] + row[2:]


def ref_crop_features(planes: np.ndarray, scale: float = 1.0) -> dict[str, Any]:
    """Every high-frequency statistic of a central crop, from its luma and (optionally) chroma planes (frozen reference)."""
    c, h, w = planes.shape
    out: dict[str, Any] = {"sharpness": 0.0, "hf_ratio": None, "grad_ratio": None, "dup_frac": 0.0,
                           "dup_parity": 0.0, "blockiness": None, "noise_sigma": None, "spectrum": None,
                           "chroma_hf": None}
    if h < 3 or w < 3:
        return out
    dx = planes[:, :, 1:] - planes[:, :, :-1]  # (c, h, w-1)
    dy = planes[:, 1:, :] - planes[:, :-1, :]  # (c, h-1, w)
    lapx = dx[:, :, 1:] - dx[:, :, :-1]  # second difference in x, (c, h, w-2)
    # 4-neighbour Laplacian at interior pixels = -(second difference in x + in y)
    lap = lapx[:, 1:-1] + (dy[:, 1:] - dy[:, :-1])[:, :, 1:-1]
    e_lap, e_dx, e_dy = (_mean_squares(a, c) for a in (lap, dx, dy))
    inv = 1.0 / (scale * scale)
    out["sharpness"] = e_lap[0] * inv
    if e_dx[0] + e_dy[0] > 0:
        out["hf_ratio"] = e_lap[0] / (e_dx[0] + e_dy[0])
    d2 = dx[0, :, 1:] + dx[0, :, :-1]  # x[i+2] - x[i]
    if e_dx[0] > 0:
        out["grad_ratio"] = _mean_squares(d2, 1)[0] / e_dx[0]
    _ref_duplicates(dx[0], out)
    if c == 3:
        grad_e = e_dx[1] + e_dy[1] + e_dx[2] + e_dy[2]
        out["chroma_hf"] = (e_lap[1] + e_lap[2]) / grad_e if grad_e > 0 else None
    if h >= 16 and w >= 16:
        out.update(_ref_noise_and_spectrum(planes[0], lapx[0], scale))
    return out


def _ref_duplicates(dx: np.ndarray, out: dict[str, Any]) -> None:
    """`dup_frac`, `dup_parity` and `blockiness` of a luma crop from its (h, w-1) horizontal differences (frozen reference)."""
    w1 = dx.shape[1]
    # exact equality of neighbours, at even and odd columns
    c_even, c_odd = int(np.count_nonzero(dx[:, 0::2] == 0)), int(np.count_nonzero(dx[:, 1::2] == 0))
    n_even, n_odd = dx.shape[0] * ((w1 + 1) // 2), dx.shape[0] * (w1 // 2)
    out["dup_frac"] = (c_even + c_odd) / dx.size
    out["dup_parity"] = abs(c_even / max(n_even, 1) - c_odd / max(n_odd, 1))
    if w1 >= 16:
        col = (np.ones(dx.shape[0], dtype=np.float32) @ np.abs(dx)).astype(np.float64)  # (w-1,) summed over rows
        boundary = col[7::8]  # the steps between columns 8k+7 and 8k+8
        inner_sum = float(col.sum()) - float(boundary.sum())
        if inner_sum > 0:
            out["blockiness"] = float(boundary.mean()) / (inner_sum / (col.size - boundary.size))


def _ref_noise_and_spectrum(lum: np.ndarray, lapx: np.ndarray, scale: float) -> dict[str, Any]:
    """`noise_sigma` and `spectrum` of an (h, w) luma crop (h, w >= 16) given its second x-difference (frozen reference)."""
    h, w = lum.shape
    y = lum / np.float32(scale)
    r = lapx[:-2] + lapx[2:] - 2 * lapx[1:-1]  # Immerkaer's kernel, (h-2, w-2), luma units
    gx = y[1:-1, 2:] - y[1:-1, :-2]
    gy = y[2:, 1:-1] - y[:-2, 1:-1]
    g2 = _ref_box3_valid(gx * gx + gy * gy)  # (h-4, w-4): the interior of r
    k = g2.size * NOISE_FLAT_PERCENT // 100
    flat = g2 <= np.partition(g2.ravel(), k)[k]
    a = np.abs(r[1:-1, 1:-1][flat])
    # the mean, not the median: on 8-bit data the responses are integers and their median moves
    # in steps of 1/6 level; for Gaussian noise E|r| = 6 sigma sqrt(2/pi)
    noise = math.sqrt(math.pi / 2.0) * mean32(a) / scale / 6.0 / NOISE_FLAT_BIAS
    win, bands, counts = _spectrum_plan(h, w)
    f = scipy_fft.rfft2((y - np.float32(mean32(y))) * win)
    parts = f.view(np.float32).ravel()  # real and imaginary parts side by side
    sums = bands @ (parts * parts)  # power per band
    spectrum = tuple(math.log10(b) if b > 0 else SPECTRUM_FLOOR
                     for b in (sums.astype(np.float64) / np.maximum(counts, 1)).tolist())
    return {"noise_sigma": noise, "spectrum": spectrum}


def ref_chroma_planes(rgb: np.ndarray, luma: np.ndarray | None = None) -> np.ndarray:
    """(h, w, 3) RGB crop -> (3, h, w) float32 stack [luma, Cb, Cr] for `crop_features` (frozen reference)."""
    h, w = rgb.shape[:2]
    c = rgb[..., :3].transpose(2, 0, 1).astype(np.float32).reshape(3, h * w)  # planar R, G, B
    planes = (_PLANES if luma is None else _PLANES[1:]) @ c  # one matrix product, (3 or 2, h*w)
    if luma is None:
        planes[0] += np.float32(32768.0)
        np.floor(planes[0] * np.float32(1.0 / 65536.0), out=planes[0])
        return planes.reshape(3, h, w)
    return np.concatenate([np.asarray(luma, dtype=np.float32).reshape(1, h * w), planes]).reshape(3, h, w)


def ref_image_stats_pil(img: Image.Image) -> ImageStats:
    """The previous `image_stats_pil`, from the decoded pixels (frozen reference).

    Pillow's nearest-neighbour grid is `sample_grid` (offset s // 2) and its luma `_luma_u8`
    (the previous code's own equivalence, tested there), so the histograms are taken with numpy
    here rather than by a copy of the Pillow calls the engine still makes.
    """
    if img.mode not in ("L", "RGB"):
        raise ValueError(f"Expected `img.mode` in ('L', 'RGB'), got {img.mode!r}.")
    quality = ref_jpeg_quality(getattr(img, "quantization", None)) if img.format == "JPEG" else None
    a = np.asarray(img)
    h, w = a.shape[:2]
    s = sample_stride(h, w)
    if img.mode == "RGB":
        return _ref_stats_u8(w, h, "RGB", s, *_ref_rgb8_parts(a), quality)
    hists = np.bincount(sample_grid(a, s).ravel(), minlength=256)[None].astype(np.float64)
    left, top, right, bottom = _centre_crop_box(h, w)
    return _ref_stats_u8(w, h, "L", s, hists, a[top:bottom, left:right], quality)


def ref_image_stats_rgb8(a: np.ndarray) -> ImageStats:
    """`image_stats_pil(Image.fromarray(a))` of an (H, W, 3) uint8 array, bit for bit, without the image (frozen reference)."""
    h, w = a.shape[:2]
    return _ref_stats_u8(w, h, "RGB", sample_stride(h, w), *_ref_rgb8_parts(a), None)


def _ref_rgb8_parts(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(grid histograms (4, 256), central crop) of an (H, W, 3) uint8 array (frozen reference)."""
    h, w = a.shape[:2]
    g = sample_grid(a, sample_stride(h, w))
    hists = np.empty((4, 256))
    for ch in range(3):
        hists[ch] = np.bincount(g[..., ch].ravel(), minlength=256)
    hists[3] = np.bincount(_luma_u8(g).ravel(), minlength=256)
    left, top, right, bottom = _centre_crop_box(h, w)
    return hists, a[top:bottom, left:right]


def _ref_stats_u8(w: int, h: int, mode: str, s: int, hists: np.ndarray, crop: np.ndarray,
              quality: float | None) -> ImageStats:
    """ImageStats of an 8-bit frame from its grid histograms ((C + 1, 256): channels then luma; (1, 256) grey)
    and its central crop ((h, w, 3) or (h, w) uint8)."""
    rgb = mode == "RGB"
    c = 3 if rgb else 1
    mean, std, lo, hi, lin = _channel_moments(hists[:c])
    lum_hist = hists[-1]
    # luma exactly as convert("L") gives it, plus Cb and Cr, in one matrix product
    hf = ref_crop_features(ref_chroma_planes(crop) if rgb else crop.astype(np.float32)[None], 255.0)
    return ImageStats(
        width=w, height=h, channels=c, dtype="uint8", mode=mode, nominal_max=255.0,
        stride=s, mean=floats(mean), std=floats(std), min=floats(lo), max=floats(hi),
        lum_percentiles=_percentiles_from_hist(lum_hist, LUM_PERCENTILES),
        lum_mean=float(lum_hist @ _V) / float(lum_hist.sum()),
        lin_mean=floats(lin), hist=_coarse_hist_u8(hists[:c]), jpeg_quality=quality,
        **hf,
    )


def ref_jpeg_quality(quantization: Any) -> float | None:
    """The IJG quality nearest to a JPEG's table 0, matched on the sorted table (frozen reference)."""
    try:
        q0 = np.asarray(list(quantization[0]), dtype=np.float64)
    except (KeyError, TypeError, IndexError, ValueError):
        return None
    if q0.size != 64:
        return None
    return _nearest_quality(tuple(np.sort(q0).tolist()))
