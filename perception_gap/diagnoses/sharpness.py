"""High-frequency diagnoses: resize-filter mismatch (`resize_filter`: aliasing or a
nearest-upscale signature) and optical sharpness gap (`sharpness`: focus, motion or lens blur).

Both read the shared high-frequency comparison (`highfreq.analyse`): the spectral-shape
difference between the sides, with each side's own sensor noise removed first. Which of the two
it is comes from where the difference sits, not from absolute levels (soft cameras and sharp
ones alike): aliasing concentrates it in the top half-octave below Nyquist, blur spreads it
down through the upper and mid bands (its log power ratio grows with frequency squared).
Sensor noise and compression are named before either (`texture`), and a difference they
explain fires neither. Unpaired, a top-band difference whose softer side has its corners at its
own noise floor is blur of that side, never aliasing (`SOFT_CORNER_MAX`).
"""

from __future__ import annotations

import math

from perception_gap.diagnoses.common import num, nums
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.highfreq import CORNER, MID, TOP, UPPER, HighFreq, analyse
from perception_gap.diagnoses.texture import NOISE_CORNER_MAX, noise_fires
from perception_gap.findings import Finding

# A high-frequency difference: the top band's shape (relative to the 1/16-1/8 band) differs by
# at least HF_TOP decades, clearly. Identical frames read 0; sigma-2 noise with JPEG q90 on one
# side up to 0.18; a 0.5-pixel Gaussian blur 0.35-0.5, a non-antialiased bilinear 2x downscale
# against an antialiased one 0.4, a nearest one 0.6-0.9.
HF_TOP = {"pairs": 0.25, "distribution": 0.35}
# Where the difference sits. Paired: the extra power of the sharper side in the top band over
# that in the upper band (linear, levels^2): blur removes a share of the signal that grows with
# frequency, but the signal itself falls faster, so its excess falls towards Nyquist (0.15-0.53
# measured on the shared cameras and synthetic textures, Gaussian sigma 0.7-1); aliasing adds
# folded energy just below Nyquist, so its excess holds up or rises there (0.60-1.76: nearest and
# non-antialiased bilinear 2x downscales against an antialiased one). Unpaired, per-band medians
# of different scenes make that linear ratio unreliable; there the shape in decades, (corner band
# - upper band) / top band, is used: blur sigma >= 1 read -1.1-0.43, aliasing 0.57-0.96 (4-8
# frames a side).
ALIAS_SHAPE = {"pairs": 0.57, "distribution": 0.5}
# Paired, a ratio between ALIAS_WEAK and ALIAS_SHAPE is aliasing when the shape in decades agrees
# ((corner - upper) / top >= ALIAS_LOG_SHAPE, which blur stays under). A blur below the sharpness
# limit can pass both and is then named resize_filter. The softer side's corners are not asked to
# sit above its noise floor here (as SOFT_CORNER_MAX does unpaired): a paired resize's antialiased
# side sits at its noise floor too, so that rule would name real resize bugs a sharpness gap.
ALIAS_WEAK = 0.45
ALIAS_LOG_SHAPE = 1.0
# Nearest-neighbour upscaling (2x) makes every other horizontal pixel pair identical: dup_parity
# 0.5-0.8 measured, vs < 0.1 for natural or noisy frames and up to 0.4 for bilinear 2x upscales
# of flat synthetic content. Needs the high-parity side to be the sharper one as well.
NEAREST_PARITY = 0.45
NEAREST_PARITY_GAP = 0.15
# Unpaired, different scenes: the top band's level relative to the 1/16-1/8 band varies so much
# from scene to scene that a 2-3x aliased downscale (+0.2-0.85 decades) is often not clear over 4-8
# frames a side. The spectrum's slope at the top (corner over upper band, per frame) varies much
# less: aliasing flattens it by 0.4-0.85 decades (z 3-16 on the VOC tune photos, 4 frames a side),
# while the mid band (1/8-1/4) stays within 0.2 decades; a Gaussian blur of sigma >= 1 takes the
# mid band down by >= 0.6 decades and added noise is told by its noise-filled corners
# (texture.NOISE_CORNER_MAX). So, unpaired, a clear slope difference of ALIAS_SLOPE with the mid band
# unmoved, the top band moving the same way and the flatter side's corners above its noise is aliasing.
ALIAS_SLOPE = 0.4
ALIAS_MID_MAX = 0.2
# Aliasing adds folded energy to the sharper side; the other side is a normal image whose corner
# band (0.5-0.72 cycles/pixel) still holds detail above its noise. A blur of the softer side takes
# its corners down to its own noise floor instead, where the top-band shape alone can read like
# aliasing. So when the softer side's corner power over its noise variance (log10,
# `HighFreq.corner_noise`, set median) is at or below SOFT_CORNER_MAX, the softer side is the one
# that changed: the difference is not named a resize-filter bug (it is a sharpness gap). Clean
# native frames and antialiased downscales read above it; noiseless renders read NaN. Unpaired
# only: a paired resize's antialiased side can read under it too, and pairs have the sharper measure
# of where the excess sits (the excess ratio, ALIAS_SHAPE) to tell blur from aliasing.
SOFT_CORNER_MAX = 0.35
# Unpaired, aliasing must also show on the sharper side itself: folded energy lifts its corner band
# (`HighFreq.corner_noise`) to at least ALIAS_CORNER_MIN (10x its noise variance). A native side
# against a softened one (a zoom by bicubic upscale, a one-axis blur) has top-band and slope
# differences that look like aliasing, because the softened side lost the top band, but its sharper
# side's corners stay under this bar: not a resize-filter bug.
ALIAS_CORNER_MIN = 1.0
# Filter families as the signatures name them (relative: one side against the other).
_ALIASED = "aliased: nearest or non-antialiased downscaling (or rendering without anti-aliasing)"
_ANTIALIASED = "antialiased (area, or bilinear/bicubic with antialias) or optically softer"
_NEAREST_UP = "nearest-neighbour upscaling"
_INTERPOLATED_UP = "interpolated (bilinear/bicubic) upscaling or native"


