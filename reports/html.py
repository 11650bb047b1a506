"""Render results.json (a dict) as one self-contained HTML document.

The report formats what the results hold; it never computes a statistic. All text goes
through Jinja2 autoescaping, since set, file, encoder and category names are user input.
Plots are inline PNG data URIs; there is no JavaScript and no network reference.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

from jinja2 import Environment
from markupsafe import Markup

from perception_gap.reports import attribution, evidence, page, plots, scatter
from perception_gap.reports.decisions import drift_rule, outcome, screen_verdict, screen_word
from perception_gap.reports.format import MISSING, ci, compact, depth_unit, metres, num, num_list, r2, signed
from perception_gap.reports.maps import maps_section
from perception_gap.reports.sets import pairs_line, set_rows
from perception_gap.reports.template import TEMPLATE
from perception_gap.wording import SEVERITIES, finite, gate_word, skip_groups

logger = logging.getLogger(__name__)

MAX_BYTES = 5 * 1024 * 1024
COCO_NAMES = ("AP", "AP50", "AP75", "APsmall", "APmedium", "APlarge", "AR1", "AR10", "AR100", "ARsmall", "ARmedium", "ARlarge")

# Caps per level: the first level is tried, tighter ones only if the document is too large.
_LEVELS = (
    dict(text=600, findings=100, evidence=40, encoders=60, skipped=200, categories=80, examples=10, sets=12, plots=True),
    dict(text=160, findings=30, evidence=15, encoders=20, skipped=50, categories=30, examples=5, sets=6, plots=True),
    dict(text=80, findings=10, evidence=8, encoders=10, skipped=20, categories=10, examples=3, sets=4, plots=False),
)


def _d(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _l(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else []


def _environment(text_limit: int) -> Environment:
    # the environment every report shares: its page shell, escaping and text cap
    return page.environment(text_limit)


def _sev(f: Mapping[str, Any]) -> str:
    s = f.get("severity")
    return s if s in SEVERITIES else "info"


def _finding(f: Mapping[str, Any], lim: Mapping[str, Any]) -> dict[str, Any]:
    top, rest, more = evidence.rows(_d(f.get("evidence")), lim["text"], lim["evidence"])
    return {"severity": f.get("severity", "info"), "sev_class": _sev(f), "code": f.get("code"),
            "title": f.get("title"), "action": f.get("action"), "reading": evidence.reading(_d(f.get("evidence"))),
            "borderline": bool(_d(f.get("evidence")).get("borderline")), "evidence": top, "evidence_rest": rest, "evidence_more": more,
            "see_maps": str(_d(f.get("evidence")).get("see") or "").startswith("maps")}


def _headline(findings: list, lim: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict box: the first finding that is not borderline. Where every bug and gap is borderline
    (fires in under 80% of resamples) none of them is the verdict: the box says so."""
    first = _finding(findings[0], lim)
    if not first["borderline"]:
        return first
    shaky = [f for f in findings if _d(f.get("evidence")).get("borderline")]
    return {"severity": "info", "sev_class": "info", "code": "borderline",
            "title": (f"Nothing stands firm: {len(shaky)} finding(s) are borderline (each fires in under 80% of "
                      f"resamples of the frames); the strongest: {first['code']}."),
            "action": "Index more frames or episodes (or matched pairs) and read the findings again before acting "
                      "on any of them.",
            "reading": "", "borderline": True, "evidence": [], "evidence_rest": [], "evidence_more": 0,
            "see_maps": False}


def _gap_ci(e: Mapping[str, Any]) -> str:
    """The distance's CI shifted by the noise floor (display arithmetic; the floor's own spread is not in it)."""
    c, floor = _d(e.get("centroid_distance_norm_ci")), e.get("noise_floor")
    if not (finite(c.get("low")) and finite(c.get("high"))):
        return ""
    f = floor if finite(floor) else 0.0
    return ci(c["low"] - f, c["high"] - f, c.get("level"))


