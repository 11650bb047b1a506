"""Fitting the real camera from sim and real frames: every factor of a mixture, with intervals.

Measured in three steps, each on what the one before left:

1. **Pipeline fixes** come from the diagnoses that fired (a channel order, a flip, a field of
   view, a resampling artefact) and frame sizes (sim resized to the real size); they are applied
   to the sim frames before anything else is measured.
2. **Light** (`brightness`, `white_balance`, `tone_curve`, `vignetting`). Paired: block means of
   linear light, sim against real, fitted as log real_c = a_c + g log sim_c + k r^2 (per-channel
   gain, one exponent, a radial fall-off) by robust least squares (Tukey weights, so blocks whose
   content changed between the two frames weigh nothing), with a bootstrap over episodes (else
   pairs) for the intervals. Unpaired: the ratio of the sets' mean linear light per channel;
   an exponent or a fall-off only where the diagnoses measured one.
3. **Blur, noise and compression** (`perception_gap.camera.texture`): the real files' JPEG
   quality and chroma subsampling; blur and noise by synthesis, matched across frequency bands.

A factor enters the model when its interval excludes no-change and its size clears a small
floor (`MIN_EFFECT`); the rest is left out (identical frames give an empty model).
"""

from __future__ import annotations

import math
from typing import Any, Hashable, Iterable, Sequence

import numpy as np

from perception_gap.camera import ops
from perception_gap.camera.model import BUGS, CameraModel, Factor, apply_factors, light_linear
from perception_gap.camera.texture import MAX_FRAMES, JpegInfo, boot_weights, texture_fit
from perception_gap.metrics.settings import LEVEL, REPLICATES

N_BOOT = REPLICATES["camera"]
CI_LEVEL = LEVEL
MIN_EPISODES = 5
# Smallest effects kept in a model (each also needs an interval that excludes no change).
MIN_EFFECT = {"brightness": 0.04, "white_balance": 0.02, "tone_curve": 0.04, "vignetting": 0.05}
BLOCKS = 24                   # light: about this many blocks across the shorter side
TEXTURE_BYTES = 512 * 2**20   # blur and noise: the float32 frames (both sides) they read at most
LIN_LO, LIN_HI = 0.004, 0.85  # light: blocks used where both sides lie in this linear range
# a fitted power outside this is no camera's tone curve (sRGB against linear is 2.2): on frames whose
# light is unrelated the fit runs to 0, and such a model is not reported
EXPONENT_RANGE = (0.25, 4.0)


def resampling_units(episodes: Sequence[Hashable] | None, n: int) -> np.ndarray:
    """Resampling unit per item: episodes when there are MIN_EPISODES of them, else the items (the
    engine's convention, `metrics.resampling`)."""
    if episodes is not None and all(e is not None for e in episodes):
        labels = {e: i for i, e in enumerate(dict.fromkeys(episodes))}
        if len(labels) >= MIN_EPISODES:
            return np.array([labels[e] for e in episodes], np.int64)
    return np.arange(n, dtype=np.int64)


def _ci(samples: np.ndarray, estimate: float) -> list[float]:
    """The engine's interval (`metrics.bootstrap.centred_ci`) of `estimate` from bootstrap replicates."""
    from perception_gap.metrics.bootstrap import centred_ci

    s = np.asarray(samples, np.float64)
    s = s[np.isfinite(s)]
    return list(centred_ci(s, float(estimate), CI_LEVEL)[:2]) if s.size else [math.nan, math.nan]


def _excludes(ci: list[float], v: float) -> bool:
    return not (ci[0] <= v <= ci[1])


# ---- 1. pipeline fixes ------------------------------------------------------------------------

