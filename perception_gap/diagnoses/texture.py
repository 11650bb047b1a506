"""Sensor and codec diagnoses: sensor noise (`sensor_noise`) and lossy compression (`compression`).

Both are gaps, not bugs: a simulator renders clean, uncompressed frames, a camera pipeline adds
noise and (for video and many recorders) compression. Both read the shared high-frequency
comparison (`highfreq.analyse`) and run before the resize-filter and sharpness checks, which
they would otherwise contaminate: noise raises high-frequency energy, compression removes it.
"""

from __future__ import annotations

import math

import numpy as np

from perception_gap.diagnoses.common import num
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.highfreq import FLAT_EXCESS, MID, TOP, UPPER, HighFreq, analyse
from perception_gap.diagnoses.motion import anisotropy_shift
from perception_gap.findings import Finding

# Sensor noise: the noisier side adds white noise of at least NOISE_MIN luma levels (the square
# root of the variance difference), the difference is clear (paired median CI, or DIST_Z), and
# it explains the extra top-band power (measured excess / variance difference <= NOISE_EXPLAINS;
# white noise reads ~1, aliasing and blur 10-1000). Luma noise of i.i.d. RGB noise is 0.67 of
# the per-channel sigma: sigma-2 RGB noise reads 1.3-1.5 luma levels over a clean camera.
NOISE_MIN = {"pairs": 0.8, "distribution": 1.5}
NOISE_EXPLAINS = 3.0
# Paired, when the noisier side is the only one stored as JPEG files: the codec zeroes the noise in
# flat blocks (where the noise is estimated) and keeps more of it in textured ones, so the measured
# noise explains less of the top band (noiseless renders against the same frames with sigma-8
# noise saved at q90, tune RGB-D camera: 7.4-7.7; robot frames: 7.8-8.4; aliasing 10-1000).
NOISE_EXPLAINS_JPEG = 9.0
# The flat-spectrum route needs the flat-region estimate to agree: at least this share of the sigma
# the flat excess implies (busy textures halve the flat-region estimate; aliasing on synthetic
# textures reads a flat-ish excess of 4 levels with a flat-region difference of 0.5).
FLAT_AGREE = 0.35
# Unpaired, different scenes: the noisier side's extra flat-region noise must also fill its
# corners (`HighFreq.corner_noise`: median log10 of corner-band power over the frame's own noise
# variance). White noise puts its variance in every band, so added noise pulls that towards 0;
# aliasing folds far more energy into the corners than into the flat regions. Measured medians
# (tune cameras): VOC photos 0.77 clean, 0.51 with sigma 2, 0.30 with sigma 5 (4-frame sets: 0.10-0.53);
# Google robot frames 1.03, 0.05, 0.01; the aliased side of nearest / non-antialiased bilinear
# 2-3.5x downscales 1.0-1.7 (one 4-frame set of noisy JPEGs 0.46-0.82). Above NOISE_CORNER_MAX
# (corners over ~4x the noise variance) the extra noise is not named sensor noise.
NOISE_CORNER_MAX = 0.6
# Unpaired, the noisier side's chroma-to-luma detail ratio (log2) must be clearly higher by at
# least this much for the chroma route (`chroma_says_noise`). Tune cameras: VOC photos (4:2:0
# JPEGs) read 0.25 clean and 2.30 with sigma 5 (medians of 8 frames).
CHROMA_NOISE_LOG2 = 0.5
# A blur of one side also takes out its noise and chroma detail, and it moves the mid band
# (1/8-1/4 cycles/pixel) relative to the reference band: sigma-2 blur of VOC photos by >= 0.6
# decades, added noise (sigma 2-8) by < 0.1. The chroma route needs the mid band unmoved.
CHROMA_NOISE_MID_MAX = 0.2
RGB_PER_LUMA = 1.0 / math.sqrt(0.299 ** 2 + 0.587 ** 2 + 0.114 ** 2)

