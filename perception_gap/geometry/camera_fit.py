"""Which camera parameters explain the sim-vs-real reprojection differences: a small least-squares fit.

The sim camera is perturbed by offsets `theta` until it projects the workspace grid where the real
camera does. Eleven offsets, each in a unit a calibration report uses:

    intrinsics: cx, cy, fx, fy (px), k1 (unitless)
    extrinsics: tx, ty, tz (mm, along the sim camera's axes), rx, ry, rz (deg, a rotation vector
                about the sim camera's axes: x right, y down, z the optical axis)

so that K_fit = K_sim + [[fx, 0, cx], [0, fy, cy], [0, 0, 0]], dist_fit = dist_sim + (k1, 0, 0, 0, 0)
and T_fit = T_sim @ [[R(r), t], [0, 1]]. Three models are fitted by `scipy.optimize.least_squares`
(trust region, bounded): intrinsics only, extrinsics only, and both. A tiny ridge (REGULARIZATION_PX
per parameter scale) pins the directions the grid cannot tell apart (a principal-point shift and a
translation are the same on a grid at one depth) without moving a fit the grid determines.

Naming (`explain_differences`): a model *explains* the differences when its residual RMS is at most
EXPLAINED_SHARE of the error RMS (or EXPLAINED_PX). If exactly one of the single-group models
explains them, that group is named; if both do (a grid that cannot tell them apart) the one with
the lower residual is named (intrinsics on a tie, fewer parameters) and the result is `ambiguous`;
if neither does, the joint model is read and each group whose own displacement (its offsets alone
applied to the sim camera, RMS over the grid) reaches NAMED_MIN_PX and GROUP_MIN_SHARE of the error
RMS is named. Nothing is named when the error RMS is below NAMED_MIN_PX.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.geometry.camera import Camera, project

INTRINSIC_NAMES = ("cx", "cy", "fx", "fy", "k1")
EXTRINSIC_NAMES = ("tx", "ty", "tz", "rx", "ry", "rz")
PARAM_NAMES = INTRINSIC_NAMES + EXTRINSIC_NAMES
# typical size of each offset (px, px, px, px, -, mm x3, deg x3): the solver's x_scale and the ridge's unit
PARAM_SCALE = np.array([10.0, 10.0, 10.0, 10.0, 0.1, 10.0, 10.0, 10.0, 1.0, 1.0, 1.0])
REGULARIZATION_PX = 1e-3  # ridge: a parameter one scale away costs as much as 1e-3 px more RMS
MAX_FIT_POINTS = 2000  # grid points the fit reads (a fixed random subset above this)
EXPLAINED_SHARE = 0.05  # a model leaving 5% of the RMS (0.25% of the squared error) explains it
EXPLAINED_PX = 0.05
NAMED_MIN_PX = 0.5
GROUP_MIN_SHARE = 0.2
TIE_PX = 0.01
OFF_IMAGE_PX = 1e4  # residual of a point the perturbed camera no longer sees in front


@dataclass(frozen=True)
class CameraFit:
    """One model's fitted offsets (real minus sim) and how well they explain the differences.

    Attributes:
        model: `intrinsics`, `extrinsics` or `both` (which offsets were free).
        theta: (11,) offsets in PARAM_NAMES order (px, px, px, px, -, mm, mm, mm, deg, deg, deg),
            0 where not free.
        translation_base_mm: (3,) the camera centre's offset in the robot base frame, mm.
        residual_rms_px: RMS distance between the fitted and the real projections over the grid.
        contribution_px: group (`intrinsics`, `extrinsics`) -> RMS displacement its offsets alone
            cause (px).
    """

    model: str
    theta: np.ndarray
    translation_base_mm: np.ndarray
    residual_rms_px: float
    contribution_px: dict[str, float]

    def offsets(self) -> dict[str, Any]:
        """The offsets in report units: px, mm (base frame) and degrees (camera axes)."""
        t = self.theta
        return {"principal_point_px": [float(t[0]), float(t[1])], "focal_px": [float(t[2]), float(t[3])],
                "k1": float(t[4]), "translation_mm": [float(v) for v in self.translation_base_mm],
                "translation_norm_mm": float(np.linalg.norm(self.translation_base_mm)),
                "translation_camera_mm": [float(v) for v in t[5:8]], "rotation_deg": [float(v) for v in t[8:11]],
                "rotation_angle_deg": float(np.linalg.norm(t[8:11]))}

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, **self.offsets(), "residual_rms_px": self.residual_rms_px,
                "contribution_px": dict(self.contribution_px)}


@dataclass(frozen=True)
class CameraExplanation:
    """The three fits and what they name (higher error is worse).

    Attributes:
        error_rms_px: RMS of the sim-vs-real reprojection error over the fitted points.
        n_points: grid points the fits read.
        fits: `intrinsics`, `extrinsics`, `both` -> CameraFit.
        named: the groups named (`intrinsics`, `extrinsics`), possibly empty.
        chosen: the fit whose offsets the findings report (`both` when neither group alone explains).
        ambiguous: both single-group models explain the differences (the grid cannot tell them apart).
    """

    error_rms_px: float
    n_points: int
    fits: dict[str, CameraFit]
    named: tuple[str, ...]
    chosen: str
    ambiguous: bool
    higher_is_gap: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"error_rms_px": self.error_rms_px, "n_points": self.n_points, "named": list(self.named),
                "chosen": self.chosen, "ambiguous": self.ambiguous,
                "rule": (f"a model explains the differences when its residual RMS <= {EXPLAINED_SHARE:g} x the error "
                         f"RMS (or {EXPLAINED_PX:g} px); a group is named when it alone explains them, or, when "
                         f"only both together do, when its own displacement >= {NAMED_MIN_PX:g} px and "
                         f">= {GROUP_MIN_SHARE:g} x the error RMS"),
                "fits": {k: f.to_dict() for k, f in self.fits.items()}}


def rotation_matrix(rotvec_deg: np.ndarray) -> np.ndarray:
    """(3, 3) rotation of a rotation vector given in degrees (Rodrigues)."""
    r = np.radians(np.asarray(rotvec_deg, dtype=np.float64))
    angle = float(np.linalg.norm(r))
    if angle < 1e-15:
        return np.eye(3)
    k = r / angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def perturbed_camera(sim: Camera, theta: np.ndarray) -> Camera:
    """The sim camera with offsets `theta` (11,) applied (see the module docstring); no fold-over cut."""
    K = sim.K.copy()
    K[0, 2] += theta[0]
    K[1, 2] += theta[1]
    K[0, 0] += theta[2]
    K[1, 1] += theta[3]
    dist = sim.dist.copy()
    dist[0] += theta[4]
    delta = np.eye(4)
    delta[:3, :3] = rotation_matrix(theta[8:11])
    delta[:3, 3] = np.asarray(theta[5:8]) / 1000.0
    return Camera(sim.width, sim.height, K, dist, sim.T_base_cam @ delta, math.inf)


def _uv(camera: Camera, points: np.ndarray) -> np.ndarray:
    uv, _, _ = project(camera, points)
    return np.nan_to_num(uv, nan=OFF_IMAGE_PX, posinf=OFF_IMAGE_PX, neginf=-OFF_IMAGE_PX)


def _rms(d: np.ndarray) -> float:
    """RMS length of (N, 2) pixel displacements."""
    return float(np.sqrt(np.mean(np.sum(d * d, axis=1)))) if len(d) else math.nan


def _bounds(sim: Camera, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    f = min(sim.K[0, 0], sim.K[1, 1])
    hi = np.array([sim.width / 2, sim.height / 2, 0.5 * f, 0.5 * f, 1.0, 1000, 1000, 1000, 45, 45, 45], dtype=np.float64)
    return -hi[free], hi[free]


def fit_model(sim: Camera, target_uv: np.ndarray, points: np.ndarray, model: str) -> CameraFit:
    """Least-squares offsets of one model.

    Args:
        sim: the sim camera (the starting point).
        target_uv: (N, 2) where the real camera projects `points`, px.
        points: (N, 3) base-frame points seen by both cameras, metres.
        model: `intrinsics`, `extrinsics` or `both`.
    """
    from scipy.optimize import least_squares

    free = np.array([model in ("intrinsics", "both")] * 5 + [model in ("extrinsics", "both")] * 6)
    ridge = REGULARIZATION_PX * math.sqrt(len(points)) / PARAM_SCALE[free]

    def full(x: np.ndarray) -> np.ndarray:
        theta = np.zeros(len(PARAM_NAMES))
        theta[free] = x
        return theta

    def residuals(x: np.ndarray) -> np.ndarray:
        d = _uv(perturbed_camera(sim, full(x)), points) - target_uv
        return np.concatenate([d.ravel(), ridge * x])

    lo, hi = _bounds(sim, free)
    sol = least_squares(residuals, np.zeros(int(free.sum())), bounds=(lo, hi), x_scale=PARAM_SCALE[free],
                        method="trf", xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=400)
    theta = full(sol.x)
    base_uv = _uv(sim, points)
    contribution = {}
    for group, idx in (("intrinsics", slice(0, 5)), ("extrinsics", slice(5, 11))):
        only = np.zeros_like(theta)
        only[idx] = theta[idx]
        contribution[group] = _rms(_uv(perturbed_camera(sim, only), points) - base_uv)
    return CameraFit(model, theta, sim.T_base_cam[:3, :3] @ theta[5:8],
                     _rms(_uv(perturbed_camera(sim, theta), points) - target_uv), contribution)


def explain_differences(sim: Camera, real: Camera, points: np.ndarray, *, random_state: int = 0) -> CameraExplanation | None:
    """Fit the three models to the grid points both cameras see and name what explains the error.

    Args:
        sim, real: the two cameras.
        points: (N, 3) grid points seen by both cameras (in both images), metres.
        random_state: seeds the subset of MAX_FIT_POINTS points read when there are more.

    Returns:
        The explanation, or None with fewer than 6 points (11 offsets need 12 coordinates).
    """
    if len(points) > MAX_FIT_POINTS:
        points = points[np.sort(np.random.default_rng(random_state).choice(len(points), MAX_FIT_POINTS, replace=False))]
    if len(points) < 6:
        return None
    target, _, _ = project(real, points)
    base = _uv(sim, points)
    err = _rms(base - target)
    fits = {m: fit_model(sim, target, points, m) for m in ("intrinsics", "extrinsics", "both")}
    tol = max(EXPLAINED_PX, EXPLAINED_SHARE * err)
    ok = {m: fits[m].residual_rms_px <= tol for m in ("intrinsics", "extrinsics")}
    ambiguous = all(ok.values())
    if err < NAMED_MIN_PX:
        named, chosen = (), "both"
    elif ambiguous:
        ri, re = fits["intrinsics"].residual_rms_px, fits["extrinsics"].residual_rms_px
        chosen = "extrinsics" if re < ri - TIE_PX else "intrinsics"
        named = (chosen,)
    elif any(ok.values()):
        chosen = "intrinsics" if ok["intrinsics"] else "extrinsics"
        named = (chosen,)
    else:
        chosen = "both"
        floor = max(NAMED_MIN_PX, GROUP_MIN_SHARE * err)
        named = tuple(g for g in ("intrinsics", "extrinsics") if fits["both"].contribution_px[g] >= floor)
    return CameraExplanation(err, len(points), fits, named, chosen, ambiguous)
