"""`motion_blur`: blur along one direction, told apart from isotropic optical blur (`sharpness`).

Each frame's statistics carry the mean squared horizontal and vertical first differences of its
central luma crop (`ImageStats.grad_xy`). Blur along x lowers the horizontal energy and leaves the
vertical one; an isotropic blur lowers both alike. The anisotropy is log2(E[dx^2] / E[dy^2]), each
energy less the 2 sigma^2 the frame's own white noise adds to it (NOISE_SHARE_MIN), compared pair by
pair (sim minus real) or between the sets' distributions.

Length. For natural images (power spectrum ~ 1/f^2) a box blur of L pixels divides the energy of
first differences along its direction by about L, so 2^|anisotropy difference| approximates the
blur length in pixels. Diagonal blur lowers both directions alike and reads as `sharpness`.

Smoothness. Where fine, uncorrelated texture (sensor grain, codec noise) carries much of a frame's
gradient energy, a blur along x averages it away in the vertical differences too, and the energy
anisotropy moves far less than the blur length says. The blur still leaves the frame smooth along
x at the pixel scale: the energy of two-pixel differences over that of one-pixel differences nears
4 along the blur (white noise reads 1, natural detail 2-3) and stays put across it. Its anisotropy,
log2(E[d2x^2] / E[dx^2]) - log2(E[d2y^2] / E[dy^2]), hardly depends on the scene's own orientation
(an edge-rich facade moves the energies, not their shape). A clear smoothness difference with the
energy anisotropy moving the opposite way (the blurred direction smoother and weaker) names the
blur where the energy anisotropy alone stays under its bar (unpaired, not where `sensor_noise`
fired: between different scenes, noise on one side moves it as much).
"""

from __future__ import annotations

import numpy as np

from perception_gap.diagnoses.common import dist_clear, excludes_zero, median_ci, num, nums, rank_p
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.findings import Finding

# log2 anisotropy difference named from here (a 2x energy ratio: ~2 px of motion).
MOTION_LOG2 = {"pairs": 1.0, "distribution": 1.3}
# ... or a clear smoothness-anisotropy difference of at least SMOOTH_LOG2 (see the module docstring)
# with the energy anisotropy moving the opposite way by at least SMOOTH_ANISO_LOG2. Measured on the
# tune cameras (12 frames each, sim clean against real faulted, pair medians): a 5-9 px horizontal
# box blur 0.39-0.71 (frames 0.12-0.89) with the energy anisotropy 1.2-2.1; isotropic blur (sigma
# 0.7-2), noise, nearest and non-antialiased resizes, a zoom, a vignette, an exposure gain and a flip
# 0.00-0.10 (JPEG q30 and q70 on the RGB-D renders 0.18 and 0.30: only while `compression` is
# not named, and q70 moved the energy anisotropy 0.40). Unpaired: 0.25 and a clear distribution gap.
SMOOTH_LOG2 = {"pairs": 0.2, "distribution": 0.25}
SMOOTH_ANISO_LOG2 = 0.6
# Below the bar, a clear anisotropy difference of at least this still holds back `resize_filter`.
MOTION_HINT_LOG2 = 0.6
HINT_ALPHA = 0.01  # unpaired: the rank test's level for that hint
# ... or HINT_ALPHA_LARGE where the medians differ by the naming bar (MOTION_LOG2) or more: at 5 a side
# one frame of a blurred set whose scene runs along the blur (a 9 px blur of VOC photos: medians 3.7
# log2 apart, p 0.016) keeps the rank test above 0.01, and the blurred side's lost top band read as
# the other side's aliasing (a wrong bug). Clean tune splits at 5 and 8 a side: medians within 1.1.
HINT_ALPHA_LARGE = 0.05
_FLOOR = 1e-12
# Sensor noise added after the blur (at readout, as a camera does) adds 2 sigma^2 to every one- and
# two-pixel difference energy alike and pulls both anisotropies towards 0: a 5-9 px blur under noise
# of sigma 6 levels moved the raw energy anisotropy 0.6-1.1 on the tune cameras, 1.0-2.6 once each
# frame's own noise (`noise_sigma`, flat regions) is taken out. What is left is kept at least this
# share of the measured energy (a noise estimate a little above a smooth direction's energy).
NOISE_SHARE_MIN = 0.05


