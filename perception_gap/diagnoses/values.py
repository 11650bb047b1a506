"""Value-encoding diagnoses: different value ranges (`value_range`) and different
normalization constants (`normalization`), read from the inference in `encoding`."""

from __future__ import annotations

import numpy as np

from perception_gap.diagnoses.common import num, nums
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.encoding import (
    ENC_EXT_MARGIN,
    ENC_MARGIN,
    ChannelMoments,
    Encoding,
    EncodingInference,
    moments,
)
from perception_gap.findings import Finding


def _encoding_evidence(ctx: Context, inf: EncodingInference, ms: ChannelMoments, mr: ChannelMoments,
                       n_pairs: int) -> dict:
    ev = basis_evidence(inf.basis, n_pairs, ctx)
    for side, enc, m in (("sim", inf.sim, ms), ("real", inf.real, mr)):
        ev[f"{side}_dtype"] = m.dtype
        ev[f"{side}_encoding"] = enc.name
        ev[f"{side}_range"] = f"{m.dtype} {enc.label}"
        ev[f"{side}_observed_min"] = num(float(np.min(m.lo)), 5)
        ev[f"{side}_observed_max"] = num(float(np.max(m.hi)), 5)
        ev[f"{side}_channel_mean"] = nums(np.mean(m.mean, axis=0), 5)
        ev[f"{side}_channel_std"] = nums(np.mean(m.std, axis=0), 5)
        if enc.normalized:
            ev[f"{side}_norm_mean"] = nums(enc.offset, 8)
            ev[f"{side}_norm_std"] = nums(enc.scale, 8)
    ev["raw_distance"] = num(inf.raw_distance)
    ev["matched_distance"] = num(inf.matched_distance)
    if inf.extremes_common is not None:  # decided by the sets' [0, 1] extremes (unpaired)
        ev["extremes_distance_common"] = num(inf.extremes_common)
        ev["extremes_distance_matched"] = num(inf.extremes_matched)
    return ev


def encoding_inputs(ctx: Context) -> tuple[str, int, ChannelMoments, ChannelMoments] | None:
    """(basis, n_pairs, sim moments, real moments) over the first min(C, 3) channels."""
    basis, fs, fr = ctx.image_sides()
    if not fs or not fr:
        return None
    c = min(min(f.image.channels for f in fs + fr), 3)
    return basis, (len(fs) if basis == "pairs" else 0), moments(fs, c), moments(fr, c)


def _encoding_score(inf: EncodingInference) -> float:
    if inf.extremes_common is not None:
        return num((inf.extremes_common - inf.extremes_matched) / ENC_EXT_MARGIN)
    return num((inf.raw_distance - inf.matched_distance) / ENC_MARGIN[inf.basis])


def _mismatch(ctx: Context, normalized: bool) -> tuple[EncodingInference, dict] | None:
    """(inference, evidence) when the sides' inferred encodings mismatch and either side being
    normalized is `normalized` (the normalization check) or not (the value-range check)."""
    inputs = encoding_inputs(ctx)
    if inputs is None:
        return None
    basis, n_pairs, ms, mr = inputs
    inf = ctx.enc
    if not inf.mismatch or bool(inf.sim.normalized or inf.real.normalized) != normalized:
        return None
    return inf, _encoding_evidence(ctx, inf, ms, mr, n_pairs)


def _g(x: float) -> str:
    """An observed value as a reader writes it: 255, 1, 0.9961."""
    return f"{x:.4g}"


def check_value_range(ctx: Context) -> Finding | None:
    """Sides in different value ranges ([0, 1] vs [0, 255], 8 vs 16 bit) without normalization."""
    found = _mismatch(ctx, normalized=False)
    if found is None:
        return None
    inf, ev = found
    fs_s, fs_r = 1.0 / inf.sim.scale[0], 1.0 / inf.real.scale[0]
    ev["full_scale_sim"] = num(fs_s)
    ev["full_scale_real"] = num(fs_r)
    ev["real_over_sim_scale"] = num(fs_r / fs_s, 6)
    if fs_r > fs_s:
        fix = f"divide real by {fs_r / fs_s:g} (or multiply sim by {fs_r / fs_s:g})"
    else:
        fix = f"divide sim by {fs_s / fs_r:g} (or multiply real by {fs_s / fs_r:g})"
    factor = max(fs_r / fs_s, fs_s / fs_r)
    title = (f"Value ranges differ: sim is {ev['sim_range']} (values {_g(ev['sim_observed_min'])} to "
             f"{_g(ev['sim_observed_max'])}) but real is {ev['real_range']} (values "
             f"{_g(ev['real_observed_min'])} to {_g(ev['real_observed_max'])}), a x{factor:.4g} scale.")
    action = (f"Bring both streams to one value range before the encoder: {fix}. This is a "
              f"pipeline bug, not something to randomize around.")
    return Finding("value_range", "bug", title, ev, action, _encoding_score(inf))


def check_normalization(ctx: Context) -> Finding | None:
    """Sides normalized with different mean/std constants, or one normalized and one not."""
    found = _mismatch(ctx, normalized=True)
    if found is None:
        return None
    inf, ev = found

    def desc(enc: Encoding) -> str:
        return enc.label if enc.normalized else f"not normalized ({enc.label})"

    title = f"Normalization differs: sim looks {desc(inf.sim)}, real looks {desc(inf.real)}."
    target = inf.sim if inf.sim.normalized else inf.real
    action = (f"Normalize both streams with the encoder's own constants (one of them is "
              f"{target.label}, mean {list(target.offset)}, std {list(target.scale)}); never "
              f"normalize twice or skip it on one side.")
    return Finding("normalization", "bug", title, ev, action, _encoding_score(inf))
