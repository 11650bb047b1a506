"""High-frequency diagnoses: resize-filter mismatch (`resize_filter`: aliasing or a
nearest-upscale signature) and optical sharpness gap (`sharpness`: focus, motion or lens blur)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from perception_gap.diagnoses.common import DIST_Z, dist_z, num
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.encoding import Encoding
from perception_gap.findings import Finding
from perception_gap.statistics.records import FrameRecord

# Resize filter, aliasing rule (downscaling without an antialias filter, or nearest): the
# sharper side must have log hf_ratio higher by RESIZE_HF, log grad_ratio lower by RESIZE_GRAD,
# and its extra gradient energy must equal white noise of at least RESIZE_NOISE_EQ 8-bit levels.
# Mild sensor noise (sigma 2-3 levels) shows up as exactly its sigma in that last measure, and on
# smooth frames it can pass the two relative tests; aliased downscales measured 5-10 levels.
RESIZE_HF = {"pairs": 0.2, "distribution": 0.3}
RESIZE_GRAD = {"pairs": 0.12, "distribution": 0.2}
RESIZE_NOISE_EQ = {"pairs": 4.0, "distribution": 6.0}
# Absolute hf_ratio levels (E[lap^2] / E[grad^2]) measured on 24 shared photos at 640x480 and
# after resizing to 224x168: natural frames 2.0 (10-90%: 1.25-2.85), antialiased downscale 1.85,
# nearest / non-antialiased bilinear downscale 3.1-3.4, Gaussian blur sigma 0.7 / 1.2 / 2: 1.2 /
# 0.5 / 0.25 (noise after the blur: 1.3 / 0.6 / 0.4). Aliasing needs the soft side unblurred and
# the sharp side above natural levels; otherwise the difference is optical (`sharpness`, a gap).
ALIAS_SOFT_MIN = 1.4
ALIAS_SHARP_MIN = 2.4
# Nearest-neighbour upscaling (2x) makes every other horizontal pixel pair identical: dup_parity
# 0.5-0.8 measured, vs < 0.1 for natural or noisy frames and up to 0.4 for bilinear 2x upscales
# of flat synthetic content. Needs the high-parity side to be the sharper one as well.
NEAREST_PARITY = 0.45
NEAREST_PARITY_GAP = 0.15
# Share of pairs whose HF differences must point the same way as the median.
RESIZE_AGREE = 0.75

# Sharpness (optical blur): Laplacian energy differing by this many stops (log2). Sensor noise
# of sigma 2-3 levels on smooth frames raises it by up to ~0.6; a 1-pixel Gaussian blur lowers
# it by 2.3-4.3 stops on the shared photos.
SHARPNESS_STOPS = {"pairs": 1.0, "distribution": 1.5}


@dataclass(frozen=True)
class HFFeatures:
    """Per-frame high-frequency features: log hf_ratio, log grad_ratio, gradient energy in
    ([0, 1] units)^2 (E[dx^2] + E[dy^2] = sharpness / hf_ratio) and dup_parity."""

    log_hf: np.ndarray
    log_grad: np.ndarray
    grad_energy: np.ndarray
    parity: np.ndarray


def _hf_features(frames: Sequence[FrameRecord], enc: Encoding) -> HFFeatures:
    # sharpness is in (fraction of full scale)^2 for integer dtypes and own units^2 for floats;
    # the inferred encoding's scale puts floats on the same footing.
    s01 = 1.0 if enc.name in ("uint8", "uint16", "uint16_8bit", "unknown") else float(np.mean(enc.scale))
    if enc.name == "uint16_8bit":
        s01 = 65535.0 / 255.0
    hf = np.array([f.image.hf_ratio for f in frames], dtype=np.float64)
    gr = np.array([f.image.grad_ratio for f in frames], dtype=np.float64)
    sh = np.array([f.image.sharpness for f in frames], dtype=np.float64) * s01 ** 2
    return HFFeatures(np.log(hf), np.log(gr), sh / hf, np.array([f.image.dup_parity for f in frames]))


def hf_differences(hs: HFFeatures, hr: HFFeatures, paired_rows: bool) -> tuple[float, float, float, float]:
    """(d log hf_ratio, d log grad_ratio, d gradient energy, agreement), sim minus real.

    Paired: medians of per-pair differences; agreement is the share of pairs pointing the same
    way as both medians. Unpaired: differences of set medians; agreement is 1 when both log
    ratios differ by DIST_Z standard errors, else 0.
    """
    if paired_rows:
        d_hf_all, d_gr_all = hs.log_hf - hr.log_hf, hs.log_grad - hr.log_grad
        d_hf, d_gr = float(np.median(d_hf_all)), float(np.median(d_gr_all))
        d_energy = float(np.median(hs.grad_energy - hr.grad_energy))
        same_way = (np.sign(d_hf_all) == np.sign(d_hf)) & (np.sign(d_gr_all) == np.sign(d_gr))
        return d_hf, d_gr, d_energy, float(np.mean(same_way))
    d_hf = float(np.median(hs.log_hf) - np.median(hr.log_hf))
    d_gr = float(np.median(hs.log_grad) - np.median(hr.log_grad))
    d_energy = float(np.median(hs.grad_energy) - np.median(hr.grad_energy))
    clear = dist_z(hs.log_hf, hr.log_hf) >= DIST_Z and dist_z(hs.log_grad, hr.log_grad) >= DIST_Z
    return d_hf, d_gr, d_energy, 1.0 if clear else 0.0


def noise_equivalent_levels(energy_diff: float) -> float:
    """Signed 8-bit sigma of white RGB noise adding `energy_diff` of luma gradient energy:
    per-channel noise sigma adds 4 * 0.447 * sigma^2 to E[dx^2] + E[dy^2] of BT.601 luma."""
    luma_var = 0.299 ** 2 + 0.587 ** 2 + 0.114 ** 2
    return math.copysign(math.sqrt(abs(energy_diff) / (4 * luma_var)) * 255.0, energy_diff)


# Filter families as the signatures name them (relative: one side against the other).
_ALIASED = "aliased: nearest or non-antialiased downscaling (or rendering without anti-aliasing)"
_ANTIALIASED = "antialiased (area, or bilinear/bicubic with antialias) or optically softer"
_NEAREST_UP = "nearest-neighbour upscaling"
_INTERPOLATED_UP = "interpolated (bilinear/bicubic) upscaling or native"


def check_resize_filter(ctx: Context) -> Finding | None:
    """Different resize filters: aliasing energy on one side, or a nearest-upscale signature."""
    def keep(f: FrameRecord, partner: FrameRecord | None) -> bool:
        # Per-pixel HF statistics compare only at one resolution (pairs of equal size).
        same = partner is None or (
            (f.image.width, f.image.height) == (partner.image.width, partner.image.height))
        return bool(f.image.hf_ratio and f.image.grad_ratio and f.image.sharpness > 0 and same)

    basis, fs, fr = ctx.image_sides(keep)
    if len(fs) < 2 or len(fr) < 2:
        return None
    hs, hr = _hf_features(fs, ctx.enc.sim), _hf_features(fr, ctx.enc.real)
    d_hf, d_gr, d_energy, agree = hf_differences(hs, hr, basis == "pairs")
    noise_eq = noise_equivalent_levels(d_energy)
    par_s, par_r = float(np.median(hs.parity)), float(np.median(hr.parity))
    sharper = "sim" if d_hf > 0 else "real"
    same_size = "resolution" not in ctx.fired
    aliasing = (same_size and abs(d_hf) >= RESIZE_HF[basis] and abs(d_gr) >= RESIZE_GRAD[basis]
                and d_hf * d_gr < 0 and abs(noise_eq) >= RESIZE_NOISE_EQ[basis]
                and math.copysign(1, noise_eq) == math.copysign(1, d_hf) and agree >= RESIZE_AGREE)
    # Optical blur on one side mimics the relative signature (the sharp side looks "aliased"
    # next to it). Absolute levels tell them apart: a blurred side's hf_ratio falls below
    # ALIAS_SOFT_MIN, while aliasing lifts the sharp side's above ALIAS_SHARP_MIN.
    hf_sharp = float(np.exp(np.median((hs if sharper == "sim" else hr).log_hf)))
    hf_soft = float(np.exp(np.median((hr if sharper == "sim" else hs).log_hf)))
    aliasing = aliasing and hf_soft >= ALIAS_SOFT_MIN and hf_sharp >= ALIAS_SHARP_MIN
    hi_par = "sim" if par_s >= par_r else "real"
    top_par, lo_par = max(par_s, par_r), min(par_s, par_r)
    nearest_up = (top_par >= NEAREST_PARITY and top_par - lo_par >= NEAREST_PARITY_GAP
                  and hi_par == sharper and abs(d_hf) >= RESIZE_HF[basis] and d_hf * d_gr < 0)
    if not (aliasing or nearest_up):
        return None
    other = "real" if sharper == "sim" else "sim"
    family = ({sharper: _NEAREST_UP, other: _INTERPOLATED_UP} if nearest_up
              else {sharper: _ALIASED, other: _ANTIALIASED})
    ev = basis_evidence(basis, len(fs) if basis == "pairs" else 0, ctx)
    ev.update({
        "log_hf_ratio_sim_minus_real": num(d_hf), "log_grad_ratio_sim_minus_real": num(d_gr),
        "noise_equivalent_levels": num(noise_eq, 3), "pair_agreement": num(agree),
        "sim_hf_ratio": num(float(np.exp(np.median(hs.log_hf)))),
        "real_hf_ratio": num(float(np.exp(np.median(hr.log_hf)))),
        "sim_grad_ratio": num(float(np.exp(np.median(hs.log_grad)))),
        "real_grad_ratio": num(float(np.exp(np.median(hr.log_grad)))),
        "sim_dup_parity": num(par_s), "real_dup_parity": num(par_r),
        "sharper_side": sharper, "sim_filter_family": family["sim"],
        "real_filter_family": family["real"],
        "signature": "nearest_upscale" if nearest_up else "aliasing",
    })
    if nearest_up:
        title = (f"{hi_par.capitalize()} frames carry a nearest-neighbour upscaling signature "
                 f"(dup_parity {top_par:.2f} vs {lo_par:.2f}); the other side is interpolated.")
        score = (top_par - lo_par) / NEAREST_PARITY_GAP
    else:
        title = (f"{sharper.capitalize()} frames carry aliased high-frequency energy the {other} "
                 f"frames lack (like {abs(noise_eq):.1f}/255 noise; hf_ratio "
                 f"x{math.exp(abs(d_hf)):.2f}): different resize filters.")
        score = abs(noise_eq) / RESIZE_NOISE_EQ[basis]
    action = ("Resize both streams with the same filter (an antialiased one, e.g. PIL BICUBIC/"
              f"BILINEAR or torchvision antialias=True); {sharper} looks like {family[sharper]}, "
              f"{other} like {family[other]}. If the sim renders at the target size, enable the "
              "renderer's anti-aliasing.")
    return Finding("resize_filter", "bug", title, ev, action, num(score))


def check_sharpness(ctx: Context) -> Finding | None:
    """Optical sharpness gap (focus, motion or lens blur): a gap, not a bug.

    Fires when the Laplacian energy differs by SHARPNESS_STOPS (log2) in the same direction for
    RESIZE_AGREE of the pairs and no resize-filter signature explains it. Mild noise raises the
    Laplacian energy of smooth frames by up to ~1.5x (0.6 in log2); a Gaussian blur of sigma 1
    pixel lowers it 5-20x.
    """
    if ctx.fired & {"resize_filter", "resolution", "value_range", "normalization"}:
        return None

    def keep(f: FrameRecord, partner: FrameRecord | None) -> bool:
        return bool(f.image.sharpness and f.image.sharpness > 0 and f.image.hf_ratio)

    basis, fs, fr = ctx.image_sides(keep)
    if len(fs) < 2 or len(fr) < 2:
        return None
    # on one scale: gradient energy x hf_ratio = sharpness, with the encoding's scale applied
    hs, hr = _hf_features(fs, ctx.enc.sim), _hf_features(fr, ctx.enc.real)
    ls = np.log2(hs.grad_energy * np.exp(hs.log_hf))
    lr = np.log2(hr.grad_energy * np.exp(hr.log_hf))
    if basis == "pairs":
        d_all = ls - lr
        d = float(np.median(d_all))
        agree = float(np.mean(np.sign(d_all) == np.sign(d)))
        clear = agree >= RESIZE_AGREE
    else:
        d = float(np.median(ls) - np.median(lr))
        agree = None
        clear = dist_z(ls, lr) >= DIST_Z
    if abs(d) < SHARPNESS_STOPS[basis] or not clear:
        return None
    sharper, softer = ("sim", "real") if d > 0 else ("real", "sim")
    ev = basis_evidence(basis, len(fs) if basis == "pairs" else 0, ctx)
    ev.update({"log2_sharpness_sim_minus_real": num(d), "sharpness_ratio": num(2 ** abs(d), 3),
               "pair_agreement": num(agree) if agree is not None else None,
               "sim_sharpness": num(float(2 ** np.median(ls)), 6), "real_sharpness": num(float(2 ** np.median(lr)), 6),
               "sharper_side": sharper})
    title = (f"{sharper.capitalize()} frames are {2 ** abs(d):.1f}x sharper than {softer} frames "
             f"(Laplacian energy): focus, motion or lens blur differs.")
    if sharper == "sim":
        action = ("Add camera blur to the sim (defocus / motion blur, randomized up to the measured softness) "
                  "or check the real camera's focus and exposure time.")
    else:
        action = ("The sim is softer than the camera: render at a higher resolution or with less "
                  "smoothing (check texture filtering and anti-aliasing settings).")
    return Finding("sharpness", "gap", title, ev, action, num(abs(d) / SHARPNESS_STOPS[basis]))
