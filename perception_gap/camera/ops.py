"""The camera model's image operators: numpy in, numpy out, on float32 sRGB values in [0, 1].

Each operator is one factor of `perception_gap.camera.model` and acts where it acts in a camera:
gains, tone curve and vignetting on linear light (sRGB decoded); optical and motion blur on linear
light; sensor noise on the encoded values (what an 8-bit pipeline adds after its tone curve, in
levels of full scale / 255); JPEG on the quantized 8-bit frame. Geometric operators (flip, zoom,
resize, channel order) move pixels and touch no value.
"""

from __future__ import annotations

import io
import math

import numpy as np

LEVEL = 1.0 / 255.0  # one 8-bit level in fractions of full scale


def srgb_to_linear(v: np.ndarray) -> np.ndarray:
    """sRGB-encoded values in [0, 1] -> linear light (IEC 61966-2-1)."""
    v = np.clip(v, 0.0, 1.0)
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4).astype(np.float32)


def linear_to_srgb(lin: np.ndarray) -> np.ndarray:
    """Linear light -> sRGB-encoded values in [0, 1] (clipped)."""
    v = np.clip(lin, 0.0, 1.0)
    return np.where(v <= 0.0031308, v * 12.92, 1.055 * np.power(v, 1.0 / 2.4) - 0.055).astype(np.float32)


def radius2(h: int, w: int) -> np.ndarray:
    """(H, W) squared distance from the frame centre, 1 at the corners."""
    yy = (np.arange(h, dtype=np.float32) - (h - 1) / 2.0) / (h / 2.0)
    xx = (np.arange(w, dtype=np.float32) - (w - 1) / 2.0) / (w / 2.0)
    return (yy[:, None] ** 2 + xx[None, :] ** 2) / 2.0


def photometric(lin: np.ndarray, gains: tuple[float, float, float] = (1.0, 1.0, 1.0), exponent: float = 1.0,
                corner_stops: float = 0.0) -> np.ndarray:
    """Linear light through per-channel gains, a power curve and a radial fall-off:
    out = gains_c * lin ** exponent * 2 ** (corner_stops * r^2), r = 1 at the corners."""
    out = np.power(np.clip(lin, 0.0, None), exponent, dtype=np.float32) if exponent != 1.0 else lin
    out = out * np.asarray(gains, dtype=np.float32)
    if corner_stops:
        out = out * np.exp2(corner_stops * radius2(*lin.shape[:2]))[..., None]
    return out.astype(np.float32, copy=False)


def gaussian_blur(x: np.ndarray, sigma: float) -> np.ndarray:
    """Isotropic Gaussian blur of sigma pixels over the two spatial axes (edges mirrored)."""
    if sigma <= 0:
        return x
    from scipy.ndimage import gaussian_filter

    return gaussian_filter(x, sigma=(sigma, sigma, 0) if x.ndim == 3 else sigma, mode="mirror", truncate=3.5)


def motion_kernel(length: float, angle_deg: float) -> np.ndarray:
    """A normalized line kernel of `length` pixels at `angle_deg` (0 = horizontal), antialiased."""
    n = int(math.ceil(length)) | 1
    k = np.zeros((n, n), np.float64)
    c = n // 2
    t = np.linspace(-(length - 1) / 2.0, (length - 1) / 2.0, max(2, int(round(length * 4))))
    a = math.radians(angle_deg)
    for x, y in zip(c + t * math.cos(a), c - t * math.sin(a)):
        x0, y0 = int(math.floor(x)), int(math.floor(y))
        fx, fy = x - x0, y - y0
        for dy, wy in ((0, 1 - fy), (1, fy)):
            for dx, wx in ((0, 1 - fx), (1, fx)):
                if 0 <= y0 + dy < n and 0 <= x0 + dx < n:
                    k[y0 + dy, x0 + dx] += wx * wy
    return (k / k.sum()).astype(np.float32)


def motion_blur(x: np.ndarray, length: float, angle_deg: float) -> np.ndarray:
    """Blur along a line of `length` pixels (exposure during motion), per channel."""
    if length <= 1:
        return x
    from scipy.ndimage import convolve

    k = motion_kernel(length, angle_deg)
    if x.ndim == 2:
        return convolve(x, k, mode="mirror")
    return np.stack([convolve(x[..., c], k, mode="mirror") for c in range(x.shape[2])], axis=-1)


