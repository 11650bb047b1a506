"""Colour diagnoses: red/blue channel swap (`channel_swap`), exposure offset in stops
(`brightness`) and white-balance shift (`white_balance`), on linear-light channel means."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from perception_gap.diagnoses.common import dist_clear, excludes_zero, median_ci, num, nums, srgb_to_linear
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.encoding import Encoding, to01
from perception_gap.findings import Finding
from perception_gap.statistics.records import FrameRecord
from perception_gap.wording import pct, sig

# Channel swap. Cost of "sim = real with per-channel gains" vs "sim = real with R<->B swapped
# and gains" (gains relative to green, so exposure is free): spread of per-pair log-mean
# residuals + SWAP_GAIN_WEIGHT x |median log gain| +
# |log coefficient-of-variation| mismatch (gain invariant, so a colour cast cannot mimic a swap).
# Fires when the swapped model costs under SWAP_RATIO of the identity model and by SWAP_MARGIN.
# Measured on synthetic scenes and the shared photos: a 1.15/0.85 linear white-balance cast costs
# 0.04-0.05 under identity and 0.54-0.64 swapped (a 1.5/0.6 cast 0.13-0.15 vs 0.61-0.74); a real
# swap costs < 0.01 swapped and 0.50-0.60 under identity.
SWAP_GAIN_WEIGHT = 0.5
# Unpaired frames whose red and blue means differ by less than this (|ln R/B|, median) are too
# grey for a swap to show: an `info` finding says the sets cannot tell (indoor grey scenes).
GREY_CHROMA = 0.05
SWAP_RATIO = 0.4
SWAP_MARGIN = {"pairs": 0.08, "distribution": 0.12}
# Unpaired, a red/blue swap of warm scenes and a cool white-balance cast move the channel medians
# alike (VOC photos: a swap reads R/G x0.75, B/G x1.40): with gains tied to green, the two models'
# gain terms differ by at most the scenes' own |ln R/B|. When white balance would fire but the
# swapped model costs under SWAP_TIE x the gains model's, the white-balance check says it cannot
# tell the two apart (`info`) rather than name either. Tune cameras: unpaired casts of 0.6 log2 on
# the robot frames cost 2.6-4.7x more swapped; the VOC swaps cost 0.39-0.77x of the gains model.
SWAP_TIE = 1.25

# Thresholds follow measurement precision. Paired, a finding needs a practically relevant effect
# whose median CI over pairs excludes zero (matched pairs measure a -0.3 stop shift as -0.2998);
# unpaired, the bar is higher and the effect must also clear the scene-to-scene spread (DIST_Z).
# Brightness: 0.12 stop (9%), paired, is under half a camera exposure step, about the smallest
# exposure change that matters to a policy, and clipped highlights pull a 0.2-stop gain down to
# ~0.14; sigma-2 noise and JPEG q90 move mean luminance by < 0.02 stop.
BRIGHTNESS_STOPS = {"pairs": 0.12, "distribution": 0.3}
# White balance: 0.1 in log2(R/G) or log2(B/G) is a 7% gain (~300 K near 5000 K); paired 0.07
# (5%). Noise and JPEG chroma subsampling move these by < 0.01.
WB_LOG2 = {"pairs": 0.07, "distribution": 0.1}

_REC709 = np.array([0.2126, 0.7152, 0.0722])


def exposure_stops(lin_sim: np.ndarray, lin_real: np.ndarray) -> np.ndarray:
    """log2 ratio of Rec.709 luminance of linear per-channel means, shape (n, 3) -> (n,)."""
    ys = np.clip(lin_sim @ _REC709, 1e-6, None)
    yr = np.clip(lin_real @ _REC709, 1e-6, None)
    return np.log2(ys / yr)


def chroma_log2(lin: np.ndarray) -> np.ndarray:
    """(n, 3) linear means -> (n, 2) log2(R/G), log2(B/G)."""
    lin = np.clip(lin, 1e-6, None)
    return np.stack([np.log2(lin[:, 0] / lin[:, 1]), np.log2(lin[:, 2] / lin[:, 1])], axis=1)


def _side_linear(frames: Sequence[FrameRecord], enc: Encoding,
                 use_lin_mean: bool) -> np.ndarray:
    """(n, 3) linear-light per-channel means: the stats' exact `lin_mean` when usable, else the
    sRGB decode of the [0, 1] channel means (biased low, the decode being convex, so it is used
    on both sides or neither)."""
    if use_lin_mean:
        return np.array([f.image.lin_mean[:3] for f in frames], dtype=np.float64)
    mean = np.array([f.image.mean[:3] for f in frames], dtype=np.float64)
    std = np.array([f.image.std[:3] for f in frames], dtype=np.float64)
    m01, _ = to01(enc, mean, std)
    return srgb_to_linear(m01)


def _lin_mean_ok(frames: Sequence[FrameRecord], enc: Encoding) -> bool:
    """`lin_mean` is exact only when the dtype's nominal scale is the inferred encoding."""
    return enc.name in ("uint8", "uint16") and all(
        f.image.lin_mean is not None and len(f.image.lin_mean) >= 3 for f in frames)