# Compression. JPEG blockiness (mean |dx| across 8x8 block boundaries over elsewhere) of the
# blockier side at least BLOCK_MIN and BLOCK_RATIO over the other's, clearly: q30 reads 1.5-2.3
# against 0.9-1.3 for the same frames uncompressed, q50 1.13-1.9, q70 1.03-1.6, and q90 on
# smooth synthetic textures up to 1.21 (a mild re-encode, kept quiet): named from about q30-50. Or both sides are JPEG files
# whose estimated qualities differ by QUALITY_GAP with the lower under QUALITY_MAX. Or chroma
# detail (chroma hf ratio) differs by CHROMA_LOG2 while luma detail does not (4:2:0 subsampling
# halves the chroma resolution: 0.7 in log2 on frames that were not subsampled before).
BLOCK_MIN = 1.25
BLOCK_RATIO = 1.15
BLOCK_STRONG = 1.3  # a ratio this large is compression even when the noise differs too (JPEG removes noise)
QUALITY_GAP = 15.0
QUALITY_MAX = 85.0
# Unpaired, only one side JPEG files (the other PNG, arrays or video): a median estimated quality
# at or under QUALITY_LOW is heavy compression whatever the other side holds (the IJG default is
# 75; the shared cameras' own JPEGs read 75-95), named when that side is also the blockier one.
QUALITY_LOW = 50.0
CHROMA_LOG2 = 0.35
CHROMA_LUMA_MAX = 0.08  # decades of top-band shape change allowed with a chroma-only finding
# 4:2:0 leaves luma alone, so luma's spectral slope at the top (corner over upper band, per frame)
# does not move: 4:2:0 of SimplerEnv frames, unpaired, read |slope difference| <= 0.07 decades. An
# aliased resize of one side flattens that slope by 0.4-0.85 and takes chroma detail with it
# (SimplerEnv 320x256 unpaired, 2x nearest and 2.5x non-antialiased bilinear against antialiased:
# slope +0.59-0.62, chroma 0.54-0.64 log2, both clear). Unpaired, different scenes keep the top
# band's own level from being clear, so the slope is what shows luma moved.
CHROMA_SLOPE_MAX = 0.2


def noise_excess(hf: HighFreq) -> float | None:
    """Signed sigma (luma levels, sim noisier positive) of the sensor noise that separates the sides, or None.

    Two routes: the flat-region noise estimates differ clearly and the difference explains the
    extra top-band power; or the band powers differ by the same amount over the top bands (white
    noise is flat), which also holds on busy textures with no flat region to measure in.
    """
    sx = hf.noise_excess()
    if not corners_are_noise(hf, sx):
        return None
    if hf.variance.clear and abs(sx) >= NOISE_MIN[hf.basis]:
        if hf.noise_explains_top() <= (NOISE_EXPLAINS_JPEG if _only_jpeg_side(hf, sx) else NOISE_EXPLAINS):
            return sx
        if hf.basis == "distribution" and not hf.signal_top.clear:
            return sx  # raw powers carry scene differences; the noise-corrected shape does not differ
    if hf.basis == "distribution" and chroma_says_noise(hf, sx):
        return sx
    flat = hf.flat_excess()
    if (hf.basis == "pairs" and flat is not None and abs(flat) >= NOISE_MIN[hf.basis]
            and sx * flat > 0 and abs(sx) >= FLAT_AGREE * abs(flat)):
        return flat  # the flat-region estimate must point the same way and not be far smaller
    return jpeg_shaped_noise(hf, sx)


def _only_jpeg_side(hf: HighFreq, signed: float) -> bool:
    """Paired, and the noisier side (`signed`: sim noisier positive) is the only one stored as JPEG files."""
    qs, qr = hf.jpeg_quality
    return hf.basis == "pairs" and math.isfinite(qs) != math.isfinite(qr) and math.isfinite(qs) == (signed > 0)


