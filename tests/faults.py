"""Fault injection for tests: synthetic scenes and the plumbing faults real pipelines commit.

Every function is pure (numpy in, numpy out) and takes its randomness as a `numpy.random.Generator`
so tests are reproducible. Images are (H, W, 3) uint8 sRGB unless a docstring says otherwise.
"""

from __future__ import annotations

import io
import math

import numpy as np
from PIL import Image, ImageFilter

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
HALF_MEAN = (0.5, 0.5, 0.5)
HALF_STD = (0.5, 0.5, 0.5)
DEG_PER_RAD = 180.0 / math.pi


# --- colour -------------------------------------------------------------------------------

def srgb_to_linear(a: np.ndarray) -> np.ndarray:
    """uint8 sRGB (any shape) -> float64 linear light in [0, 1] (IEC 61966-2-1)."""
    v = np.asarray(a, dtype=np.float64) / 255.0
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(lin: np.ndarray) -> np.ndarray:
    """float linear light (clipped to [0, 1]) -> uint8 sRGB."""
    v = np.clip(np.asarray(lin, dtype=np.float64), 0.0, 1.0)
    s = np.where(v <= 0.0031308, v * 12.92, 1.055 * v ** (1 / 2.4) - 0.055)
    return np.clip(np.round(s * 255.0), 0, 255).astype(np.uint8)


# --- synthetic scenes -----------------------------------------------------------------------

