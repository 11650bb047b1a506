"""Render results.json (a `Results`, or its plain dict) as one self-contained HTML document.

The report formats what the results hold; it never computes a statistic. It reads the typed
sections of perception_gap.schema (`reports.reading` reads a plain dict into them, partial and
older files included); below a section, free-form objects (evidence, a gate's detail, detection
summaries) are read by key. All text goes
through Jinja2 autoescaping, since set, file, encoder and category names are user input.
Plots are inline PNG data URIs; there is no JavaScript and no network reference.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from markupsafe import Markup

from perception_gap.reports import attribution, evidence, page, plots, reading, scatter
from perception_gap.reports.decisions import drift_rule, outcome, screen_verdict, screen_word
from perception_gap.reports.detection import COCO_NAMES, detection_tables
from perception_gap.reports.format import MISSING, ci, compact, depth_unit, metres, num, num_list, r2, signed
from perception_gap.reports.maps import maps_section
from perception_gap.reports.reading import blank, entries, given, section
from perception_gap.reports.sets import pairs_line, set_rows
from perception_gap.reports.template import TEMPLATE
from perception_gap.schema import (
    BootstrapCI,
    Config,
    Drift,
    EncoderEntry,
    Fid,
    FindingEntry,
    FrechetEntry,
    GateEntry,
    Interval,
    KIDEntry,
    MMDEntry,
    PairedCosineEntry,
    ProbeEntry,
    Results,
    Screen,
    ScreenRank,
    SetInfo,
    SetStats,
)
from perception_gap.wording import SEVERITIES, finite, gate_word, skip_groups

logger = logging.getLogger(__name__)

MAX_BYTES = 5 * 1024 * 1024

# Caps per level: the first level is tried, tighter ones only if the document is too large.
_LEVELS = (
    dict(text=600, findings=100, evidence=40, encoders=60, skipped=200, categories=80, examples=10, sets=12, plots=True),
    dict(text=160, findings=30, evidence=15, encoders=20, skipped=50, categories=30, examples=5, sets=6, plots=True),
    dict(text=80, findings=10, evidence=8, encoders=10, skipped=20, categories=10, examples=3, sets=4, plots=False),
)


def _d(v: Any) -> Mapping[str, Any]:
    # a free-form object of results (evidence, a gate's detail, a per-view cell, a listed pair): itself,
    # or empty when it is another kind
    return v if isinstance(v, Mapping) else {}


def _sev(f: FindingEntry) -> str:
    return f.severity if f.severity in SEVERITIES else "info"


def _finding(f: FindingEntry, lim: Mapping[str, Any]) -> dict[str, Any]:
    ev = _d(f.evidence)
    top, rest, more = evidence.rows(ev, lim["text"], lim["evidence"])
    return {"severity": "info" if f.severity is None else f.severity, "sev_class": _sev(f), "code": f.code,
            "title": f.title, "action": f.action, "reading": evidence.reading(ev),
            "borderline": bool(ev.get("borderline")), "evidence": top, "evidence_rest": rest, "evidence_more": more,
            "see_maps": str(ev.get("see") or "").startswith("maps")}


def _headline(findings: list[FindingEntry], lim: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict box: the first finding that is not borderline. Where every bug and gap is borderline
    (fires in under 80% of resamples) none of them is the verdict: the box says so."""
    first = _finding(findings[0], lim)
    if not first["borderline"]:
        return first
    shaky = [f for f in findings if _d(f.evidence).get("borderline")]
    return {"severity": "info", "sev_class": "info", "code": "borderline",
            "title": (f"Nothing stands firm: {len(shaky)} finding(s) are borderline (each fires in under 80% of "
                      f"resamples of the frames); the strongest: {first['code']}."),
            "action": "Index more frames or episodes (or matched pairs) and read the findings again before acting "
                      "on any of them.",
            "reading": "", "borderline": True, "evidence": [], "evidence_rest": [], "evidence_more": 0,
            "see_maps": False}


def _gap_ci(e: EncoderEntry) -> str:
    """The distance's CI shifted by the noise floor (display arithmetic; the floor's own spread is not in it)."""
    c, floor = e.centroid_distance_norm_ci, e.noise_floor
    if c is None or not (finite(c.low) and finite(c.high)):
        return ""
    f = floor if finite(floor) else 0.0
    return ci(c.low - f, c.high - f, c.level)


