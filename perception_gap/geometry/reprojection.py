"""Reprojection error between a sim and a real camera over a workspace grid.

Each grid point (robot base frame) is projected through both cameras; its error is the pixel
distance between the two projections. A point behind either camera (or beyond a camera's
monotonic distortion range) counts as `behind`; one that falls outside either image counts as
`outside`; both are excluded from the statistics and counted.

Growth: the error is regressed on each point's distance from the calibration centre, defined
here as the centre of the grid's bounds ((min + max) / 2, the middle of the workspace where a
calibration target usually sits), by Theil-Sen (the median of pairwise slopes, robust to a
few wild points). The error is *structured* (an `extrinsics` finding) when the fitted growth
across the grid (slope × the largest distance) is at least STRUCTURE_MIN_GROWTH_PX and at least
STRUCTURE_MIN_SHARE of the mean error; an error that does not grow with distance (a principal
point offset, a small pure shift) is *flat*.

Attribution: `perception_gap.geometry.camera_fit` fits the sim camera's principal point, focal
lengths, k1, translation and rotation offsets that best reproduce the real projections over the
grid, and names `intrinsics` and/or `extrinsics` with the fitted offsets (px, mm, degrees). The
distance-growth rule above names `extrinsics` only when the fit names nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.errors import InputError
from perception_gap.findings import Finding
from perception_gap.geometry.camera import Camera, project
from perception_gap.geometry.camera_fit import CameraExplanation, explain_differences

MAX_GRID_POINTS = 100_000
MAX_COORD_M = 1e6  # a workspace within 1,000 km of the robot's base
STRUCTURE_MIN_GROWTH_PX = 1.0
STRUCTURE_MIN_SHARE = 0.25
THEIL_SEN_MAX_POINTS = 1500  # pairwise slopes are O(n²): a fixed random subset above this


def grid_points(lo: Any, hi: Any, step: Any) -> np.ndarray:
    """(N, 3) points from `lo` to `hi` inclusive every `step` metres along each axis.

    Raises:
        InputError: bounds not 3 finite numbers with min <= max, step not positive, or too
            many points (more than MAX_GRID_POINTS).
    """
    try:
        a, b, s = (np.asarray(v, dtype=np.float64) for v in (lo, hi, step))
    except (TypeError, ValueError):
        raise InputError(f"Expected `grid` min/max as [x, y, z] and step in metres, got {lo!r}, {hi!r}, {step!r}.") from None
    if a.shape != (3,) or b.shape != (3,) or not (np.isfinite(a).all() and np.isfinite(b).all()) or (a > b).any() \
            or (np.abs(a) > MAX_COORD_M).any() or (np.abs(b) > MAX_COORD_M).any():
        raise InputError(f"Expected `grid.min` and `grid.max` as [x, y, z] with min <= max, within +-{MAX_COORD_M:g} m, "
                         f"got {lo!r:.80} and {hi!r:.80}.")
    if s.shape != () or not math.isfinite(float(s)) or float(s) <= 0:
        raise InputError(f"Expected `grid.step` to be a positive number of metres, got {step!r}.")
    with np.errstate(over="ignore"):  # a span or step so extreme the count is infinite: refused below
        per_axis = np.floor((b - a) / float(s) + 1e-9) + 1  # floats: an int64 would wrap past 2**63
        total = float(np.prod(per_axis))
    if not (np.isfinite(per_axis).all() and total <= MAX_GRID_POINTS):
        shown = " x ".join(f"{c:.4g}" for c in per_axis)
        raise InputError(f"Expected at most {MAX_GRID_POINTS} grid points, got {total:.4g} ({shown}); "
                         "use a larger `grid.step`.")
    counts = per_axis.astype(np.int64)
    axes = [a[i] + float(s) * np.arange(counts[i]) for i in range(3)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


@dataclass(frozen=True)
class KnownPoints:
    """Known 3D points with the pixels the real camera observed them at.

    Attributes:
        xyz: (M, 3) base-frame points, metres.
        observed_px: (M, 2) observed pixels in the real image.
        real_error_px, sim_error_px: (M,) distance from each model's projection to the observed
            pixel (NaN where the point is behind that camera).
    """

    xyz: np.ndarray
    observed_px: np.ndarray
    real_error_px: np.ndarray
    sim_error_px: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        def rms(e: np.ndarray) -> float | None:
            ok = e[np.isfinite(e)]
            return float(np.sqrt(np.mean(ok ** 2))) if ok.size else None

        return {"n": len(self.xyz), "real_rms_px": rms(self.real_error_px), "sim_rms_px": rms(self.sim_error_px),
                "per_point": [{"xyz": p.tolist(), "pixel": o.tolist(), "real_error_px": _num(r), "sim_error_px": _num(s)}
                              for p, o, r, s in zip(self.xyz, self.observed_px, self.real_error_px, self.sim_error_px)]}


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class Reprojection:
    """The reprojection error surface (higher is worse).

    Attributes:
        points: (N, 3) grid points, metres, base frame.
        error_px: (N,) sim-vs-real pixel distance, NaN where excluded.
        n_behind, n_outside: grid points excluded (behind a camera; outside an image).
        mean, median, max: over the valid points, px (NaN without any).
        centre: (3,) the calibration centre (centre of the grid bounds), metres.
        slope_px_per_m, intercept_px: Theil-Sen fit of error against distance from `centre`.
        growth_px: slope × the largest distance of a valid point from `centre`.
        structured: the error grows with distance (see the module docstring).
        known: the known-points check, when given.
        fit: the camera-parameter fit over the valid points (None with fewer than 6).
    """

    points: np.ndarray
    error_px: np.ndarray
    n_behind: int
    n_outside: int
    mean: float
    median: float
    max: float
    centre: np.ndarray
    slope_px_per_m: float
    intercept_px: float
    growth_px: float
    structured: bool
    known: KnownPoints | None = None
    fit: CameraExplanation | None = None
    higher_is_gap: bool = True

    def to_dict(self) -> dict[str, Any]:
        valid = int(np.isfinite(self.error_px).sum())
        out = {"mean": _num(self.mean), "median": _num(self.median), "max": _num(self.max),
               "slope_px_per_m": _num(self.slope_px_per_m), "intercept_px": _num(self.intercept_px),
               "growth_px": _num(self.growth_px), "structured": self.structured, "centre": self.centre.tolist(),
               "n_points": len(self.points), "n_valid": valid, "n_behind": self.n_behind,
               "n_outside": self.n_outside,
               "grid": {"points": np.round(self.points, 6).tolist(),
                        "error_px": [_num(round(float(e), 4)) for e in self.error_px]}}
        if self.known is not None:
            out["points"] = self.known.to_dict()
        out["camera_fit"] = self.fit.to_dict() if self.fit is not None else None
        return out


def theil_sen(x: np.ndarray, y: np.ndarray, *, random_state: int = 0) -> tuple[float, float]:
    """(slope, intercept): median of pairwise slopes, then median of y - slope x."""
    if len(x) > THEIL_SEN_MAX_POINTS:
        idx = np.random.default_rng(random_state).choice(len(x), THEIL_SEN_MAX_POINTS, replace=False)
        x, y = x[idx], y[idx]
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx > 1e-12
    keep |= dx < -1e-12
    if not keep.any():
        return 0.0, float(np.median(y)) if len(y) else math.nan
    slope = float(np.median((y[j] - y[i])[keep] / dx[keep]))
    return slope, float(np.median(y - slope * x))


def reprojection_error(sim: Camera, real: Camera, points: np.ndarray, *,
                       known_xyz: np.ndarray | None = None, known_px: np.ndarray | None = None) -> Reprojection:
    """Reprojection error of each grid point between the sim and the real camera.

    Args:
        sim, real: the two cameras.
        points: (N, 3) grid points in the base frame, metres.
        known_xyz: optional (M, 3) known 3D points; with `known_px` (M, 2) their observed
            pixels in the real image.
    """
    uv_s, front_s, in_s = project(sim, points)
    uv_r, front_r, in_r = project(real, points)
    front = front_s & front_r
    valid = in_s & in_r
    err = np.where(valid, np.linalg.norm(uv_s - uv_r, axis=1), np.nan)
    centre = (points.min(axis=0) + points.max(axis=0)) / 2 if len(points) else np.zeros(3)
    e = err[valid]
    if e.size:
        dist = np.linalg.norm(points[valid] - centre, axis=1)
        slope, intercept = theil_sen(dist, e)
        growth = slope * float(dist.max())
        mean, median, mx = float(e.mean()), float(np.median(e)), float(e.max())
    else:
        slope = intercept = growth = mean = median = mx = math.nan
    structured = bool(e.size) and growth >= STRUCTURE_MIN_GROWTH_PX and growth >= STRUCTURE_MIN_SHARE * mean
    known = None
    if known_xyz is not None and known_px is not None:
        ks, _, _ = project(sim, known_xyz)
        kr, _, _ = project(real, known_xyz)
        known = KnownPoints(known_xyz, known_px, np.linalg.norm(kr - known_px, axis=1),
                            np.linalg.norm(ks - known_px, axis=1))
    fit = explain_differences(sim, real, points[valid])
    return Reprojection(points, err, int((~front).sum()), int((front & ~valid).sum()), mean, median, mx, centre,
                        slope, intercept, growth, structured, known, fit)


def _signed(v: float, digits: int) -> str:
    """`v` with a sign and `digits` decimals; a value that rounds to zero reads +0.00, never -0.00."""
    return f"{round(v, digits) + 0.0:+.{digits}f}"


def _fit_finding(r: Reprojection, group: str) -> Finding:
    """An `intrinsics` or `extrinsics` finding with the fitted offsets of the chosen model."""
    fit = r.fit
    chosen = fit.fits[fit.chosen]
    o = chosen.offsets()
    share = chosen.contribution_px[group]
    if group == "intrinsics":
        pp, f = o["principal_point_px"], o["focal_px"]
        what = (f"principal point {_signed(pp[0], 2)}, {_signed(pp[1], 2)} px, focal {_signed(f[0], 2)}, "
                f"{_signed(f[1], 2)} px, k1 {_signed(o['k1'], 4)}")
        title = f"The real camera's intrinsics differ from the sim camera's: {what}"
        action = ("Copy the real camera's calibrated K and distortion into the sim camera (or re-calibrate the real "
                  "camera with a target); check that both use the same image size and principal-point convention.")
        keys = ("principal_point_px", "focal_px", "k1")
    else:
        t = o["translation_mm"]
        what = (f"{o['translation_norm_mm']:.1f} mm ({_signed(t[0], 1)}, {_signed(t[1], 1)}, {_signed(t[2], 1)} mm in "
                f"the base frame) and "
                f"{o['rotation_angle_deg']:.2f} deg")
        title = f"The real camera's pose differs from the sim camera's by {what}"
        action = ("Re-run the hand-eye calibration or copy the calibrated real pose into the sim camera; check the "
                  "frame conventions (OpenCV vs OpenGL axes, base frame vs world frame) on both sides.")
        keys = ("translation_mm", "translation_norm_mm", "translation_camera_mm", "rotation_deg", "rotation_angle_deg")
    title += (f"; these offsets alone move the projections by {share:.2f} px RMS (sim vs real error {fit.error_rms_px:.2f} "
              f"px RMS, fit residual {chosen.residual_rms_px:.2f} px).")
    if fit.ambiguous:
        other = "extrinsics" if group == "intrinsics" else "intrinsics"
        title += (f" An {other} offset explains the grid almost as well (residual "
                  f"{fit.fits[other].residual_rms_px:.2g} px): add depth range to the grid to tell them apart.")
    evidence = {k: o[k] for k in keys} | {
        "moved_px": share, "error_rms_px": fit.error_rms_px, "residual_rms_px": chosen.residual_rms_px,
        "model": fit.chosen, "ambiguous": fit.ambiguous, "mean_px": r.mean, "max_px": r.max}
    return Finding(group, "bug", title, evidence, action, score=share)


def reprojection_findings(r: Reprojection) -> list[Finding]:
    """`intrinsics` / `extrinsics` named by the camera fit; else `extrinsics` when the error grows
    with distance from the calibration centre."""
    if r.fit is not None and r.fit.named:
        return [_fit_finding(r, g) for g in r.fit.named]
    if not r.structured:
        return []
    return [Finding(
        "extrinsics", "bug",
        f"Sim and real cameras disagree by {r.mean:.3g} px on average (max {r.max:.3g}), growing "
        f"{r.slope_px_per_m:.3g} px per metre away from the workspace centre: the camera poses differ.",
        {"mean_px": r.mean, "max_px": r.max, "slope_px_per_m": r.slope_px_per_m, "growth_px": r.growth_px,
         "centre": r.centre.tolist()},
        "Re-run the hand-eye calibration or copy the calibrated real pose into the sim camera; check the "
        "frame conventions (OpenCV vs OpenGL axes, base frame vs world frame) on both sides.",
        score=r.growth_px)]