def _with_ci(v: Mapping[str, Any], nd: int = 3) -> str:
    """A `{value, ci}` entry (Frechet distance, KID) as `value 95% [low, high]`."""
    c = _d(v.get("ci"))
    if not finite(v.get("value")):
        return MISSING
    return num(v["value"], nd) + (" " + ci(c.get("low"), c.get("high"), c.get("level"), nd) if c else "")


def _fid(f: Mapping[str, Any]) -> dict[str, Any] | None:
    """results.json's `fid` (FID and KID on the reference Inception's features) for the report."""
    if not f:
        return None
    sha = str(f.get("weights_sha256") or "")
    return {"fid": _with_ci(f), "kid": _with_ci(_d(f.get("kid")), 4), "n_sim": f.get("n_sim"), "n_real": f.get("n_real"),
            "sha": sha[:12], "reference": bool(f.get("reference_weights")), "insufficient": f.get("insufficient"),
            "implementation": f.get("implementation")}


def _drop(probe: Mapping[str, Any]) -> tuple[str, str]:
    """(transfer drop, its CI) as text. When sim->real is below the R² display floor the drop's
    digits mean as little as the R²'s: it reads as at least sim->sim minus the floor, no CI."""
    floor = probe.get("r2_display_floor") if finite(probe.get("r2_display_floor")) else -1.0
    ss, sr, drop = probe.get("sim_to_sim"), probe.get("sim_to_real"), probe.get("transfer_drop")
    if not finite(drop):
        return MISSING, ""
    if finite(ss) and ss < floor:
        return "not meaningful (sim\u2192sim below the floor)", ""
    if finite(sr) and sr < floor:
        return "more than " + signed(ss - floor), ""
    c = _d(probe.get("transfer_drop_ci"))
    return signed(drop), ci(c.get("low"), c.get("high"), c.get("level")) if c else ""


def _encoder(e: Mapping[str, Any]) -> dict[str, Any]:
    c = _d(e.get("centroid_distance_norm_ci"))
    pc, mmd, probe = _d(e.get("paired_cosine")), _d(e.get("mmd")), _d(e.get("probe"))
    floor_r2 = probe.get("r2_display_floor")
    drop, drop_ci = _drop(probe)
    pre = {k: v for k, v in _d(e.get("preprocessing")).items()}
    return {
        "rank": "reference" if e.get("reference") else e.get("rank"), "front": bool(e.get("pareto_front")),
        "name": e.get("name"), "basis": e.get("ranking_basis"), "probe_uninformative": e.get("probe_informative") is False,
        "family": e.get("family"), "dim": e.get("dim"),
        "cd": num(e.get("centroid_distance_norm")), "cd_ci": ci(c.get("low"), c.get("high"), c.get("level")),
        "floor": num(e.get("noise_floor")), "floor_method": e.get("noise_floor_method"),
        "gap": signed(e.get("gap_above_floor")), "gap_ci": _gap_ci(e), "auc": num(e.get("domain_auc")),
        "probe_warn": finite(probe.get("sim_to_real")) and probe["sim_to_real"] <= 0,
        "mmd": num(mmd.get("value"), 4), "mmd_p": "p=" + num(mmd.get("p_value")),
        "pc": num(pc.get("mean")), "pc_shuffled": num(pc.get("shuffled_mean")), "clip_band": pc.get("clip_band"),
        "p_ss": r2(probe.get("sim_to_sim"), floor_r2), "p_rr": r2(probe.get("real_to_real"), floor_r2),
        "p_sr": r2(probe.get("sim_to_real"), floor_r2),
        "drop": drop, "drop_ci": drop_ci,
        "fd": _with_ci(_d(e.get("frechet_distance"))), "kid": _with_ci(_d(e.get("kid")), 4),
        "insufficient": [(str(k), str(v)) for k, v in _d(e.get("insufficient")).items()],
        "fingerprint": e.get("fingerprint"), "n_sim": e.get("n_sim"), "n_real": e.get("n_real"),
        "n_skipped": len(_l(e.get("skipped"))), "preprocessing": compact(pre, 600) if pre else MISSING,
    }