def _with_ci(value: Any, c: BootstrapCI | Interval | None, nd: int = 3) -> str:
    """A value and its interval (Frechet distance, KID, FID) as `value 95% [low, high]`."""
    if not finite(value):
        return MISSING
    return num(value, nd) + (" " + ci(c.low, c.high, c.level, nd) if given(c) and c is not None else "")


def _fid(f: Fid | None) -> dict[str, Any] | None:
    """results.json's `fid` (FID and KID on the reference Inception's features) for the report."""
    if f is None or not given(f):
        return None
    sha = str(f.weights_sha256 or "")
    kid = section(KIDEntry, f.kid) or blank(KIDEntry)
    return {"fid": _with_ci(f.value, f.ci), "kid": _with_ci(kid.value, kid.ci, 4), "n_sim": f.n_sim,
            "n_real": f.n_real, "sha": sha[:12], "reference": bool(f.reference_weights),
            "insufficient": f.insufficient, "implementation": f.implementation}


def _drop(probe: ProbeEntry) -> tuple[str, str]:
    """(transfer drop, its CI) as text. When sim->real is below the R² display floor the drop's
    digits mean as little as the R²'s: it reads as at least sim->sim minus the floor, no CI."""
    floor = probe.r2_display_floor if finite(probe.r2_display_floor) else -1.0
    ss, sr, drop = probe.sim_to_sim, probe.sim_to_real, probe.transfer_drop
    if not finite(drop):
        return MISSING, ""
    if finite(ss) and ss < floor:
        return "not meaningful (sim\u2192sim below the floor)", ""
    if finite(sr) and sr < floor:
        return "more than " + signed(ss - floor), ""
    c = probe.transfer_drop_ci
    return signed(drop), ci(c.low, c.high, c.level) if given(c) and c is not None else ""


def _encoder(e: EncoderEntry) -> dict[str, Any]:
    c = e.centroid_distance_norm_ci or blank(BootstrapCI)
    pc, mmd = e.paired_cosine or blank(PairedCosineEntry), e.mmd or blank(MMDEntry)
    probe = e.probe or blank(ProbeEntry)
    fd, kid = e.frechet_distance or blank(FrechetEntry), e.kid or blank(KIDEntry)
    floor_r2 = probe.r2_display_floor
    drop, drop_ci = _drop(probe)
    pre = dict(e.preprocessing or {})
    return {
        "rank": "reference" if e.reference else e.rank, "front": bool(e.pareto_front),
        "name": e.name, "basis": e.ranking_basis, "probe_uninformative": e.probe_informative is False,
        "family": e.family, "dim": e.dim,
        "cd": num(e.centroid_distance_norm), "cd_ci": ci(c.low, c.high, c.level),
        "floor": num(e.noise_floor), "floor_method": e.noise_floor_method,
        "gap": signed(e.gap_above_floor), "gap_ci": _gap_ci(e), "auc": num(e.domain_auc),
        "probe_warn": finite(probe.sim_to_real) and probe.sim_to_real <= 0,
        "mmd": num(mmd.value, 4), "mmd_p": "p=" + num(mmd.p_value),
        "pc": num(pc.mean), "pc_shuffled": num(pc.shuffled_mean), "clip_band": pc.clip_band,
        "p_ss": r2(probe.sim_to_sim, floor_r2), "p_rr": r2(probe.real_to_real, floor_r2),
        "p_sr": r2(probe.sim_to_real, floor_r2),
        "drop": drop, "drop_ci": drop_ci,
        "fd": _with_ci(fd.value, fd.ci), "kid": _with_ci(kid.value, kid.ci, 4),
        "insufficient": [(str(k), str(v)) for k, v in (e.insufficient or {}).items()],
        "fingerprint": e.fingerprint, "n_sim": e.n_sim, "n_real": e.n_real,
        "n_skipped": len(e.skipped or []), "preprocessing": compact(pre, 600) if pre else MISSING,
    }