def pipeline_factors(findings: list[dict[str, Any]], sim_size: tuple[int, int] | None,
                     real_size: tuple[int, int] | None) -> tuple[list[Factor], list[dict[str, str]]]:
    """The fixes the diagnoses call for, as factors applied to sim frames; plus what is left out."""
    from perception_gap.diagnoses.thumbs import INVERSE

    fired = {f["code"]: f for f in findings if f.get("severity") in ("bug", "gap")}
    out: list[Factor] = []
    left: list[dict[str, str]] = []
    if real_size and sim_size and real_size != sim_size:
        out.append(Factor("resolution", {"width": real_size[0], "height": real_size[1]}, {},
                          "most common real frame size", True))
    if "channel_swap" in fired:
        out.append(Factor("channel_swap", {"order": "bgr"}, {}, "diagnosis channel_swap", True))
    if "value_range" in fired or "normalization" in fired:
        left.append({"code": "value_range" if "value_range" in fired else "normalization",
                     "reason": "a value scale of float observations: fix it in the pipeline (image encoders read 8-bit frames)"})
    if "orientation" in fired:
        t = (fired["orientation"].get("evidence") or {}).get("transform")
        if t:
            out.append(Factor("orientation", {"transform": INVERSE.get(t, t)}, {}, "diagnosis orientation", True))
    if "field_of_view" in fired:
        ev = fired["field_of_view"].get("evidence") or {}
        z = ev.get("zoom_sim_over_real")
        if z:
            ci = ev.get("ci")
            out.append(Factor("field_of_view", {"zoom_sim_over_real": float(z)},
                              {"zoom_sim_over_real": list(ci)} if isinstance(ci, (list, tuple)) and len(ci) == 2 else {},
                              "diagnosis field_of_view (thumbnail zoom search)", True))
    if "resize_filter" in fired:
        sig = (fired["resize_filter"].get("evidence") or {}).get("signature")
        if sig in ("nearest_upscale", "aliasing"):
            out.append(Factor("resize_filter", {"signature": sig, "factor": 2}, {}, "diagnosis resize_filter", True))
    return out, left


# ---- 2. light ---------------------------------------------------------------------------------