def jpeg_shaped_noise(hf: HighFreq, signed: float) -> float | None:
    """Paired: noise on the side stored as JPEG files (the other not), read below the bands the codec removes.

    JPEG quantizes the highest frequencies of each 8x8 block hardest, so white noise under it stays
    flat only up to about 0.35 cycles/pixel: the excess is equal in the mid and upper bands and falls
    through the top and corner bands, and the flat-region estimate keeps only part of the noise
    (sigma-5 noise saved at q90 on SimplerEnv frames: mid/upper excess 12.8/13.2 levels^2, top 9.1,
    corner 4.6, flat-region sigma 1.1 against 0.4). Aliasing puts its excess in the top band
    (mid band under a third of it) and blur takes power from the softer side, so neither gives
    an equal excess in the mid and upper bands on the noisier JPEG side. Returns the signed sigma
    (sim noisier positive) or None.
    """
    qs, qr = hf.jpeg_quality
    if hf.basis != "pairs" or math.isfinite(qs) == math.isfinite(qr) or not hf.variance.clear:
        return None
    jpeg_side_sim = math.isfinite(qs)
    e = np.array([hf.excess[MID], hf.excess[UPPER]])
    if not (np.all(e > 0) or np.all(e < 0)) or (e[0] > 0) != jpeg_side_sim or (signed > 0) != jpeg_side_sim:
        return None
    a = np.abs(e)
    top = abs(hf.excess[TOP]) if hf.excess[TOP] * e[0] > 0 else 0.0
    if a.max() / a.min() > FLAT_EXCESS or top > a.max() * FLAT_EXCESS:
        return None
    sigma = math.sqrt(float(a.mean()))
    return math.copysign(sigma, float(e[0])) if sigma >= NOISE_MIN["pairs"] else None


def chroma_says_noise(hf: HighFreq, signed: float) -> bool:
    """Unpaired: the noisier side also carries clearly more chroma detail (CHROMA_NOISE_LOG2).

    Noise drawn per channel is mostly chroma, while scenes keep most of their detail in luma, so
    the chroma-to-luma detail ratio follows added noise whatever the scenes hold; the flat-region
    noise of different scenes overlaps too much for the rank test on its own.

    Args:
        hf: the high-frequency comparison.
        signed: noise excess (`HighFreq.noise_excess`), sim noisier positive.
    """
    c = hf.chroma
    if abs(hf.bands[MID]) >= CHROMA_NOISE_MID_MAX:
        return False  # the luma detail moved below the top bands: blur of the quieter side, not noise
    return (c.clear and abs(signed) >= NOISE_MIN["distribution"] and abs(c.diff) >= CHROMA_NOISE_LOG2
            and (c.diff > 0) == (signed > 0) and (hf.noise.diff > 0) == (signed > 0))


def corners_are_noise(hf: HighFreq, signed: float) -> bool:
    """Unpaired: the noisier side's corner band is dominated by its noise (NOISE_CORNER_MAX); always
    True on the pairs basis, where the flat excess and the top-band checks decide.

    Args:
        hf: the high-frequency comparison.
        signed: noise excess, sim noisier positive.
    """
    c = hf.corner_noise
    if hf.basis == "pairs" or not (math.isfinite(c.sim) and math.isfinite(c.real)):
        return True
    return (c.sim if signed > 0 else c.real) <= NOISE_CORNER_MAX


def noise_fires(hf: HighFreq) -> bool:
    """The sides differ by sensor noise, and noise explains their high-frequency difference."""
    sx = noise_excess(hf)
    if sx is None:
        return False
    # an exposure gain amplifies the brighter side's noise: that is named as brightness
    return hf.brighter is None or (sx > 0) != (hf.brighter == "sim")