def _grads(frames) -> np.ndarray:
    """(n, 4) one- and two-pixel difference energies, x then y (NaN where a frame lacks them), with
    the frame's own white noise taken out (see NOISE_SHARE_MIN)."""
    rows = [tuple(f.image.grad_xy) + (np.nan,) * (4 - len(f.image.grad_xy)) if f.image.grad_xy is not None
            else (np.nan,) * 4 for f in frames]
    g = np.array(rows, dtype=np.float64).reshape(-1, 4)
    sigma = np.array([f.image.noise_sigma if f.image.noise_sigma is not None else 0.0 for f in frames],
                     dtype=np.float64)
    return np.maximum(g - 2.0 * (sigma ** 2)[:, None], NOISE_SHARE_MIN * g)


def _aniso(frames) -> tuple[np.ndarray, np.ndarray]:
    g = _grads(frames)
    return np.log2(np.maximum(g[:, 0], _FLOOR) / np.maximum(g[:, 1], _FLOOR)), g[:, :2]


def _smooth_aniso(frames) -> np.ndarray:
    """log2(E[d2x^2]/E[dx^2]) - log2(E[d2y^2]/E[dy^2]) per frame: > 0 where x is the smoother axis."""
    g = np.maximum(_grads(frames), _FLOOR)
    with np.errstate(invalid="ignore"):
        return np.log2(g[:, 2] / g[:, 0]) - np.log2(g[:, 3] / g[:, 1])


def _smoothness_names_it(ctx: Context, basis: str, fs, fr, diff: float) -> float | None:
    """The smoothness-anisotropy difference sim minus real when it names directional blur (see
    SMOOTH_LOG2): clear, at least the bar, and the energy anisotropy `diff` moving the opposite way
    by SMOOTH_ANISO_LOG2. None otherwise (or without two-pixel energies: older statistics).

    Unpaired, not where `sensor_noise` fired: between different scenes, noise on one side moves
    both anisotropies as much as a blur does (8 VOC photos against 8 others with sigma-5 noise read
    a smoothness difference past the bar)."""
    # not a skip rule: after compression only this second reading is left out; the energy anisotropy still names a blur
    if "compression" in ctx.fired or abs(diff) < SMOOTH_ANISO_LOG2:
        return None
    s_s, s_r = _smooth_aniso(fs), _smooth_aniso(fr)
    if basis == "pairs":
        d = s_s - s_r
        d = d[np.isfinite(d)]
        if d.size < 3:
            return None
        sd, clear = float(np.median(d)), excludes_zero(median_ci(d))
    else:
        if "sensor_noise" in ctx.fired:  # unpaired only (docstring): a rule on the basis, not on the code
            return None
        s_s, s_r = s_s[np.isfinite(s_s)], s_r[np.isfinite(s_r)]
        if min(s_s.size, s_r.size) < 2:
            return None
        sd = float(np.median(s_s) - np.median(s_r))
        clear = dist_clear(s_s, s_r, SMOOTH_LOG2[basis])
    return sd if clear and abs(sd) >= SMOOTH_LOG2[basis] and sd * diff < 0 else None


def _rank_hint(a_s: np.ndarray, a_r: np.ndarray, diff: float) -> bool:
    """Unpaired: the anisotropies differ by rank at HINT_ALPHA (HINT_ALPHA_LARGE for a difference of
    medians `diff` at the naming bar or more)."""
    alpha = HINT_ALPHA_LARGE if abs(diff) >= MOTION_LOG2["distribution"] else HINT_ALPHA
    return rank_p(a_s[np.isfinite(a_s)], a_r[np.isfinite(a_r)]) <= alpha