def add_noise(v: np.ndarray, read: float, shot: float, rng: np.random.Generator) -> np.ndarray:
    """Signal-dependent noise on encoded values: variance (read^2 + shot * v * 255) levels^2, v in
    [0, 1]; `read` in levels, `shot` in levels^2 per level. Each channel draws its own noise."""
    if read <= 0 and shot <= 0:
        return v
    var = read * read + shot * np.clip(v, 0.0, 1.0) * 255.0
    noise = rng.standard_normal(v.shape, dtype=np.float32)
    return (v + noise * np.sqrt(var, dtype=np.float32) * LEVEL).astype(np.float32)


def to_u8(v: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(v * 255.0), 0, 255).astype(np.uint8)


def jpeg(v: np.ndarray, quality: int, subsampling: str = "4:4:4") -> np.ndarray:
    """Encode and decode at IJG `quality` with the given chroma subsampling; float [0, 1] in and out."""
    from PIL import Image

    buf = io.BytesIO()
    sub = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}[subsampling]
    Image.fromarray(to_u8(v)).save(buf, format="JPEG", quality=int(quality), subsampling=sub)
    buf.seek(0)
    with Image.open(buf) as im:
        out = np.asarray(im.convert("RGB"), dtype=np.float32)
    return out * LEVEL


def zoom(x: np.ndarray, factor: float) -> np.ndarray:
    """Content magnified by `factor` about the frame centre (>1 zooms in, <1 out: edges mirrored);
    out(p) = x(p / factor) with p measured from the centre, bilinear."""
    if abs(factor - 1.0) < 1e-6:
        return x
    from scipy.ndimage import map_coordinates

    h, w = x.shape[:2]
    yy = (np.arange(h, dtype=np.float32) - (h - 1) / 2.0) / factor + (h - 1) / 2.0
    xx = (np.arange(w, dtype=np.float32) - (w - 1) / 2.0) / factor + (w - 1) / 2.0
    gy, gx = np.meshgrid(yy, xx, indexing="ij")
    chans = [x] if x.ndim == 2 else [x[..., c] for c in range(x.shape[2])]
    out = [map_coordinates(c, [gy, gx], order=1, mode="mirror") for c in chans]
    return out[0] if x.ndim == 2 else np.stack(out, axis=-1)


# The eight flips and rotations on (H, W, ...) frames (names as `diagnoses.thumbs.DIHEDRAL`).
TURNS = {
    "identity": lambda a: a,
    "flip_vertical": lambda a: a[::-1],
    "flip_horizontal": lambda a: a[:, ::-1],
    "rotate_180": lambda a: a[::-1, ::-1],
    "transpose": lambda a: np.swapaxes(a, 0, 1),
    "rotate_90_cw": lambda a: np.swapaxes(a, 0, 1)[:, ::-1],
    "rotate_90_ccw": lambda a: np.swapaxes(a, 0, 1)[::-1],
    "anti_transpose": lambda a: np.swapaxes(a, 0, 1)[::-1, ::-1],
}


def turn(x: np.ndarray, name: str) -> np.ndarray:
    return np.ascontiguousarray(TURNS[name](x))


def resize(x: np.ndarray, width: int, height: int) -> np.ndarray:
    """Resample to width x height with an antialiased filter (box when shrinking, bicubic otherwise)."""
    from PIL import Image

    if x.shape[1] == width and x.shape[0] == height:
        return x
    shrink = width < x.shape[1] and height < x.shape[0]
    filt = Image.Resampling.BOX if shrink else Image.Resampling.BICUBIC
    chans = [x] if x.ndim == 2 else [x[..., c] for c in range(x.shape[2])]
    out = [np.asarray(Image.fromarray(c.astype(np.float32), mode="F").resize((width, height), filt)) for c in chans]
    return np.clip(out[0] if x.ndim == 2 else np.stack(out, axis=-1), 0.0, 1.0)


def nearest_resample(x: np.ndarray, factor: int = 2) -> np.ndarray:
    """Area downscale by `factor`, then nearest-neighbour upscale back (duplicated pixel blocks)."""
    h, w = x.shape[:2]
    small = resize(x, max(1, w // factor), max(1, h // factor))
    up = np.repeat(np.repeat(small, factor, axis=0), factor, axis=1)
    pad_h, pad_w = max(0, h - up.shape[0]), max(0, w - up.shape[1])
    if pad_h or pad_w:
        up = np.pad(up, ((0, pad_h), (0, pad_w)) + ((0, 0),) * (x.ndim - 2), mode="edge")
    return up[:h, :w]


def aliased_resample(x: np.ndarray, factor: int = 2) -> np.ndarray:
    """Bicubic upscale by `factor`, then a nearest (non-antialiased) downscale back: the frame as a
    sensor-resolution image decimated without a low-pass filter would show it."""
    h, w = x.shape[:2]
    big = resize(x, w * factor, h * factor)
    return big[::factor, ::factor][:h, :w]
