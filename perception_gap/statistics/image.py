"""Per-frame raw statistics: small pure functions on decoded pixels.

Two entry points compute the same numbers: `image_stats_pil` on an 8-bit PIL image (the fast
path: the heavy lifting stays in Pillow's C code) and `image_stats_array` on any numpy array
(16-bit, float observation arrays, already-normalized tensors). Values are always reported in
the frame's own units; nothing is rescaled. Where a number needs a [0, 1] scale (sharpness,
linear-light means) the scale comes from the dtype (255 for uint8, 65535 for uint16) and is
recorded as `nominal_max`; float arrays have no nominal scale and keep their own units.

Sampling. Intensity statistics (per-channel moments, extrema, luminance percentiles) are
computed on a regular pixel grid of stride `s = floor(sqrt(H*W / 8192))` (at least 1) starting
at offset `s // 2`, so their cost is bounded whatever the resolution (a 640x480 frame uses
every sixth pixel of every sixth row: 8,480 samples; moments differ from the full-image
ones by well under one intensity level). High-frequency statistics (sharpness, spectral
slope, duplicate pixels, JPEG blockiness) are computed at full resolution on the central
crop of at most 128x128 pixels, since subsampling would destroy exactly what they measure.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from PIL import Image

from perception_gap.statistics.sampling import edge_profiles, floats, sample_grid, sample_stride
from perception_gap.statistics.texture import chroma_planes, crop_features, crop_features_batch, jpeg_quality

LUM_PERCENTILES = (1, 5, 50, 95, 99)
HF_CROP = 128
# Channel histograms: HIST_BINS equal bins over [0, full scale] of integer-coded frames.
HIST_BINS = 32
# Side of the luma thumbnail kept per frame (float16: 2 KiB a frame).
THUMB = 32

# ITU-R BT.601 luma weights, as Pillow's convert("L") uses them (fixed point, rounded).
_LUMA = np.array([0.299, 0.587, 0.114])
_LUMA_FIXED = (19595, 38470, 7471)


def _srgb_to_linear(v: np.ndarray) -> np.ndarray:
    """sRGB-encoded values in [0, 1] -> linear light in [0, 1] (IEC 61966-2-1)."""
    v = np.asarray(v, dtype=np.float64)
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


_SRGB_LUT_8 = _srgb_to_linear(np.arange(256) / 255.0)


@dataclass(frozen=True)
class ImageStats:
    """Raw statistics of one RGB (or grayscale) frame, in the frame's own units.

    Attributes:
        width, height: pixels, after EXIF orientation.
        channels: 1, 3 or 4 as stored (statistics use the first 3 of 4).
        dtype: numpy dtype name of the decoded values (`uint8`, `uint16`, `float32`, ...).
        mode: Pillow mode for image files, `array` for `.npy` observations.
        nominal_max: full-scale value implied by the dtype (255, 65535), None for floats.
        stride: sampling stride of the intensity statistics (see module docstring).
        mean, std, min, max: per channel, shape (C,), own units.
        lum_percentiles: luma percentiles at `LUM_PERCENTILES`, own units.
        lum_mean: mean luma, own units.
        lin_mean: per-channel mean of linear light in [0, 1] (sRGB decoded); None when the
            dtype gives no nominal scale.
        sharpness: mean squared 4-neighbour Laplacian of luma, in (fraction of full scale)^2
            (own units^2 for floats).
        hf_ratio: E[Laplacian^2] / (E[dx^2] + E[dy^2]); dimensionless, 0 for a linear ramp,
            5 for white noise. None on a constant crop.
        grad_ratio: E[(x[i+2]-x[i])^2] / E[(x[i+1]-x[i])^2] horizontally; ~4 for smooth images,
            ~1 for white noise; 2x nearest-neighbour upscaling raises it (white noise -> 2). None on a constant crop.
        dup_frac: fraction of horizontally adjacent luma pairs that are exactly equal.
        dup_parity: |dup_frac at even columns - dup_frac at odd columns| (2x nearest upscaling
            makes every other pair equal).
        blockiness: mean |dx| across 8-pixel block boundaries / mean |dx| elsewhere (~1 for
            unblocked images, >1 for JPEG block artefacts). None on a constant crop.
        nonfinite_frac: fraction of sampled values that are NaN or infinite (float arrays).
        hist: per-channel histogram of the sampled values, `HIST_BINS` equal bins over
            [0, nominal_max], as fractions of the samples, flattened channel-major (C * HIST_BINS);
            None for float arrays (no fixed scale to bin on).
        noise_sigma: sensor-noise standard deviation of luma, in fraction of full scale (own
            units for floats; x255 = 8-bit levels), estimated robustly in the flattest 30% of the
            crop (see `texture_features`). None on crops under 16 pixels.
        spectrum: log10 mean power of the Hann-windowed luma crop in the six radial frequency
            bands `SPECTRUM_BANDS` (cycles per pixel, Nyquist = 0.5), in (fraction of full
            scale)^2 per pixel: white noise of variance v reads log10(v) in every band. None on
            small crops.
        chroma_hf: E[Laplacian^2] / E[gradient^2] of the chroma (Cb, Cr) crop, as `hf_ratio` is
            for luma; chroma subsampling (4:2:0 video and JPEG) lowers it, per-channel noise raises
            it. None for grey or constant frames.
        jpeg_quality: the IJG quality (1-100) whose luminance quantization table best matches the
            file's own (JPEG files only), else None.
        thumb: the whole frame's luma as a `THUMB` x `THUMB` box-filtered thumbnail of the sampling
            grid, float16 bytes (row-major), in fractions of full scale (own units for floats;
            non-finite values as NaN). The spatial checks (orientation, field of view, vignetting,
            tone curve, pair sync) and the gap maps read it (`thumb_array`).
        grad_xy: (E[dx^2], E[dy^2], E[d2x^2], E[d2y^2]) of the luma crop: horizontal and vertical
            first differences, then differences across two pixels (x[i+2] - x[i], y[j+2] - y[j]), in
            (fraction of full scale)^2. Directional blur lowers the first-difference energy along its
            direction against the other, and smooths that direction at the pixel scale: there the
            two-pixel energy nears 4x the one-pixel energy (white noise: 1x, natural frames ~2-3x),
            whatever the scene's own orientation (`diagnoses.motion`). Catalogs of stats revision 2
            and older hold the first two only.
        edges: where the luma edges lie across the width and the height (`edge_profiles`, own
            units); compared with the depth map's (`DepthStats.edges`) for depth-to-RGB registration.
    """

    width: int
    height: int
    channels: int
    dtype: str
    mode: str
    nominal_max: float | None
    stride: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    min: tuple[float, ...]
    max: tuple[float, ...]
    lum_percentiles: tuple[float, ...]
    lum_mean: float
    lin_mean: tuple[float, ...] | None
    sharpness: float
    hf_ratio: float | None
    grad_ratio: float | None
    dup_frac: float
    dup_parity: float
    blockiness: float | None
    nonfinite_frac: float = 0.0
    hist: tuple[float, ...] | None = None
    noise_sigma: float | None = None
    spectrum: tuple[float, ...] | None = None
    chroma_hf: float | None = None
    jpeg_quality: float | None = None
    thumb: bytes | None = None
    grad_xy: tuple[float, ...] | None = None
    edges: tuple[float, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _centre_crop_box(height: int, width: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the central crop, origin aligned to the 8x8 JPEG grid."""
    cw, ch = min(width, HF_CROP), min(height, HF_CROP)
    left = ((width - cw) // 2) // 8 * 8
    top = ((height - ch) // 2) // 8 * 8
    return left, top, left + cw, top + ch


def _percentiles_from_hist(hist: np.ndarray, qs: tuple[float, ...]) -> tuple[float, ...]:
    """Inverted-CDF percentiles (numpy's `method="inverted_cdf"`) of integer data from its histogram."""
    cdf = np.cumsum(hist)
    idx = np.searchsorted(cdf, np.asarray(qs, dtype=np.float64) / 100.0 * cdf[-1], side="left")
    return tuple(float(i) for i in idx)


def _thumb_u8(lum: Image.Image) -> bytes:
    """THUMB x THUMB box-filtered thumbnail of an 8-bit `L` image, as float16 fractions of 255."""
    t = np.asarray(lum.resize((THUMB, THUMB), Image.BOX), dtype=np.float32) / np.float32(255.0)
    return t.astype(np.float16).tobytes()


def _thumb_float(lum: np.ndarray, scale: float) -> bytes:
    """THUMB x THUMB box-filtered thumbnail of an (h, w) luma array in own units / `scale`.

    Non-finite samples are left out of each box (a box with none finite is NaN).
    """
    lum = np.asarray(lum, dtype=np.float32) / np.float32(scale)
    fin = np.isfinite(lum)
    box = lambda a: np.asarray(Image.fromarray(a, mode="F").resize((THUMB, THUMB), Image.BOX), dtype=np.float32)
    total = box(np.where(fin, lum, np.float32(0.0)))
    share = box(fin.astype(np.float32))
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(share > 0, total / np.maximum(share, np.float32(1e-12)), np.float32(np.nan))
    return np.clip(t, -65000.0, 65000.0).astype(np.float16).tobytes()


def thumb_array(thumb: bytes) -> np.ndarray:
    """The (THUMB, THUMB) float32 luma thumbnail of `ImageStats.thumb`."""
    return np.frombuffer(thumb, dtype=np.float16).astype(np.float32).reshape(THUMB, THUMB)


_V = np.arange(256, dtype=np.float64)
# Columns: value, value^2, linear light; one matrix product gives every channel's sums at once.
_HIST_BASIS = np.stack([np.ones(256), _V, _V * _V, _SRGB_LUT_8], axis=1)  # (256, 4)


def _channel_moments(hist: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel (mean, std, min, max, linear-light mean) of 8-bit data from its (C, 256) histogram."""
    sums = hist @ _HIST_BASIS  # (C, 4): n, sum v, sum v^2, sum linear
    n = sums[:, 0]
    mean = sums[:, 1] / n
    std = np.sqrt(np.maximum(sums[:, 2] / n - mean * mean, 0.0))
    nz = hist > 0
    lo = nz.argmax(axis=1)
    hi = 255 - nz[:, ::-1].argmax(axis=1)
    return mean, std, lo, hi, sums[:, 3] / n



def _coarse_hist_u8(hist: np.ndarray) -> tuple[float, ...]:
    """(C, 256) 8-bit counts -> flattened (C * HIST_BINS) fractions of each channel's samples."""
    c = hist.shape[0]
    coarse = hist.reshape(c, HIST_BINS, 256 // HIST_BINS).sum(axis=2)
    return floats((coarse / coarse.sum(axis=1, keepdims=True)).ravel())


def _int_hist(flat: np.ndarray, nominal: float) -> tuple[float, ...]:
    """(N, C) unsigned integer samples -> flattened (C * HIST_BINS) fractions, bins over [0, nominal]."""
    n, c = flat.shape
    shift = int(round(math.log2(nominal + 1))) - int(round(math.log2(HIST_BINS)))
    out = np.empty((c, HIST_BINS))
    for ch in range(c):
        out[ch] = np.bincount(flat[:, ch] >> shift, minlength=HIST_BINS)[:HIST_BINS] / max(n, 1)
    return floats(out.ravel())


@dataclass(frozen=True)
class Sampled:
    """What an 8-bit frame's statistics need from its pixels, taken right after decoding.

    The grid histograms ((C + 1, 256): channels then luma; (1, 256) grey) and a copy of the
    central crop ((h, w, 3) or (h, w) uint8): the frame itself can be released before its
    statistics are computed, so that `image_stats_sampled` computes a batch of frames at once.
    """

    width: int
    height: int
    mode: str
    stride: int
    hists: np.ndarray
    crop: np.ndarray
    jpeg_quality: float | None
    thumb: bytes | None = None
    edges: tuple[float, ...] | None = None


def sample_pil(img: Image.Image) -> Sampled:
    """`Sampled` of an 8-bit Pillow image (mode `L` or `RGB`; convert other modes first).

    Everything heavy runs in Pillow's C code (a nearest-neighbour grid, two histograms, one
    crop).

    Args:
        img: decoded, EXIF-oriented image of size (W, H), mode `L` or `RGB`.
    """
    if img.mode not in ("L", "RGB"):
        raise ValueError(f"Expected `img.mode` in ('L', 'RGB'), got {img.mode!r}.")
    w, h = img.size
    s = sample_stride(h, w)
    if s > 1:
        sw, sh = w // s, h // s
        grid = img.resize((sw, sh), Image.NEAREST, box=(0, 0, sw * s, sh * s))
    else:
        grid = img
    rgb = img.mode == "RGB"
    lum = grid.convert("L") if rgb else grid
    raw = grid.histogram() + lum.histogram() if rgb else grid.histogram()
    hists = np.fromiter(raw, np.int64, len(raw)).astype(np.float64).reshape(-1, 256)  # ~2x np.array(raw, float)
    crop = np.asarray(img.crop(_centre_crop_box(h, w)))  # the one copy of the crop out of Pillow
    quality = jpeg_quality(getattr(img, "quantization", None)) if img.format == "JPEG" else None
    edges = edge_profiles(np.asarray(lum), s, h, w)
    return Sampled(w, h, img.mode, s, hists, crop, quality, _thumb_u8(lum), edges)


def sample_rgb8(a: np.ndarray) -> Sampled:
    """`sample_pil(Image.fromarray(a))` of an (H, W, 3) uint8 array, bit for bit, without the image.

    A decoded video frame arrives as an array (`to_ndarray(format="rgb24")`); making it a Pillow
    image copies the whole frame (~0.16 ms at 640x480) only to sample it. Pillow's nearest-
    neighbour grid is `sample_grid` (offset s // 2), its luma `_luma_u8`, so the histograms,
    and with them every statistic, are the same numbers (tested equal).
    """
    h, w = a.shape[:2]
    s = sample_stride(h, w)
    g = sample_grid(a, s)
    hists = np.empty((4, 256))
    for ch in range(3):
        hists[ch] = np.bincount(g[..., ch].ravel(), minlength=256)
    lum = _luma_u8(g)
    hists[3] = np.bincount(lum.ravel(), minlength=256)
    left, top, right, bottom = _centre_crop_box(h, w)
    thumb = _thumb_u8(Image.fromarray(np.ascontiguousarray(lum), mode="L"))
    return Sampled(w, h, "RGB", s, hists, a[top:bottom, left:right].copy(), None, thumb,
                   edge_profiles(lum, s, h, w))


def image_stats_pil(img: Image.Image) -> ImageStats:
    """Statistics of an 8-bit Pillow image (mode `L` or `RGB`); see `sample_pil`."""
    return image_stats_sampled([sample_pil(img)])[0]


def image_stats_rgb8(a: np.ndarray) -> ImageStats:
    """`image_stats_pil(Image.fromarray(a))` of an (H, W, 3) uint8 array, bit for bit; see `sample_rgb8`."""
    return image_stats_sampled([sample_rgb8(a)])[0]


def image_stats_sampled(frames: list[Sampled]) -> list[ImageStats]:
    """Statistics of sampled 8-bit frames, in order; the crops of a size computed as one batch.

    The crop statistics (`crop_features_batch`) cost less per frame in a batch (one numpy pass
    per operation for all frames) and give the same numbers bit for bit.
    """
    groups: dict[tuple, list[int]] = {}
    for i, f in enumerate(frames):
        groups.setdefault((f.mode, f.crop.shape), []).append(i)
    hf: list[dict[str, Any]] = [{} for _ in frames]
    for (mode, _), idx in groups.items():
        if mode == "RGB":  # luma exactly as convert("L") gives it, plus Cb and Cr
            planes = np.empty((len(idx), 3) + frames[idx[0]].crop.shape[:2], dtype=np.float32)
            for k, i in enumerate(idx):
                chroma_planes(frames[i].crop, out=planes[k])
        else:
            planes = np.stack([frames[i].crop for i in idx]).astype(np.float32)[:, None]
        for i, feats in zip(idx, crop_features_batch(planes, 255.0)):
            hf[i] = feats
    return [_stats_u8(f, feats) for f, feats in zip(frames, hf)]


def _stats_u8(f: Sampled, hf: dict[str, Any]) -> ImageStats:
    """ImageStats of a sampled 8-bit frame and its crop statistics."""
    rgb = f.mode == "RGB"
    c = 3 if rgb else 1
    mean, std, lo, hi, lin = _channel_moments(f.hists[:c])
    lum_hist = f.hists[-1]
    return ImageStats(
        width=f.width, height=f.height, channels=c, dtype="uint8", mode=f.mode, nominal_max=255.0,
        stride=f.stride, mean=floats(mean), std=floats(std), min=floats(lo), max=floats(hi),
        lum_percentiles=_percentiles_from_hist(lum_hist, LUM_PERCENTILES),
        lum_mean=float(lum_hist @ _V) / float(lum_hist.sum()),
        lin_mean=floats(lin), hist=_coarse_hist_u8(f.hists[:c]), jpeg_quality=f.jpeg_quality,
        thumb=f.thumb, edges=f.edges, **hf,
    )


def nominal_max_of(dtype: np.dtype) -> float | None:
    """Full-scale value implied by an integer dtype (255, 65535, ...); None for floats."""
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return 255.0
    if dtype == np.uint16:
        return 65535.0
    return None


def _luma_float(a: np.ndarray) -> np.ndarray:
    """(H, W, C) -> (H, W) float64 luma with BT.601 weights (C >= 3), or the channel itself."""
    if a.shape[2] >= 3:
        return a[..., :3].astype(np.float64) @ _LUMA
    return a[..., 0].astype(np.float64)


def _luma_u8(a: np.ndarray) -> np.ndarray:
    """Integer luma of an (H, W, 3) uint8 array, bit-exact with Pillow's convert("L")."""
    r, g, b = (a[..., i].astype(np.uint32) for i in range(3))
    return ((r * _LUMA_FIXED[0] + g * _LUMA_FIXED[1] + b * _LUMA_FIXED[2] + 0x8000) >> 16).astype(np.uint8)


def image_stats_array(a: np.ndarray, *, mode: str = "array") -> ImageStats:
    """Statistics of an (H, W) or (H, W, C) numpy array of any real dtype, own units.

    Channels beyond the third (alpha) are ignored for luma and HF statistics but reported in
    the per-channel moments. Non-finite values are excluded from moments and counted in
    `nonfinite_frac`.
    """
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[0] == 0 or a.shape[1] == 0 or a.shape[2] == 0:
        raise ValueError(f"Expected an (H, W) or (H, W, C) array with H, W, C > 0, got shape {a.shape}.")
    h, w, c = a.shape
    nominal = nominal_max_of(a.dtype)
    s = sample_stride(h, w)
    g = sample_grid(a, s)
    flat = g.reshape(-1, c)
    is_float = np.issubdtype(a.dtype, np.floating)
    means, stds, mins, maxs = [], [], [], []
    nonfinite = 0
    for ch in range(c):
        col = flat[:, ch]
        if is_float:
            fin = np.isfinite(col)
            nonfinite += int(col.size - np.count_nonzero(fin))
            col = col[fin]
        if col.size == 0:
            means.append(float("nan")); stds.append(float("nan"))
            mins.append(float("nan")); maxs.append(float("nan"))
            continue
        col64 = col.astype(np.float64)
        means.append(float(col64.mean()))
        stds.append(float(col64.std()))
        mins.append(float(col64.min()))
        maxs.append(float(col64.max()))
    if a.dtype == np.uint8 and c >= 3:
        lum_grid = _luma_u8(g[..., :3])
        thumb = _thumb_u8(Image.fromarray(np.ascontiguousarray(lum_grid), mode="L"))
        lum_g = lum_grid.astype(np.float64).ravel()
    else:
        lum_grid = _luma_float(g)
        thumb = _thumb_float(lum_grid, nominal if nominal is not None else 1.0)
        lum_g = lum_grid.ravel()
    lum_g = lum_g[np.isfinite(lum_g)]
    if lum_g.size:
        lum_p = tuple(float(x) for x in np.percentile(lum_g, LUM_PERCENTILES, method="inverted_cdf"))
        lum_mean = float(lum_g.mean())
    else:
        lum_p, lum_mean = tuple(float("nan") for _ in LUM_PERCENTILES), float("nan")
    lin_mean = None
    if nominal is not None:
        cc = min(c, 3)
        if a.dtype == np.uint8:
            lin_mean = tuple(float(_SRGB_LUT_8[flat[:, i]].mean()) for i in range(cc))
        else:
            lin_mean = tuple(float(_srgb_to_linear(flat[:, i] / nominal).mean()) for i in range(cc))
    left, top, right, bottom = _centre_crop_box(h, w)
    crop = a[top:bottom, left:right]
    if a.dtype == np.uint8 and c >= 3:
        planes = chroma_planes(crop)  # luma bit-exact with `_luma_u8`
    else:
        lum_c = np.nan_to_num(_luma_float(crop).astype(np.float32), nan=0.0, posinf=0.0, neginf=0.0)
        if c >= 3:
            crop3 = np.nan_to_num(crop[..., :3].astype(np.float32), nan=0.0, posinf=0.0, neginf=0.0)
            planes = chroma_planes(crop3, lum_c)
        else:
            planes = lum_c[None]
    hf = crop_features(planes, nominal if nominal is not None else 1.0)
    hist = _int_hist(flat, nominal) if nominal is not None else None
    return ImageStats(
        width=w, height=h, channels=c, dtype=a.dtype.name, mode=mode, nominal_max=nominal,
        stride=s, mean=tuple(means), std=tuple(stds), min=tuple(mins), max=tuple(maxs),
        lum_percentiles=lum_p, lum_mean=lum_mean, lin_mean=lin_mean,
        nonfinite_frac=nonfinite / max(flat.size, 1), hist=hist, thumb=thumb,
        edges=edge_profiles(lum_grid.astype(np.float64), s, h, w), **hf,
    )