def _families(encoders: list[dict[str, Any]], raw: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each row's number (its point's number in a numbered scatter) and family colour; then per family,
    in order of first appearance, its best row (the first in results order) and how many rows it has."""
    colours = scatter.family_colours(raw)
    out: dict[str, dict[str, Any]] = {}
    for n, e in enumerate(encoders, 1):
        fam = str(e.get("family") or "other")
        e.update(n=n, family_colour=colours.get(fam, "#666666"))
        if fam not in out:
            out[fam] = {"family": fam, "colour": e["family_colour"], "best": e["name"], "rank": e["rank"], "count": 0}
        out[fam]["count"] += 1
    return list(out.values())


def _stat_rows(stats: Mapping[str, Any], names: list[str]) -> list[tuple[str, list[str]]]:
    ss = [_d(stats.get(n)) for n in names]
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, fn) -> None:
        cells = [fn(s) for s in ss]
        if any(c != MISSING for c in cells):
            rows.append((label, cells))

    def mapping(v: Any) -> str:
        m = _d(v)
        return ", ".join(f"{k}: {x}" for k, x in list(m.items())[:5]) if m else MISSING

    row("frames / images / depth", lambda s: f"{num(s.get('n_frames'))} / {num(s.get('n_images'))} / {num(s.get('n_depth'))}"
        if s else MISSING)
    row("sizes (WxH: frames)", lambda s: mapping(s.get("sizes")))
    row("dtypes", lambda s: mapping(s.get("dtypes")))
    row("modes", lambda s: mapping(s.get("modes")))
    row("channels", lambda s: num(s.get("channels")))
    row("channel mean", lambda s: num_list(s.get("channel_mean")) if s.get("channel_mean") else MISSING)
    row("channel std", lambda s: num_list(s.get("channel_std")) if s.get("channel_std") else MISSING)
    row("channel min", lambda s: num_list(s.get("channel_min")) if s.get("channel_min") else MISSING)
    row("channel max", lambda s: num_list(s.get("channel_max")) if s.get("channel_max") else MISSING)
    row("luma mean", lambda s: num(s.get("lum_mean"), 2))
    row("luma percentiles", lambda s: ", ".join(f"{k} {num(v, 1)}" for k, v in _d(s.get("lum_percentiles")).items())
        or MISSING)
    row("linear mean (RGB)", lambda s: num_list(s.get("lin_mean"), 4) if s.get("lin_mean") else MISSING)
    for k in ("sharpness", "hf_ratio", "grad_ratio", "dup_frac", "blockiness", "jpeg_fraction", "nonfinite_frac"):
        row(k.replace("_", " "), lambda s, k=k: num(s.get(k), 4))
    row("depth dtypes / units", lambda s: (mapping(_d(s.get("depth")).get("dtypes")) + "; "
                                           + mapping(_d(s.get("depth")).get("inferred_units"))) if s.get("depth") else MISSING)
    row("depth percentiles (m)", _depth_percentiles)
    row("depth dropout mean / max", lambda s: f"{num(_d(s.get('depth')).get('dropout_mean'))} / "
                                              f"{num(_d(s.get('depth')).get('dropout_max'))}" if s.get("depth") else MISSING)
    for vec in ("action", "proprio"):
        row(f"{vec} (n, dim)", lambda s, v=vec: f"{num(_d(s.get(v)).get('n'))}, {num(_d(s.get(v)).get('dim'))}"
            if s.get(v) else MISSING)
        row(f"{vec} min", lambda s, v=vec: num_list(_l(_d(s.get(v)).get("min"))[:12], 3) if s.get(v) else MISSING)
        row(f"{vec} max", lambda s, v=vec: num_list(_l(_d(s.get(v)).get("max"))[:12], 3) if s.get(v) else MISSING)
    return rows


def _depth_percentiles(s: Mapping[str, Any]) -> str:
    """Depth percentiles in metres after unit resolution, the native unit named beside them."""
    d = _d(s.get("depth"))
    pcts = _d(d.get("percentiles"))
    if not pcts:
        return MISSING
    per_m, unit = depth_unit(d)
    if per_m is None:
        return ", ".join(f"{k} {num(v)}" for k, v in pcts.items()) + " (native, unit unknown)"
    return ", ".join(f"{k} {metres(v, per_m)}" for k, v in pcts.items()) + f" (native unit {unit})"


def _stats_plots(stats: Mapping[str, Any], names: list[str], colours: dict[str, str]) -> list[Markup]:
    out = []
    dom = {n: _d(stats.get(n)).get("domain") for n in names}
    means = {n: _l(_d(stats.get(n)).get("channel_mean")) for n in names}
    nch = max((len(v) for v in means.values()), default=0)
    labels = ["R", "G", "B"] if nch == 3 else [f"c{i}" for i in range(nch)]
    p = plots.grouped_bars("Per-channel mean (median over frames)", labels, means, "mean value (native pixel units)",
                           dom, colours)
    if p:
        out.append(p)
    lums = {n: _d(_d(stats.get(n)).get("lum_percentiles")) for n in names}
    keys = list(next((v for v in lums.values() if v), {}).keys())
    p = plots.grouped_bars("Luma percentiles", keys, {n: [v.get(k) for k in keys] for n, v in lums.items()},
                           "luma (native pixel units)", dom, colours)
    if p:
        out.append(p)
    p = plots.channel_histograms({n: _d(_d(stats.get(n)).get("channel_hist")) for n in names}, dom, colours)
    if p:
        out.append(p)
    p = plots.depth_histograms({n: _d(_d(stats.get(n)).get("depth")) for n in names}, dom, colours)
    if p:
        out.append(p)
    return out


def _detection(det: Mapping[str, Any], lim: Mapping[str, Any]) -> dict[str, Any]:
    n_ex = lim["examples"]
    summary, cols, per_class_src = [], [], []
    for set_name, by_source in _d(det.get("sets")).items():
        for source, s in _d(by_source).items():
            s = _d(s)
            summary.append({"set": set_name, "source": source, "cells": [num(s.get(k)) for k in COCO_NAMES],
                            "n_images": s.get("n_images"), "n_gt": s.get("n_gt"), "n_dets": s.get("n_dets")})
            cols.append(f"{set_name} / {source}")
            per_class_src.append(_d(s.get("per_class_ap")))
    cats = sorted({c for pc in per_class_src for c in pc}, key=str)
    per_class = [(c, [num(pc.get(c)) if c in pc else MISSING for pc in per_class_src]) for c in cats[: lim["categories"]]]
    diffs = [{"source": src, "ap_sim": num(_d(d).get("ap_sim")), "ap_real": num(_d(d).get("ap_real")),
              "estimate": signed(_d(d).get("estimate")),
              "ci": ci(_d(d).get("low"), _d(d).get("high"), _d(d).get("level")),
              "n_pairs": _d(d).get("n_pairs"), "method": _d(d).get("method")}
             for src, d in _d(det.get("differences")).items()]
    flips = []
    for src, f in _d(det.get("flips")).items():
        f = _d(f)
        flips.append({"source": src,
                      "cells": [num(f.get(k)) for k in ("n_pairs", "n_objects", "found_both", "sim_only", "real_only",
                                                         "missed_both", "recall_sim", "recall_real")],
                      "examples": [{"kind": x.get("kind"), "category": x.get("category"), "sim_key": x.get("sim_key"),
                                    "real_key": x.get("real_key"), "bbox_sim": num_list(x.get("bbox_sim"), 1),
                                    "bbox_real": num_list(x.get("bbox_real"), 1)}
                                   for x in map(_d, _l(f.get("examples"))[:n_ex])]})
    latching = []
    for set_name, by_source in _d(det.get("latching")).items():
        for src, lr in _d(by_source).items():
            lr = _d(lr)
            latching.append({"set": set_name, "source": src,
                             "cells": [num(lr.get(k)) for k in ("n_detections", "n_true_positive", "n_false_positive",
                                                                 "latching", "wrong_class", "duplicate",
                                                                 "localization", "background")],
                             "examples": [{"key": x.get("key"), "kind": x.get("kind"), "category": x.get("category"),
                                           "score": num(x.get("score")), "gt_category": x.get("gt_category"),
                                           "iou": num(x.get("iou"))}
                                          for x in map(_d, _l(lr.get("examples"))[:n_ex])]})
    return {"summary": summary, "per_class_cols": cols, "per_class": per_class,
            "per_class_more": max(0, len(cats) - lim["categories"]), "differences": diffs, "flips": flips,
            "latching": latching}


def _thumbs(results: Mapping[str, Any], max_thumbs: int) -> list[dict[str, Any]]:
    """Thumbnails of the image files listed under results["thumbnails"] (path, caption), if any."""
    out = []
    for t in _l(results.get("thumbnails")):
        if len(out) >= max_thumbs:
            break
        t = _d(t) if isinstance(t, Mapping) else {"path": t}
        path = t.get("path")
        src = plots.thumbnail(str(path)) if isinstance(path, (str, os.PathLike)) else None
        if src is not None:
            out.append({"src": src, "caption": t.get("caption") or Path(str(path)).name})
    return out


def _worst_pairs(results: Mapping[str, Any], max_pairs: int) -> dict[str, Any] | None:
    """The best-ranked encoder's farthest pairs (listed in results) as sim | real | difference."""
    encs = sorted((_d(e) for e in _l(results.get("encoders"))),
                  key=lambda e: (e.get("rank") is None, e.get("rank") or 0))
    enc = next((e for e in encs if _l(e.get("worst_pairs"))), None)
    if enc is None or max_pairs <= 0:
        return None
    rows = []
    for w in _l(enc.get("worst_pairs"))[:max_pairs]:
        w = _d(w)
        strip = plots.pair_strip(str(w.get("sim_path")), str(w.get("real_path")))
        if strip is not None:
            rows.append({"sim": strip[0], "real": strip[1], "diff": strip[2], "gain": f"{strip[3]:g}",
                         "key": w.get("pair_key"), "distance": num(w.get("cosine_distance"))})
    return {"encoder": enc.get("name"), "rows": rows} if rows else None


