"""Perception findings: what the embedding comparison says, after the plumbing is settled.

Reads encoder entries (the `encoders` part of results.json) and the raw-statistics findings;
never computes a statistic itself. Causes contaminate each other in one direction: a plumbing
bug moves every embedding, so while one is open the perception findings say so and only
rank; an appearance gap named by the raw statistics is the first suspect when every encoder
keeps sim and real apart.
"""

from __future__ import annotations

from typing import Any

from perception_gap.findings import Finding
from perception_gap.ranking import CLIP_INTERVENE, CLIP_STABLE, CLIP_WIDEN, clip_band

# An encoder "keeps sim and real apart" when its distance is this many times its noise floor.
FAR_FACTOR = 2.0
# A closer encoder must not lose more probe R^2 than this to be recommended.
PROBE_SLACK = 0.1

# Which visual factor a raw-statistics finding points to, and the randomization it calls for (RGB
# factors only: every encoder reads the colour frame, so no depth, proprioception or action
# finding can explain its gap).
_FACTOR_ACTIONS = {
    "brightness": "light intensity / exposure",
    "white_balance": "colour temperature / white-balance gains",
    "resize_filter": "blur and resize-filter",
    "sharpness": "camera blur",
    "sensor_noise": "sensor noise",
    "compression": "JPEG compression",
    "vignetting": "lens vignetting",
}
# The camera factors together must close at least this share of an encoder's gap above its floor
# (the lower end of the interval) for the `camera_model` finding.
CAMERA_MODEL_SHARE = 0.2
# A factor is named in an action when its cumulative step closes at least this share.
NAMED_STEP = 0.05


def _far(e: dict[str, Any]) -> bool | None:
    """True when the encoder's sim-real distance is well above its real-real floor."""
    cd, fl = e.get("centroid_distance_norm"), e.get("noise_floor")
    lo = (e.get("centroid_distance_norm_ci") or {}).get("low")
    if cd is None or fl is None:
        return None
    return (lo if lo is not None else cd) > FAR_FACTOR * fl


