"""Moving-camera sequences built from real photos, for bench/bench_false_alarms.py.

Real robot data is mostly seen by cameras that move (a mobile base driving down a corridor, a
wrist camera, a hand-held RGB-D sensor): consecutive views look alike, the set mean image has
structure, yet the camera is not fixed. The data folder holds few such sequences, so this module
makes them from real frames: a *virtual camera* looks at one large real photo (a static real
scene) and moves over it along a smooth random trajectory. Each frame is the crop the camera
sees at that time, resampled to a fixed output size.

Construction (deterministic from the seed and the source image's name):

- A crop keeps the output's aspect ratio; its width is `zoom * W_max`, where `W_max` is the
  widest crop of that aspect that fits the photo, and its centre is placed inside the photo by a
  position `u` in [0, 1] per axis (0: crop against the left/top edge, 1: against the right/bottom).
- `pan` trajectories (pan, zoom and translate): `zoom`, `u_x` and `u_y` each follow a monotone
  cubic (PCHIP) through random knots every KNOT_FRAMES frames (zoom knots in [0.55, 0.95], position
  knots in [0.1, 0.9]), so the motion is smooth, stays inside the photo and changes direction a
  few times per sequence.
- `corridor` trajectories (a camera moving forward with a little yaw): the crop shrinks
  geometrically from zoom 0.95 to 0.5 over the sequence (a forward walk towards a point of the
  scene), the horizontal position drifts by a slow sinusoid of amplitude 0.12 (yaw) around a
  random start, and the vertical position bobs by 0.03 (a walking or driving camera's pitch).
- The crop box (float coordinates) is resampled with Pillow's bicubic filter, which widens its
  kernel when it reduces, so frames are antialiased like a real camera's; sources are chosen so
  no crop is smaller than the output (never an upsampling).

What the sequences are not: parallax, motion blur, sensor noise and auto exposure are absent
(the source photo's own noise and compression are scaled with it). A clean split of such a camera
differs only by which views of the same scene each half holds.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps
from scipy.interpolate import PchipInterpolator

KNOT_FRAMES = 21  # a pan changes direction about every 21 frames (3 times in 64)


@dataclass(frozen=True)
class Trajectory:
    """A virtual camera's path over one photo.

    Attributes:
        zoom: (T,) crop width as a share of the widest crop of the output aspect that fits.
        u_x: (T,) horizontal crop position in [0, 1] (0 left edge, 1 right edge).
        u_y: (T,) vertical crop position in [0, 1] (0 top edge, 1 bottom edge).
    """

    zoom: np.ndarray
    u_x: np.ndarray
    u_y: np.ndarray


def _smooth(rng: np.random.Generator, n: int, lo: float, hi: float) -> np.ndarray:
    """(n,) values in [lo, hi]: a monotone cubic through random knots every KNOT_FRAMES frames."""
    t_knots = np.arange(0, n - 1 + KNOT_FRAMES, KNOT_FRAMES, dtype=np.float64)
    return PchipInterpolator(t_knots, rng.uniform(lo, hi, t_knots.size))(np.arange(n, dtype=np.float64))


def pan_trajectory(rng: np.random.Generator, n: int) -> Trajectory:
    """Pan, zoom and translate: smooth random paths of zoom and position (module docstring)."""
    return Trajectory(_smooth(rng, n, 0.55, 0.95), _smooth(rng, n, 0.1, 0.9), _smooth(rng, n, 0.1, 0.9))


def corridor_trajectory(rng: np.random.Generator, n: int) -> Trajectory:
    """Forward motion with a small yaw: a geometric zoom-in and a slow horizontal drift."""
    t = np.arange(n, dtype=np.float64) / max(n - 1, 1)
    zoom = 0.95 * (0.5 / 0.95) ** t
    x0, y0 = rng.uniform(0.35, 0.65), rng.uniform(0.4, 0.6)
    yaw = 0.12 * np.sin(2 * np.pi * (rng.uniform(0.3, 0.8) * t + rng.uniform()))
    bob = 0.03 * np.sin(2 * np.pi * (rng.uniform(2.0, 4.0) * t + rng.uniform()))
    return Trajectory(zoom, np.clip(x0 + yaw, 0.0, 1.0), np.clip(y0 + bob, 0.0, 1.0))


def render(photo: Image.Image, traj: Trajectory, size: tuple[int, int]) -> list[np.ndarray]:
    """The frames the camera sees along `traj`: per time a (h, w, 3) uint8 crop resampled to `size` (w, h)."""
    pw, ph = photo.size
    aspect = size[0] / size[1]
    w_max = min(pw, ph * aspect)
    out = []
    for z, ux, uy in zip(traj.zoom, traj.u_x, traj.u_y):
        w = float(z) * w_max
        h = w / aspect
        x0, y0 = float(ux) * (pw - w), float(uy) * (ph - h)
        out.append(np.asarray(photo.resize(size, Image.BICUBIC, box=(x0, y0, x0 + w, y0 + h))))
    return out


@dataclass(frozen=True)
class Source:
    """A real photo a virtual camera moves over, and the output size of its frames (w, h)."""

    name: str
    path: Path
    size: tuple[int, int]


def pick_sources(cameras: list) -> list[Source]:
    """Large real photos among the discovered cameras (bench/truth_cases.py `Camera`s).

    ClearGrasp 1280x720 scenes (the opaque shot of each; its transparent twin is the same view)
    render at 320x240; SimplerEnv 640x480 robot views (every third) at 320x240; every eleventh
    VOC 500x375 photo at 160x120 (a 0.55 zoom of 500 px is 275 px: no upsampling at that size).
    """
    out = []
    for cam in cameras:
        if cam.name.startswith("cleargrasp_1280x720"):
            paths, size = [p for p in cam.rgb_paths if "-opaque-" in p.name], (320, 240)
        elif cam.name == "simpler_640x480":
            paths, size = list(cam.rgb_paths[::3]), (320, 240)
        elif cam.name == "voc100_500x375":
            paths, size = list(cam.rgb_paths[::11]), (160, 120)
        else:
            continue
        for p in paths:
            stem = p.stem.replace("-opaque-rgb-img", "")
            out.append(Source(f"{cam.name.split('_')[0]}{stem}", p, size))
    return out


def trajectory_seed(seed: int, name: str) -> np.random.Generator:
    """A generator fixed by the seed and the camera's name."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def build(sources: list[Source], folder: Path, *, n_frames: int = 64, pans: int = 2, corridors: int = 1,
          seed: int = 0, names: Callable[[str], bool] | None = None) -> list[tuple[str, Source, str, list[Path]]]:
    """Render every source's trajectories into `folder` as BMP files (lossless, quick to write; one folder a camera).

    Returns:
        per virtual camera (name, its source, variant `pan`/`corridor`, its frame files in time order).
        Names are `moving_<source>_<variant><k>`; only those `names` accepts, when given.
    """
    cams = []
    for src in sources:
        with Image.open(src.path) as im:
            photo = ImageOps.exif_transpose(im).convert("RGB")
        for variant, count, make in (("pan", pans, pan_trajectory), ("corridor", corridors, corridor_trajectory)):
            for k in range(count):
                name = f"moving_{src.name}_{variant}{k}"
                if names is not None and not names(name):
                    continue
                frames = render(photo, make(trajectory_seed(seed, name), n_frames), src.size)
                d = folder / name
                d.mkdir(parents=True, exist_ok=True)
                paths = []
                for t, a in enumerate(frames):
                    p = d / f"t{t:03d}.bmp"
                    Image.fromarray(a).save(p)
                    paths.append(p)
                cams.append((name, src, variant, paths))
    return cams