def _screen(scr: Mapping[str, Any], lim: Mapping[str, Any], colours: dict[str, str]) -> dict[str, Any] | None:
    views = [str(v) for v in _l(scr.get("views"))][: lim["encoders"]]
    ranking = []
    for r in _l(scr.get("ranking"))[: lim["sets"] * 4]:
        r = _d(r)
        c, pv = _d(r.get("ci")), _d(r.get("per_view"))
        ranking.append({"rank": r.get("rank"), "set": r.get("set"), "distance": num(r.get("distance")),
                        "ci": ci(c.get("low"), c.get("high"), c.get("level")),
                        "per_view": [num(_d(pv.get(v)).get("distance")) for v in views]})
    pairwise = []
    for p in _l(scr.get("pairwise"))[: lim["findings"]]:
        p = _d(p)
        c, pv = _d(p.get("ci")), _d(p.get("per_view"))
        pairwise.append({"closer": p.get("closer"), "farther": p.get("farther"), "difference": signed(p.get("difference")),
                         "ci": ci(c.get("low"), c.get("high"), c.get("level")),
                         "significant": "yes" if p.get("significant") else "no",
                         "per_view": [signed(_d(pv.get(v)).get("difference")) + ("*" if _d(pv.get(v)).get("significant") else "")
                                      for v in views]})
    plot = plots.screen_distances(_l(scr.get("ranking")), views, colours) if lim["plots"] else None
    return {"closest": scr.get("closest"), "views": views, "ranking": ranking, "pairwise": pairwise,
            "ci_level": (f"{100 * scr['ci_level']:g}%" if isinstance(scr.get("ci_level"), (int, float)) else MISSING),
            "units": _units(scr), "baseline": scr.get("baseline"),
            "word": screen_word(scr), "reason": _d(scr.get("gate")).get("reason"), "worse": ", ".join(str(w) for w in _l(scr.get("worse_than_baseline"))),
            "skipped_views": [(str(k), str(v)) for k, v in _d(scr.get("skipped_views")).items()], "plot": plot}