def anisotropy_shift(ctx: Context) -> float | None:
    """log2 anisotropy difference sim minus real when it clears the hint bar (MOTION_HINT_LOG2, clear
    on pairs or by rank unpaired, `_rank_hint`), else None: one side lost detail along one axis."""
    basis, fs, fr = ctx.image_sides(lambda f, g: f.image.grad_xy is not None and min(f.image.grad_xy[:2]) > 0)
    if min(len(fs), len(fr)) < (3 if basis == "pairs" else 2):
        return None
    a_s, a_r = _aniso(fs)[0], _aniso(fr)[0]
    if basis == "pairs":
        d = a_s - a_r
        diff, clear = float(np.median(d)), excludes_zero(median_ci(d))
    else:
        diff = float(np.median(a_s) - np.median(a_r))
        clear = _rank_hint(a_s, a_r, diff)
    return diff if clear and abs(diff) >= MOTION_HINT_LOG2 else None


def check_motion_blur(ctx: Context) -> Finding | None:
    """Directional (motion) blur on one side: its horizontal or vertical detail lost against the other."""
    basis, fs, fr = ctx.image_sides(lambda f, g: f.image.grad_xy is not None and min(f.image.grad_xy[:2]) > 0)
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
    hint = clear if basis == "pairs" else _rank_hint(a_s, a_r, diff)
    if hint and abs(diff) >= MOTION_HINT_LOG2:
        # directional blur too weak to name still moves the top of the spectrum: the resize-filter
        # signature is not read then (a wrong bug is worse than silence)
        ctx.memo["anisotropy_differs"] = num(diff, 3)
    smooth = _smoothness_names_it(ctx, basis, fs, fr, diff)
    if smooth is not None:
        ctx.memo["anisotropy_differs"] = num(diff, 3)
    if (not clear or abs(diff) < MOTION_LOG2[basis]) and smooth is None:
        return None
    if blurred is None and smooth is not None:  # unblurred frames are alike smooth both ways
        s_s, s_r = _smooth_aniso(fs), _smooth_aniso(fr)
        blurred = "sim" if abs(float(np.nanmedian(s_s))) >= abs(float(np.nanmedian(s_r))) else "real"
    if blurred is None:  # unblurred scenes sit near 0 anisotropy: the blurred side strays further from it
        blurred = "sim" if abs(float(np.median(a_s))) >= abs(float(np.median(a_r))) else "real"
    if blurred == "sim":
        direction = "horizontal" if diff < 0 else "vertical"
    else:
        direction = "horizontal" if diff > 0 else "vertical"
    # below the energy bar the length is hidden by fine texture (named by smoothness): a lower bound
    measured = abs(diff) >= MOTION_LOG2[basis]
    length = 2.0 ** abs(diff) if measured else 2.0
    size = f"of about {length:.0f} px" if measured else "of at least 2 px (fine texture hides its length)"
    ev = basis_evidence(basis, len(fs) if basis == "pairs" else 0, ctx)
    ev.update({"anisotropy_log2_sim_minus_real": num(diff, 3), "threshold_log2": MOTION_LOG2[basis],
               "smoothness_anisotropy_log2_sim_minus_real": num(smooth, 3) if smooth is not None else None,
               "smoothness_threshold_log2": SMOOTH_LOG2[basis],
               "blurred_side": blurred, "direction": direction, "approx_length_px": num(length, 1) if measured else None,
               "min_length_px": None if measured else 2.0,
               "sim_anisotropy_median": num(float(np.median(a_s)), 3),
               "real_anisotropy_median": num(float(np.median(a_r)), 3),
               "sim_grad_energy_xy_median": nums(np.median(g_s, axis=0).tolist(), 8),
               "real_grad_energy_xy_median": nums(np.median(g_r, axis=0).tolist(), 8)})
    title = (f"{blurred.capitalize()} frames are blurred along the {direction} direction (motion blur {size}): "
             f"detail lost one way only.")
    other = "real" if blurred == "sim" else "sim"
    how_long = f"~{length:.0f} px" if measured else "the measured softness (2 px and up)"
    action = (f"Match the exposure time / motion of the {other} camera: add {direction} motion blur of {how_long} "
              f"to the sim renders (or shorten the real exposure), and randomize its length and direction if "
              f"the robot moves during capture.")
    score = abs(diff) / MOTION_LOG2[basis]
    if smooth is not None:
        score = max(score, abs(smooth) / SMOOTH_LOG2[basis])
    return Finding("motion_blur", "gap", title, ev, action, num(score))