def _hf_signature(hf: HighFreq) -> tuple[float, float] | None:
    """(top-band shape difference in decades, sharper side positive; where-it-sits ratio) or None."""
    top = hf.bands[TOP]
    if noise_fires(hf) or (hf.brighter is not None and hf.brighter == hf.sharper):
        return None  # noise, or an exposure gain (clipped highlights, amplified noise), explains it
    mid = hf.bands[MID]
    if hf.band_clear[MID] and abs(mid) >= HF_TOP[hf.basis] and abs(mid) >= abs(top) and not hf.band_clear[TOP]:
        return abs(mid), -math.inf  # a strong blur takes the top band down to the noise floor: the mid band shows it
    if abs(top) < HF_TOP[hf.basis] or not hf.band_clear[TOP]:
        return _slope_signature(hf)
    if hf.basis == "pairs":
        up = hf.excess[UPPER]
        shape = hf.excess[TOP] / up if up * top > 0 else 0.0  # sharper side's extra power, top over upper
        if ALIAS_WEAK <= shape < ALIAS_SHAPE["pairs"] and (hf.bands[CORNER] - hf.bands[UPPER]) / top >= ALIAS_LOG_SHAPE:
            shape = ALIAS_SHAPE["pairs"]  # both measures lean to aliasing
    else:
        shape = (hf.bands[CORNER] - hf.bands[UPPER]) / top  # the sharper side's view (signs cancel)
    return abs(top), shape


def _slope_signature(hf: HighFreq) -> tuple[float, float] | None:
    """Unpaired aliasing read from the per-frame spectral slope at the top (see ALIAS_SLOPE), or None."""
    sl, top = hf.slope, hf.bands[TOP]
    if hf.basis != "distribution" or not sl.clear or abs(sl.diff) < ALIAS_SLOPE or sl.diff * top <= 0:
        return None
    if abs(hf.bands[MID]) >= ALIAS_MID_MAX:
        return None  # the mid band moved: blur (or a scene difference), not aliasing
    flat_corner = hf.corner_noise.sim if sl.diff > 0 else hf.corner_noise.real
    if not math.isfinite(flat_corner) or flat_corner <= NOISE_CORNER_MAX:
        return None  # the flatter side's corners are its noise: not aliasing
    return abs(top), ALIAS_SHAPE["distribution"]


def _softer_rolled_off(hf: HighFreq) -> bool:
    """The softer side's corners are at its own noise floor (SOFT_CORNER_MAX): blur of that side, not aliasing."""
    if hf.basis == "pairs":
        return False  # pairs have the excess ratio (ALIAS_SHAPE); see SOFT_CORNER_MAX
    c = hf.corner_noise.real if hf.sharper == "sim" else hf.corner_noise.sim
    return math.isfinite(c) and c <= SOFT_CORNER_MAX


def _sharper_corners_low(hf: HighFreq) -> bool:
    """Unpaired: the sharper side's corners hold no folded energy (ALIAS_CORNER_MIN): native detail, not aliasing."""
    if hf.basis == "pairs":
        return False
    c = hf.corner_noise.sim if hf.sharper == "sim" else hf.corner_noise.real
    return math.isfinite(c) and c < ALIAS_CORNER_MIN


def _aliasing(hf: HighFreq, sig: tuple[float, float] | None) -> bool:
    """The high-frequency signature reads as aliasing of the sharper side (not blur of the softer one)."""
    return (sig is not None and sig[1] >= ALIAS_SHAPE[hf.basis] and not _softer_rolled_off(hf)
            and not _sharper_corners_low(hf))


