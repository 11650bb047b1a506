"""Verdicts earned by evidence: each finding's value against its bar, its interval, its stability.

The checks decide whether a code fires on the full sets. This module then asks two questions of
every `bug` and `gap` finding, by rerunning the checks on `N_RESAMPLES` bootstrap resamples of the
sets (`resample`: episodes when each side has `MIN_EPISODES`, else pairs, else frames; the
per-frame statistics are reused, only the checks rerun):

- **Stability**: the share of resamples in which the same code fires. Below `STABLE` the finding
  reads "borderline", is at most a gap and never heads the report.
- **Interval**: the percentile interval (`CI_LEVEL`) of the finding's value over the resamples, a
  resample where the code did not fire counting as a value at its bar (it did not clear it). With
  the value's `bar` (where the code starts to fire) it gives `margin`: how far beyond the bar the
  value lies, in interval widths.

A `bug` is earned one of two ways: the data match a known plumbing mapping (`SIGNATURES`: a channel
order, x255, mm vs m, an exact flip, an sRGB encode missing or doubled, a nearest-neighbour
upscale...), or the whole interval lies beyond the code's bug bar (`READINGS[code].bug_bar`). A
finding a check raised as a bug that earns neither is worded again as a gap (`_AS_GAP`), with its
interval and bar.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from perception_gap.codes import Code
from perception_gap.diagnoses.common import MIN_PAIRS
from perception_gap.findings import Finding
from perception_gap.statistics.records import FrameRecord, SetRecords, paired

N_RESAMPLES = 50
STABLE = 0.8
CI_LEVEL = 0.95
MIN_EPISODES = 5

# Field of view: a zoom is named from spatial.FOV_MIN_ZOOM (1.08); a bug when its whole interval
# lies beyond FOV_BUG_ZOOM (a sim camera whose focal length is 15% off is set wrong, not drifted).
FOV_BUG_ZOOM = 1.15
# Tone curve: an exponent is named from tone.TONE_SLOPE; a bug without the paired encode signature
# only when its interval lies wholly beyond 2^+-TONE_BUG_LOG2 (a missing encode reads 1.5-1.7 on real
# frames as the sRGB toe is no pure power, a doubled one ~0.5; a camera's own curve 0.7-1.4).
TONE_BUG_LOG2 = 0.75


@dataclass(frozen=True)
class Reading:
    """How a code's evidence reads against its bars.

    Attributes:
        value: (evidence, score) -> the finding's signed value in `unit`, or None.
        bar: evidence -> the value where the code starts to fire (on the value's side).
        log: effects are |log value| (ratios) rather than |value| (differences).
        unit: the value's unit, for the evidence and the report.
        bug_bar: evidence -> the value the whole interval must lie beyond for a bug (None: never
            from the interval alone).
    """

    value: Callable[[dict, float], float | None]
    bar: Callable[[dict], float]
    log: bool
    unit: str
    bug_bar: Callable[[dict], float] | None = None


def _key(name: str) -> Callable[[dict, float], float | None]:
    return lambda ev, score: ev.get(name)


def _const(v: float) -> Callable[[dict], float]:
    return lambda ev: v


def _wb(ev: dict, score: float) -> float | None:
    rg, bg = ev.get("log2_r_over_g_sim_minus_real"), ev.get("log2_b_over_g_sim_minus_real")
    if rg is None or bg is None:
        return None
    return rg if abs(rg) >= abs(bg) else bg


def _alias(ev: dict, score: float) -> float | None:
    return ev.get("where_it_sits") if ev.get("signature") == "aliasing" else score


def _alias_bar(ev: dict) -> float:
    from perception_gap.diagnoses.sharpness import ALIAS_SHAPE

    if ev.get("signature") == "aliasing" and ev.get("where_it_sits") is not None:
        return ALIAS_SHAPE[ev.get("basis", "pairs")]
    return 1.0


def _fov_bar(ev: dict) -> float:
    from perception_gap.diagnoses.spatial import FOV_MIN_ZOOM

    return FOV_MIN_ZOOM


def _score(ev: dict, score: float) -> float | None:
    return score


_SCORE = Reading(_score, _const(1.0), False, "x its bar")

READINGS: dict[Code, Reading] = {
    Code.BRIGHTNESS: Reading(_key("stops_sim_minus_real"), lambda ev: ev["threshold_stops"], False, "stops"),
    Code.WHITE_BALANCE: Reading(_wb, lambda ev: ev["threshold_log2"], False, "log2 gain"),
    Code.VIGNETTING: Reading(_key("corner_minus_centre_stops_sim_minus_real"), lambda ev: ev["threshold_stops"], False,
                          "stops"),
    Code.DEPTH_DROPOUT: Reading(_key("dropout_diff_real_minus_sim"), lambda ev: ev["threshold"], False, "fraction"),
    Code.MOTION_BLUR: Reading(_key("anisotropy_log2_sim_minus_real"), lambda ev: ev["threshold_log2"], False, "log2"),
    Code.TONE_CURVE: Reading(_key("exponent_sim_over_real"), lambda ev: ev["threshold"], True, "exponent",
                          _const(2.0 ** TONE_BUG_LOG2)),
    Code.FIELD_OF_VIEW: Reading(_key("zoom_sim_over_real"), _fov_bar, True, "x (zoom)", _const(FOV_BUG_ZOOM)),
    Code.RESIZE_FILTER: Reading(_alias, _alias_bar, False, "band shape", _alias_bar),
}


def _encode_signature(ev: dict) -> str | None:
    from perception_gap.diagnoses.tone import ENCODE_RESIDUAL

    x = ev.get("exponent_sim_over_real") or 1.0
    if x > 1 and (ev.get("missing_encode_residual_log2") or math.inf) <= ENCODE_RESIDUAL:
        return "sRGB encode missing on the sim side (pair quantiles on the exact mapping)"
    if x < 1 and (ev.get("double_encode_residual_log2") or math.inf) <= ENCODE_RESIDUAL:
        return "sRGB encode applied twice on the sim side (pair quantiles on the exact mapping)"
    return None


# Known plumbing mappings: evidence -> the mapping matched (a bug whenever the code fires stably).
SIGNATURES: dict[Code, Callable[[dict], str | None]] = {
    Code.RESOLUTION: lambda ev: "frame sizes differ",
    Code.NON_FINITE: lambda ev: "NaN or infinite values",
    Code.VALUE_RANGE: lambda ev: "value scale (x255, x257 or another constant)",
    Code.NORMALIZATION: lambda ev: "normalization constants",
    Code.FRAME_FORMAT: lambda ev: "frame format (channels or dtype)",
    Code.CHANNEL_SWAP: lambda ev: "channel order",
    Code.ORIENTATION: lambda ev: f"an exact {ev.get('transform', 'flip or rotation')}",
    Code.PAIR_SYNC: lambda ev: f"pairs keyed {ev.get('offset_steps')} step(s) apart",
    Code.DEPTH_SCALE: lambda ev: "depth unit scale",
    Code.DEPTH_INVALID: lambda ev: "invalid-depth marker",
    Code.DEPTH_REGISTRATION: lambda ev: "a whole-frame shift of depth against colour",
    Code.JOINT_UNITS: lambda ev: "degrees vs radians",
    Code.CONTROL_DIMS: lambda ev: "vector lengths",
    Code.CONTROL_SCALE: lambda ev: "a constant scale",
    Code.CONTROL_SIGN: lambda ev: "a negated dimension",
    Code.RESIZE_FILTER: lambda ev: ("nearest-neighbour upscale (duplicated pixel pairs)"
                                 if ev.get("signature") == "nearest_upscale" else None),
    Code.TONE_CURVE: _encode_signature,
}


# ------------------------------------------------------------------------------------------------
# Resampling
# ------------------------------------------------------------------------------------------------

def _units(frames: list[FrameRecord]) -> list[list[FrameRecord]]:
    eps: dict = {}
    for f in frames:
        eps.setdefault(f.episode, []).append(f)
    if None not in eps and len(eps) >= MIN_EPISODES:
        return list(eps.values())
    return [[f] for f in frames]


def _copy(f: FrameRecord, k: int) -> FrameRecord:
    return f if k == 0 else replace(f, pair_key=f"{f.pair_key}\x1f{k}")


def _draw(units: list, rng: np.random.Generator) -> list[tuple]:
    """`len(units)` units drawn with replacement, each with its copy number (0 for its first draw)."""
    seen: dict[int, int] = {}
    out = []
    for u in rng.integers(0, len(units), len(units)):
        out.append((units[u], seen.get(int(u), 0)))
        seen[int(u)] = out[-1][1] + 1
    return out


def resample(sim: SetRecords, real: SetRecords, rng: np.random.Generator) -> tuple[SetRecords, SetRecords]:
    """One bootstrap resample of two sets: paired sets by episode (of the real frames) or by pair,
    both sides together; unpaired sets each by episode or frame. A unit drawn k times appears k
    times, its copies under new pair keys; frames without a partner stay as they are."""
    pairs = paired(sim, real)
    if len(pairs) >= MIN_PAIRS:
        by_ep: dict = {}
        for s, r in pairs:
            by_ep.setdefault(r.episode, []).append((s, r))
        units = list(by_ep.values()) if None not in by_ep and len(by_ep) >= MIN_EPISODES else [[p] for p in pairs]
        out_s, out_r = [], []
        for unit, k in _draw(units, rng):
            for s, r in unit:
                out_s.append(_copy(s, k))
                out_r.append(_copy(r, k))
        keys = {s.pair_key for s, _ in pairs}
        out_s += [f for f in sim.frames if f.pair_key not in keys]
        out_r += [f for f in real.frames if f.pair_key not in keys]
        return replace(sim, frames=tuple(out_s)), replace(real, frames=tuple(out_r))

    def one(side: SetRecords) -> SetRecords:
        units = _units(list(side.frames))
        if not units:
            return side
        return replace(side, frames=tuple(_copy(f, k) for unit, k in _draw(units, rng) for f in unit))

    return one(sim), one(real)


# ------------------------------------------------------------------------------------------------
# Settling each finding
# ------------------------------------------------------------------------------------------------

def _effect(v: float, log: bool) -> float:
    return abs(math.log(v)) if log else abs(v)


def _on_side(bar: float, v: float, log: bool) -> float:
    """The bar on the value's side (a ratio below 1 or a negative difference mirrors it)."""
    if log:
        return bar if v >= 1 else 1.0 / bar
    return abs(bar) if v >= 0 else -abs(bar)


def _fmt(v: float) -> str:
    return f"{v:.3g}"


@dataclass(frozen=True)
class Settled:
    """The reading of one finding over the resamples (see the module docstring)."""

    value: float | None
    ci: tuple[float, float] | None
    bar: float | None
    bug_bar: float | None
    margin: float | None
    unit: str | None
    stability: float
    n_resamples: int


def settle_one(f: Finding, resampled: list[Finding | None]) -> Settled:
    """The value, interval, bar, margin and stability of finding `f` given the same code's finding
    in each resample (None where it did not fire)."""
    n = len(resampled)
    stability = sum(r is not None for r in resampled) / n if n else 1.0
    rd = READINGS.get(f.code, _SCORE)
    try:
        v = rd.value(f.evidence, f.score)
        bar = rd.bar(f.evidence) if v is not None else None
    except (KeyError, TypeError):
        rd, v, bar = _SCORE, f.score, 1.0
    if v is None or not math.isfinite(v) or (rd.log and v <= 0):
        return Settled(None, None, None, None, None, None, stability, n)
    side_bar = _on_side(bar, v, rd.log)
    vals = []
    for r in resampled:
        rv = None
        if r is not None:
            try:
                rv = rd.value(r.evidence, r.score)
            except (KeyError, TypeError):
                rv = None
        ok = rv is not None and math.isfinite(rv) and not (rd.log and rv <= 0)
        vals.append(rv if ok else side_bar)
    if n:
        tail = 100 * (1 - CI_LEVEL) / 2
        lo, hi = (float(x) for x in np.percentile(vals, [tail, 100 - tail]))
    else:
        lo = hi = float(v)
    width = abs(math.log(hi) - math.log(lo)) if rd.log else abs(hi - lo)
    excess = _effect(v, rd.log) - _effect(side_bar, rd.log)
    margin = excess / width if width > 1e-12 else (math.inf if excess > 0 else 0.0)
    bug_bar = _on_side(rd.bug_bar(f.evidence), v, rd.log) if rd.bug_bar is not None else None
    return Settled(float(v), (lo, hi), side_bar, bug_bar, margin, rd.unit, stability, n)


def _beyond(ci: tuple[float, float], bug_bar: float, v: float, log: bool) -> bool:
    lo, hi = ci
    up = v >= (1 if log else 0)
    return lo > bug_bar if up else hi < bug_bar


def _tone_gap(f: Finding, s: Settled) -> tuple[str, str]:
    lo, hi = s.ci
    milder = "milder than" if abs(math.log2(s.value)) < TONE_BUG_LOG2 else "not clearly"
    what = "a missing or doubled sRGB encode (about 1.6 / 0.5 on real frames)"
    title = (f"The transfer curves differ: sim luminance goes as real luminance to the power {s.value:.2f} "
             f"[{lo:.2f}, {hi:.2f}], {milder} {what}; named from {s.bar:.2f}.")
    action = (f"Model the real camera's tone curve (or its auto exposure) in the sim: apply an exponent of "
              f"{s.value:.2f} on linear light in rendering or augmentation and randomize around it. If the sim should "
              "match the camera exactly, check that both streams are sRGB-encoded once.")
    return title, action


def _fov_gap(f: Finding, s: Settled) -> tuple[str, str]:
    lo, hi = s.ci
    word = "narrower" if s.value > 1 else "wider"
    title = (f"Sim field of view is slightly {word}: the scene appears {s.value:.2f}x [{lo:.2f}, {hi:.2f}] as large as "
             f"in real (named from {s.bar:.2f}x; a bug when the whole interval lies beyond {s.bug_bar:.2f}x).")
    action = (f"Check the sim camera's intrinsics and crop against the real calibration (focal ratio sim/real = "
              f"{s.value:.3f}); a small focal mismatch is a calibration gap: set it from the calibration or "
              "randomize the field of view around it.")
    return title, action


def _resize_gap(f: Finding, s: Settled) -> tuple[str, str]:
    lo, hi = s.ci
    title = (f"The frames' high-frequency signatures differ the way different resize filters do, but not clearly: "
             f"{s.value:.2f} [{lo:.2f}, {hi:.2f}] against a bar of {s.bar:.2f} ({f.title})")
    action = ("Check that both streams are resized with the same (antialiased) filter; if they are, read this "
              "with the sharpness and noise findings: a mild blur or sharpening can look the same.")
    return title, action


_AS_GAP: dict[Code, Callable[[Finding, Settled], tuple[str, str]]] = {
    Code.TONE_CURVE: _tone_gap, Code.FIELD_OF_VIEW: _fov_gap, Code.RESIZE_FILTER: _resize_gap,
}


def apply(f: Finding, s: Settled) -> Finding:
    """`f` with the settled reading in its evidence, its severity earned and its wording to match."""
    ev = dict(f.evidence)
    ev.update({"value": s.value, "ci": list(s.ci) if s.ci else None, "bar": s.bar, "unit": s.unit,
               "margin": None if s.margin is None else (round(s.margin, 3) if math.isfinite(s.margin) else None),
               "stability": round(s.stability, 3), "n_resamples": s.n_resamples})
    for k in ("value", "bar"):
        if ev[k] is not None:
            ev[k] = float(_fmt(ev[k]))
    if ev["ci"] is not None:
        ev["ci"] = [float(_fmt(x)) for x in ev["ci"]]
    if s.bug_bar is not None:
        ev["bug_bar"] = float(_fmt(s.bug_bar))
    severity, title, action = f.severity, f.title, f.action
    borderline = s.n_resamples > 0 and s.stability < STABLE
    if severity == "bug":
        sig = SIGNATURES.get(f.code, lambda e: None)(f.evidence)
        rd = READINGS.get(f.code)
        beyond = (s.ci is not None and s.bug_bar is not None and s.value is not None
                  and _beyond(s.ci, s.bug_bar, s.value, rd.log if rd else False))
        if sig and not borderline:
            ev["bug_basis"] = f"signature: {sig}"
        elif beyond and not borderline:
            ev["bug_basis"] = "interval wholly beyond the bug bar"
        else:
            severity = "gap"
            if f.code in _AS_GAP and s.ci is not None and s.value is not None:
                title, action = _AS_GAP[f.code](f, s)
            ev["bug_basis"] = None
    if borderline:
        ev["borderline"] = True
        title = f"Borderline (fires in {s.stability:.0%} of {s.n_resamples} resamples): {title}"
        action = f"Not a verdict yet: index more frames or episodes and read it again. If it holds: {action}"
    return Finding(f.code, severity, title, ev, action, f.score)


def settle(findings: list[Finding], runs: list[list[Finding]], *, facts: frozenset[str] = frozenset()) -> list[Finding]:
    """Every `bug` and `gap` of `findings` settled against the same code in each resample's
    findings `runs` (see the module docstring); `info` findings as they are.

    `facts`: codes whose findings count particular frames (this frame is 16-bit grey, these hold NaN):
    facts about those frames, not estimates, so not resampled (a resample that leaves the frame out
    does not make it right); the registry's `Check.fact` (`checks.FACTS`)."""
    out = []
    for f in findings:
        if f.severity == "info":
            out.append(f)
            continue
        if f.code in facts:
            sig = SIGNATURES.get(f.code, lambda e: None)(f.evidence)
            ev = {**f.evidence, "value": None, "ci": None, "bar": None, "unit": None, "margin": None,
                  "stability": 1.0, "n_resamples": 0, "stability_basis": "a count of particular frames: not resampled"}
            if f.severity == "bug":
                ev["bug_basis"] = f"signature: {sig}" if sig else "a count of particular frames"
            out.append(Finding(f.code, f.severity, f.title, ev, f.action, f.score))
            continue
        per = []
        for run in runs:
            hit = next((g for g in run if g.code == f.code and g.severity != "info"), None)
            per.append(hit)
        out.append(apply(f, settle_one(f, per)))
    return out