def _families(encoders: list[dict[str, Any]], raw: list[EncoderEntry]) -> list[dict[str, Any]]:
    """Each row's number (its point's number in a numbered scatter) and family colour; then per family,
    in order of first appearance, its best row (the first in results order) and how many rows it has."""
    colours = scatter.family_colours(raw)
    out: dict[str, dict[str, Any]] = {}
    for n, e in enumerate(encoders, 1):
        fam = str(e["family"] or "other")
        e.update(n=n, family_colour=colours.get(fam, "#666666"))
        if fam not in out:
            out[fam] = {"family": fam, "colour": e["family_colour"], "best": e["name"], "rank": e["rank"], "count": 0}
        out[fam]["count"] += 1
    return list(out.values())


def _mapping(m: Any) -> str:
    # the first few entries of a count table (`160x120: 96`)
    return ", ".join(f"{k}: {x}" for k, x in list(m.items())[:5]) if isinstance(m, Mapping) and m else MISSING


def _vector(v: Any) -> Mapping[str, Any]:
    # a set's action or proprio summary: `n`, `dim`, `min`, `max`
    return _d(v)


def _stat_rows(stats: Mapping[str, SetStats], names: list[str]) -> list[tuple[str, list[str]]]:
    ss = [stats[n] for n in names]
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, fn: Callable[[SetStats], str]) -> None:
        cells = [fn(s) for s in ss]
        if any(c != MISSING for c in cells):
            rows.append((label, cells))

    row("frames / images / depth", lambda s: f"{num(s.n_frames)} / {num(s.n_images)} / {num(s.n_depth)}"
        if given(s) else MISSING)
    row("sizes (WxH: frames)", lambda s: _mapping(s.sizes))
    row("dtypes", lambda s: _mapping(s.dtypes))
    row("modes", lambda s: _mapping(s.modes))
    row("channels", lambda s: num(s.channels))
    row("channel mean", lambda s: num_list(s.channel_mean) if s.channel_mean else MISSING)
    row("channel std", lambda s: num_list(s.channel_std) if s.channel_std else MISSING)
    row("channel min", lambda s: num_list(s.channel_min) if s.channel_min else MISSING)
    row("channel max", lambda s: num_list(s.channel_max) if s.channel_max else MISSING)
    row("luma mean", lambda s: num(s.lum_mean, 2))
    row("luma percentiles", lambda s: ", ".join(f"{k} {num(v, 1)}" for k, v in (s.lum_percentiles or {}).items())
        or MISSING)
    row("linear mean (RGB)", lambda s: num_list(s.lin_mean, 4) if s.lin_mean else MISSING)
    for k in ("sharpness", "hf_ratio", "grad_ratio", "dup_frac", "blockiness", "jpeg_fraction", "nonfinite_frac"):
        row(k.replace("_", " "), lambda s, k=k: num(getattr(s, k), 4))
    row("depth dtypes / units", lambda s: (_mapping(_d(s.depth).get("dtypes")) + "; "
                                           + _mapping(_d(s.depth).get("inferred_units"))) if s.depth else MISSING)
    row("depth percentiles (m)", _depth_percentiles)
    row("depth dropout mean / max", lambda s: f"{num(_d(s.depth).get('dropout_mean'))} / "
                                              f"{num(_d(s.depth).get('dropout_max'))}" if s.depth else MISSING)
    for vec in ("action", "proprio"):
        row(f"{vec} (n, dim)", lambda s, v=vec: f"{num(_vector(getattr(s, v)).get('n'))}, "
                                                f"{num(_vector(getattr(s, v)).get('dim'))}" if getattr(s, v) else MISSING)
        row(f"{vec} min", lambda s, v=vec: num_list(_list(_vector(getattr(s, v)).get("min"))[:12], 3)
            if getattr(s, v) else MISSING)
        row(f"{vec} max", lambda s, v=vec: num_list(_list(_vector(getattr(s, v)).get("max"))[:12], 3)
            if getattr(s, v) else MISSING)
    return rows


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else []


def _depth_percentiles(s: SetStats) -> str:
    """Depth percentiles in metres after unit resolution, the native unit named beside them."""
    d = _d(s.depth)
    pcts = _d(d.get("percentiles"))
    if not pcts:
        return MISSING
    per_m, unit = depth_unit(d)
    if per_m is None:
        return ", ".join(f"{k} {num(v)}" for k, v in pcts.items()) + " (native, unit unknown)"
    return ", ".join(f"{k} {metres(v, per_m)}" for k, v in pcts.items()) + f" (native unit {unit})"