def perception_findings(encoders: list[dict[str, Any]], stats_findings: list[Finding]) -> list[Finding]:
    """Findings from the encoder entries (ranked, with CIs, floors and probes)."""
    out: list[Finding] = []
    usable = [e for e in encoders if e.get("centroid_distance_norm") is not None]
    bugs = [f for f in stats_findings if f.severity == "bug"]
    if not usable:
        return out
    if bugs:
        codes = ", ".join(sorted({f.code for f in bugs}))
        out.append(Finding(
            code="perception_after_plumbing", severity="info",
            title=f"Embedding distances are measured through open plumbing bugs ({codes}); read them only as a ranking.",
            evidence={"bugs": sorted({f.code for f in bugs})},
            action="Fix the plumbing bugs first, re-index, and rerun; the encoder comparison will change.",
            score=0.0))
    # 1. one encoder clearly closer (CI apart from every other) while keeping its probe
    candidates = [e for e in usable if e.get("family") != "pixel"]  # the pixel baseline is a reference
    if len(candidates) >= 2:
        best_probe = max((e["probe"]["sim_to_real"] for e in candidates if (e.get("probe") or {}).get("sim_to_real") is not None), default=None)
        by_gap = sorted(candidates, key=lambda e: e["centroid_distance_norm"])
        top = by_gap[0]
        top_ci = top.get("centroid_distance_norm_ci") or {}
        others_low = [(o.get("centroid_distance_norm_ci") or {}).get("low") for o in by_gap[1:]]
        apart = top_ci.get("high") is not None and all(lo is not None and top_ci["high"] < lo for lo in others_low)
        tp = (top.get("probe") or {}).get("sim_to_real")
        keeps = best_probe is None or (tp is not None and tp >= best_probe - PROBE_SLACK)
        if apart and keeps:
            runner = by_gap[1]
            verified = tp is not None
            out.append(Finding(
                code="encoder_choice", severity="gap" if verified else "info",
                title=(f"{top['name']} keeps sim and real closest: normalized centroid distance "
                       f"{top['centroid_distance_norm']:.3f} (95% CI {top_ci['low']:.3f}-{top_ci['high']:.3f}) vs "
                       f"{runner['centroid_distance_norm']:.3f} for {runner['name']}, CIs apart"),
                evidence={"encoder": top["name"], "distance": top["centroid_distance_norm"], "ci": top_ci,
                          "runner_up": runner["name"], "runner_up_distance": runner["centroid_distance_norm"],
                          "probe_sim_to_real": tp, "best_probe_sim_to_real": best_probe},
                action=(f"Swap to encoder {top['name']}: it hides more of the gap while keeping what the probe predicts."
                        if verified else
                        f"Consider encoder {top['name']}, but index actions or proprioception first: without a probe "
                        "nothing shows it keeps what the policy needs (an encoder can look close by discarding everything)."),
                score=float(runner["centroid_distance_norm"] - top["centroid_distance_norm"])))
    # 2. every encoder keeps sim and real apart: the gap lives in the images
    fars = [_far(e) for e in usable]
    if all(f is True for f in fars):
        factors = [f for f in stats_findings if f.code in _FACTOR_ACTIONS and f.severity == "gap"]
        worst = min(usable, key=lambda e: e["centroid_distance_norm"])
        ev = {"encoders": {e["name"]: {"distance": e["centroid_distance_norm"], "noise_floor": e["noise_floor"]} for e in usable},
              "factors": [f.code for f in factors]}
        attr = _attribution_of(worst, usable)
        if attr is not None:
            ev["attribution"] = {"encoder": attr[0], "all": attr[1]["all"], "residual": attr[1]["residual"]}
            action = _attribution_action(*attr)
        elif factors:
            named = "; ".join(f"{f.code} ({f.title.rstrip('.')})" for f in factors)
            action = "Randomize " + ", ".join(_FACTOR_ACTIONS[f.code] for f in factors) + \
                     " in the simulator by at least the measured offsets: " + named + "."
        else:
            action = ("No raw statistic explains it: compare the worst pairs side by side (textures, materials, "
                      "object geometry, camera pose) before widening randomization.")
        out.append(Finding(
            code="appearance_gap", severity="gap",
            title=(f"Every encoder keeps sim and real apart: even {worst['name']} is at "
                   f"{worst['centroid_distance_norm']:.3f}, over {FAR_FACTOR:g}x its real-vs-real noise floor "
                   f"({worst['noise_floor']:.3f}); the gap lives in the images"),
            evidence=ev, action=action,
            score=float(min(e["centroid_distance_norm"] / max(e["noise_floor"], 1e-9) for e in usable))))
    cam = camera_model_finding(usable)
    if cam is not None:
        out.append(cam)
    # 3. CLIP thresholds, CLIP-family encoders only
    for e in usable:
        pc = e.get("paired_cosine") or {}
        if e.get("family") != "clip" or pc.get("mean") is None:
            continue
        band = clip_band(pc["mean"])
        if band in ("intervene", "widen_randomization"):
            out.append(Finding(
                code="clip_cosine", severity="gap",
                title=f"{e['name']}: mean paired cosine distance {pc['mean']:.3f} is above the CLIP {'randomization' if band == 'widen_randomization' else 'intervention'} threshold ({CLIP_WIDEN if band == 'widen_randomization' else CLIP_INTERVENE:.2f})",
                evidence={"encoder": e["name"], "paired_cosine_mean": pc["mean"], "band": band,
                          "thresholds": {"stable": CLIP_STABLE, "intervene": CLIP_INTERVENE, "widen": CLIP_WIDEN}},
                action=("Widen domain randomization (lighting, textures, camera) before training on these frames."
                        if band == "widen_randomization" else "Intervene on the largest appearance factor before training."),
                score=float(pc["mean"])))
    return out


