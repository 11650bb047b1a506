"""Named plumbing diagnoses: the sim/real differences that are bugs or simple sensor gaps.

`diagnose(sim, real)` runs a registry of small checks over the per-frame statistics of two
frame sets and returns `Finding`s (codes in CONTRACT.md), most urgent first. Each check is one
function `check(ctx) -> Finding | None`; the arithmetic lives in tiny pure helpers below it.

Two bases. With at least `MIN_PAIRS` frames matched by pair key a check compares each sim frame
with its own real frame and takes the median over pairs, so scene content cancels; otherwise it
compares the two sets' distributions, which needs larger effects and, for gaps, an effect that
clears the sets' scene-to-scene spread (`DIST_Z` standard errors). Every finding's evidence says
which basis it used (`basis`, `n_pairs`).

Checks contaminate each other, so they run in order and read what already fired:
value-range or normalization mismatches put the two sides on different scales (brightness and
white balance are then skipped); a channel swap fakes a white-balance shift (skipped) and a
luminance change (brightness un-swaps the channels first); a resolution mismatch changes what
per-pixel sharpness means (the resize check then relies only on the nearest-neighbour
signature, which does not depend on scale).

Values are compared in a common [0, 1] scale only after the value encoding of each side has
been inferred (`infer_encodings`); arrays themselves are never rescaled by the statistics.

A finding's `score` is its effect in units of the threshold that made it fire (>= 1), so
findings of one severity sort by how clearly they cleared their bar.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from perception_gap.findings import Finding, order_findings
from perception_gap.statistics.records import FrameRecord, SetRecords, paired
from perception_gap.statistics.depth import DEPTH_PERCENTILES

__all__ = [
    "CHECKS", "ChannelMoments", "Encoding", "EncodingInference", "HFFeatures", "HALF", "IMAGENET",
    "NORMALIZATIONS", "OPENAI_CLIP", "chroma_log2", "diagnose", "exposure_stops", "hf_differences",
    "infer_encodings", "joint_scale_ratios", "moment_distance", "name_depth_ratio",
    "nearest_depth_unit", "noise_equivalent_levels", "srgb_to_linear", "swap_costs",
]

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# Thresholds. Each was tuned on the clean cases (real frames vs the same frames with sigma 2/255
# Gaussian noise and JPEG q90 re-encoding; two halves of one real set) and on injected faults,
# on synthetic scenes and on the real photos in ../shared/data (see tests/test_plumbing.py).
# ---------------------------------------------------------------------------------------------

# Pairs needed before per-pair medians are trusted; below this, set distributions are compared.
MIN_PAIRS = 3
# Distribution basis: a gap must exceed this many standard errors of the difference of the two
# set medians (scene-to-scene spread / sqrt(n)); z = 3 keeps two halves of one real set quiet.
DIST_Z = 3.0

# Value encoding (value_range / normalization). The distance between two sides' per-channel
# moments is |d mean| / pooled std + |ln std ratio|, averaged over channels (affine invariant).
# A mismatch is declared when un-normalizing the sides with *different* constants brings that
# distance below ENC_RATIO x the raw distance and by at least ENC_MARGIN. ImageNet vs CLIP, the
# closest pair of constants, measured raw 0.31-0.32 and matched < 0.01 on noisy pairs; clean
# pairs measured raw < 0.01, so no different-constants hypothesis can improve by 0.08. Set
# moments of two halves of one set differ by 0.13-0.30 (scene content), hence 0.25 there.
ENC_RATIO = 0.5
ENC_MARGIN = {"pairs": 0.08, "distribution": 0.25}
# Slack, in [0, 1] units, when testing that a side's min/max fit a candidate's attainable range
# (JPEG ringing and float rounding overshoot slightly), and the share of frames that must fit.
ENC_BOUND_TOL = 0.03
ENC_FIT_SHARE = 0.9

# Channel swap. Cost of "sim = real with per-channel gains" vs "sim = real with R<->B swapped
# and gains" (gains relative to green, so exposure is free): spread of per-pair log-mean
# residuals + SWAP_GAIN_WEIGHT x |median log gain| +
# |log coefficient-of-variation| mismatch (gain invariant, so a colour cast cannot mimic a swap).
# Fires when the swapped model costs under SWAP_RATIO of the identity model and by SWAP_MARGIN.
# Measured on synthetic scenes and the shared photos: a 1.15/0.85 linear white-balance cast costs
# 0.04-0.05 under identity and 0.54-0.64 swapped (a 1.5/0.6 cast 0.13-0.15 vs 0.61-0.74); a real
# swap costs < 0.01 swapped and 0.50-0.60 under identity.
SWAP_GAIN_WEIGHT = 0.5
SWAP_RATIO = 0.4
SWAP_MARGIN = {"pairs": 0.08, "distribution": 0.2}

# Brightness: one third of a stop is a camera's exposure step and about the smallest exposure
# difference a viewer notices; sigma-2 noise and JPEG q90 move mean luminance by < 0.02 stop.
BRIGHTNESS_STOPS = 0.3
# White balance: 0.1 in log2(R/G) or log2(B/G) is a 7% gain (~300 K near 5000 K); noise and
# JPEG chroma subsampling move these by < 0.01.
WB_LOG2 = 0.1

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

# Resolution: aspect ratios closer than this (relative) count as the same aspect.
ASPECT_TOL = 0.01

# Depth scale: a paired median depth ratio beyond 1.5x is no scene difference; comparing set
# medians of different scenes, only 3x or more is. A ratio within 25% of a ratio of two known
# units (m, cm, mm, 1/5000 m, 0.1 mm) is named after them.
DEPTH_RATIO = {"pairs": 1.5, "distribution": 3.0}
DEPTH_NAME_TOL = 1.25
DEPTH_UNIT_NAMES = {"m": 1.0, "cm": 100.0, "mm": 1000.0, "1/5000 m (TUM)": 5000.0, "0.1 mm": 10000.0}

# Depth dropout: 5 percentage points of invalid pixels and at least twice as many (with a 1-point
# floor) on one side; sensor holes on transparent/specular objects are 10-50%, clean renders 0%.
DROPOUT_DIFF = 0.05
DROPOUT_RATIO = 2.0

# Joint units: a per-dimension scale ratio within 30% of 180/pi (57.3) means degrees vs radians.
DEG_PER_RAD = 180.0 / math.pi
JOINT_RATIO_TOL = 1.3
# Once two dims match that closely, other dims within 2x of 57.3 join them: a deg/rad bug hits all
# revolute joints at once, and set-level spreads of a few episodes scatter by +-30% on their own.
JOINT_RATIO_LOOSE = 2.0

_REC709 = np.array([0.2126, 0.7152, 0.0722])
_P50 = DEPTH_PERCENTILES.index(50)


# ---------------------------------------------------------------------------------------------
# Small numeric helpers (pure)
# ---------------------------------------------------------------------------------------------

def _num(x: float, nd: int = 4) -> float | None:
    """A plain Python float rounded for evidence; None for NaN/inf (JSON has neither)."""
    x = float(x)
    return float(round(x, nd)) if math.isfinite(x) else None


def _nums(xs: Sequence[float], nd: int = 4) -> list[float]:
    return [_num(x, nd) for x in xs]


def _median_se(x: np.ndarray) -> float:
    """Standard error of a sample median (normal approximation, MAD-based spread)."""
    if x.size < 2:
        return math.inf
    mad = 1.4826 * float(np.median(np.abs(x - np.median(x))))
    sd = max(mad, float(np.std(x, ddof=1)) * 0.5)  # MAD is 0 on tied data; keep some spread
    return 1.2533 * sd / math.sqrt(x.size)


def _dist_z(a: np.ndarray, b: np.ndarray) -> float:
    """|median(a) - median(b)| in standard errors of that difference."""
    se = math.hypot(_median_se(a), _median_se(b))
    diff = abs(float(np.median(a)) - float(np.median(b)))
    if se == 0:
        return math.inf if diff > 0 else 0.0
    return diff / se


def srgb_to_linear(v: np.ndarray) -> np.ndarray:
    """sRGB-encoded values in [0, 1] -> linear light (IEC 61966-2-1); clips to [0, 1] first."""
    v = np.clip(np.asarray(v, dtype=np.float64), 0.0, 1.0)
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def exposure_stops(lin_sim: np.ndarray, lin_real: np.ndarray) -> np.ndarray:
    """log2 ratio of Rec.709 luminance of linear per-channel means, shape (n, 3) -> (n,)."""
    ys = np.clip(lin_sim @ _REC709, 1e-6, None)
    yr = np.clip(lin_real @ _REC709, 1e-6, None)
    return np.log2(ys / yr)


def chroma_log2(lin: np.ndarray) -> np.ndarray:
    """(n, 3) linear means -> (n, 2) log2(R/G), log2(B/G)."""
    lin = np.clip(lin, 1e-6, None)
    return np.stack([np.log2(lin[:, 0] / lin[:, 1]), np.log2(lin[:, 2] / lin[:, 1])], axis=1)


def moment_distance(mean_s: np.ndarray, std_s: np.ndarray, mean_r: np.ndarray,
                    std_r: np.ndarray) -> np.ndarray:
    """Affine-invariant distance between per-channel moments, averaged over channels.

    Args:
        mean_s, std_s, mean_r, std_r: (n, C) per-frame (or (1, C) per-set) moments.

    Returns:
        (n,) |mean_s - mean_r| / pooled std + |ln(std_s / std_r)|, mean over C.
    """
    eps = 1e-9
    pooled = np.sqrt(0.5 * (std_s ** 2 + std_r ** 2)) + eps
    d = np.abs(mean_s - mean_r) / pooled + np.abs(np.log((std_s + eps) / (std_r + eps)))
    return d.mean(axis=1)


# ---------------------------------------------------------------------------------------------
# Value encodings: how an observation maps back to [0, 1] sRGB values
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Encoding:
    """A value encoding: x01 = value * scale + offset, per channel (R, G, B).

    Attributes:
        name: stable key (`uint8`, `float_0_1`, `imagenet`, ...).
        label: human description used in titles and evidence.
        offset, scale: per-channel constants of the inverse map to [0, 1].
        normalized: a mean/std normalization (as opposed to a plain value range).
    """

    name: str
    label: str
    offset: tuple[float, float, float]
    scale: tuple[float, float, float]
    normalized: bool

    def consts(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """(offset, scale) arrays for `c` channels (grey frames use the channel average)."""
        off, sc = np.asarray(self.offset), np.asarray(self.scale)
        if c >= 3:
            return off, sc
        return np.full(c, off.mean()), np.full(c, sc.mean())

    def same_map(self, other: "Encoding") -> bool:
        return bool(np.allclose(self.offset, other.offset) and np.allclose(self.scale, other.scale))


def _norm_encoding(name: str, label: str, mean: Sequence[float], std: Sequence[float]) -> Encoding:
    """x_obs = (x01 - mean) / std  <=>  x01 = x_obs * std + mean."""
    return Encoding(name, label, tuple(mean), tuple(std), True)


def _range_encoding(name: str, label: str, full_scale: float) -> Encoding:
    return Encoding(name, label, (0.0, 0.0, 0.0), (1.0 / full_scale,) * 3, False)


IMAGENET = _norm_encoding("imagenet", "ImageNet mean/std", (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
OPENAI_CLIP = _norm_encoding("openai_clip", "OpenAI CLIP mean/std",
                             (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
HALF = _norm_encoding("half", "0.5/0.5 mean/std (values in [-1, 1])", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
NORMALIZATIONS = (IMAGENET, OPENAI_CLIP, HALF)
_FLOAT_CANDIDATES = (
    _range_encoding("float_0_1", "[0, 1]", 1.0),
    _range_encoding("float_0_255", "[0, 255]", 255.0),
    _range_encoding("float_0_65535", "[0, 65535]", 65535.0),
    *NORMALIZATIONS,
)
_UINT8 = _range_encoding("uint8", "[0, 255]", 255.0)
_UINT16 = _range_encoding("uint16", "[0, 65535]", 65535.0)
_UINT16_AS_8 = _range_encoding("uint16_8bit", "[0, 255] in 16 bits", 255.0)
IDENTITY = Encoding("unknown", "unknown range", (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), False)


@dataclass(frozen=True)
class ChannelMoments:
    """Per-frame image moments of one side, first min(C, 3) channels.

    Attributes:
        mean, std, lo, hi: (n, c) per-frame per-channel moments and extrema, own units.
        dtype: modal dtype name.
    """

    mean: np.ndarray
    std: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    dtype: str


def _moments(frames: Sequence[FrameRecord], c: int) -> ChannelMoments:
    mean = np.array([f.image.mean[:c] for f in frames], dtype=np.float64)
    std = np.array([f.image.std[:c] for f in frames], dtype=np.float64)
    lo = np.array([f.image.min[:c] for f in frames], dtype=np.float64)
    hi = np.array([f.image.max[:c] for f in frames], dtype=np.float64)
    dtype = Counter(f.image.dtype for f in frames).most_common(1)[0][0]
    return ChannelMoments(mean, std, lo, hi, dtype)


def _candidate_encodings(m: ChannelMoments) -> list[Encoding]:
    """Encodings whose attainable [0, 1] range holds the side's per-frame extrema."""
    if m.dtype == "uint8":
        cands: tuple[Encoding, ...] = (_UINT8,)
    elif m.dtype == "uint16":
        cands = (_UINT16, _UINT16_AS_8)
    else:
        cands = _FLOAT_CANDIDATES
    c = m.mean.shape[1]
    out = []
    for enc in cands:
        off, sc = enc.consts(c)
        lo01, hi01 = m.lo * sc + off, m.hi * sc + off
        ok = np.all((lo01 >= -ENC_BOUND_TOL) & (hi01 <= 1 + ENC_BOUND_TOL), axis=1)
        if ok.size and ok.mean() >= ENC_FIT_SHARE:
            out.append(enc)
    return out


