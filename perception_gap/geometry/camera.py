"""A camera model: OpenCV pinhole intrinsics, Brown-Conrady distortion, pose in the robot base frame.

Conventions (OpenCV): the camera looks along its +z axis, x to the right, y down. `T_base_cam`
is the camera's pose in the robot base frame, so a point maps as `p_base = R @ p_cam + t` and
`p_cam = R.T @ (p_base - t)`. Distortion is `(k1, k2, p1, p2, k3)`:

    x, y = X / Z, Y / Z;  r2 = x² + y²;  radial = 1 + k1 r2 + k2 r2² + k3 r2³
    x' = x radial + 2 p1 x y + p2 (r2 + 2 x²);  y' = y radial + p1 (r2 + 2 y²) + 2 p2 x y
    u = fx x' + s y' + cx;  v = fy y' + cy
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.errors import InputError

ROTATION_TOL = 1e-4  # max |R^T R - I| entry: a rotation written with 5-6 decimals passes
MIN_DEPTH_M = 1e-6  # a point closer to the camera plane than this is behind it
MAX_SIDE_PX = 1_000_000  # no camera's image is wider or taller
# Beyond these no calibration is meant (a focal length of 1e7 px, a camera 1,000 km from the base,
# a distortion coefficient of 1e6), and products of such values overflow a float.
MAX_INTRINSIC_PX = 1e7
MAX_TRANSLATION_M = 1e6
MAX_DIST_COEFF = 1e6


@dataclass(frozen=True)
class Camera:
    """A validated camera.

    Attributes:
        width, height: image size in pixels.
        K: (3, 3) intrinsics, fx, fy > 0, last row (0, 0, 1).
        dist: (5,) `k1, k2, p1, p2, k3`.
        T_base_cam: (4, 4) camera pose in the robot base frame (proper rotation).
        max_r2: the largest squared normalized radius where the radial distortion is still
            monotonic (inf without distortion); beyond it the model folds back and projects
            points from outside the field of view into the image, so those count as outside.
    """

    width: int
    height: int
    K: np.ndarray
    dist: np.ndarray
    T_base_cam: np.ndarray
    max_r2: float

    def to_dict(self) -> dict[str, Any]:
        return {"width": self.width, "height": self.height, "K": self.K.tolist(), "dist": self.dist.tolist(),
                "T_base_cam": self.T_base_cam.tolist()}


def _matrix(value: Any, shape: tuple[int, int], what: str, limit: float) -> np.ndarray:
    try:
        m = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"Expected `{what}` to be a {shape[0]}x{shape[1]} matrix of numbers, got {value!r:.80}.") from None
    if m.shape != shape:
        raise InputError(f"Expected `{what}` to be {shape[0]}x{shape[1]}, got shape {m.shape}.")
    if not (np.isfinite(m).all() and (np.abs(m) <= limit).all()):
        raise InputError(f"Expected `{what}` to be finite, each entry within +-{limit:g}, got {m.tolist()}.")
    return m


def _monotonic_r2(k1: float, k2: float, k3: float) -> float:
    """Largest r² where d/dr [r (1 + k1 r² + k2 r⁴ + k3 r⁶)] = 1 + 3k1 s + 5k2 s² + 7k3 s³ stays > 0."""
    roots = np.roots([7 * k3, 5 * k2, 3 * k1, 1.0]) if (k1, k2, k3) != (0.0, 0.0, 0.0) else np.array([])
    pos = [r.real for r in np.atleast_1d(roots) if abs(r.imag) < 1e-12 and r.real > 0]
    return float(min(pos)) if pos else math.inf


def parse_camera(obj: Any, name: str) -> Camera:
    """Validate a camera given as `{"width", "height", "K", "dist", "T_base_cam"}`.

    Args:
        obj: the parsed JSON object.
        name: where it came from (`sim`, `real`), for messages.

    Raises:
        InputError: naming the field and what is wrong (a singular K, a non-rotation, ...).
    """
    if not isinstance(obj, dict):
        raise InputError(f"Expected `{name}` to be a camera object, got {type(obj).__name__}.")
    missing = [k for k in ("width", "height", "K", "T_base_cam") if k not in obj]
    if missing:
        raise InputError(f"Camera `{name}` lacks {', '.join(missing)}.")
    size = []
    for key in ("width", "height"):
        v = obj[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v) \
                or not 1 <= v <= MAX_SIDE_PX:
            raise InputError(f"Expected `{name}.{key}` to be an integer in [1, {MAX_SIDE_PX}] pixels, got {v!r}.")
        size.append(int(v))
    K = _matrix(obj["K"], (3, 3), f"{name}.K", MAX_INTRINSIC_PX)
    if K[0, 0] <= 0 or K[1, 1] <= 0:
        raise InputError(f"Expected `{name}.K` to have positive focal lengths, got fx={K[0, 0]:g}, fy={K[1, 1]:g} "
                         f"(a singular camera).")
    if not np.allclose(K[1:, :], [[0, K[1, 1], K[1, 2]], [0, 0, 1]], atol=1e-9):
        raise InputError(f"Expected `{name}.K` to be upper triangular with last row [0, 0, 1], got {K.tolist()}.")
    dist = obj.get("dist") or []
    try:
        d = np.asarray(dist, dtype=np.float64) if isinstance(dist, (list, tuple)) else None
    except (TypeError, ValueError):  # nested lists of unequal lengths, text
        d = None
    if d is None or d.ndim != 1 or d.size not in (0, 4, 5) or not np.isfinite(d).all() or \
            (np.abs(d) > MAX_DIST_COEFF).any():
        raise InputError(f"Expected `{name}.dist` to be [k1, k2, p1, p2] or [k1, k2, p1, p2, k3] (finite, within "
                         f"+-{MAX_DIST_COEFF:g}), got {dist!r:.120}.")
    d = np.concatenate([d, np.zeros(5 - d.size)])
    T = _matrix(obj["T_base_cam"], (4, 4), f"{name}.T_base_cam", MAX_TRANSLATION_M)
    if not np.allclose(T[3], [0, 0, 0, 1], atol=1e-9):
        raise InputError(f"Expected `{name}.T_base_cam` last row [0, 0, 0, 1], got {T[3].tolist()}.")
    R = T[:3, :3]
    ortho = float(np.abs(R.T @ R - np.eye(3)).max())
    det = float(np.linalg.det(R))
    if ortho > ROTATION_TOL or det < 0:
        raise InputError(f"Expected `{name}.T_base_cam` to hold a rotation (orthonormal within {ROTATION_TOL:g}, "
                         f"det +1), got |R^T R - I| = {ortho:.3g}, det = {det:.4g}.")
    return Camera(size[0], size[1], K, d, T, _monotonic_r2(d[0], d[1], d[4]))


def project(camera: Camera, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Project base-frame points through a camera.

    Args:
        camera: the camera.
        points: (N, 3) points in the robot base frame, metres.

    Returns:
        `uv` (N, 2) pixel coordinates (NaN where not in front), `in_front` (N,) bool (depth >
        MIN_DEPTH_M and inside the distortion's monotonic range), `in_image` (N,) bool (in front
        and 0 <= u < width, 0 <= v < height).
    """
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # far points: inf, then outside
        return _project(camera, np.asarray(points, dtype=np.float64))


def _project(camera: Camera, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    R, t = camera.T_base_cam[:3, :3], camera.T_base_cam[:3, 3]
    pc = (points - t) @ R  # rows of R.T @ (p - t)
    z = pc[:, 2]
    front = z > MIN_DEPTH_M
    with np.errstate(divide="ignore", invalid="ignore"):
        x, y = pc[:, 0] / z, pc[:, 1] / z
    k1, k2, p1, p2, k3 = camera.dist
    r2 = x * x + y * y
    front &= r2 < camera.max_r2
    radial = 1 + r2 * (k1 + r2 * (k2 + r2 * k3))
    xd = x * radial + 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
    yd = y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
    K = camera.K
    uv = np.stack([K[0, 0] * xd + K[0, 1] * yd + K[0, 2], K[1, 1] * yd + K[1, 2]], axis=1)
    uv[~front] = np.nan
    with np.errstate(invalid="ignore"):
        inside = front & (uv[:, 0] >= 0) & (uv[:, 0] < camera.width) & (uv[:, 1] >= 0) & (uv[:, 1] < camera.height)
    return uv, front, inside
