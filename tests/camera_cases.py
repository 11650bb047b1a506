"""Frames and known cameras for the camera-model tests and benches.

`dead_leaves` draws the standard synthetic model of natural images (occluding discs of random
colour with power-law radii: edges at every scale, a 1/f spectrum); `voc_photos` reads real
photos from the shared data. `KNOWN` is the mixture the issue names: +0.5 stop, white balance
R x1.15 B x0.88, Gaussian blur sigma 1.2 px, noise sigma 3 levels, JPEG q60 (4:2:0).
"""

from __future__ import annotations

import functools
import io
from pathlib import Path

import numpy as np
from PIL import Image

from perception_gap.camera.model import CameraModel, Factor

KNOWN = CameraModel((
    Factor("brightness", {"stops": 0.5}),
    Factor("white_balance", {"r_gain": 1.15, "b_gain": 0.88}),
    Factor("sharpness", {"sigma_px": 1.2}),
    Factor("sensor_noise", {"read_levels": 3.0, "shot_levels2": 0.0}),
))
JPEG_QUALITY, JPEG_SUBSAMPLING = 60, 2  # PIL's code for 4:2:0


def dead_leaves(seed: int, size: tuple[int, int] = (240, 180), n: int = 400) -> np.ndarray:
    """An H x W x 3 uint8 dead-leaves image: discs drawn back to front, radius ~ r^-3 in [3, 60] px,
    each with its own colour and a gentle shading."""
    rng = np.random.default_rng(seed)
    w, h = size
    img = np.zeros((h, w, 3), np.float32)
    filled = np.zeros((h, w), bool)
    yy, xx = np.mgrid[0:h, 0:w]
    r = 3.0 * (1 - rng.random(n) * (1 - (3 / 60) ** 2)) ** -0.5
    for i in range(n):  # front to back: a pixel keeps the first disc that covers it
        cx, cy = rng.uniform(-10, w + 10), rng.uniform(-10, h + 10)
        # only the disc's bounding box (a pixel beyond it is more than r away), a pixel of margin
        y0, y1 = max(int(cy - r[i]) - 1, 0), min(int(cy + r[i]) + 2, h)
        x0, x1 = max(int(cx - r[i]) - 1, 0), min(int(cx + r[i]) + 2, w)
        if y0 >= y1 or x0 >= x1:
            continue
        box = np.s_[y0:y1, x0:x1]
        disc = ((xx[box] - cx) ** 2 + (yy[box] - cy) ** 2 <= r[i] ** 2) & ~filled[box]
        if not disc.any():
            continue
        col = rng.uniform(0.08, 0.9, 3)
        shade = 1 + 0.15 * (xx[box][disc] - cx) / max(r[i], 1)
        img[box][disc] = col[None, :] * shade[:, None]
        filled[box] |= disc
        if filled.all():
            break
    img[~filled] = 0.5
    return np.clip(np.rint(img * 255), 0, 255).astype(np.uint8)


@functools.lru_cache(maxsize=8)
def _scene(base: int, size: tuple[int, int]) -> np.ndarray:
    """The dead-leaves scene that every frame of `base` shows (drawn once; read-only)."""
    canvas = dead_leaves(base, size, n=300)
    canvas.flags.writeable = False
    return canvas


def tabletop(seed: int, size: tuple[int, int] = (192, 144), base: int = 0) -> np.ndarray:
    """A robot camera's frame: one dead-leaves scene (`base`) seen with a few pixels of jitter, with
    four objects (discs and boxes of random colour) placed anew in each frame."""
    rng = np.random.default_rng([base, seed])
    w, h = size
    canvas = _scene(base, (w + 24, h + 24))
    dx, dy = rng.integers(0, 24, 2)
    img = canvas[dy:dy + h, dx:dx + w].copy()
    yy, xx = np.mgrid[0:h, 0:w]
    for _ in range(4):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(8, 22)
        col = rng.integers(20, 235, 3)
        shape = (np.abs(xx - cx) <= r) & (np.abs(yy - cy) <= r * 0.7) if rng.random() < 0.5 else \
            (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
        img[shape] = col
    return img


def voc_photos(shared: Path, n: int) -> list[np.ndarray]:
    paths = sorted((shared / "detection_voc100" / "images").glob("*.jpg"))[:n]
    return [np.asarray(Image.open(p).convert("RGB")) for p in paths]


def jpeg(frame: np.ndarray, quality: int = JPEG_QUALITY, subsampling: int = JPEG_SUBSAMPLING) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=quality, subsampling=subsampling)
    return buf.getvalue()


def through_known(frames: list[np.ndarray], seed: int = 1) -> list[np.ndarray]:
    """The frames through `KNOWN`, then JPEG q60 4:2:0 (decoded back)."""
    from perception_gap.camera.model import apply_camera_model

    rng = np.random.default_rng(seed)
    out = []
    for f in frames:
        x = apply_camera_model(f, KNOWN, rng=rng)
        out.append(np.asarray(Image.open(io.BytesIO(jpeg(x))).convert("RGB")))
    return out


def write_pairs(root: Path, sim: list[np.ndarray], real_jpeg: list[bytes] | None = None,
                real_png: list[np.ndarray] | None = None) -> tuple[Path, Path]:
    """sim frames as PNG under root/sim, real ones as the given JPEG bytes (or PNG) under root/real,
    paired by file stem."""
    ds, dr = root / "sim", root / "real"
    ds.mkdir(parents=True, exist_ok=True)
    dr.mkdir(parents=True, exist_ok=True)
    for i, f in enumerate(sim):
        Image.fromarray(f).save(ds / f"f{i:03d}.png")
    for i, b in enumerate(real_jpeg or []):
        (dr / f"f{i:03d}.jpg").write_bytes(b)
    for i, f in enumerate(real_png or []):
        Image.fromarray(f).save(dr / f"f{i:03d}.png")
    return ds, dr