def check_sensor_noise(ctx: Context) -> Finding | None:
    """Sensor noise differs between the sides (a gap: add calibrated noise to sim, or denoise)."""
    hf = analyse(ctx)
    if hf is None or not noise_fires(hf):
        return None
    signed = noise_excess(hf)
    noisier = "sim" if signed > 0 else "real"
    sx = abs(signed)
    ev = basis_evidence(hf.basis, hf.n_pairs, ctx)
    ev.update({"noise_sigma_sim": num(hf.noise.sim, 3), "noise_sigma_real": num(hf.noise.real, 3),
               "added_sigma_luma": num(sx, 3), "added_sigma_rgb_iid": num(sx * RGB_PER_LUMA, 3),
               "noisier_side": noisier, "top_band_excess_over_noise": num(hf.noise_explains_top(), 3),
               "flat_band_excess_sigma": num(hf.flat_excess(), 3) if hf.flat_excess() is not None else None,
               "unit": "8-bit levels (luma; rgb_iid = per channel if the noise is independent per channel)"})
    if hf.variance.ci is not None:
        ev["variance_diff_ci"] = [num(hf.variance.ci[0], 3), num(hf.variance.ci[1], 3)]
    title = (f"{noisier.capitalize()} frames carry more sensor noise: sigma {max(hf.noise.sim, hf.noise.real):.1f} "
             f"vs {min(hf.noise.sim, hf.noise.real):.1f} luma levels (about {sx * RGB_PER_LUMA:.1f}/255 "
             f"per-channel noise added on the {noisier} side).")
    if noisier == "real":
        action = (f"Add calibrated sensor noise to the sim frames (Gaussian, about {sx * RGB_PER_LUMA:.1f}/255 per "
                  "channel, or a shot + read noise model fitted to the camera), or denoise the real frames "
                  "before the policy sees them.")
    else:
        action = (f"The sim adds more noise than the camera has ({sx * RGB_PER_LUMA:.1f}/255 per channel): lower "
                  "the sim's noise model to the measured real level.")
    return Finding("sensor_noise", "gap", title, ev, action, num(sx / NOISE_MIN[hf.basis]))


def _blocky(hf: HighFreq) -> tuple[str, float] | None:
    b = hf.blockiness
    if not b.clear or not (math.isfinite(b.sim) and math.isfinite(b.real)):
        return None
    hi, lo = max(b.sim, b.real), min(b.sim, b.real)
    side = "sim" if b.sim > b.real else "real"
    if hf.band_clear[TOP] and abs(hf.bands[TOP]) >= 0.25 and hf.sharper == side:
        return None  # the blockier side is also clearly sharper: the other side lost its blocks to blur
    if hi >= BLOCK_MIN and lo > 0 and hi / lo >= BLOCK_RATIO:
        return side, hi / lo / BLOCK_RATIO
    return None


def _low_quality(hf: HighFreq) -> tuple[str, float] | None:
    q = hf.quality
    if not (math.isfinite(q.sim) and math.isfinite(q.real)):
        return _one_side_low_quality(hf)
    lo = min(q.sim, q.real)
    if abs(q.diff) >= QUALITY_GAP and lo <= QUALITY_MAX and (q.clear or hf.basis == "distribution"):
        return ("sim" if q.sim < q.real else "real"), abs(q.diff) / QUALITY_GAP
    return None


def _one_side_low_quality(hf: HighFreq) -> tuple[str, float] | None:
    """Unpaired: only one side is JPEG files, at QUALITY_LOW or under, and it is the blockier side."""
    qs, qr = hf.jpeg_quality
    if hf.basis != "distribution" or math.isfinite(qs) == math.isfinite(qr):
        return None
    side, quality = ("sim", qs) if math.isfinite(qs) else ("real", qr)
    b = hf.blockiness
    blockier = b.sim > b.real if side == "sim" else b.real > b.sim
    if quality > QUALITY_LOW or not blockier:
        return None
    return side, (QUALITY_MAX - quality) / QUALITY_GAP


def _quieter_jpeg(hf: HighFreq) -> tuple[str, float] | None:
    """Only one side is JPEG files, at QUALITY_MAX or under, and it is the quieter side by the
    sensor-noise rule: JPEG quantization takes out the noise the other side still carries, so
    the difference is compression, not extra noise on the lossless side."""
    qs, qr = hf.jpeg_quality
    if math.isfinite(qs) == math.isfinite(qr):
        return None
    side, quality = ("sim", qs) if math.isfinite(qs) else ("real", qr)
    signed = noise_excess(hf)
    if quality > QUALITY_MAX or signed is None or (signed > 0) == (side == "sim"):
        return None
    return side, (QUALITY_MAX + QUALITY_GAP - quality) / QUALITY_GAP


