"""The camera model of the demo's "real" side: lens, exposure, white balance, noise, JPEG, depth.

Each effect sits below its plumbing threshold (see perception_gap/diagnoses/), except the depth dropout,
which fires as a gap (a gap, not a bug).
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

# Camera model of the "real" side (each below its plumbing threshold; see perception_gap/diagnoses/).
REAL_EXPOSURE_STOPS = 0.06      # BRIGHTNESS_STOPS = 0.12 (pairs)
REAL_WB_GAINS = (1.03, 1.0, 0.97)  # WB_LOG2 = 0.07 (pairs) -> log2 1.03 = 0.043
REAL_BLUR_SIGMA = 0.35          # pixels; SHARPNESS_STOPS = 1.0 (pairs)
REAL_VIGNETTE = 0.2             # relative fall-off at the corners
REAL_FULL_WELL = 4000.0         # electrons at linear 1.0 (shot noise ~2/255 at mid grey)
REAL_READ_NOISE = 3.0           # electrons
REAL_JPEG_QUALITY = 90
REAL_DEPTH_REL_NOISE = 0.004
REAL_DEPTH_DROPOUT = 0.08       # DROPOUT_DIFF = 0.04 (pairs): fires as a gap, score 2


def _srgb_to_linear(a: np.ndarray) -> np.ndarray:
    v = np.asarray(a, dtype=np.float64) / 255.0
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb_u8(lin: np.ndarray) -> np.ndarray:
    v = np.clip(lin, 0.0, 1.0)
    s = np.where(v <= 0.0031308, v * 12.92, 1.055 * v ** (1 / 2.4) - 0.055)
    return np.clip(np.round(s * 255.0), 0, 255).astype(np.uint8)


def camera_model(rgb: np.ndarray, rng: np.random.Generator, *, exposure_stops: float = REAL_EXPOSURE_STOPS,
                 wb_gains: tuple[float, float, float] = REAL_WB_GAINS, blur_sigma: float = REAL_BLUR_SIGMA,
                 vignette: float = REAL_VIGNETTE, noise: bool = True) -> np.ndarray:
    """A rendered uint8 sRGB frame as a camera would deliver it (before JPEG), uint8 sRGB.

    In linear light: lens blur (Gaussian), exposure (stops), white-balance gains, vignetting
    (1 - v r^2, r = 1 at the corners), shot noise (Poisson as Gaussian, REAL_FULL_WELL e- at
    1.0) and read noise (REAL_READ_NOISE e-); then sRGB encoding and 8-bit quantization.
    """
    from scipy.ndimage import gaussian_filter

    lin = _srgb_to_linear(rgb)
    if blur_sigma > 0:
        lin = gaussian_filter(lin, sigma=(blur_sigma, blur_sigma, 0), mode="nearest")
    h, w = lin.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    r2 = ((xx - (w - 1) / 2) / (w / 2)) ** 2 + ((yy - (h - 1) / 2) / (h / 2)) ** 2
    gain = (2.0 ** exposure_stops) * (1.0 - vignette * r2 / 2.0)
    lin = lin * gain[..., None] * np.asarray(wb_gains)
    if noise:
        e = np.clip(lin, 0, None) * REAL_FULL_WELL
        e = e + rng.normal(0.0, 1.0, e.shape) * np.sqrt(e + REAL_READ_NOISE ** 2)
        lin = e / REAL_FULL_WELL
    return _linear_to_srgb_u8(lin)


def encode_jpeg(rgb: np.ndarray, quality: int = REAL_JPEG_QUALITY) -> bytes:
    """JPEG at `quality` with full-resolution chroma (4:4:4), as a machine-vision camera writes it:
    Pillow's default 4:2:0 would halve the chroma detail, which the diagnoses name as compression."""
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality, subsampling=0)
    return buf.getvalue()


def _edges(ids: np.ndarray) -> np.ndarray:
    """Pixels within one pixel of an instance boundary."""
    e = np.zeros(ids.shape, dtype=bool)
    e[:, 1:] |= ids[:, 1:] != ids[:, :-1]
    e[:, :-1] |= ids[:, 1:] != ids[:, :-1]
    e[1:, :] |= ids[1:, :] != ids[:-1, :]
    e[:-1, :] |= ids[1:, :] != ids[:-1, :]
    return e


def real_depth_mm(depth_m: np.ndarray, ids: np.ndarray, rng: np.random.Generator, dropout: float) -> np.ndarray:
    """Structured-light style depth: uint16 mm, multiplicative noise, holes at object edges and
    in smooth random blobs until about `dropout` of the pixels are 0."""
    d = depth_m.astype(np.float64) * 1000.0 * (1.0 + rng.normal(0.0, REAL_DEPTH_REL_NOISE, depth_m.shape))
    out = np.clip(np.round(d), 0, 65535).astype(np.uint16)
    holes = _edges(ids) & (rng.random(ids.shape) < 0.7)
    need = dropout - holes.mean()
    if need > 0:
        h, w = ids.shape
        small = rng.random((max(2, h // 8), max(2, w // 8))).astype(np.float32)
        field = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), dtype=np.float64)
        field[holes] = -np.inf
        thr = np.quantile(field[~holes], 1.0 - need / max(1e-9, 1.0 - holes.mean()))
        holes |= field >= thr
    out[holes] = 0
    return out