def _linear_means(ctx: Context, sim_frames: Sequence[FrameRecord],
                  real_frames: Sequence[FrameRecord]) -> tuple[np.ndarray, np.ndarray]:
    es, er = ctx.enc.sim, ctx.enc.real
    exact = _lin_mean_ok(sim_frames, es) and _lin_mean_ok(real_frames, er)
    return _side_linear(sim_frames, es, exact), _side_linear(real_frames, er, exact)


def _log_means_cv(frames: Sequence[FrameRecord], enc: Encoding) -> tuple[np.ndarray, np.ndarray]:
    """(n, 3) log of [0, 1] channel means and log coefficient of variation."""
    mean = np.array([f.image.mean[:3] for f in frames], dtype=np.float64)
    std = np.array([f.image.std[:3] for f in frames], dtype=np.float64)
    m01, s01 = to01(enc, mean, std)
    m01 = np.clip(m01, 1e-3, None)
    return np.log(m01), np.log(np.clip(s01, 1e-4, None) / m01)


def swap_costs(lm_s: np.ndarray, cv_s: np.ndarray, lm_r: np.ndarray, cv_r: np.ndarray,
               paired_rows: bool) -> tuple[float, float, dict]:
    """Cost of explaining sim from real without and with an R<->B swap.

    Gains are taken relative to the green channel's, so an exposure difference costs neither
    model anything.

    Args:
        lm_s, cv_s: (n_s, 3) sim log channel means and log coefficients of variation.
        lm_r, cv_r: (n_r, 3) the same for real; n_r == n_s and rows matched when `paired_rows`.

    Returns:
        (identity cost, swapped cost, per-model details).
    """
    if paired_rows:
        exposure = lm_s[:, 1] - lm_r[:, 1]
    else:
        exposure = np.full(len(lm_s), float(np.median(lm_s[:, 1]) - np.median(lm_r[:, 1])))
    details = {}
    costs = []
    for name, perm in (("identity", [0, 1, 2]), ("swapped", [2, 1, 0])):
        parts = []
        gains = []
        for c in (0, 2):
            pc = perm[c]
            if paired_rows:
                res = lm_s[:, c] - lm_r[:, pc] - exposure
                gain = float(np.median(res))
                spread = float(np.median(np.abs(res - gain)))
                cv_term = float(np.median(np.abs(cv_s[:, c] - cv_r[:, pc])))
            else:
                gain = float(np.median(lm_s[:, c]) - np.median(lm_r[:, pc]) - exposure[0])
                spread = 0.0
                cv_term = abs(float(np.median(cv_s[:, c]) - np.median(cv_r[:, pc])))
            gains.append(gain)
            parts.append(spread + SWAP_GAIN_WEIGHT * abs(gain) + cv_term)
        cost = float(np.mean(parts))
        costs.append(cost)
        details[name] = {"cost": num(cost), "log_gain_r": num(gains[0]), "log_gain_b": num(gains[1])}
    return costs[0], costs[1], details


def _is_colour(f: FrameRecord, partner: FrameRecord | None) -> bool:
    return f.image.channels >= 3


