"""Value-encoding inference: how each side's observations map back to [0, 1] sRGB values.

`infer_encodings` tests (sim encoding, real encoding) hypotheses (uint8, [0, 1] floats,
ImageNet / OpenAI-CLIP / 0.5 normalizations, ...) on per-channel moments; the checks read
values on a common [0, 1] scale only through the encodings inferred here. Pure: no check
context, no findings.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from perception_gap.statistics.records import FrameRecord

# Value encoding (value_range / normalization). The distance between two sides' per-channel
# moments is |d mean| / pooled std + |ln std ratio|, averaged over channels (affine invariant).
# A mismatch is declared when un-normalizing the sides with *different* constants brings that
# distance below ENC_RATIO x the raw distance and by at least ENC_MARGIN. ImageNet vs CLIP, the
# closest pair of constants, measured raw 0.31-0.32 and matched < 0.01 on noisy pairs; clean
# pairs measured raw < 0.01, so no different-constants hypothesis can improve by 0.08. Set
# moments of two halves of one set differ by 0.13-0.30 (scene content), but a wrong-constants
# hypothesis does not halve that; ImageNet vs CLIP unpaired reads raw ~0.21, hence 0.12 there.
ENC_RATIO = 0.5
ENC_MARGIN = {"pairs": 0.08, "distribution": 0.12}
# Slack, in [0, 1] units, when testing that a side's min/max fit a candidate's attainable range
# (JPEG ringing and float rounding overshoot slightly), and the share of frames that must fit.
ENC_BOUND_TOL = 0.03
ENC_FIT_SHARE = 0.9
# Unpaired sets whose moments differ by scene content (ImageNet vs CLIP on different VOC photos:
# raw 0.18-0.56, the constants' own effect ~0.17) are read by their set extremes instead: a camera's
# frames reach near-black and near-white somewhere, so under the right encodings both sides' [0, 1]
# extremes coincide. Extremes distance = mean over channels of |lo01 sim - lo01 real| + |hi01 sim -
# hi01 real|, over the sides' mean span. Tune cameras, 8 frames a side: ImageNet vs CLIP reads 0.00-0.06 with different
# constants and 0.16-0.20 with one; both sides ImageNet reads 0.00-0.06 alike, 0.14-0.22 apart.
# A normalization mismatch is declared when different constants bring it under ENC_RATIO x the
# best common encoding's and by at least ENC_EXT_MARGIN.
ENC_EXT_MARGIN = 0.08
# Different-constants hypotheses this close in moment distance explain the sides alike: maps whose
# sim-to-real ratios differ by 257/255 (x257 vs x255) read 0.02-0.03 apart whatever the true one
# (float [0, 255] vs [0, 1] frames, real 0-10% darker), so the tie is broken by the sides' extremes.
ENC_TIE = 0.05


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


def moments(frames: Sequence[FrameRecord], c: int) -> ChannelMoments:
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


def to01(enc: Encoding, mean: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
        extremes_common, extremes_matched: set-extremes distance (see ENC_EXT_MARGIN) under the
            best common encoding and under `sim`/`real`, when the mismatch was decided by the
            extremes (unpaired normalization); None otherwise.
    """

    sim: Encoding
    real: Encoding
    mismatch: bool
    raw_distance: float
    matched_distance: float
    basis: str
    extremes_common: float | None = None
    extremes_matched: float | None = None


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
        a_mean, a_std = to01(es, s_mean, s_std)
        b_mean, b_std = to01(er, r_mean, r_std)
        return float(np.median(moment_distance(a_mean, a_std, b_mean, b_std)))

    raw = dist(IDENTITY, IDENTITY)
    cs, cr = _candidate_encodings(ms), _candidate_encodings(mr)
    hyps = [(dist(es, er), es, er) for es in cs for er in cr if not es.same_map(er)]
    best = _tightest_of_best(hyps, ms, mr)
    margin = ENC_MARGIN[basis]
    if best is not None and best[0] < ENC_RATIO * raw and raw - best[0] >= margin:
        return EncodingInference(best[1], best[2], True, raw, best[0], basis)
    if basis != "pairs":
        by_extremes = _extremes_mismatch(ms, mr, cs, cr)
        if by_extremes is not None:
            (es, er), common, matched = by_extremes
            return EncodingInference(es, er, True, raw, dist(es, er), basis, common, matched)
    es, er = _best_single(ms, cs), _best_single(mr, cr)
    if not es.same_map(er):
        # Both sides read the same way when one common encoding fits both (values agree as is).
        common = [e for e in cs if any(e.same_map(x) for x in cr)]
        if common:
            both = ChannelMoments(np.vstack([ms.mean, mr.mean]), np.vstack([ms.std, mr.std]),
                                  np.vstack([ms.lo, mr.lo]), np.vstack([ms.hi, mr.hi]), ms.dtype)
            es = er = _best_single(both, common)
    return EncodingInference(es, er, False, raw, raw, basis)