def _units(scr: Mapping[str, Any]) -> str:
    """What the screen's bootstrap resampled, counted: `15 episodes (125 paired scenes in them)`."""
    kinds = _d(scr.get("resampling_units"))
    what = ", ".join(f"{num(n)} {k}" for k, n in kinds.items()) if kinds else f"{num(scr.get('n_scenes'))} clusters"
    pairs = scr.get("n_pairs")
    return what + (f" ({num(pairs)} paired scenes in them)" if isinstance(pairs, int) else "")


def _drift(dr: Mapping[str, Any], lim: Mapping[str, Any]) -> dict[str, Any]:
    gates = []
    for g in _l(dr.get("gates"))[: lim["findings"]]:
        g = _d(g)
        c = _d(g.get("ci"))
        gates.append({"name": g.get("name"), "value": num(g.get("value")),
                      "ci": ci(c.get("low"), c.get("high"), c.get("level")) if c else "",
                      "threshold": num(g.get("threshold")), "word": outcome(g), "rule": drift_rule(g),
                      "description": g.get("description")})
    history = []
    for h in _l(dr.get("history"))[-lim["skipped"]:]:
        h = _d(h)
        history.append({"run_id": h.get("run_id"), "started_at": h.get("started_at"), "current": h.get("current"),
                        "result": gate_word(bool(h.get("passed"))),
                        "failed": ", ".join(str(x) for x in _l(h.get("failed"))) or MISSING})
    plot = plots.drift_trend(_l(dr.get("history"))) if lim["plots"] and len(_l(dr.get("history"))) > 1 else None
    return {"baseline": dr.get("baseline"), "current": dr.get("current"), "word": gate_word(bool(dr.get("passed"))),
            "gates": gates, "history": history, "plot": plot}