def _smooth_noise(rng: np.random.Generator, h: int, w: int, cells: int) -> np.ndarray:
    """(h, w) float noise in [0, 1], smooth at a scale of ~w/cells pixels."""
    small = rng.random((max(2, cells * h // w), cells)).astype(np.float32)
    img = Image.fromarray(small).resize((w, h), Image.BICUBIC)  # float32 -> mode "F"
    out = np.asarray(img, dtype=np.float64)
    return (out - out.min()) / max(out.max() - out.min(), 1e-9)


def textured_scene(rng: np.random.Generator, width: int = 320, height: int = 240) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic tabletop-ish frame and its depth.

    Gradient background, a textured table plane, random rectangles and ellipses with their own
    colours (so per-scene R/B balance varies) and fine stripe or checker textures (so resize
    filters leave a trace), rendered in linear light, slightly blurred like a lens, sRGB encoded.

    Returns:
        rgb: (height, width, 3) uint8 sRGB.
        depth_m: (height, width) float32 depth in metres, in [0.3, 3.5], no holes.
    """
    h, w = height, width
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    yn, xn = yy / h, xx / w
    c0, c1 = rng.uniform(0.03, 0.6, 3), rng.uniform(0.03, 0.6, 3)
    t = (xn * rng.uniform(-1, 1) + yn * rng.uniform(-1, 1))
    t = (t - t.min()) / max(t.max() - t.min(), 1e-9)
    lin = c0 * (1 - t[..., None]) + c1 * t[..., None]
    lin *= (0.6 + 0.4 * _smooth_noise(rng, h, w, 12))[..., None]
    horizon = rng.uniform(0.35, 0.55)
    depth = np.where(yn < horizon, 3.0 + 0.4 * xn, 0.6 + 2.2 * (1 - (yn - horizon) / (1 - horizon)) ** 1.5)
    table = yn >= horizon
    tc = rng.uniform(0.05, 0.5, 3)
    grain = 0.75 + 0.25 * _smooth_noise(rng, h, w, 60)
    lin[table] = (tc * grain[..., None])[table]
    for _ in range(int(rng.integers(5, 9))):
        cx, cy = rng.uniform(0.05, 0.95) * w, rng.uniform(horizon * 0.8, 0.95) * h
        rx, ry = rng.uniform(0.04, 0.16) * w, rng.uniform(0.04, 0.16) * h
        if rng.random() < 0.5:
            m = (np.abs(xx - cx) < rx) & (np.abs(yy - cy) < ry)
        else:
            m = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 < 1
        col = rng.uniform(0.02, 0.75, 3)
        kind = rng.integers(0, 3)
        if kind == 0:  # fine stripes near the Nyquist limit of a 3x downscale
            period = rng.uniform(2.5, 6.0)
            ang = rng.uniform(0, math.pi)
            tex = 0.5 + 0.5 * np.sin(2 * math.pi * (xx * math.cos(ang) + yy * math.sin(ang)) / period)
            shade = 0.55 + 0.45 * tex
        elif kind == 1:  # checkerboard
            k = int(rng.integers(3, 9))
            shade = 0.6 + 0.4 * (((xx // k) + (yy // k)) % 2)
        else:  # smooth shading
            shade = 0.5 + 0.5 * _smooth_noise(rng, h, w, 8)
        lin[m] = (col * shade[..., None])[m]
        depth[m] = np.minimum(depth[m], rng.uniform(0.35, 1.5))
    rgb = linear_to_srgb(lin)
    rgb = np.asarray(Image.fromarray(rgb).filter(ImageFilter.GaussianBlur(radius=0.6)))  # lens
    return rgb, depth.astype(np.float32)


def scene_set(seed: int, n: int, width: int = 320, height: int = 240) -> list[tuple[np.ndarray, np.ndarray]]:
    """`n` textured scenes (rgb uint8, depth metres) from one seed."""
    rng = np.random.default_rng(seed)
    return [textured_scene(rng, width, height) for _ in range(n)]


# --- sensor realism -------------------------------------------------------------------------

def add_sensor_noise(a: np.ndarray, rng: np.random.Generator, sigma: float = 2.0) -> np.ndarray:
    """Gaussian noise of `sigma` uint8 levels, rounded and clipped to uint8."""
    noisy = a.astype(np.float64) + rng.normal(0.0, sigma, a.shape)
    return np.clip(np.round(noisy), 0, 255).astype(np.uint8)


def jpeg_roundtrip(a: np.ndarray, quality: int = 90) -> np.ndarray:
    """Encode as JPEG at `quality` and decode again (uint8 RGB)."""
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    return np.asarray(Image.open(buf).convert("RGB"))


def mild_sensor(a: np.ndarray, rng: np.random.Generator, jpeg: bool = True) -> np.ndarray:
    """The clean-case perturbation: sigma 2/255 Gaussian noise, optionally JPEG quality 90."""
    out = add_sensor_noise(a, rng, 2.0)
    return jpeg_roundtrip(out, 90) if jpeg else out


# --- plumbing faults: colour and value encoding ----------------------------------------------

def swap_rb(a: np.ndarray) -> np.ndarray:
    """RGB <-> BGR."""
    return np.ascontiguousarray(a[..., ::-1])


def expose(a: np.ndarray, stops: float) -> np.ndarray:
    """Multiply linear light by 2**stops (clipping at white) and re-encode sRGB."""
    return linear_to_srgb(srgb_to_linear(a) * 2.0 ** stops)


def white_balance(a: np.ndarray, gains: tuple[float, float, float] = (1.15, 1.0, 0.85)) -> np.ndarray:
    """Per-channel gains applied in linear light, re-encoded sRGB."""
    return linear_to_srgb(srgb_to_linear(a) * np.asarray(gains))


def to_float01(a: np.ndarray) -> np.ndarray:
    """uint8 -> float32 in [0, 1]."""
    return a.astype(np.float32) / np.float32(255.0)


def to_float255(a: np.ndarray) -> np.ndarray:
    """uint8 -> float32 in [0, 255]."""
    return a.astype(np.float32)


def to_uint16(a: np.ndarray) -> np.ndarray:
    """uint8 -> uint16 full scale (x257), as a 16-bit PNG export does."""
    return a.astype(np.uint16) * np.uint16(257)


def normalize(a: np.ndarray, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """uint8 -> float32 (x/255 - mean) / std per channel, as torchvision's Normalize does."""
    return ((to_float01(a) - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)).astype(np.float32)


# --- plumbing faults: geometry ---------------------------------------------------------------

def resize_pil(a: np.ndarray, size: tuple[int, int], resample: int = Image.BILINEAR) -> np.ndarray:
    """Pillow resize to (width, height); Pillow's BILINEAR/BICUBIC antialias when downscaling."""
    return np.asarray(Image.fromarray(a).resize(size, resample))


def resize_nearest(a: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize to (width, height) by index sampling at pixel centres."""
    w, h = size
    ys = np.minimum(((np.arange(h) + 0.5) * a.shape[0] / h).astype(int), a.shape[0] - 1)
    xs = np.minimum(((np.arange(w) + 0.5) * a.shape[1] / w).astype(int), a.shape[1] - 1)
    return np.ascontiguousarray(a[ys][:, xs])


def resize_bilinear_no_aa(a: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Plain bilinear sampling to (width, height): 4 taps, no antialias filter (like
    `cv2.INTER_LINEAR` or `F.interpolate(..., antialias=False)` when downscaling)."""
    w, h = size
    src = a.astype(np.float64)
    fy = np.clip((np.arange(h) + 0.5) * a.shape[0] / h - 0.5, 0, a.shape[0] - 1)
    fx = np.clip((np.arange(w) + 0.5) * a.shape[1] / w - 0.5, 0, a.shape[1] - 1)
    y0, x0 = np.floor(fy).astype(int), np.floor(fx).astype(int)
    y1, x1 = np.minimum(y0 + 1, a.shape[0] - 1), np.minimum(x0 + 1, a.shape[1] - 1)
    wy, wx = (fy - y0)[:, None, None], (fx - x0)[None, :, None]
    top = src[y0][:, x0] * (1 - wx) + src[y0][:, x1] * wx
    bot = src[y1][:, x0] * (1 - wx) + src[y1][:, x1] * wx
    out = top * (1 - wy) + bot * wy
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def centre_crop_to_aspect(a: np.ndarray, aspect: float) -> np.ndarray:
    """Largest centred crop of `a` with width/height == `aspect`."""
    h, w = a.shape[:2]
    if w / h > aspect:
        cw = int(round(h * aspect))
        x0 = (w - cw) // 2
        return a[:, x0:x0 + cw]
    ch = int(round(w / aspect))
    y0 = (h - ch) // 2
    return a[y0:y0 + ch]


# --- depth -----------------------------------------------------------------------------------

def depth_to_mm_u16(depth_m: np.ndarray) -> np.ndarray:
    """Metres -> uint16 millimetres (0 stays 0 = invalid)."""
    d = np.nan_to_num(np.asarray(depth_m, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    return np.clip(np.round(d * 1000.0), 0, 65535).astype(np.uint16)


def depth_to_tum_u16(depth_m: np.ndarray) -> np.ndarray:
    """Metres -> uint16 at 5000 units per metre (TUM RGB-D convention)."""
    d = np.nan_to_num(np.asarray(depth_m, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    return np.clip(np.round(d * 5000.0), 0, 65535).astype(np.uint16)


def depth_noise(depth: np.ndarray, rng: np.random.Generator, rel_sigma: float = 0.005) -> np.ndarray:
    """Multiplicative Gaussian depth noise (same dtype; invalid pixels stay invalid)."""
    d = depth.astype(np.float64)
    noisy = d * (1.0 + rng.normal(0.0, rel_sigma, d.shape))
    noisy[~(d > 0)] = d[~(d > 0)]
    if np.issubdtype(depth.dtype, np.integer):
        info = np.iinfo(depth.dtype)
        return np.clip(np.round(noisy), 0, info.max).astype(depth.dtype)
    return noisy.astype(depth.dtype)


def depth_holes(depth: np.ndarray, rng: np.random.Generator, frac: float = 0.2) -> np.ndarray:
    """Punch blob-shaped holes (value 0) covering about `frac` of the pixels, like a structured-
    light sensor on specular/transparent surfaces and occlusion edges."""
    h, w = depth.shape
    field = _smooth_noise(rng, h, w, 16)
    thr = np.quantile(field, 1.0 - frac)
    out = depth.copy()
    out[field >= thr] = 0
    return out


# --- proprioception ----------------------------------------------------------------------------

def joint_trajectory(rng: np.random.Generator, n: int, dims: int = 7) -> np.ndarray:
    """(n, dims) plausible joint angles in radians: smooth random walks inside joint limits."""
    base = rng.uniform(-1.5, 1.5, dims)
    steps = np.cumsum(rng.normal(0, 0.08, (n, dims)), axis=0)
    return np.clip(base + steps, -2.9, 2.9)