def _attribution_of(first: dict[str, Any], usable: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """(encoder name, attribution) with a clear gap, `first` preferred, then the ranking's order."""
    for e in [first] + [u for u in usable if u is not first]:
        a = e.get("attribution") or {}
        if a.get("clear_gap") and a.get("factors"):
            return e["name"], a
    return None


def _pct(v: float) -> str:
    return f"{100 * v:.0f}%"


def _named_steps(a: dict[str, Any]) -> list[str]:
    from perception_gap.camera.model import Factor, describe

    steps = sorted(a["factors"], key=lambda f: -f["step"])
    return [f"{describe(Factor(f['code'], f['params']))} closes {_pct(f['step'])} "
            f"[{_pct(f['step_ci'][0])}, {_pct(f['step_ci'][1])}]" for f in steps if f["step"] >= NAMED_STEP]


def _attribution_action(name: str, a: dict[str, Any]) -> str:
    named = _named_steps(a)
    al, res = a["all"], a["residual"]
    head = ("Model the real camera in the sim (camera_model.json, `apply_camera_model`): " + "; ".join(named)
            if named else "No single camera factor closes a clear share")
    tail = (f"; together the camera factors close {_pct(al['share'])} [{_pct(al['ci'][0])}, {_pct(al['ci'][1])}] of "
            f"{name}'s gap above its floor")
    rest = (f". {_pct(res['share'])} remains: content, materials or lighting: compare the worst pairs and the gap "
            "maps before widening randomization." if res["share"] >= CAMERA_MODEL_SHARE else ".")
    return head + tail + rest


def camera_model_finding(usable: list[dict[str, Any]]) -> Finding | None:
    """`camera_model`: the fitted camera factors together close a clear share of an encoder's gap."""
    found = [e for e in usable if (e.get("attribution") or {}).get("clear_gap") and e["attribution"].get("factors")
             and e["attribution"]["all"]["ci"][0] >= CAMERA_MODEL_SHARE]
    if not found:
        return None
    clear = [(e["name"], e["attribution"]) for e in found]
    first = next((e for e in found if e.get("family") != "pixel"), found[0])  # the pixel reference only alone
    name, a = first["name"], first["attribution"]
    codes = [f["code"] for f in a["factors"]]
    al = a["all"]
    return Finding(
        code="camera_model", severity="gap",
        title=(f"Model the real camera in the sim: these {len(codes)} factors close {_pct(al['share'])} "
               f"[{_pct(al['ci'][0])}, {_pct(al['ci'][1])}] of {name}'s gap above its floor ({', '.join(codes)})"),
        evidence={"encoders": {n: {"all": x["all"], "residual": x["residual"],
                                   "steps": {f["code"]: f["step"] for f in x["factors"]}} for n, x in clear},
                  "factors": codes, "file": "camera_model.json", "n_pairs": a.get("n_pairs"), "basis": a.get("basis")},
        action=(_attribution_action(name, a) + " Put the factors of camera_model.json into the renderer's output "
                "or the training augmentation (`perception_gap.apply_camera_model`) and rerun."),
        score=float(al["share"]))


def with_residual(findings: list[Finding], encoders: list[dict[str, Any]]) -> list[Finding]:
    """`unexplained_gap` stating the share of the gap the camera factors leave (when measured)."""
    attr = next(((e["name"], e["attribution"]) for e in encoders
                 if (e.get("attribution") or {}).get("clear_gap") and e["attribution"].get("residual")), None)
    if attr is None:
        return findings
    name, a = attr
    out = []
    for f in findings:
        if f.code == "unexplained_gap":
            r = a["residual"]
            f = Finding(f.code, f.severity,
                        f"{f.title.rstrip('.')}; the measured camera factors leave {_pct(r['share'])} "
                        f"[{_pct(r['ci'][0])}, {_pct(r['ci'][1])}] of {name}'s gap above its floor.",
                        {**f.evidence, "residual_share": r["share"], "residual_ci": r["ci"], "residual_encoder": name},
                        f.action, f.score)
        out.append(f)
    return out


_INSUFFICIENT_ACTIONS = {
    "probe": "Index actions or proprioception with the frames (a manifest's `action`/`proprio` columns) to run the probes.",
    "paired cosine": "Give matching sim and real frames the same pair key (file stem, --pair-regex or a manifest's `pair_key`).",
}


def insufficient_findings(encoders: list[dict[str, Any]]) -> list[Finding]:
    """One `info` finding per (metric, reason) that could not be computed, naming the encoders."""
    groups: dict[tuple[str, str], list[str]] = {}
    for e in encoders:
        for metric, reason in (e.get("insufficient") or {}).items():
            groups.setdefault((metric, reason), []).append(e["name"])
    out = []
    for (metric, reason), names in sorted(groups.items()):
        who = "every encoder" if len(names) == len(encoders) and len(names) > 1 else ", ".join(names)
        out.append(Finding(code="insufficient_data", severity="info",
                           title=f"{metric} not computed ({who}): {reason}",
                           evidence={"metric": metric, "reason": reason, "encoders": names},
                           action=_INSUFFICIENT_ACTIONS.get(metric, "Index more frames, pairs or episodes for this metric."),
                           score=0.0))
    return out