def check_channel_swap(ctx: Context) -> Finding | None:
    """RGB vs BGR: the swapped model explains the sim from the real far better than gains do."""
    basis, fs, fr = ctx.image_sides(_is_colour)
    need = 1 if basis == "pairs" else 2  # one frame per side says nothing about a distribution
    if len(fs) < need or len(fr) < need:
        return None
    lm_s, cv_s = _log_means_cv(fs, ctx.enc.sim)
    lm_r, cv_r = _log_means_cv(fr, ctx.enc.real)
    c_id, c_sw, details = swap_costs(lm_s, cv_s, lm_r, cv_r, basis == "pairs")
    ctx.memo["swap_costs"] = (c_id, c_sw, details)  # the white-balance check asks whether a swap fits as well
    if not (c_sw < SWAP_RATIO * c_id and c_id - c_sw >= SWAP_MARGIN[basis]):
        return _cannot_tell_swap(ctx, basis, lm_s, lm_r)
    # Natural scenes average redder than bluer (ImageNet mean R 0.485 > B 0.406, and every real
    # photo in the shared data has mean R > B), so the side whose frames are bluer is the BGR one.
    rb_s = float(np.median(lm_s[:, 0] - lm_s[:, 2]))
    rb_r = float(np.median(lm_r[:, 0] - lm_r[:, 2]))
    bgr_side = "sim" if rb_s < rb_r else "real"
    ev = basis_evidence(basis, len(fs) if basis == "pairs" else 0, ctx)
    ev.update({
        "identity_cost": num(c_id), "swapped_cost": num(c_sw), "models": details,
        "sim_log_r_over_b": num(rb_s), "real_log_r_over_b": num(rb_r),
        "likely_bgr_side": bgr_side,
        "bgr_side_basis": "natural scenes average R > B; the bluer side is taken as BGR",
    })
    title = (f"Red and blue channels are swapped between sim and real (swapped model fits "
             f"{c_id / max(c_sw, 1e-3):.1f}x better); {bgr_side} most likely delivers BGR.")
    action = (f"Swap the channel order in the {bgr_side} pipeline (it delivers BGR, e.g. an OpenCV "
              f"imread/camera driver); do not randomize hue around it.")
    return Finding("channel_swap", "bug", title, ev, action, num((c_id - c_sw) / SWAP_MARGIN[basis]))


def _cannot_tell_swap(ctx: Context, basis: str, lm_s: np.ndarray, lm_r: np.ndarray) -> Finding | None:
    """Unpaired near-grey frames carry no red/blue signature: say so rather than name another cause."""
    if basis == "pairs":
        return None
    chroma = max(float(np.median(np.abs(lm[:, 0] - lm[:, 2]))) for lm in (lm_s, lm_r))
    if chroma >= GREY_CHROMA:
        return None
    ev = basis_evidence(basis, 0, ctx)
    ev.update({"median_abs_log_r_over_b": num(chroma), "grey_below": GREY_CHROMA})
    return Finding("channel_swap", "info",
                   "Sim and real frames are nearly grey and unpaired: a red/blue channel swap cannot be told from "
                   "these sets either way.",
                   ev, "Index matched pairs (shared pair keys) or frames with coloured objects to check the channel "
                       "order; white-balance figures of these sets are unreliable for the same reason.", 0.0)


def _color_inputs(ctx: Context) -> tuple[str, int, np.ndarray, np.ndarray] | None:
    """(basis, n_pairs, sim linear means (n, 3), real linear means (m, 3)) in channel order
    corrected for a detected swap."""
    basis, fs, fr = ctx.image_sides(_is_colour)
    need = 1 if basis == "pairs" else 2  # a distribution needs a spread
    if len(fs) < need or len(fr) < need:
        return None
    lin_s, lin_r = _linear_means(ctx, fs, fr)
    if "channel_swap" in ctx.fired:
        lin_s = lin_s[:, ::-1]
    return basis, (len(fs) if basis == "pairs" else 0), lin_s, lin_r


def check_brightness(ctx: Context) -> Finding | None:
    """Exposure offset in stops from mean linear luminance (Rec.709)."""
    inputs = _color_inputs(ctx)
    if inputs is None:
        return None
    basis, n_pairs, lin_s, lin_r = inputs
    if basis == "pairs":
        per_pair = exposure_stops(lin_s, lin_r)
        stops = float(np.median(per_pair))
        spread = [float(np.percentile(per_pair, 25)), float(np.percentile(per_pair, 75))]
        z_ok = excludes_zero(median_ci(per_pair))
    else:
        ys = np.log2(np.clip(lin_s @ _REC709, 1e-6, None))
        yr = np.log2(np.clip(lin_r @ _REC709, 1e-6, None))
        stops = float(np.median(ys) - np.median(yr))
        spread = None
        z_ok = dist_clear(ys, yr, BRIGHTNESS_STOPS["distribution"])
    if abs(stops) < BRIGHTNESS_STOPS[basis] or not z_ok:
        return None
    if "vignetting" in ctx.fired and abs(ctx.memo.get("vignetting_centre_stops", 0.0)) < BRIGHTNESS_STOPS[basis]:
        return None  # the mean fell because the corners did: the centre is as bright as the other side's
    word = "brighter" if stops > 0 else "darker"
    ctx.memo["brighter"] = "sim" if stops > 0 else "real"  # the high-frequency checks discount what exposure moves
    budget = math.ceil(abs(stops) * 10 - 1e-9) / 10
    ev = basis_evidence(basis, n_pairs, ctx)
    ev.update({"stops_sim_minus_real": num(stops), "luminance_ratio_sim_over_real": num(2.0 ** stops),
               "threshold_stops": BRIGHTNESS_STOPS[basis],
               "sim_linear_luminance": num(float(np.median(lin_s @ _REC709)), 5),
               "real_linear_luminance": num(float(np.median(lin_r @ _REC709)), 5)})
    if spread is not None:
        ev["stops_iqr"] = nums(spread)
    ratio = 2.0 ** stops
    title = f"Sim is {sig(abs(stops))} stops {word} than real (sim luminance {pct(ratio)} of real's)."
    action = (f"Randomize light intensity / exposure by at least ±{budget:.1f} stops (sim luminance is "
              f"{pct(ratio)} of real's), or match the sim camera's exposure to the real one.")
    return Finding("brightness", "gap", title, ev, action, num(abs(stops) / BRIGHTNESS_STOPS[basis]))