def _set_colours(results: Mapping[str, Any], sim: Any, real: Any, stat_names: list[str]) -> dict[str, str]:
    """One colour per set for every plot of the report: the reference set (real; the drift baseline)
    first, then the compared ones (sim; the drift's current set; each screened rendering)."""
    dr, scr = _d(results.get("drift")), _d(results.get("screen"))
    order = [dr.get("baseline"), dr.get("current"), real, sim]
    order += [_d(r).get("set") for r in _l(scr.get("ranking"))] + list(stat_names)
    return plots.set_colours([n for n in order if n is not None])


def _skip_rows(sets: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per set and skip reason (perception_gap.wording.skip_groups): its frame count and
    the first few files, so 1,000 frames skipped for one reason take one row, not 1,000."""
    rows = []
    for name, rec in sets.items():
        for g in skip_groups(_d(s) for s in _l(_d(rec).get("skipped"))):
            names = ", ".join(g["examples"]) + (", \u2026" if g["count"] > len(g["examples"]) else "")
            rows.append({"set": name, "n": g["count"], "count": f"{g['count']:,}", "reason": g["reason"], "examples": names,
                         "folder": g["folder"]})
    return rows


def _context(results: Mapping[str, Any], max_thumbs: int, lim: Mapping[str, Any]) -> dict[str, Any]:
    findings = [_d(f) for f in _l(results.get("findings"))]
    cfg = _d(results.get("config"))
    sets = _d(results.get("sets"))
    stats = _d(results.get("stats"))
    raw_enc = [_d(e) for e in _l(results.get("encoders"))]
    encoders = [_encoder(e) for e in raw_enc[: lim["encoders"]]]
    families = _families(encoders, raw_enc)
    stat_names = [n for n in stats if isinstance(stats.get(n), Mapping)][: lim["sets"]]
    skipped_all = _skip_rows(sets)
    sim = cfg.get("sim") or next((n for n, r in sets.items() if _d(r).get("domain") == "sim"), None)
    real = cfg.get("real") or next((n for n, r in sets.items() if _d(r).get("domain") == "real"), None)
    colours = _set_colours(results, sim, real, stat_names)
    plot_enc = None
    if lim["plots"] and raw_enc:
        has_probe = any(_d(e.get("probe")).get("sim_to_real") is not None for e in raw_enc)
        plot_enc = scatter.gap_vs_probe(raw_enc) if has_probe else None
        plot_enc = plot_enc or plots.gap_bars(raw_enc)
    extra_plots = []
    if lim["plots"] and raw_enc:
        encs = [_d(e) for e in raw_enc]
        extra_plots = [p for p in (plots.pca_scatter(encs, (str(sim), str(real)), colours), plots.cosine_histograms(encs))
                       if p is not None]
    det = results.get("detection")
    kind = cfg.get("kind") or ("screen" if "screen" in results else "drift" if "drift" in results else "run")
    scr, dr = results.get("screen"), results.get("drift")
    return {
        "kind": kind, "screen": _screen(scr, lim, colours) if isinstance(scr, Mapping) else None,
        "drift": _drift(dr, lim) if isinstance(dr, Mapping) else None,
        "sim": sim, "real": real, "version": results.get("version"), "run_id": results.get("run_id"),
        "verdict": (screen_verdict(scr) if kind == "screen" and isinstance(scr, Mapping)
                    else _headline(findings, lim) if findings else None),
        "findings": [_finding(f, lim) for f in findings[: lim["findings"]]], "n_findings": len(findings),
        "findings_more": max(0, len(findings) - lim["findings"]),
        "maps": maps_section(results.get("maps"), {"sim": sim, "real": real},
                             {"sim": colours.get(str(sim)), "real": colours.get(str(real))}) if lim["plots"] else None,
        "encoders": encoders, "encoders_more": max(0, len(raw_enc) - lim["encoders"]), "plot_encoders": plot_enc,
        "families": families, "numbered": len(raw_enc) > scatter.NAMED_MAX,
        "fid": _fid(_d(results.get("fid"))),
        "attribution": attribution.section(results, max_encoders=lim["encoders"], max_pairs=max_thumbs, plots=lim["plots"]),
        "extra_plots": extra_plots,
        "stats_sets": [{"name": n, "domain": _d(stats[n]).get("domain")} for n in stat_names],
        "stats_rows": _stat_rows(stats, stat_names) if stat_names else [],
        "stats_plots": _stats_plots(stats, stat_names, colours) if stat_names and lim["plots"] else [],
        "detection": _detection(det, lim) if isinstance(det, Mapping) else None, "coco_names": COCO_NAMES,
        "thumbs": _thumbs(results, max_thumbs) if lim["plots"] else [],
        "worst": _worst_pairs(results, max_thumbs) if lim["plots"] else None,
        "sets": set_rows(sets, max(lim["sets"], 2)), "pairs": pairs_line(results.get("pairs")),
        "skipped": skipped_all[: lim["skipped"]], "n_skipped_total": f"{sum(g['n'] for g in skipped_all):,}",
        "skipped_more": f"{sum(g['n'] for g in skipped_all[lim['skipped']:]):,}",
        "skipped_more_groups": max(0, len(skipped_all) - lim["skipped"]),
        "config": [(str(k), compact(v, 400)) for k, v in list(cfg.items())[:40]],
    }


def render_report(results: Mapping[str, Any], *, max_thumbs: int = 12) -> str:
    """Render results.json as one self-contained HTML document (< 5 MB, no network, no script).

    Args:
        results: the `results.json` structure (as written by `run`); missing parts are skipped.
        max_thumbs: most thumbnails embedded, from image files listed in `results["thumbnails"]`.

    Returns:
        The HTML document as text.
    """
    html = ""
    for lim in _LEVELS:
        env = _environment(lim["text"])
        html = env.from_string(TEMPLATE).render(**_context(results, max_thumbs if lim["plots"] else 0, lim))
        if len(html.encode("utf-8")) < MAX_BYTES:
            return html
        logger.info("report over %d bytes at caps %s; tightening", MAX_BYTES, lim)
    return html


def write_report(results: Mapping[str, Any], path: str | os.PathLike[str], *, max_thumbs: int = 12) -> Path:
    """Render the report and write it atomically (temp file in the same folder, then replace).

    Returns:
        The path written.
    """
    path = Path(path)
    html = render_report(results, max_thumbs=max_thumbs)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(html)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a report is meant to be shared
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