def _blocks(lin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Block means of a linear frame and each block's r^2: ((nb, 3), (nb,))."""
    h, w = lin.shape[:2]
    b = max(1, min(h, w) // BLOCKS)
    hh, ww = (h // b) * b, (w // b) * b
    m = lin[:hh, :ww].reshape(hh // b, b, ww // b, b, 3).mean(axis=(1, 3))
    yy = ((np.arange(hh // b) + 0.5) * b - h / 2.0) / (h / 2.0)
    xx = ((np.arange(ww // b) + 0.5) * b - w / 2.0) / (w / 2.0)
    r2 = (yy[:, None] ** 2 + xx[None, :] ** 2) / 2.0
    return m.reshape(-1, 3), np.broadcast_to(r2, m.shape[:2]).reshape(-1)


def _design(ms: np.ndarray, mr: np.ndarray, r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = (ms > LIN_LO) & (ms < LIN_HI) & (mr > LIN_LO) & (mr < 0.95)
    rows, ys = [], []
    for c in range(3):
        k = ok[:, c]
        n = int(k.sum())
        if not n:
            continue
        x = np.zeros((n, 5))
        x[:, c] = 1.0
        x[:, 3] = np.log(ms[k, c])
        x[:, 4] = r2[k]
        rows.append(x)
        ys.append(np.log(mr[k, c]))
    if not rows:
        return np.zeros((0, 5)), np.zeros(0)
    return np.vstack(rows), np.concatenate(ys)


def _solve(a: np.ndarray, b: np.ndarray, fixed: dict[int, float]) -> np.ndarray:
    """Least squares from normal equations with some parameters held at given values."""
    free = [i for i in range(5) if i not in fixed]
    theta = np.zeros(5)
    for i, v in fixed.items():
        theta[i] = v
    rhs = b[free] - a[np.ix_(free, list(fixed))] @ np.array(list(fixed.values())) if fixed else b[free]
    sub = a[np.ix_(free, free)] + 1e-9 * np.eye(len(free))
    theta[free] = np.linalg.solve(sub, rhs)
    return theta


def light_paired(pairs: Iterable[tuple[np.ndarray, np.ndarray]], units: np.ndarray,
                 rng: np.random.Generator) -> tuple[list[Factor], dict[str, Any]]:
    """Gains, exponent and fall-off from aligned pairs (float sRGB frames, read one pair at a time),
    with bootstrap intervals."""
    designs = []
    for s, r in pairs:
        ms, r2 = _blocks(ops.srgb_to_linear(s))
        mr, _ = _blocks(ops.srgb_to_linear(r))
        designs.append(_design(ms, mr, r2))
    x = np.vstack([d[0] for d in designs]) if designs else np.zeros((0, 5))
    y = np.concatenate([d[1] for d in designs]) if designs else np.zeros(0)
    if len(y) < 20:
        return [], {"light": "too few usable blocks (frames too dark, too bright or too few)"}
    # the exponent and the fall-off are identifiable only with a spread of levels and of radii
    fixed: dict[int, float] = {}
    if np.std(x[:, 3]) < 0.3:
        fixed[3] = 1.0
    if np.std(x[:, 4]) < 0.05:
        fixed[4] = 0.0
    w = np.ones(len(y))
    theta = np.zeros(5)
    for _ in range(6):  # IRLS with Tukey's biweight
        a = (x * w[:, None]).T @ x
        theta = _solve(a, (x * w[:, None]).T @ y, fixed)
        res = y - x @ theta
        scale = max(1.4826 * float(np.median(np.abs(res - np.median(res)))), 0.01)
        u = res / (4.685 * scale)
        w = np.where(np.abs(u) < 1, (1 - u * u) ** 2, 0.0)
    # bootstrap: per-pair normal equations with the final weights
    per_a, per_b = [], []
    start = 0
    for d in designs:
        n = len(d[1])
        ww = w[start:start + n]
        per_a.append((d[0] * ww[:, None]).T @ d[0])
        per_b.append((d[0] * ww[:, None]).T @ d[1])
        start += n
    pa, pb = np.stack(per_a), np.stack(per_b)
    ua = np.zeros((int(units.max()) + 1, 5, 5))
    ub = np.zeros((int(units.max()) + 1, 5))
    np.add.at(ua, units, pa)
    np.add.at(ub, units, pb)
    boots = []
    for cw in boot_weights(units, rng, N_BOOT):
        try:
            boots.append(_solve(np.tensordot(cw, ua, 1), cw @ ub, fixed))
        except np.linalg.LinAlgError:
            continue
    bt = np.array(boots) if boots else theta[None]
    return _light_factors(theta, bt, fixed, "pairs: robust fit of block means of linear light, sim against real"), \
        {"blocks": int(len(y)), "blocks_weighted": int((w > 0).sum())}


def _light_factors(theta: np.ndarray, bt: np.ndarray, fixed: dict[int, float], how: str) -> list[Factor]:
    out: list[Factor] = []
    ln2 = math.log(2.0)
    stops, s_ci = theta[1] / ln2, _ci(bt[:, 1] / ln2, theta[1] / ln2)
    rg, bg = theta[0] - theta[1], theta[2] - theta[1]
    rg_ci, bg_ci = _ci(bt[:, 0] - bt[:, 1], rg), _ci(bt[:, 2] - bt[:, 1], bg)
    if 3 not in fixed:
        g, g_ci = theta[3], _ci(bt[:, 3], theta[3])
        plausible = EXPONENT_RANGE[0] <= g <= EXPONENT_RANGE[1]
        if plausible and abs(math.log2(g)) >= MIN_EFFECT["tone_curve"] and _excludes(g_ci, 1.0):
            out.append(Factor("tone_curve", {"exponent": round(float(g), 4)}, {"exponent": _r(g_ci)}, how))
    if 4 not in fixed:
        v, v_ci = theta[4] / ln2, _ci(bt[:, 4] / ln2, theta[4] / ln2)
        if abs(v) >= MIN_EFFECT["vignetting"] and _excludes(v_ci, 0.0):
            out.append(Factor("vignetting", {"corner_stops": round(float(v), 4)}, {"corner_stops": _r(v_ci)}, how))
    if abs(stops) >= MIN_EFFECT["brightness"] and _excludes(s_ci, 0.0):
        out.append(Factor("brightness", {"stops": round(float(stops), 4)}, {"stops": _r(s_ci)}, how))
    wb_clear = any(abs(v) / ln2 >= MIN_EFFECT["white_balance"] and _excludes(c, 0.0)
                   for v, c in ((rg, rg_ci), (bg, bg_ci)))
    if wb_clear:
        out.append(Factor("white_balance", {"r_gain": round(math.exp(rg), 4), "b_gain": round(math.exp(bg), 4)},
                          {"r_gain": _r([math.exp(c) for c in rg_ci]), "b_gain": _r([math.exp(c) for c in bg_ci])}, how))
    return out


def _r(ci: list[float], nd: int = 4) -> list[float]:
    return [round(float(c), nd) for c in ci]


def light_sets(sim: Iterable[np.ndarray], real: Iterable[np.ndarray], units_s: np.ndarray, units_r: np.ndarray,
               findings: list[dict[str, Any]], rng: np.random.Generator) -> list[Factor]:
    """Unpaired: per-channel gains from the sets' mean linear light (frames read one at a time);
    exponent and fall-off from the diagnoses when they measured one."""
    ms = np.array([ops.srgb_to_linear(s).reshape(-1, 3).mean(0) for s in sim])
    mr = np.array([ops.srgb_to_linear(r).reshape(-1, 3).mean(0) for r in real])
    theta = np.zeros(5)
    theta[:3] = np.log(np.maximum(mr.mean(0), 1e-6)) - np.log(np.maximum(ms.mean(0), 1e-6))
    theta[3], theta[4] = 1.0, 0.0
    bt = []
    for ws, wr in zip(boot_weights(units_s, rng, N_BOOT), boot_weights(units_r, rng, N_BOOT)):
        fs = ws[units_s]
        fr = wr[units_r]
        gs = (ms * fs[:, None]).sum(0) / max(fs.sum(), 1e-9)
        gr = (mr * fr[:, None]).sum(0) / max(fr.sum(), 1e-9)
        t = np.zeros(5)
        t[:3] = np.log(np.maximum(gr, 1e-6)) - np.log(np.maximum(gs, 1e-6))
        t[3] = 1.0
        bt.append(t)
    out = _light_factors(theta, np.array(bt), {3: 1.0, 4: 0.0}, "sets: ratio of the sets' mean linear light")
    fired = {f["code"]: f.get("evidence") or {} for f in findings if f.get("severity") in ("bug", "gap")}
    if "tone_curve" in fired and fired["tone_curve"].get("exponent_sim_over_real"):
        x = float(fired["tone_curve"]["exponent_sim_over_real"])
        out.insert(0, Factor("tone_curve", {"exponent": round(1.0 / x, 4)}, {}, "diagnosis tone_curve (quantiles)"))
    if "vignetting" in fired and fired["vignetting"].get("corner_minus_centre_stops_sim_minus_real") is not None:
        v = -float(fired["vignetting"]["corner_minus_centre_stops_sim_minus_real"])
        out.insert(0, Factor("vignetting", {"corner_stops": round(v, 4)}, {}, "diagnosis vignetting (radial profile)"))
    return out


# ---- the whole fit ------------------------------------------------------------------------------

def _motion(findings: list[dict[str, Any]]) -> tuple[float | None, list[dict[str, str]]]:
    """The line blur's angle when `motion_blur` found the real side blurred one way (0 = horizontal)."""
    ev = next((f.get("evidence") or {} for f in findings if f.get("code") == "motion_blur"
               and f.get("severity") in ("bug", "gap")), None)
    if ev is None:
        return None, []
    if ev.get("blurred_side") == "sim":
        return None, [{"code": "motion_blur", "reason": "the sim frames carry a line blur the real camera lacks: "
                                                        "render without it (no camera factor removes blur)"}]
    return (0.0 if ev.get("direction") == "horizontal" else 90.0), []


def _float(f: np.ndarray) -> np.ndarray:
    return f.astype(np.float32) * ops.LEVEL if f.dtype == np.uint8 else f.astype(np.float32)


def _common_size(frames: list[np.ndarray]) -> tuple[int, int] | None:
    from collections import Counter

    sizes = Counter((f.shape[1], f.shape[0]) for f in frames)
    return sizes.most_common(1)[0][0] if sizes else None


URGENCY = ("resolution", "channel_swap", "value_range", "orientation", "field_of_view", "resize_filter",
           "tone_curve", "vignetting", "brightness", "white_balance", "compression", "sensor_noise",
           "motion_blur", "sharpness")


def fit_camera_model(sim: list[np.ndarray], real: list[np.ndarray], *, paired: bool,
                     episodes_sim: Sequence[Hashable] | None = None, episodes_real: Sequence[Hashable] | None = None,
                     findings: list[dict[str, Any]] | None = None, jpeg: JpegInfo | None = None,
                     random_state: int = 0, sim_name: str | None = None, real_name: str | None = None) -> CameraModel:
    """The real camera as factors applied to sim frames (see the module docstring).

    Args:
        sim, real: H x W x 3 uint8 (or float sRGB) frames; paired: sim[i] shows what real[i] shows.
        paired: whether the lists are matched pairs.
        episodes_sim, episodes_real: episode per frame (resampling units), None when unknown.
        findings: the diagnoses' findings as dicts (code, severity, evidence), for the pipeline fixes.
        jpeg: what the files say about compression.
        random_state: tiles, noise fields and bootstrap draws.

    Returns:
        CameraModel, its factors in urgency order.
    """
    rng = np.random.default_rng(random_state)
    findings = findings or []
    basis = "pairs" if paired else "sets"
    if not sim or not real:
        return CameraModel((), basis, 0, (), sim_name, real_name)
    fixes, left = pipeline_factors(findings, _common_size(sim), _common_size(real))
    pre = CameraModel(tuple(fixes))

    def fixed(i: int) -> np.ndarray:
        return apply_factors(_float(sim[i]), pre, rng)

    if paired:
        keep = [i for i in range(len(sim)) if fixed(i).shape == real[i].shape] if fixes else \
            [i for i in range(len(sim)) if sim[i].shape == real[i].shape]
        units_s = resampling_units([episodes_sim[i] for i in keep] if episodes_sim is not None else None, len(keep))
        units_r = units_s
        light = light_paired(((fixed(i), _float(real[i])) for i in keep), units_s, rng)[0] if len(keep) >= 3 else []
    else:
        keep = list(range(len(sim)))
        units_s, units_r = resampling_units(episodes_sim, len(sim)), resampling_units(episodes_real, len(real))
        light = light_sets((fixed(i) for i in keep), (_float(r) for r in real), units_s, units_r, findings, rng)
    lit = {f.code: f for f in light}
    # blur and noise read at most MAX_FRAMES frames (fewer when large: TEXTURE_BYTES of linear light)
    h, w = sim[keep[0]].shape[:2] if keep else (1, 1)
    n_tex = int(max(4, min(MAX_FRAMES, TEXTURE_BYTES // max(1, 2 * 12 * h * w))))
    pick = sorted(rng.permutation(len(keep))[:n_tex].tolist())
    s_l = [light_linear(fixed(keep[j]), lit) for j in pick]
    if paired:
        r_l = [_float(real[keep[j]]) for j in pick]
        u_r = units_s[pick]
    else:
        pr = sorted(rng.permutation(len(real))[:n_tex].tolist())
        r_l = [ops.srgb_to_linear(_float(real[j])) for j in pr]
        u_r = units_r[pr]
    angle, left_m = _motion(findings)
    tex, left2, _info = texture_fit(s_l, r_l, units_s[pick], u_r, paired and len(s_l) >= 3, jpeg, rng, angle)
    left2 = left_m + left2
    factors = sorted(fixes + light + tex, key=lambda f: URGENCY.index(f.code))
    factors = [Factor(f.code, f.params, f.ci, f.method, f.code in BUGS) for f in factors]
    return CameraModel(tuple(factors), basis, len(keep) if paired else min(len(sim), len(real)),
                       tuple(left + left2), sim_name, real_name)
