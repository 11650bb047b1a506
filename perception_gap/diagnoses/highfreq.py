"""The high-frequency picture of two frame sets, shared by the noise, compression, resize-filter
and sharpness checks.

Four causes move a frame's fine detail, and each leaves its own signature in the per-frame
texture statistics (`perception_gap.statistics.texture`):
- sensor noise is flat: it adds the same power sigma^2 to every frequency band, and raises the
  noise measured in the flattest parts of the frame;
- optical blur rolls the spectrum off: every band above the lowest loses power, increasingly
  with frequency (a Gaussian blur's log power ratio grows with f^2), and the mid band visibly;
- aliasing (a downscale without an antialias filter, nearest or plain bilinear) folds energy
  from above the new Nyquist back just below it: the difference concentrates in the top
  half-octave while the mid band barely moves;
- lossy compression quantizes 8x8 blocks (blockiness) and subsamples chroma (chroma detail falls
  while luma detail stays).

`analyse(ctx)` measures each once, on the pairs basis (per-pair differences, so scene content
cancels) or the distribution basis (differences of set medians, with the scene-to-scene spread as
the bar), and memoizes the result on the check context. Powers and noise are in 8-bit levels
(the encoding's scale applied), so float observation arrays compare with images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from perception_gap.diagnoses.common import dist_clear, excludes_zero, median, median_ci
from perception_gap.diagnoses.context import Context
from perception_gap.diagnoses.encoding import Encoding
from perception_gap.statistics.records import FrameRecord

CORNER, TOP, UPPER, MID, REF = 5, 4, 3, 2, 1  # SPECTRUM_BANDS: 0.5-0.72, 0.35-0.5, 0.25-0.35, 1/8-1/4, 1/16-1/8
N_BANDS = 6
# The distribution basis compares set medians of per-frame features that vary from scene to scene:
# below this many frames a side, no high-frequency finding is made on it.
MIN_DIST_FRAMES = 4
FLAT_EXCESS = 1.8
# A band's power after removing the side's own noise is kept at least this share of the measured
# power, so that a noise estimate a little above the band power cannot produce log(0).
MIN_SIGNAL_SHARE = 0.05


def level_scale(enc: Encoding) -> float:
    """Multiplier from a frame's stored [0, 1]-scale (or own-unit) statistics to 8-bit levels."""
    if enc.name == "uint16_8bit":
        return 65535.0
    if enc.name in ("uint8", "uint16", "unknown"):
        return 255.0
    return 255.0 * float(np.mean(enc.scale))


def has_texture(f: FrameRecord) -> bool:
    im = f.image
    return im.noise_sigma is not None and im.spectrum is not None and len(im.spectrum) == N_BANDS


@dataclass(frozen=True)
class Side:
    """Per-frame high-frequency features of one side, rows aligned with the other side on the pairs basis.

    Attributes:
        noise: (n,) sensor-noise sigma, 8-bit levels.
        power: (n, N_BANDS) band power, 8-bit levels^2 per frequency bin.
        blockiness: (n,) JPEG block-boundary gradient ratio (NaN where unmeasured).
        quality: (n,) estimated JPEG quality of JPEG files (NaN otherwise).
        chroma: (n,) chroma hf ratio (NaN for grey frames).
        parity: (n,) duplicate-pixel parity (the nearest-upscale signature).
    """

    noise: np.ndarray
    power: np.ndarray
    blockiness: np.ndarray
    quality: np.ndarray
    chroma: np.ndarray
    parity: np.ndarray

    @classmethod
    def of(cls, frames: Sequence[FrameRecord], enc: Encoding) -> "Side":
        k = level_scale(enc)
        nan = math.nan

        def col(name: str) -> np.ndarray:
            return np.array([getattr(f.image, name) if getattr(f.image, name) is not None else nan
                             for f in frames], dtype=np.float64)

        spectrum = np.array([f.image.spectrum for f in frames], dtype=np.float64).reshape(-1, N_BANDS)
        return cls(noise=col("noise_sigma") * k, power=10.0 ** spectrum * (k * k),
                   blockiness=col("blockiness"), quality=col("jpeg_quality"), chroma=col("chroma_hf"),
                   parity=col("dup_parity"))

    def signal(self) -> np.ndarray:
        """(n, N_BANDS) band power with the side's own white-noise power sigma^2 removed (floored)."""
        return np.maximum(self.power - (self.noise ** 2)[:, None], MIN_SIGNAL_SHARE * self.power)

    def jpeg_quality(self) -> float:
        """Median estimated JPEG quality when most frames are JPEG files, else NaN."""
        q = self.quality[np.isfinite(self.quality)]
        return float(np.median(q)) if 2 * q.size > self.quality.size else math.nan

    def corner_over_noise(self) -> np.ndarray:
        """(n,) log10 of the corner-band power over the flat-region noise variance (NaN without noise).

        White noise of variance v adds v to every band, the corners included, so added noise pulls
        this towards 0 (the corners become noise); aliasing folds energy into the corners and
        holds it up or raises it, whatever the scene.
        """
        v = self.noise ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(v > 0, np.log10(self.power[:, CORNER] / v), np.nan)