def _tightest_of_best(hyps: list[tuple[float, Encoding, Encoding]], ms: ChannelMoments, mr: ChannelMoments
                      ) -> tuple[float, Encoding, Encoding] | None:
    """The (distance, sim, real) hypothesis to test: among those within ENC_TIE of the closest,
    the one whose encodings fit both sides' extremes tightest (`_tightness`). Moments cannot tell
    apart maps of nearly one ratio ([0, 65535] vs [0, 255] is x257, [0, 255] vs [0, 1] is x255);
    the sides' attainable ranges can."""
    if not hyps:
        return None
    top = min(d for d, _, _ in hyps)
    near = [h for h in hyps if h[0] <= top + ENC_TIE]
    return min(near, key=lambda h: (_tightness(h[1], ms) + _tightness(h[2], mr), h[0]))


def _pooled(m: ChannelMoments) -> tuple[np.ndarray, np.ndarray]:
    """(1, c) set mean and pooled std (within-frame variance + between-frame variance)."""
    mean = m.mean.mean(axis=0, keepdims=True)
    var = (m.std ** 2).mean(axis=0, keepdims=True) + m.mean.var(axis=0, keepdims=True)
    return mean, np.sqrt(var)


def _extremes(enc: Encoding, m: ChannelMoments) -> tuple[np.ndarray, np.ndarray]:
    """(c,) set minimum and maximum per channel in [0, 1] units under `enc`."""
    off, sc = enc.consts(m.mean.shape[1])
    return np.min(m.lo * sc + off, axis=0), np.max(m.hi * sc + off, axis=0)


def extremes_distance(es: Encoding, ms: ChannelMoments, er: Encoding, mr: ChannelMoments) -> float:
    """Set-extremes distance under `es` / `er`: mean over channels of |lo01 sim - lo01 real| +
    |hi01 sim - hi01 real|, over the mean span (hi01 - lo01) of the two sides, so that one common
    map (a range such as [0, 255] that squeezes both sides) reads the same as any other."""
    lo_s, hi_s = _extremes(es, ms)
    lo_r, hi_r = _extremes(er, mr)
    span = float(np.mean(0.5 * ((hi_s - lo_s) + (hi_r - lo_r))))
    return float(np.mean(np.abs(lo_s - lo_r) + np.abs(hi_s - hi_r))) / max(span, 1e-12)


def _extremes_mismatch(ms: ChannelMoments, mr: ChannelMoments, cs: list[Encoding], cr: list[Encoding]
                       ) -> tuple[tuple[Encoding, Encoding], float, float] | None:
    """((sim, real) encodings, common distance, matched distance) when different normalization
    constants line up the sides' set extremes far better than any one encoding both fit."""
    common = [e for e in cs if any(e.same_map(x) for x in cr)]
    pairs = [(es, er) for es in cs for er in cr
             if not es.same_map(er) and (es.normalized or er.normalized)]
    if not common or not pairs:
        return None
    d_common = min(extremes_distance(e, ms, e, mr) for e in common)
    d_best, best = min(((extremes_distance(es, ms, er, mr), (es, er)) for es, er in pairs), key=lambda t: t[0])
    if d_best < ENC_RATIO * d_common and d_common - d_best >= ENC_EXT_MARGIN:
        return best, d_common, d_best
    return None
