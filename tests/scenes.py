"""Generated paired frames for workflow tests: smooth tabletop-like scenes through a simple camera."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter


def scenes(n: int = 24, h: int = 48, w: int = 64, seed: int = 0) -> list[np.ndarray]:
    """Scenes in linear light [0, 1]: a warm gradient background (a wooden table) and three boxes."""
    rng = np.random.default_rng(seed)
    out = []
    y, x = np.mgrid[0:h, 0:w] / max(h, w)
    for _ in range(n):
        img = np.stack([0.40 + 0.15 * x, 0.28 + 0.10 * y, 0.16 + 0.06 * (x + y)], -1) * rng.uniform(0.8, 1.2)
        for _ in range(3):
            r0, c0 = rng.integers(0, h - 12), rng.integers(0, w - 12)
            img[r0:r0 + rng.integers(6, 12), c0:c0 + rng.integers(6, 12)] = rng.uniform(0.1, 0.9, 3)
        out.append(img)
    return out


def render(scene: np.ndarray, gain: float | tuple[float, float, float] = 1.0, noise: float = 0.0,
           rng: np.random.Generator | None = None) -> np.ndarray:
    """Linear scene -> sRGB uint8 through a gain (per channel or global) and Gaussian sensor noise."""
    v = scene * np.asarray(gain, dtype=np.float64)
    if noise:
        v = v + (rng or np.random.default_rng(0)).normal(0, noise, v.shape)
    return (np.clip(v, 0, 1) ** (1 / 2.2) * 255).round().astype(np.uint8)


def blur(a: np.ndarray, radius: float = 1.5) -> np.ndarray:
    return np.asarray(Image.fromarray(a).filter(ImageFilter.GaussianBlur(radius)))


def write_set(root: Path, frames: list[np.ndarray], prefix: str = "s") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, a in enumerate(frames):
        Image.fromarray(a).save(root / f"{prefix}{i:03d}.png", compress_level=1)
    return root