@dataclass(frozen=True)
class Contrast:
    """One quantity compared sim against real: effect (sim minus real) and whether it is clear."""

    sim: float
    real: float
    diff: float
    clear: bool
    ci: tuple[float, float] | None = None


def contrast(a_sim: np.ndarray, a_real: np.ndarray, paired: bool) -> Contrast:
    """Median effect sim - real: per-pair differences with a median CI (pairs), or set medians with the distribution bar (`dist_clear`)."""
    ok = np.isfinite(a_sim) & np.isfinite(a_real) if paired else None
    if paired:
        s, r = a_sim[ok], a_real[ok]
        if s.size == 0:
            return Contrast(math.nan, math.nan, 0.0, False)
        d = s - r
        ci = median_ci(d)
        return Contrast(median(s), median(r), median(d), excludes_zero(ci), ci)
    s, r = a_sim[np.isfinite(a_sim)], a_real[np.isfinite(a_real)]
    if s.size < 2 or r.size < 2:
        return Contrast(math.nan, math.nan, 0.0, False)
    ms, mr = median(s), median(r)
    return Contrast(ms, mr, ms - mr, dist_clear(s, r))


@dataclass(frozen=True)
class HighFreq:
    """The high-frequency comparison of two sets (see the module docstring).

    Attributes:
        basis: `pairs` or `distribution`; n_pairs: pairs used (0 on the distribution basis).
        noise: sigma, 8-bit levels; variance: sigma^2 difference (levels^2).
        bands: (N_BANDS,) spectral shape difference sim - real per band: the log10 power of the
            band relative to the reference band (1/16-1/8 cycles/pixel), so content that is
            stronger or weaker overall cancels; `band_clear` whether each is clear. Raw powers,
            sensor noise included: noise is named first (`texture.noise_fires`), and the noise an
            antialias filter averages away is part of what tells aliasing from blur.
        signal_top: the top band's shape difference after each side's own noise is removed.
        top_excess: extra top-band power of the noisier side over the other (levels^2 per bin),
            raw (not noise-corrected): what the noise difference must explain.
        excess: (N_BANDS,) band power sim - real, linear (levels^2 per bin): white noise adds the
            same amount to every band, so an excess that is flat over the top bands is noise even
            where the flat-region estimate finds no flat region (busy textures).
        brighter: the brighter side when the brightness check fired, else None (an exposure
            change moves fine detail too: clipping adds edges, gain amplifies noise).
        blockiness, quality, chroma: the compression measures (log2 of chroma).
        parity: duplicate-pixel parity.
        slope: per-frame log10 power of the corner band over the upper band (0.25-0.35), the
            spectrum's fall-off just below and beyond Nyquist: aliasing flattens it whatever the scene.
        jpeg_quality: (sim, real) median estimated JPEG quality of each side's files, NaN for a
            side that is mostly not JPEG files (`Side.jpeg_quality`).
        corner_noise: log10 corner-band power over each frame's own noise variance
            (`Side.corner_over_noise`): what tells added noise (pulls it to 0) from aliasing.
    """

    basis: str
    n_pairs: int
    noise: Contrast
    variance: Contrast
    bands: tuple[float, ...]
    band_clear: tuple[bool, ...]
    signal_top: Contrast
    top_excess: float
    excess: tuple[float, ...]
    brighter: str | None
    blockiness: Contrast
    quality: Contrast
    chroma: Contrast
    parity: Contrast
    corner_noise: Contrast
    slope: Contrast
    jpeg_quality: tuple[float, float]

    @property
    def sharper(self) -> str:
        return "sim" if self.bands[TOP] > 0 else "real"

    def noise_excess(self) -> float:
        """sqrt of the variance difference, signed like it: the sigma the noisier side adds."""
        v = self.variance.diff
        return math.copysign(math.sqrt(abs(v)), v)

    def flat_excess(self) -> float | None:
        """Signed sigma (levels) of white noise explaining a flat excess over the top bands, else None.

        Flat: the same sign in the upper, top and corner bands and within a factor FLAT_EXCESS of
        each other (white noise reads 0.6-1.2 between them; aliasing 0.2-0.45 and blur under 0.25,
        their excess falling towards the corners).
        """
        e = np.array([self.excess[UPPER], self.excess[TOP], self.excess[CORNER]])
        if not (np.all(e > 0) or np.all(e < 0)):
            return None
        a = np.abs(e)
        if a.max() / a.min() > FLAT_EXCESS:
            return None
        return math.copysign(math.sqrt(float(a.mean())), float(e[0]))

    def noise_explains_top(self) -> float:
        """Measured top-band excess of the noisier side / the noise variance difference (~1 for noise)."""
        v = abs(self.variance.diff)
        return self.top_excess / v if v > 0 else math.inf