def _hf_evidence(ctx: Context, hf: HighFreq, shape: float | None) -> dict:
    ev = basis_evidence(hf.basis, hf.n_pairs, ctx)
    ev.update({"band_shape_sim_minus_real": nums(hf.bands[MID:], 3),
               "bands_cycles_per_pixel": "1/8-1/4, 0.25-0.35, 0.35-0.5, 0.5-0.72",
               "where_it_sits": num(shape, 3) if shape is not None else None,
               "top_slope_sim_minus_real": num(hf.slope.diff, 3),
               "noise_sigma_sim": num(hf.noise.sim, 3), "noise_sigma_real": num(hf.noise.real, 3),
               "corner_over_noise_sim": num(hf.corner_noise.sim, 3),
               "corner_over_noise_real": num(hf.corner_noise.real, 3),
               "sharper_side": hf.sharper})
    return ev


def check_resize_filter(ctx: Context) -> Finding | None:
    """Different resize filters: aliasing on one side, or a nearest-upscale signature."""
    hf = analyse(ctx)
    if hf is None:
        return None
    sig = _hf_signature(hf)
    sharper = hf.sharper
    other = "real" if sharper == "sim" else "sim"
    par_s, par_r = hf.parity.sim, hf.parity.real
    hi_par = "sim" if par_s >= par_r else "real"
    top_par, lo_par = max(par_s, par_r), min(par_s, par_r)
    nearest_up = (sig is not None and top_par >= NEAREST_PARITY and top_par - lo_par >= NEAREST_PARITY_GAP
                  and hi_par == sharper)
    aliasing = _aliasing(hf, sig)
    if aliasing and not nearest_up and ctx.memo.get("anisotropy_differs") is not None:
        aliasing = False  # one side blurred along one direction: its top band is not a filter's
    if not (aliasing or nearest_up):
        return None
    family = ({sharper: _NEAREST_UP, other: _INTERPOLATED_UP} if nearest_up
              else {sharper: _ALIASED, other: _ANTIALIASED})
    ev = _hf_evidence(ctx, hf, sig[1])
    ev.update({"sim_dup_parity": num(par_s), "real_dup_parity": num(par_r),
               "sim_filter_family": family["sim"], "real_filter_family": family["real"],
               "signature": "nearest_upscale" if nearest_up else "aliasing"})
    if nearest_up:
        title = (f"{hi_par.capitalize()} frames carry a nearest-neighbour upscaling signature "
                 f"(dup_parity {top_par:.2f} vs {lo_par:.2f}); the other side is interpolated.")
        score = (top_par - lo_par) / NEAREST_PARITY_GAP
    else:
        title = (f"{sharper.capitalize()} frames carry aliased energy just below Nyquist that the {other} frames "
                 f"lack (top-band power x{10 ** sig[0]:.1f}, concentrated at the top): different resize filters.")
        score = sig[0] / HF_TOP[hf.basis]
    action = ("Resize both streams with the same filter (an antialiased one, e.g. PIL BICUBIC/"
              f"BILINEAR or torchvision antialias=True); {sharper} looks like {family[sharper]}, "
              f"{other} like {family[other]}. If the sim renders at the target size, enable the "
              "renderer's anti-aliasing.")
    return Finding("resize_filter", "bug", title, ev, action, num(score))


def check_sharpness(ctx: Context) -> Finding | None:
    """Optical sharpness gap (focus, motion or lens blur): a gap, not a bug.

    Fires on a clear high-frequency difference that spreads down from the top band (blur) and is
    not explained by sensor noise, compression, a resize filter or a resolution change.
    """
    hf = analyse(ctx)
    if hf is None:
        return None
    sig = _hf_signature(hf)
    if sig is None or _aliasing(hf, sig):
        return None
    sharper = hf.sharper
    softer = "real" if sharper == "sim" else "sim"
    ratio = 10 ** sig[0]
    ev = _hf_evidence(ctx, hf, sig[1] if math.isfinite(sig[1]) else None)
    ev["top_band_power_ratio"] = num(ratio, 3)
    title = (f"{sharper.capitalize()} frames are sharper than {softer} frames: {ratio:.1f}x the power just below "
             f"Nyquist, falling off through the upper bands as blur does (focus, motion or lens blur differs).")
    if sharper == "sim":
        action = ("Add camera blur to the sim (defocus / motion blur, randomized up to the measured softness) "
                  "or check the real camera's focus and exposure time.")
    else:
        action = ("The sim is softer than the camera: render at a higher resolution or with less "
                  "smoothing (check texture filtering and anti-aliasing settings).")
    return Finding("sharpness", "gap", title, ev, action, num(sig[0] / HF_TOP[hf.basis]))