def _subsampled(hf: HighFreq) -> tuple[str, float] | None:
    c = hf.chroma
    if not c.clear or abs(c.diff) < CHROMA_LOG2 or (hf.band_clear[TOP] and abs(hf.bands[TOP]) > CHROMA_LUMA_MAX):
        return None
    if hf.slope.clear and abs(hf.slope.diff) > CHROMA_SLOPE_MAX:
        return None  # luma moved too: a resize filter or blur, not chroma subsampling
    if abs(hf.noise_excess()) >= 0.5 * NOISE_MIN[hf.basis]:
        return None  # per-channel noise raises chroma detail on the noisier side, clearly or not
    return ("real" if c.diff > 0 else "sim"), abs(c.diff) / CHROMA_LOG2


def _blur_took_blocks(ctx: Context, blockier: str) -> bool:
    """The less blocky side lost horizontal detail against vertical (`motion.anisotropy_shift`):
    blockiness reads horizontal differences at block boundaries, and a horizontal (motion) blur of
    one side takes its block edges with it, so the other side reads blockier without being more
    compressed (SimplerEnv frames upscaled 2x, 5-9 px horizontal blur of one side: blockiness 1.41
    vs 1.10, anisotropy shift 0.64-1.08 log2)."""
    shift = anisotropy_shift(ctx)
    return shift is not None and (shift > 0) == (blockier == "sim")


def check_compression(ctx: Context) -> Finding | None:
    """Lossy compression differs: JPEG block artefacts or quality, or chroma subsampling (a gap)."""
    hf = analyse(ctx)
    if hf is None:
        return None
    blocky, quality, sub = _blocky(hf), _low_quality(hf), _subsampled(hf)
    if blocky is not None and _blur_took_blocks(ctx, blocky[0]):
        blocky = None
    if noise_fires(hf):
        # compression removes noise: the less noisy side being clearly blockier, or the only JPEG
        # side, is still compression
        strong = blocky is not None and blocky[1] * BLOCK_RATIO >= BLOCK_STRONG
        blocky, sub = (blocky if strong else None), None
        quality = quality or _quieter_jpeg(hf)
    found = quality or blocky or sub
    if found is None:
        return None
    side, score = found
    other = "real" if side == "sim" else "sim"
    ev = basis_evidence(hf.basis, hf.n_pairs, ctx)
    ev.update({"compressed_side": side,
               "blockiness_sim": num(hf.blockiness.sim, 3), "blockiness_real": num(hf.blockiness.real, 3),
               "jpeg_quality_sim": num(hf.jpeg_quality[0], 1), "jpeg_quality_real": num(hf.jpeg_quality[1], 1),
               "log2_chroma_detail_sim_minus_real": num(hf.chroma.diff, 3),
               "signature": "jpeg_quality" if quality else ("blockiness" if blocky else "chroma_subsampling")})
    if quality and not math.isfinite(hf.quality.diff + hf.quality.sim + hf.quality.real):
        what = f"JPEG quality about {hf.jpeg_quality[0 if side == 'sim' else 1]:.0f} (the {other} frames are not JPEG files)"
    elif quality:
        what = f"JPEG quality about {min(hf.quality.sim, hf.quality.real):.0f} vs {max(hf.quality.sim, hf.quality.real):.0f}"
    elif blocky:
        what = (f"8x8 block artefacts (blockiness {max(hf.blockiness.sim, hf.blockiness.real):.2f} vs "
                f"{min(hf.blockiness.sim, hf.blockiness.real):.2f})")
    else:
        what = f"chroma detail {2 ** abs(hf.chroma.diff):.1f}x lower (chroma subsampling, 4:2:0 video)"
    title = f"{side.capitalize()} frames are more compressed than {other} frames: {what}."
    if side == "real":
        action = ("Apply the same codec to the sim frames (JPEG at the measured quality, or the video codec with "
                  "4:2:0 chroma) in training augmentation, or record real frames at higher quality.")
    else:
        action = ("The sim stream is compressed more than the camera's: store or transport sim frames losslessly "
                  "(PNG, or a higher JPEG quality) or match the camera's codec settings.")
    return Finding("compression", "gap", title, ev, action, num(score))