def analyse(ctx: Context) -> HighFreq | None:
    """The memoized high-frequency comparison, or None without two comparable frames a side.

    Per-pixel statistics compare only at one resolution: pairs of unequal size are left out (and
    the distribution basis is used only when the sides share their usual size).
    """
    if "highfreq" in ctx.memo:
        return ctx.memo["highfreq"]

    def keep(f: FrameRecord, partner: FrameRecord | None) -> bool:
        same = partner is None or (f.image.width, f.image.height) == (partner.image.width, partner.image.height)
        return has_texture(f) and same

    basis, fs, fr = ctx.image_sides(keep)
    out = None
    need = 2 if basis == "pairs" else MIN_DIST_FRAMES
    # unpaired frames of different sizes have no common band layout; pairs keep only same-size pairs (`keep`)
    if len(fs) >= need and len(fr) >= need and ctx.enc is not None and (basis == "pairs" or "resolution" not in ctx.fired):
        out = _compare(basis, Side.of(fs, ctx.enc.sim), Side.of(fr, ctx.enc.real), len(fs), ctx.memo.get("brighter"))
    ctx.memo["highfreq"] = out
    return out


def _compare(basis: str, s: Side, r: Side, n: int, brighter: str | None) -> HighFreq:
    paired = basis == "pairs"
    ls, lr = np.log10(s.power), np.log10(r.power)
    ls, lr = ls - ls[:, REF:REF + 1], lr - lr[:, REF:REF + 1]
    bands = [contrast(ls[:, b], lr[:, b], paired) for b in range(N_BANDS)]
    variance = contrast(s.noise ** 2, r.noise ** 2, paired)
    noisier_sim = variance.diff > 0
    hi, lo = (s, r) if noisier_sim else (r, s)
    if paired:
        top_excess = float(np.median(hi.power[:, TOP] - lo.power[:, TOP]))
        excess = tuple(float(x) for x in np.median(s.power - r.power, axis=0))
    else:
        top_excess = float(np.median(hi.power[:, TOP]) - np.median(lo.power[:, TOP]))
        excess = tuple(float(x) for x in np.median(s.power, axis=0) - np.median(r.power, axis=0))
    cs, cr = np.log10(s.signal()), np.log10(r.signal())
    signal_top = contrast(cs[:, TOP] - cs[:, REF], cr[:, TOP] - cr[:, REF], paired)
    return HighFreq(
        basis=basis, n_pairs=n if paired else 0,
        noise=contrast(s.noise, r.noise, paired), variance=variance,
        bands=tuple(b.diff for b in bands), band_clear=tuple(b.clear for b in bands),
        signal_top=signal_top, top_excess=top_excess, excess=excess, brighter=brighter,
        blockiness=contrast(s.blockiness, r.blockiness, paired),
        quality=contrast(s.quality, r.quality, paired),
        chroma=contrast(np.log2(s.chroma), np.log2(r.chroma), paired),
        parity=contrast(s.parity, r.parity, paired),
        corner_noise=contrast(s.corner_over_noise(), r.corner_over_noise(), paired),
        slope=contrast(ls[:, CORNER] - ls[:, UPPER], lr[:, CORNER] - lr[:, UPPER], paired),
        jpeg_quality=(s.jpeg_quality(), r.jpeg_quality()))