def _stats_plots(stats: Mapping[str, SetStats], names: list[str], colours: dict[str, str]) -> list[Markup]:
    out = []
    dom = {n: stats[n].domain for n in names}
    means = {n: list(stats[n].channel_mean or []) for n in names}
    nch = max((len(v) for v in means.values()), default=0)
    labels = ["R", "G", "B"] if nch == 3 else [f"c{i}" for i in range(nch)]
    p = plots.grouped_bars("Per-channel mean (median over frames)", labels, means, "mean value (native pixel units)",
                           dom, colours)
    if p:
        out.append(p)
    lums = {n: stats[n].lum_percentiles or {} for n in names}
    keys = list(next((v for v in lums.values() if v), {}).keys())
    p = plots.grouped_bars("Luma percentiles", keys, {n: [v.get(k) for k in keys] for n, v in lums.items()},
                           "luma (native pixel units)", dom, colours)
    if p:
        out.append(p)
    p = plots.channel_histograms({n: stats[n].channel_hist or {} for n in names}, dom, colours)
    if p:
        out.append(p)
    p = plots.depth_histograms({n: stats[n].depth or {} for n in names}, dom, colours)
    if p:
        out.append(p)
    return out


def _thumbs(res: Results, max_thumbs: int) -> list[dict[str, Any]]:
    """Thumbnails of the image files listed under results["thumbnails"] (path, caption), if any."""
    out = []
    for t in _list(res.extra.get("thumbnails")):
        if len(out) >= max_thumbs:
            break
        t = t if isinstance(t, Mapping) else {"path": t}
        path = t.get("path")
        src = plots.thumbnail(str(path)) if isinstance(path, (str, os.PathLike)) else None
        if src is not None:
            out.append({"src": src, "caption": t.get("caption") or Path(str(path)).name})
    return out


def _worst_pairs(encoders: list[EncoderEntry], max_pairs: int) -> dict[str, Any] | None:
    """The best-ranked encoder's farthest pairs (listed in results) as sim | real | difference."""
    encs = sorted(encoders, key=lambda e: (e.rank is None, e.rank or 0))
    enc = next((e for e in encs if e.worst_pairs), None)
    if enc is None or max_pairs <= 0:
        return None
    rows = []
    for w in map(_d, (enc.worst_pairs or [])[:max_pairs]):
        strip = plots.pair_strip(str(w.get("sim_path")), str(w.get("real_path")))
        if strip is not None:
            rows.append({"sim": strip[0], "real": strip[1], "diff": strip[2], "gain": f"{strip[3]:g}",
                         "key": w.get("pair_key"), "distance": num(w.get("cosine_distance"))})
    return {"encoder": enc.name, "rows": rows} if rows else None


def _screen(scr: Screen, lim: Mapping[str, Any], colours: dict[str, str]) -> dict[str, Any] | None:
    views = [str(v) for v in scr.views or []][: lim["encoders"]]
    ranking = []
    for r in entries(ScreenRank, scr.ranking)[: lim["sets"] * 4]:
        c, pv = r.ci or blank(Interval), r.per_view or {}
        ranking.append({"rank": r.rank, "set": r.set, "distance": num(r.distance), "ci": ci(c.low, c.high, c.level),
                        "per_view": [num(_d(pv.get(v)).get("distance")) for v in views]})
    pairwise = []
    for p in map(_d, (scr.pairwise or [])[: lim["findings"]]):
        c, pv = section(Interval, p.get("ci")) or blank(Interval), _d(p.get("per_view"))
        pairwise.append({"closer": p.get("closer"), "farther": p.get("farther"), "difference": signed(p.get("difference")),
                         "ci": ci(c.low, c.high, c.level), "significant": "yes" if p.get("significant") else "no",
                         "per_view": [signed(_d(pv.get(v)).get("difference")) + ("*" if _d(pv.get(v)).get("significant") else "")
                                      for v in views]})
    plot = plots.screen_distances(scr.ranking or [], views, colours) if lim["plots"] else None
    return {"closest": scr.closest, "views": views, "ranking": ranking, "pairwise": pairwise,
            "ci_level": (f"{100 * scr.ci_level:g}%" if isinstance(scr.ci_level, (int, float)) else MISSING),
            "units": _units(scr), "baseline": scr.baseline, "word": screen_word(scr),
            "reason": scr.gate.reason if scr.gate is not None else None,
            "worse": ", ".join(str(w) for w in scr.worse_than_baseline or []),
            "skipped_views": [(str(k), str(v)) for k, v in (scr.skipped_views or {}).items()], "plot": plot}