def check_white_balance(ctx: Context) -> Finding | None:
    """Colour-temperature / white-balance gain shift in log2(R/G), log2(B/G) of linear means."""
    inputs = _color_inputs(ctx)
    if inputs is None:
        return None
    basis, n_pairs, lin_s, lin_r = inputs
    cs, cr = chroma_log2(lin_s), chroma_log2(lin_r)
    if basis == "pairs":
        shift = np.median(cs - cr, axis=0)
        z_ok = any(excludes_zero(median_ci(cs[:, k] - cr[:, k])) and abs(shift[k]) >= WB_LOG2[basis] for k in (0, 1))
    else:
        shift = np.median(cs, axis=0) - np.median(cr, axis=0)
        z_ok = any(dist_clear(cs[:, k], cr[:, k], WB_LOG2["distribution"]) for k in (0, 1))
    rg, bg = float(shift[0]), float(shift[1])
    size = max(abs(rg), abs(bg))
    if size < WB_LOG2[basis] or not z_ok:
        return None
    if basis != "pairs" and _swap_fits_as_well(ctx):
        return _cannot_tell_swap_from_wb(ctx, basis, rg, bg)
    warm = rg - bg
    tone = "warmer (redder)" if warm > 0 else "cooler (bluer)"
    ev = basis_evidence(basis, n_pairs, ctx)
    ev.update({"log2_r_over_g_sim_minus_real": num(rg), "log2_b_over_g_sim_minus_real": num(bg),
               "gain_r_sim_over_real": num(2.0 ** rg), "gain_b_sim_over_real": num(2.0 ** bg),
               "threshold_log2": WB_LOG2[basis], "sim_tone": tone})
    title = (f"Sim is {tone} than real: R/G gain x{2 ** rg:.2f}, B/G gain x{2 ** bg:.2f} "
             f"({size:.2f} log2).")
    gains = [f"±{pct(abs(2 ** x - 1))} on {n}" for n, x in (("R/G", rg), ("B/G", bg)) if abs(2 ** x - 1) >= 0.005]
    action = (f"Randomize white-balance gains / colour temperature by at least {' and '.join(gains)}, or match "
              f"the sim light colour and the camera's white balance.")
    return Finding("white_balance", "gap", title, ev, action, num(size / WB_LOG2[basis]))


def _swap_fits_as_well(ctx: Context) -> bool:
    """The R<->B swapped model explains the sets about as well as the gains model (SWAP_TIE)."""
    costs = ctx.memo.get("swap_costs")
    return costs is not None and costs[1] < SWAP_TIE * costs[0]


def _cannot_tell_swap_from_wb(ctx: Context, basis: str, rg: float, bg: float) -> Finding:
    """Unpaired white-balance shift that a red/blue channel swap explains about as well: say so."""
    c_id, c_sw, details = ctx.memo["swap_costs"]
    ev = basis_evidence(basis, 0, ctx)
    ev.update({"log2_r_over_g_sim_minus_real": num(rg), "log2_b_over_g_sim_minus_real": num(bg),
               "identity_cost": num(c_id), "swapped_cost": num(c_sw), "models": details,
               "swap_tie_ratio": SWAP_TIE})
    title = (f"Sim and real differ in red/blue balance (R/G x{2 ** rg:.2f}, B/G x{2 ** bg:.2f}), but these "
             f"unpaired sets cannot tell a white-balance shift from a red/blue channel swap (swapped model "
             f"cost {c_sw:.2f} vs gains {c_id:.2f}).")
    action = ("Check the channel order (RGB vs BGR) of both pipelines first, e.g. on one matched pair; index "
              "matched pairs (shared pair keys) to decide; randomize white balance only once the order is "
              "known to match.")
    return Finding("channel_swap", "info", title, ev, action, 0.0)
