"""`motion_blur`: blur along one direction, told apart from isotropic optical blur (`sharpness`).

Each frame's statistics carry the mean squared horizontal and vertical first differences of its
central luma crop (`ImageStats.grad_xy`). Blur along x lowers the horizontal energy and leaves the
vertical one; an isotropic blur lowers both alike. The anisotropy is log2(E[dx^2] / E[dy^2]),
compared pair by pair (sim minus real) or between the sets' distributions.

Length. For natural images (power spectrum ~ 1/f^2) a box blur of L pixels divides the energy of
first differences along its direction by about L, so 2^|anisotropy difference| approximates the
blur length in pixels. Diagonal blur lowers both directions alike and reads as `sharpness`.
"""

from __future__ import annotations

import numpy as np

from perception_gap.diagnoses.common import dist_clear, excludes_zero, median_ci, num, nums, rank_p
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.findings import Finding

# log2 anisotropy difference named from here (a 2x energy ratio: ~2 px of motion).
MOTION_LOG2 = {"pairs": 1.0, "distribution": 1.3}
# Below the bar, a clear anisotropy difference of at least this still holds back `resize_filter`.
MOTION_HINT_LOG2 = 0.6
HINT_ALPHA = 0.01  # unpaired: the rank test's level for that hint
_FLOOR = 1e-12


def _aniso(frames) -> np.ndarray:
    g = np.array([f.image.grad_xy if f.image.grad_xy is not None else (np.nan, np.nan) for f in frames],
                 dtype=np.float64).reshape(-1, 2)
    return np.log2(np.maximum(g[:, 0], _FLOOR) / np.maximum(g[:, 1], _FLOOR)), g


def anisotropy_shift(ctx: Context) -> float | None:
    """log2 anisotropy difference sim minus real when it clears the hint bar (MOTION_HINT_LOG2, clear
    on pairs or at HINT_ALPHA by rank unpaired), else None: one side lost detail along one axis."""
    basis, fs, fr = ctx.image_sides(lambda f, g: f.image.grad_xy is not None and min(f.image.grad_xy) > 0)
    if min(len(fs), len(fr)) < (3 if basis == "pairs" else 2):
        return None
    a_s, a_r = _aniso(fs)[0], _aniso(fr)[0]
    if basis == "pairs":
        d = a_s - a_r
        diff, clear = float(np.median(d)), excludes_zero(median_ci(d))
    else:
        diff = float(np.median(a_s) - np.median(a_r))
        clear = rank_p(a_s[np.isfinite(a_s)], a_r[np.isfinite(a_r)]) <= HINT_ALPHA
    return diff if clear and abs(diff) >= MOTION_HINT_LOG2 else None


def check_motion_blur(ctx: Context) -> Finding | None:
    """Directional (motion) blur on one side: its horizontal or vertical detail lost against the other."""
    if ctx.fired & {"value_range", "normalization", "frame_format", "orientation"}:
        return None
    basis, fs, fr = ctx.image_sides(lambda f, g: f.image.grad_xy is not None and min(f.image.grad_xy) > 0)
    if min(len(fs), len(fr)) < (3 if basis == "pairs" else 2):
        return None
    a_s, g_s = _aniso(fs)
    a_r, g_r = _aniso(fr)
    if basis == "pairs":
        d = a_s - a_r
        diff = float(np.median(d))
        clear = excludes_zero(median_ci(d))
        # which side lost detail: the one whose energy fell along the blur direction
        lx = float(np.median(np.log2(g_s[:, 0] / g_r[:, 0])))
        ly = float(np.median(np.log2(g_s[:, 1] / g_r[:, 1])))
        blurred = "sim" if min(lx, ly) < 0 and abs(min(lx, ly)) >= abs(max(lx, ly)) else "real"
    else:
        diff = float(np.median(a_s) - np.median(a_r))
        clear = dist_clear(a_s, a_r, MOTION_LOG2[basis])
        blurred = None
    hint = clear if basis == "pairs" else rank_p(a_s[np.isfinite(a_s)], a_r[np.isfinite(a_r)]) <= HINT_ALPHA
    if hint and abs(diff) >= MOTION_HINT_LOG2:
        # directional blur too weak to name still moves the top of the spectrum: the resize-filter
        # signature is not read then (a wrong bug is worse than silence)
        ctx.memo["anisotropy_differs"] = num(diff, 3)
    if not clear or abs(diff) < MOTION_LOG2[basis]:
        return None
    if blurred is None:  # unblurred scenes sit near 0 anisotropy: the blurred side strays further from it
        blurred = "sim" if abs(float(np.median(a_s))) >= abs(float(np.median(a_r))) else "real"
    if blurred == "sim":
        direction = "horizontal" if diff < 0 else "vertical"
    else:
        direction = "horizontal" if diff > 0 else "vertical"
    length = 2.0 ** abs(diff)
    ev = basis_evidence(basis, len(fs) if basis == "pairs" else 0, ctx)
    ev.update({"anisotropy_log2_sim_minus_real": num(diff, 3), "threshold_log2": MOTION_LOG2[basis],
               "blurred_side": blurred, "direction": direction, "approx_length_px": num(length, 1),
               "sim_anisotropy_median": num(float(np.median(a_s)), 3),
               "real_anisotropy_median": num(float(np.median(a_r)), 3),
               "sim_grad_energy_xy_median": nums(np.median(g_s, axis=0).tolist(), 8),
               "real_grad_energy_xy_median": nums(np.median(g_r, axis=0).tolist(), 8)})
    title = (f"{blurred.capitalize()} frames are blurred along the {direction} direction (motion blur of about "
             f"{length:.0f} px): detail lost one way only.")
    other = "real" if blurred == "sim" else "sim"
    action = (f"Match the exposure time / motion of the {other} camera: add {direction} motion blur of ~{length:.0f} px "
              f"to the sim renders (or shorten the real exposure), and randomize its length and direction if "
              f"the robot moves during capture.")
    return Finding("motion_blur", "gap", title, ev, action, num(abs(diff) / MOTION_LOG2[basis]))