def _units(scr: Screen) -> str:
    """What the screen's bootstrap resampled, counted: `15 episodes (125 paired scenes in them)`."""
    kinds = scr.resampling_units
    what = ", ".join(f"{num(n)} {k}" for k, n in kinds.items()) if kinds else f"{num(scr.n_scenes)} clusters"
    pairs = scr.n_pairs
    return what + (f" ({num(pairs)} paired scenes in them)" if isinstance(pairs, int) else "")


def _drift(dr: Drift, lim: Mapping[str, Any]) -> dict[str, Any]:
    gates = []
    for g in entries(GateEntry, dr.gates)[: lim["findings"]]:
        c = section(Interval, g.ci) or blank(Interval)
        gates.append({"name": g.name, "value": num(g.value), "ci": ci(c.low, c.high, c.level) if g.ci else "",
                      "threshold": num(g.threshold), "word": outcome(g), "rule": drift_rule(g),
                      "description": g.description})
    history = []
    for h in map(_d, (dr.history or [])[-lim["skipped"]:]):
        history.append({"run_id": h.get("run_id"), "started_at": h.get("started_at"), "current": h.get("current"),
                        "result": gate_word(bool(h.get("passed"))),
                        "failed": ", ".join(str(x) for x in _list(h.get("failed"))) or MISSING})
    runs = dr.history or []
    plot = plots.drift_trend(runs) if lim["plots"] and len(runs) > 1 else None
    return {"baseline": dr.baseline, "current": dr.current, "word": gate_word(bool(dr.passed)),
            "gates": gates, "history": history, "plot": plot}


def _set_colours(results: Results | Mapping[str, Any], sim: Any, real: Any, stat_names: list[str]) -> dict[str, str]:
    """One colour per set for every plot of the report: the reference set (real; the drift baseline)
    first, then the compared ones (sim; the drift's current set; each screened rendering)."""
    res = reading.results(results)
    dr, scr = res.drift or blank(Drift), res.screen or blank(Screen)
    order = [dr.baseline, dr.current, real, sim]
    order += [r.set for r in entries(ScreenRank, scr.ranking)] + list(stat_names)
    return plots.set_colours([n for n in order if n is not None])


def _skip_rows(sets: Mapping[str, SetInfo | None]) -> list[dict[str, Any]]:
    """One row per set and skip reason (perception_gap.wording.skip_groups): its frame count and
    the first few files, so 1,000 frames skipped for one reason take one row, not 1,000."""
    rows = []
    for name, rec in sets.items():
        for g in skip_groups(map(_d, (rec.skipped if rec is not None else None) or [])):
            names = ", ".join(g["examples"]) + (", \u2026" if g["count"] > len(g["examples"]) else "")
            rows.append({"set": name, "n": g["count"], "count": f"{g['count']:,}", "reason": g["reason"], "examples": names,
                         "folder": g["folder"]})
    return rows