def _tightness(enc: Encoding, m: ChannelMoments) -> float:
    """How far the side's extreme values, mapped by `enc`, are from spanning [0, 1] (lower is
    tighter). Sets usually contain near-black and near-white pixels somewhere; falling short of
    0 or 1 is common, overshooting them is not (5x the penalty)."""
    off, sc = enc.consts(m.mean.shape[1])
    lo01 = np.min(m.lo * sc + off, axis=0)
    hi01 = np.max(m.hi * sc + off, axis=0)
    short = np.maximum(lo01, 0.0) + np.maximum(1.0 - hi01, 0.0)
    over = np.maximum(-lo01, 0.0) + np.maximum(hi01 - 1.0, 0.0)
    return float(np.mean(short + 5.0 * over))


def _best_single(m: ChannelMoments, cands: list[Encoding]) -> Encoding:
    if not cands:
        return IDENTITY
    return min(cands, key=lambda e: _tightness(e, m))


def _to01(enc: Encoding, mean: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    off, sc = enc.consts(mean.shape[1])
    return mean * sc + off, std * sc


@dataclass(frozen=True)
class EncodingInference:
    """Inferred value encodings of the two sides and the evidence behind them.

    Attributes:
        sim, real: the encoding each side is read with from here on.
        mismatch: the best explanation maps the sides back to [0, 1] differently.
        raw_distance: moment distance of the values as they are.
        matched_distance: the same after un-normalizing with `sim`/`real`.
        basis: `pairs` or `distribution`.
    """

    sim: Encoding
    real: Encoding
    mismatch: bool
    raw_distance: float
    matched_distance: float
    basis: str


def infer_encodings(ms: ChannelMoments, mr: ChannelMoments, basis: str) -> EncodingInference:
    """Hypothesis test over (sim encoding, real encoding) pairs.

    Paired moments (row i of `ms` matches row i of `mr`) when `basis == "pairs"`; otherwise the
    pooled set moments are compared. The raw distance is the no-mismatch hypothesis (any common
    affine map leaves the distance unchanged); a different-constants hypothesis wins only when
    it explains the sides far better.
    """
    if basis == "pairs":
        s_mean, s_std, r_mean, r_std = ms.mean, ms.std, mr.mean, mr.std
    else:
        s_mean, s_std = _pooled(ms)
        r_mean, r_std = _pooled(mr)

    def dist(es: Encoding, er: Encoding) -> float:
        a_mean, a_std = _to01(es, s_mean, s_std)
        b_mean, b_std = _to01(er, r_mean, r_std)
        return float(np.median(moment_distance(a_mean, a_std, b_mean, b_std)))

    raw = dist(IDENTITY, IDENTITY)
    cs, cr = _candidate_encodings(ms), _candidate_encodings(mr)
    best: tuple[float, Encoding, Encoding] | None = None
    for es in cs:
        for er in cr:
            if es.same_map(er):
                continue
            d = dist(es, er)
            if best is None or d < best[0]:
                best = (d, es, er)
    margin = ENC_MARGIN[basis]
    if best is not None and best[0] < ENC_RATIO * raw and raw - best[0] >= margin:
        return EncodingInference(best[1], best[2], True, raw, best[0], basis)
    es, er = _best_single(ms, cs), _best_single(mr, cr)
    if not es.same_map(er):
        # Both sides read the same way when one common encoding fits both (values agree as is).
        common = [e for e in cs if any(e.same_map(x) for x in cr)]
        if common:
            both = ChannelMoments(np.vstack([ms.mean, mr.mean]), np.vstack([ms.std, mr.std]),
                                  np.vstack([ms.lo, mr.lo]), np.vstack([ms.hi, mr.hi]), ms.dtype)
            es = er = _best_single(both, common)
    return EncodingInference(es, er, False, raw, raw, basis)


def _pooled(m: ChannelMoments) -> tuple[np.ndarray, np.ndarray]:
    """(1, c) set mean and pooled std (within-frame variance + between-frame variance)."""
    mean = m.mean.mean(axis=0, keepdims=True)
    var = (m.std ** 2).mean(axis=0, keepdims=True) + m.mean.var(axis=0, keepdims=True)
    return mean, np.sqrt(var)


# ---------------------------------------------------------------------------------------------
# Check context
# ---------------------------------------------------------------------------------------------

@dataclass
class _Context:
    """What every check reads: the sets, their pairs, the inferred encodings, what fired."""

    sim: SetRecords
    real: SetRecords
    pairs: list[tuple[FrameRecord, FrameRecord]]
    enc: EncodingInference | None = None
    fired: set[str] = field(default_factory=set)

    def image_pairs(self) -> list[tuple[FrameRecord, FrameRecord]]:
        return [(s, r) for s, r in self.pairs if _usable(s) and _usable(r)]

    def images(self, side: str) -> list[FrameRecord]:
        frames = self.sim.frames if side == "sim" else self.real.frames
        return [f for f in frames if _usable(f)]

    def image_sides(self, keep: Callable[[FrameRecord, FrameRecord | None], bool] = lambda f, g: True,
                    ) -> tuple[str, list[FrameRecord], list[FrameRecord]]:
        """(basis, sim frames, real frames) with usable images passing `keep`.

        `keep(frame, partner)` sees the matched frame as `partner` on the pairs basis (rows of
        the two lists then match) and None on the distribution basis.
        """
        pairs = [(s, r) for s, r in self.image_pairs() if keep(s, r) and keep(r, s)]
        if len(pairs) >= MIN_PAIRS:
            return "pairs", [s for s, _ in pairs], [r for _, r in pairs]
        return ("distribution", [f for f in self.images("sim") if keep(f, None)],
                [f for f in self.images("real") if keep(f, None)])


def _usable(f: FrameRecord) -> bool:
    im = f.image
    return im is not None and all(math.isfinite(v) for v in im.mean) and all(
        math.isfinite(v) for v in im.std)


def _basis_evidence(basis: str, n_pairs: int, ctx: _Context) -> dict:
    return {"basis": basis, "n_pairs": n_pairs if basis == "pairs" else 0,
            "n_sim": len(ctx.sim.frames), "n_real": len(ctx.real.frames)}


def _side_linear(frames: Sequence[FrameRecord], enc: Encoding,
                 use_lin_mean: bool) -> np.ndarray:
    """(n, 3) linear-light per-channel means: the stats' exact `lin_mean` when usable, else the
    sRGB decode of the [0, 1] channel means (biased low, the decode being convex, so it is used
    on both sides or neither)."""
    if use_lin_mean:
        return np.array([f.image.lin_mean[:3] for f in frames], dtype=np.float64)
    mean = np.array([f.image.mean[:3] for f in frames], dtype=np.float64)
    std = np.array([f.image.std[:3] for f in frames], dtype=np.float64)
    m01, _ = _to01(enc, mean, std)
    return srgb_to_linear(m01)


def _lin_mean_ok(frames: Sequence[FrameRecord], enc: Encoding) -> bool:
    """`lin_mean` is exact only when the dtype's nominal scale is the inferred encoding."""
    return enc.name in ("uint8", "uint16") and all(
        f.image.lin_mean is not None and len(f.image.lin_mean) >= 3 for f in frames)


def _linear_means(ctx: _Context, sim_frames: Sequence[FrameRecord],
                  real_frames: Sequence[FrameRecord]) -> tuple[np.ndarray, np.ndarray]:
    es, er = ctx.enc.sim, ctx.enc.real
    exact = _lin_mean_ok(sim_frames, es) and _lin_mean_ok(real_frames, er)
    return _side_linear(sim_frames, es, exact), _side_linear(real_frames, er, exact)


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

def _modal_size(frames: Sequence[FrameRecord]) -> tuple[tuple[int, int], float]:
    sizes = Counter((f.image.width, f.image.height) for f in frames)
    size, n = sizes.most_common(1)[0]
    return size, n / len(frames)


def _aspect_name(w: int, h: int) -> str:
    g = math.gcd(w, h)
    a, b = w // g, h // g
    return f"{a}:{b}" if a <= 64 else f"{w / h:.3f}:1"


def _check_resolution(ctx: _Context) -> Finding | None:
    """Modal frame size (and aspect ratio) differ between the sets."""
    fs, fr = ctx.images("sim"), ctx.images("real")
    if not fs or not fr:
        return None
    (ws, hs), share_s = _modal_size(fs)
    (wr, hr), share_r = _modal_size(fr)
    if (ws, hs) == (wr, hr):
        return None
    asp_s, asp_r = ws / hs, wr / hr
    aspect_diff = abs(math.log(asp_s / asp_r))
    aspect_mismatch = aspect_diff > math.log1p(ASPECT_TOL)
    scale = math.sqrt((ws * hs) / (wr * hr))
    ev = _basis_evidence("distribution", 0, ctx)  # modal sizes of each set
    ev.update({
        "sim_size": [ws, hs], "real_size": [wr, hr],
        "sim_aspect": _num(asp_s), "real_aspect": _num(asp_r),
        "sim_aspect_name": _aspect_name(ws, hs), "real_aspect_name": _aspect_name(wr, hr),
        "aspect_mismatch": aspect_mismatch, "area_scale_sim_over_real": _num(scale),
        "sim_modal_share": _num(share_s), "real_modal_share": _num(share_r),
    })
    if aspect_mismatch:
        title = (f"Frame aspect differs: sim {ws}x{hs} ({_aspect_name(ws, hs)}) vs real {wr}x{hr} "
                 f"({_aspect_name(wr, hr)}).")
        action = (f"Crop (do not stretch) the real stream to the sim's {_aspect_name(ws, hs)} field of "
                  f"view and resize it to {ws}x{hs} with the sim's filter, or render the sim at "
                  f"{wr}x{hr}; check that both cameras' intrinsics match.")
        score = 2.0 + aspect_diff
    else:
        title = f"Frame size differs: sim {ws}x{hs} vs real {wr}x{hr} (same {_aspect_name(ws, hs)} aspect)."
        action = (f"Resize the real stream to {ws}x{hs} with the same filter the sim uses (or render "
                  f"the sim at {wr}x{hr}) so both reach the encoder at one resolution.")
        score = 1.0 + abs(math.log(scale))
    return Finding("resolution", "bug", title, ev, action, _num(score))


def _encoding_evidence(ctx: _Context, inf: EncodingInference, ms: ChannelMoments, mr: ChannelMoments,
                       n_pairs: int) -> dict:
    ev = _basis_evidence(inf.basis, n_pairs, ctx)
    for side, enc, m in (("sim", inf.sim, ms), ("real", inf.real, mr)):
        ev[f"{side}_dtype"] = m.dtype
        ev[f"{side}_encoding"] = enc.name
        ev[f"{side}_range"] = f"{m.dtype} {enc.label}"
        ev[f"{side}_observed_min"] = _num(float(np.min(m.lo)), 5)
        ev[f"{side}_observed_max"] = _num(float(np.max(m.hi)), 5)
        ev[f"{side}_channel_mean"] = _nums(np.mean(m.mean, axis=0), 5)
        ev[f"{side}_channel_std"] = _nums(np.mean(m.std, axis=0), 5)
        if enc.normalized:
            ev[f"{side}_norm_mean"] = _nums(enc.offset, 8)
            ev[f"{side}_norm_std"] = _nums(enc.scale, 8)
    ev["raw_distance"] = _num(inf.raw_distance)
    ev["matched_distance"] = _num(inf.matched_distance)
    return ev


def _encoding_inputs(ctx: _Context) -> tuple[str, int, ChannelMoments, ChannelMoments] | None:
    """(basis, n_pairs, sim moments, real moments) over the first min(C, 3) channels."""
    basis, fs, fr = ctx.image_sides()
    if not fs or not fr:
        return None
    c = min(min(f.image.channels for f in fs + fr), 3)
    return basis, (len(fs) if basis == "pairs" else 0), _moments(fs, c), _moments(fr, c)


def _encoding_score(inf: EncodingInference) -> float:
    return _num((inf.raw_distance - inf.matched_distance) / ENC_MARGIN[inf.basis])


def _check_value_range(ctx: _Context) -> Finding | None:
    """Sides in different value ranges ([0, 1] vs [0, 255], 8 vs 16 bit) without normalization."""
    inputs = _encoding_inputs(ctx)
    if inputs is None:
        return None
    basis, n_pairs, ms, mr = inputs
    inf = ctx.enc
    if not inf.mismatch or inf.sim.normalized or inf.real.normalized:
        return None
    ev = _encoding_evidence(ctx, inf, ms, mr, n_pairs)
    fs_s, fs_r = 1.0 / inf.sim.scale[0], 1.0 / inf.real.scale[0]
    ev["full_scale_sim"] = _num(fs_s)
    ev["full_scale_real"] = _num(fs_r)
    ev["real_over_sim_scale"] = _num(fs_r / fs_s, 6)
    if fs_r > fs_s:
        fix = f"divide real by {fs_r / fs_s:g} (or multiply sim by {fs_r / fs_s:g})"
    else:
        fix = f"divide sim by {fs_s / fs_r:g} (or multiply real by {fs_s / fs_r:g})"
    title = (f"Value ranges differ: sim is {ev['sim_range']} but real is {ev['real_range']} "
             f"(x{max(fs_r / fs_s, fs_s / fs_r):g}).")
    action = (f"Bring both streams to one value range before the encoder: {fix}. This is a "
              f"pipeline bug, not something to randomize around.")
    return Finding("value_range", "bug", title, ev, action, _encoding_score(inf))


def _check_normalization(ctx: _Context) -> Finding | None:
    """Sides normalized with different mean/std constants, or one normalized and one not."""
    inputs = _encoding_inputs(ctx)
    if inputs is None:
        return None
    basis, n_pairs, ms, mr = inputs
    inf = ctx.enc
    if not inf.mismatch or not (inf.sim.normalized or inf.real.normalized):
        return None
    ev = _encoding_evidence(ctx, inf, ms, mr, n_pairs)

    def desc(enc: Encoding) -> str:
        return enc.label if enc.normalized else f"not normalized ({enc.label})"

    title = f"Normalization differs: sim looks {desc(inf.sim)}, real looks {desc(inf.real)}."
    target = inf.sim if inf.sim.normalized else inf.real
    action = (f"Normalize both streams with the encoder's own constants (one of them is "
              f"{target.label}, mean {list(target.offset)}, std {list(target.scale)}); never "
              f"normalize twice or skip it on one side.")
    return Finding("normalization", "bug", title, ev, action, _encoding_score(inf))


def _log_means_cv(frames: Sequence[FrameRecord], enc: Encoding) -> tuple[np.ndarray, np.ndarray]:
    """(n, 3) log of [0, 1] channel means and log coefficient of variation."""
    mean = np.array([f.image.mean[:3] for f in frames], dtype=np.float64)
    std = np.array([f.image.std[:3] for f in frames], dtype=np.float64)
    m01, s01 = _to01(enc, mean, std)
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
        details[name] = {"cost": _num(cost), "log_gain_r": _num(gains[0]), "log_gain_b": _num(gains[1])}
    return costs[0], costs[1], details


def _is_colour(f: FrameRecord, partner: FrameRecord | None) -> bool:
    return f.image.channels >= 3


def _check_channel_swap(ctx: _Context) -> Finding | None:
    """RGB vs BGR: the swapped model explains the sim from the real far better than gains do."""
    basis, fs, fr = ctx.image_sides(_is_colour)
    need = 1 if basis == "pairs" else 2  # one frame per side says nothing about a distribution
    if len(fs) < need or len(fr) < need:
        return None
    lm_s, cv_s = _log_means_cv(fs, ctx.enc.sim)
    lm_r, cv_r = _log_means_cv(fr, ctx.enc.real)
    c_id, c_sw, details = swap_costs(lm_s, cv_s, lm_r, cv_r, basis == "pairs")
    if not (c_sw < SWAP_RATIO * c_id and c_id - c_sw >= SWAP_MARGIN[basis]):
        return None
    # Natural scenes average redder than bluer (ImageNet mean R 0.485 > B 0.406, and every real
    # photo in the shared data has mean R > B), so the side whose frames are bluer is the BGR one.
    rb_s = float(np.median(lm_s[:, 0] - lm_s[:, 2]))
    rb_r = float(np.median(lm_r[:, 0] - lm_r[:, 2]))
    bgr_side = "sim" if rb_s < rb_r else "real"
    ev = _basis_evidence(basis, len(fs) if basis == "pairs" else 0, ctx)
    ev.update({
        "identity_cost": _num(c_id), "swapped_cost": _num(c_sw), "models": details,
        "sim_log_r_over_b": _num(rb_s), "real_log_r_over_b": _num(rb_r),
        "likely_bgr_side": bgr_side,
        "bgr_side_basis": "natural scenes average R > B; the bluer side is taken as BGR",
    })
    title = (f"Red and blue channels are swapped between sim and real (swapped model fits "
             f"{c_id / max(c_sw, 1e-3):.1f}x better); {bgr_side} most likely delivers BGR.")
    action = (f"Swap the channel order in the {bgr_side} pipeline (it delivers BGR, e.g. an OpenCV "
              f"imread/camera driver); do not randomize hue around it.")
    return Finding("channel_swap", "bug", title, ev, action, _num((c_id - c_sw) / SWAP_MARGIN[basis]))


def _depth_frames(frames: Sequence[FrameRecord]) -> list[FrameRecord]:
    return [f for f in frames if f.depth is not None and f.depth.percentiles is not None
            and f.depth.percentiles[_P50] > 0]


def _declared_unit(frames: Sequence[FrameRecord]) -> float | None:
    units = [f.depth_units_per_m for f in frames if f.depth_units_per_m]
    if len(units) < len(frames) / 2:
        return None
    return Counter(units).most_common(1)[0][0]


def _inferred_unit(frames: Sequence[FrameRecord]) -> str:
    return Counter(f.depth.inferred_unit for f in frames).most_common(1)[0][0]


def nearest_depth_unit(units_per_m: float) -> str | None:
    """Name of the known unit within DEPTH_NAME_TOL of `units_per_m`, else None."""
    name, fac = min(DEPTH_UNIT_NAMES.items(), key=lambda kv: abs(math.log(units_per_m / kv[1])))
    return name if abs(math.log(units_per_m / fac)) <= math.log(DEPTH_NAME_TOL) else None


def name_depth_ratio(ratio: float) -> tuple[str, str, float] | None:
    """The pair of known units (sim unit, real unit) whose units-per-metre ratio is closest to
    `ratio` (sim value / real value at the same depth), within DEPTH_NAME_TOL; else None."""
    best = None
    for us, fs in DEPTH_UNIT_NAMES.items():
        for ur, fr in DEPTH_UNIT_NAMES.items():
            if us == ur:
                continue
            err = abs(math.log(ratio / (fs / fr)))
            if err <= math.log(DEPTH_NAME_TOL) and (best is None or err < best[2]):
                best = (us, ur, err)
    return best


def _explain_depth_ratio(ratio: float, f_s: float, f_r: float, both_converted: bool,
                         inferred: tuple[str, str]) -> tuple[str, tuple[str, str] | None]:
    """(side most likely wrong, (sim unit, real unit) names or None) for a depth `ratio`
    (sim / real after dividing by the units-per-metre factors `f_s`, `f_r`; `inferred` holds
    the stats' unit guesses, which break ties)."""
    if not both_converted:
        named = name_depth_ratio(ratio)
        looks = (named[0], named[1]) if named else None
        # Metres is the usual target; the side not in metres is the one to convert.
        if looks and "m" in looks:
            return ("real" if looks[0] == "m" else "sim"), looks
        return ("sim" if ratio >= 1 else "real"), looks
    # Units were declared (or inferred for one side): one side's factor is right, the other's
    # is not. Each hypothesis implies a true unit for the wrong side; keep those that are known.
    options = []
    sim_true, real_right = nearest_depth_unit(ratio * f_s), nearest_depth_unit(f_r)
    if sim_true and real_right:
        options.append(("sim", (sim_true, real_right), sim_true == inferred[0]))
    sim_right, real_true = nearest_depth_unit(f_s), nearest_depth_unit(f_r / ratio)
    if real_true and sim_right:
        options.append(("real", (sim_right, real_true), real_true == inferred[1]))
    if not options:
        return ("sim" if ratio >= 1 else "real"), None
    options.sort(key=lambda o: not o[2])  # the one the magnitudes agree with first
    return options[0][0], options[0][1]


def _check_depth_scale(ctx: _Context) -> Finding | None:
    """Median depth of matching frames differs by a unit factor (mm vs m, 1/5000 m, ...)."""
    ds, dr = _depth_frames(ctx.sim.frames), _depth_frames(ctx.real.frames)
    if not ds or not dr:
        return None
    decl_s, decl_r = _declared_unit(ds), _declared_unit(dr)
    inf_s, inf_r = _inferred_unit(ds), _inferred_unit(dr)
    conv = {"m": 1.0, "mm": 1000.0}

    def factor(decl: float | None, inferred: str, other_decl: float | None) -> tuple[float, str]:
        if decl is not None:
            return decl, "declared"
        if other_decl is not None and inferred in conv:
            return conv[inferred], "inferred"
        return 1.0, "raw"

    f_s, how_s = factor(decl_s, inf_s, decl_r)
    f_r, how_r = factor(decl_r, inf_r, decl_s)
    real_by_key = {f.pair_key: f for f in dr}
    pairs = [(s, real_by_key[s.pair_key]) for s in ds if s.pair_key in real_by_key]
    if len(pairs) >= MIN_PAIRS:
        basis = "pairs"
        ratios = np.array([(s.depth.percentiles[_P50] / f_s) / (r.depth.percentiles[_P50] / f_r)
                           for s, r in pairs])
        ratio = float(np.exp(np.median(np.log(ratios))))
        agree = float(np.mean(np.abs(np.log(ratios / ratio)) < math.log(1.25)))
    else:
        basis = "distribution"
        med_s = float(np.median([f.depth.percentiles[_P50] for f in ds])) / f_s
        med_r = float(np.median([f.depth.percentiles[_P50] for f in dr])) / f_r
        ratio = med_s / med_r
        agree = None
    unit_conflict = (decl_s is None and decl_r is None and "unknown" not in (inf_s, inf_r)
                     and inf_s != inf_r)
    far = abs(math.log(ratio)) >= math.log(DEPTH_RATIO[basis])
    if not far and not unit_conflict:
        return None
    compared = "metres" if how_s != "raw" and how_r != "raw" else "raw values"
    wrong, looks = _explain_depth_ratio(ratio, f_s, f_r, compared == "metres", (inf_s, inf_r))

    def unit_desc(decl: float | None, inferred: str) -> str:
        if decl is not None:
            return f"declared {nearest_depth_unit(decl) or f'{decl:g} units/m'}"
        return f"undeclared (looks like {inferred})"

    ev = _basis_evidence(basis, len(pairs) if basis == "pairs" else 0, ctx)
    ev.update({
        "ratio_sim_over_real": _num(ratio, 6), "compared_in": compared,
        "sim_unit": unit_desc(decl_s, inf_s), "real_unit": unit_desc(decl_r, inf_r),
        "sim_inferred_unit": inf_s, "real_inferred_unit": inf_r,
        "sim_declared_units_per_m": _num(decl_s) if decl_s is not None else None,
        "real_declared_units_per_m": _num(decl_r) if decl_r is not None else None,
        "sim_median_depth": _num(float(np.median([f.depth.percentiles[_P50] for f in ds])), 5),
        "real_median_depth": _num(float(np.median([f.depth.percentiles[_P50] for f in dr])), 5),
        "unit_conflict": unit_conflict, "likely_wrong_side": wrong,
    })
    if agree is not None:
        ev["pair_agreement"] = _num(agree)
    if looks:
        ev["sim_looks_like"], ev["real_looks_like"] = looks
        what = f" ({looks[0]} vs {looks[1]})"
    else:
        what = ""
    big, small, fac = ("sim", "real", ratio) if ratio >= 1 else ("real", "sim", 1 / ratio)
    where = " at matching frames" if basis == "pairs" else ""
    title = f"{big.capitalize()} depth is {fac:.4g}x {small} depth{where}{what}."
    decl_wrong = decl_s if wrong == "sim" else decl_r
    true_unit = (looks[0] if wrong == "sim" else looks[1]) if looks else None
    if true_unit and decl_wrong is not None:
        action = (f"The {wrong} set's depth is in {true_unit} but its declared `depth_unit` says "
                  f"{nearest_depth_unit(decl_wrong) or f'{decl_wrong:g} units/m'}: declare "
                  f"{DEPTH_UNIT_NAMES[true_unit]:g} units per metre (or convert in its loader); this is "
                  f"a bug, not a randomization budget.")
    elif true_unit:
        action = (f"Convert {wrong} depth from {true_unit} to metres in its loader (divide by "
                  f"{DEPTH_UNIT_NAMES[true_unit]:g}) and declare `depth_unit` for both sets; this is a "
                  f"bug, not a randomization budget.")
    else:
        action = (f"Find the scale error in the depth pipelines ({big} values are {fac:.3g}x the "
                  f"{small} ones) and declare `depth_unit` for both sets.")
    score = abs(math.log(ratio)) / math.log(DEPTH_RATIO[basis]) + (1.0 if unit_conflict else 0.0)
    return Finding("depth_scale", "bug", title, ev, action, _num(score))


def _check_depth_dropout(ctx: _Context) -> Finding | None:
    """Invalid-depth fraction (0, NaN, inf) much higher on one side."""
    ds = [f for f in ctx.sim.frames if f.depth is not None]
    dr = [f for f in ctx.real.frames if f.depth is not None]
    if not ds or not dr:
        return None
    real_by_key = {f.pair_key: f for f in dr}
    pairs = [(s, real_by_key[s.pair_key]) for s in ds if s.pair_key in real_by_key]
    dos = np.array([f.depth.dropout for f in ds])
    dor = np.array([f.depth.dropout for f in dr])
    if len(pairs) >= MIN_PAIRS:
        basis = "pairs"
        diff = float(np.median([r.depth.dropout - s.depth.dropout for s, r in pairs]))
        z_ok = True
    else:
        basis = "distribution"
        diff = float(np.median(dor) - np.median(dos))
        z_ok = _dist_z(dor, dos) >= DIST_Z
    mean_s, mean_r = float(dos.mean()), float(dor.mean())
    hi, lo = max(mean_s, mean_r), min(mean_s, mean_r)
    if abs(diff) < DROPOUT_DIFF or (hi + 0.01) / (lo + 0.01) < DROPOUT_RATIO or not z_ok:
        return None
    ev = _basis_evidence(basis, len(pairs) if basis == "pairs" else 0, ctx)
    ev.update({"sim_dropout": _num(mean_s), "real_dropout": _num(mean_r),
               "dropout_diff_real_minus_sim": _num(diff)})
    if diff > 0:
        title = (f"Real depth has {mean_r:.0%} invalid pixels vs {mean_s:.0%} in sim "
                 f"(+{diff * 100:.0f} points).")
        action = ("Add a depth-noise/dropout model to the sim depth (holes at depth edges and on "
                  "transparent/specular surfaces, at the measured rate), or filter/inpaint real "
                  "depth before the policy sees it.")
    else:
        title = (f"Sim depth has {mean_s:.0%} invalid pixels vs {mean_r:.0%} in real "
                 f"(+{-diff * 100:.0f} points).")
        action = ("Check the sim depth's near/far clipping planes and invalid-value encoding, or "
                  "match the dropout model to the real sensor's measured rate.")
    return Finding("depth_dropout", "gap", title, ev, action, _num(abs(diff) / DROPOUT_DIFF))


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
    clear = _dist_z(hs.log_hf, hr.log_hf) >= DIST_Z and _dist_z(hs.log_grad, hr.log_grad) >= DIST_Z
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


def _check_resize_filter(ctx: _Context) -> Finding | None:
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
    ev = _basis_evidence(basis, len(fs) if basis == "pairs" else 0, ctx)
    ev.update({
        "log_hf_ratio_sim_minus_real": _num(d_hf), "log_grad_ratio_sim_minus_real": _num(d_gr),
        "noise_equivalent_levels": _num(noise_eq, 3), "pair_agreement": _num(agree),
        "sim_hf_ratio": _num(float(np.exp(np.median(hs.log_hf)))),
        "real_hf_ratio": _num(float(np.exp(np.median(hr.log_hf)))),
        "sim_grad_ratio": _num(float(np.exp(np.median(hs.log_grad)))),
        "real_grad_ratio": _num(float(np.exp(np.median(hr.log_grad)))),
        "sim_dup_parity": _num(par_s), "real_dup_parity": _num(par_r),
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
    return Finding("resize_filter", "bug", title, ev, action, _num(score))


def _check_sharpness(ctx: _Context) -> Finding | None:
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
        clear = _dist_z(ls, lr) >= DIST_Z
    if abs(d) < SHARPNESS_STOPS[basis] or not clear:
        return None
    sharper, softer = ("sim", "real") if d > 0 else ("real", "sim")
    ev = _basis_evidence(basis, len(fs) if basis == "pairs" else 0, ctx)
    ev.update({"log2_sharpness_sim_minus_real": _num(d), "sharpness_ratio": _num(2 ** abs(d), 3),
               "pair_agreement": _num(agree) if agree is not None else None,
               "sim_sharpness": _num(float(2 ** np.median(ls)), 6), "real_sharpness": _num(float(2 ** np.median(lr)), 6),
               "sharper_side": sharper})
    title = (f"{sharper.capitalize()} frames are {2 ** abs(d):.1f}x sharper than {softer} frames "
             f"(Laplacian energy): focus, motion or lens blur differs.")
    if sharper == "sim":
        action = ("Add camera blur to the sim (defocus / motion blur, randomized up to the measured softness) "
                  "or check the real camera's focus and exposure time.")
    else:
        action = ("The sim is softer than the camera: render at a higher resolution or with less "
                  "smoothing (check texture filtering and anti-aliasing settings).")
    return Finding("sharpness", "gap", title, ev, action, _num(abs(d) / SHARPNESS_STOPS[basis]))


def _color_inputs(ctx: _Context) -> tuple[str, int, np.ndarray, np.ndarray] | None:
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


def _check_brightness(ctx: _Context) -> Finding | None:
    """Exposure offset in stops from mean linear luminance (Rec.709)."""
    if ctx.fired & {"value_range", "normalization"}:
        return None
    inputs = _color_inputs(ctx)
    if inputs is None:
        return None
    basis, n_pairs, lin_s, lin_r = inputs
    if basis == "pairs":
        per_pair = exposure_stops(lin_s, lin_r)
        stops = float(np.median(per_pair))
        spread = [float(np.percentile(per_pair, 25)), float(np.percentile(per_pair, 75))]
        z_ok = True
    else:
        ys = np.log2(np.clip(lin_s @ _REC709, 1e-6, None))
        yr = np.log2(np.clip(lin_r @ _REC709, 1e-6, None))
        stops = float(np.median(ys) - np.median(yr))
        spread = None
        z_ok = _dist_z(ys, yr) >= DIST_Z
    if abs(stops) < BRIGHTNESS_STOPS or not z_ok:
        return None
    pct = 2.0 ** abs(stops) - 1.0
    word = "brighter" if stops > 0 else "darker"
    budget = math.ceil(abs(stops) * 10 - 1e-9) / 10
    ev = _basis_evidence(basis, n_pairs, ctx)
    ev.update({"stops_sim_minus_real": _num(stops), "luminance_ratio_sim_over_real": _num(2.0 ** stops),
               "threshold_stops": BRIGHTNESS_STOPS,
               "sim_linear_luminance": _num(float(np.median(lin_s @ _REC709)), 5),
               "real_linear_luminance": _num(float(np.median(lin_r @ _REC709)), 5)})
    if spread is not None:
        ev["stops_iqr"] = _nums(spread)
    title = f"Sim is {abs(stops):.2f} stops ({pct:.0%}) {word} than real."
    action = (f"Randomize light intensity / exposure by at least ±{budget:.1f} stops (sim is "
              f"{pct:.0%} {word}), or match the sim camera's exposure to the real one.")
    return Finding("brightness", "gap", title, ev, action, _num(abs(stops) / BRIGHTNESS_STOPS))


def _check_white_balance(ctx: _Context) -> Finding | None:
    """Colour-temperature / white-balance gain shift in log2(R/G), log2(B/G) of linear means."""
    if ctx.fired & {"value_range", "normalization", "channel_swap"}:
        return None
    inputs = _color_inputs(ctx)
    if inputs is None:
        return None
    basis, n_pairs, lin_s, lin_r = inputs
    cs, cr = chroma_log2(lin_s), chroma_log2(lin_r)
    if basis == "pairs":
        shift = np.median(cs - cr, axis=0)
        z_ok = True
    else:
        shift = np.median(cs, axis=0) - np.median(cr, axis=0)
        z_ok = max(_dist_z(cs[:, 0], cr[:, 0]), _dist_z(cs[:, 1], cr[:, 1])) >= DIST_Z
    rg, bg = float(shift[0]), float(shift[1])
    size = max(abs(rg), abs(bg))
    if size < WB_LOG2 or not z_ok:
        return None
    warm = rg - bg
    tone = "warmer (redder)" if warm > 0 else "cooler (bluer)"
    ev = _basis_evidence(basis, n_pairs, ctx)
    ev.update({"log2_r_over_g_sim_minus_real": _num(rg), "log2_b_over_g_sim_minus_real": _num(bg),
               "gain_r_sim_over_real": _num(2.0 ** rg), "gain_b_sim_over_real": _num(2.0 ** bg),
               "threshold_log2": WB_LOG2, "sim_tone": tone})
    title = (f"Sim is {tone} than real: R/G gain x{2 ** rg:.2f}, B/G gain x{2 ** bg:.2f} "
             f"({size:.2f} log2).")
    action = (f"Randomize white-balance gains / colour temperature by at least ±{abs(2 ** rg - 1):.0%} "
              f"on R/G and ±{abs(2 ** bg - 1):.0%} on B/G, or match the sim light colour and the "
              f"camera's white balance.")
    return Finding("white_balance", "gap", title, ev, action, _num(size / WB_LOG2))


def joint_scale_ratios(sim_vals: np.ndarray, real_vals: np.ndarray, paired_rows: bool) -> np.ndarray:
    """Per-dimension scale of sim relative to real, shape (D,); NaN where a dim carries nothing.

    Paired: least-squares slope through the origin of sim on real. Unpaired: ratio of
    root-mean-square values (deg vs rad scales offsets and spread alike)."""
    out = np.full(sim_vals.shape[1], np.nan)
    for d in range(sim_vals.shape[1]):
        s, r = sim_vals[:, d], real_vals[:, d]
        if paired_rows:
            den = float(r @ r)
            if den > 1e-12 and float(s @ s) > 1e-12:
                out[d] = float(s @ r) / den
        else:
            rs, rr = math.sqrt(float(np.mean(s * s))), math.sqrt(float(np.mean(r * r)))
            if rs > 1e-9 and rr > 1e-9:
                out[d] = rs / rr
    return out


def _joint_check(ctx: _Context, attr: str) -> Finding | None:
    get = lambda f: getattr(f, attr)  # noqa: E731
    fs = [f for f in ctx.sim.frames if get(f) is not None]
    fr = [f for f in ctx.real.frames if get(f) is not None]
    if not fs or not fr:
        return None
    dims = Counter(len(get(f)) for f in fs).most_common(1)[0][0]
    if Counter(len(get(f)) for f in fr).most_common(1)[0][0] != dims or dims == 0:
        return None
    fs = [f for f in fs if len(get(f)) == dims]
    fr = [f for f in fr if len(get(f)) == dims]
    real_by_key = {f.pair_key: f for f in fr}
    pairs = [(s, real_by_key[s.pair_key]) for s in fs if s.pair_key in real_by_key]
    if len(pairs) >= MIN_PAIRS:
        basis = "pairs"
        sv = np.array([get(s) for s, _ in pairs], dtype=np.float64)
        rv = np.array([get(r) for _, r in pairs], dtype=np.float64)
    else:
        basis = "distribution"
        sv = np.array([get(f) for f in fs], dtype=np.float64)
        rv = np.array([get(f) for f in fr], dtype=np.float64)
    ok_rows_s, ok_rows_r = np.all(np.isfinite(sv), axis=1), np.all(np.isfinite(rv), axis=1)
    if basis == "pairs":
        keep = ok_rows_s & ok_rows_r
        sv, rv = sv[keep], rv[keep]
    else:
        sv, rv = sv[ok_rows_s], rv[ok_rows_r]
    if len(sv) == 0 or len(rv) == 0:
        return None
    ratios = joint_scale_ratios(sv, rv, basis == "pairs")
    with np.errstate(invalid="ignore", divide="ignore"):
        lr = np.log(np.abs(ratios))

    def near(sign: float, tol: float) -> list[int]:
        return [d for d in range(dims)
                if np.isfinite(lr[d]) and abs(lr[d] - sign * math.log(DEG_PER_RAD)) <= math.log(tol)]

    sim_deg, real_deg = near(1.0, JOINT_RATIO_TOL), near(-1.0, JOINT_RATIO_TOL)
    if len(sim_deg) >= 2:
        sim_deg = near(1.0, JOINT_RATIO_LOOSE)
    if len(real_deg) >= 2:
        real_deg = near(-1.0, JOINT_RATIO_LOOSE)
    if not sim_deg and not real_deg:
        return None
    deg_side, flagged = ("sim", sim_deg) if len(sim_deg) >= len(real_deg) else ("real", real_deg)
    rad_side = "real" if deg_side == "sim" else "sim"
    ratio_list = [abs(float(ratios[d])) ** (1.0 if deg_side == "sim" else -1.0) for d in flagged]
    ev = _basis_evidence(basis, len(sv) if basis == "pairs" else 0, ctx)
    ev.update({"field": attr, "dims": [int(d) for d in flagged], "n_dims": dims,
               "degrees_side": deg_side,
               "ratios_degrees_over_radians": _nums(ratio_list, 3),
               "median_ratio": _num(float(np.median(ratio_list)), 3),
               "expected_ratio": _num(DEG_PER_RAD, 3),
               "all_dim_ratios_sim_over_real": [_num(float(x), 5) for x in ratios]})
    title = (f"{deg_side.capitalize()} {attr} dims {ev['dims']} are {ev['median_ratio']:.1f}x the "
             f"{rad_side} values: degrees vs radians.")
    action = (f"Convert {deg_side} {attr} dims {ev['dims']} from degrees to radians (x pi/180) in its "
              f"loader; this is a unit bug, not a randomization budget.")
    return Finding("joint_units", "bug", title, ev, action, _num(len(flagged)))


def _check_joint_units(ctx: _Context) -> Finding | None:
    """Proprio and action dims in degrees on one side and radians on the other (one finding;
    the action field's evidence rides along when both are off)."""
    proprio, action = _joint_check(ctx, "proprio"), _joint_check(ctx, "action")
    if proprio is None or action is None:
        return proprio or action
    ev = dict(proprio.evidence)
    ev["action"] = {k: action.evidence[k] for k in ("dims", "degrees_side", "median_ratio")}
    title = proprio.title[:-1] + f" (action dims {action.evidence['dims']} too)."
    action_text = (proprio.action + f" Do the same for {action.evidence['degrees_side']} action dims "
                   f"{action.evidence['dims']}.")
    return Finding("joint_units", "bug", title, ev, action_text, proprio.score + action.score)


# The registry, in the order checks contaminate each other (see the module docstring).
CHECKS: tuple[tuple[str, Callable[[_Context], Finding | None]], ...] = (
    ("resolution", _check_resolution),
    ("value_range", _check_value_range),
    ("normalization", _check_normalization),
    ("channel_swap", _check_channel_swap),
    ("depth_scale", _check_depth_scale),
    ("depth_dropout", _check_depth_dropout),
    ("resize_filter", _check_resize_filter),
    ("sharpness", _check_sharpness),
    ("brightness", _check_brightness),
    ("white_balance", _check_white_balance),
    ("joint_units", _check_joint_units),
)


def _infer(ctx: _Context) -> None:
    inputs = _encoding_inputs(ctx)
    if inputs is not None:
        basis, _, ms, mr = inputs
        ctx.enc = infer_encodings(ms, mr, basis)


_IMAGE_CHECKS = {"value_range", "normalization", "channel_swap", "resize_filter", "sharpness",
                 "brightness", "white_balance"}


def diagnose(sim: SetRecords, real: SetRecords) -> list[Finding]:
    """Run every plumbing check on a sim set against a real set.

    Args:
        sim: the simulated frame set (`domain` "sim").
        real: the real frame set (`domain` "real").

    Returns:
        Findings with codes from CONTRACT.md (`channel_swap`, `value_range`, `normalization`,
        `depth_scale`, `depth_dropout`, `resize_filter`, `brightness`, `white_balance`,
        `resolution`, `joint_units`), ordered by `order_findings`; empty when nothing is off.
    """
    ctx = _Context(sim=sim, real=real, pairs=paired(sim, real))
    _infer(ctx)
    findings: list[Finding] = []
    for code, check in CHECKS:
        if code in _IMAGE_CHECKS and ctx.enc is None:
            continue
        found = check(ctx)
        if found is not None:
            ctx.fired.add(code)
            findings.append(found)
            logger.debug("%s: %s", code, found.title)
    logger.info("plumbing: %d finding(s) for %s vs %s", len(findings), sim.name, real.name)
    return order_findings(findings)