def _context(results: Mapping[str, Any], res: Results, max_thumbs: int, lim: Mapping[str, Any]) -> dict[str, Any]:
    findings = entries(FindingEntry, res.findings)
    cfg = res.config or blank(Config)
    sets = res.sets or {}
    stats = res.stats or {}
    raw_enc = entries(EncoderEntry, res.encoders)
    encoders = [_encoder(e) for e in raw_enc[: lim["encoders"]]]
    families = _families(encoders, raw_enc)
    stat_names = [n for n, s in stats.items() if s is not None][: lim["sets"]]
    present = {n: s for n, s in stats.items() if s is not None}
    skipped_all = _skip_rows(sets)
    sim = cfg.sim or next((n for n, r in sets.items() if r is not None and r.domain == "sim"), None)
    real = cfg.real or next((n for n, r in sets.items() if r is not None and r.domain == "real"), None)
    colours = _set_colours(res, sim, real, stat_names)
    plot_enc = None
    if lim["plots"] and raw_enc:
        has_probe = any(e.probe is not None and e.probe.sim_to_real is not None for e in raw_enc)
        plot_enc = scatter.gap_vs_probe(raw_enc) if has_probe else None
        plot_enc = plot_enc or plots.gap_bars(raw_enc)
    extra_plots = []
    if lim["plots"] and raw_enc:
        extra_plots = [p for p in (plots.pca_scatter(raw_enc, (str(sim), str(real)), colours),
                                   plots.cosine_histograms(raw_enc)) if p is not None]
    kind = cfg.kind or ("screen" if "screen" in res else "drift" if "drift" in res else "run")
    scr, dr, det = res.screen, res.drift, res.detection
    return {
        "kind": kind, "screen": _screen(scr, lim, colours) if scr is not None else None,
        "drift": _drift(dr, lim) if dr is not None else None,
        "sim": sim, "real": real, "version": res.version, "run_id": res.run_id,
        "verdict": (screen_verdict(scr) if kind == "screen" and scr is not None
                    else _headline(findings, lim) if findings else None),
        "findings": [_finding(f, lim) for f in findings[: lim["findings"]]], "n_findings": len(findings),
        "findings_more": max(0, len(findings) - lim["findings"]),
        # the maps and attribution sections read the results' JSON form
        "maps": maps_section(results["maps"] if "maps" in results else None, {"sim": sim, "real": real},
                             {"sim": colours.get(str(sim)), "real": colours.get(str(real))}) if lim["plots"] else None,
        "encoders": encoders, "encoders_more": max(0, len(raw_enc) - lim["encoders"]), "plot_encoders": plot_enc,
        "families": families, "numbered": len(raw_enc) > scatter.NAMED_MAX,
        "fid": _fid(res.fid),
        "attribution": attribution.section(results, max_encoders=lim["encoders"], max_pairs=max_thumbs, plots=lim["plots"]),
        "extra_plots": extra_plots,
        "stats_sets": [{"name": n, "domain": present[n].domain} for n in stat_names],
        "stats_rows": _stat_rows(present, stat_names) if stat_names else [],
        "stats_plots": _stats_plots(present, stat_names, colours) if stat_names and lim["plots"] else [],
        "detection": detection_tables(det, lim) if det is not None else None, "coco_names": COCO_NAMES,
        "thumbs": _thumbs(res, max_thumbs) if lim["plots"] else [],
        "worst": _worst_pairs(raw_enc, max_thumbs) if lim["plots"] else None,
        "sets": set_rows(sets, max(lim["sets"], 2)), "pairs": pairs_line(res.pairs),
        "skipped": skipped_all[: lim["skipped"]], "n_skipped_total": f"{sum(g['n'] for g in skipped_all):,}",
        "skipped_more": f"{sum(g['n'] for g in skipped_all[lim['skipped']:]):,}",
        "skipped_more_groups": max(0, len(skipped_all) - lim["skipped"]),
        "config": [(str(k), compact(v, 400)) for k, v in list(cfg.to_dict().items())[:40]],
    }


def render_report(results: Results | Mapping[str, Any], *, max_thumbs: int = 12) -> str:
    """Render results.json as one self-contained HTML document (< 5 MB, no network, no script).

    Args:
        results: a `Results` (`perception_gap.load_results`) or the plain `results.json` structure (as
            written by `run`; read as `reports.reading` says); missing parts are skipped.
        max_thumbs: most thumbnails embedded, from image files listed in `results["thumbnails"]`.

    Returns:
        The HTML document as text.
    """
    res = reading.results(results)
    html = ""
    for lim in _LEVELS:
        html = page.compiled(TEMPLATE, lim["text"]).render(**_context(results, res, max_thumbs if lim["plots"] else 0, lim))
        if len(html.encode("utf-8")) < MAX_BYTES:
            return html
        logger.info("report over %d bytes at caps %s; tightening", MAX_BYTES, lim)
    return html


def write_report(results: Results | Mapping[str, Any], path: str | os.PathLike[str], *, max_thumbs: int = 12) -> Path:
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
