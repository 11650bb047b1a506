"""`screen`: which of several sim renderings is closest to one real set, with confidence.

Combines the catalog (cached statistics and embeddings) with the pure math in
`perception_gap.workflows.screening`, returns its part of results.json and stores every figure
in the catalog's `runs`/`results` tables.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from perception_gap.candidates import Candidate, as_candidates, sweep_config
from perception_gap.catalog import Catalog
from perception_gap.embed import default_encoders, embed_sets, load_encoder
from perception_gap.errors import InputError, InsufficientData
from perception_gap.findings import Finding, order_findings
from perception_gap.metrics.settings import Resampling
from perception_gap.statistics.summary import summarize_set
from perception_gap.version import __version__
from perception_gap.workflows import screening
from perception_gap.workflows.common import check_sets, encoder_identity
from perception_gap.workflows.set_notes import role_findings, step_notes
from perception_gap.workflows.stats import compute_stats, load_set_records, set_info

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]



_View = tuple[str, dict[str, np.ndarray], dict[str, list[str]], dict[str, list[Any]]]


def _statistics_view(records: dict[str, Any]) -> _View:
    """The raw-statistics view: each set's per-frame statistic features, pair keys and episodes."""
    feats, keys, eps = {}, {}, {}
    for n, rec in records.items():
        frames = [f for f in rec.frames if f.image is not None]
        feats[n] = np.asarray([screening.stat_features(f.image) for f in frames])
        keys[n] = [f.pair_key for f in frames]
        eps[n] = [f.episode for f in frames]
    return ("raw statistics", feats, keys, eps)


def screen_job(catalog: Catalog, sims: list[str], real: str, *, encoder_names: list[str | Candidate] | None = None,
               baseline: str | None = None, device: str = "auto", batch_size: int | str = 32,
               workers: int | None = None, n_boot: int = screening.N_BOOT, random_state: int = 0,
               progress: Progress | None = None, precision: str = "fp32",
               resampling: Resampling | None = None) -> dict[str, Any]:
    """Which of `sims` is closest to `real`: raw statistics and every encoder, paired bootstrap.

    Returns:
        results.json with `sets`, `stats`, `findings` (each sim's plumbing diagnoses, then the
        screening verdict), `screen` (see `screening.rank_renderings`), `config`, `version`.
    """
    from perception_gap.diagnoses.checks import diagnose

    # `resampling`, when it sets them, wins over `n_boot` and `random_state`
    rs = resampling or Resampling()
    n_boot, random_state, level = rs.n("screen", n_boot), rs.random_state(random_state), rs.ci()
    if len(sims) < 2:
        raise InputError(f"Expected at least two --sim sets to screen, got {len(sims)}.")
    if not 10 <= n_boot <= 100_000:
        raise InputError(f"Expected `--n-boot` in [10, 100000], got {n_boot}.")
    if len(set(sims)) != len(sims) or real in sims:
        raise InputError("Expected distinct --sim sets and a --real set that is not among them.")
    check_sets(catalog, sims + [real], {**{s: "--sim" for s in sims}, real: "--real"})
    if baseline is not None and baseline not in sims:
        raise InputError(f"Expected `--fail-if-worse` to name one of the --sim sets ({', '.join(sims)}), got {baseline!r}.")
    cands = as_candidates(default_encoders() if encoder_names is None else encoder_names)
    names = [c.name for c in cands]
    compute_stats(catalog, sims + [real], workers=workers, progress=progress)
    roles = {**{s: "sim" for s in sims}, real: "real"}
    with catalog.session():  # the reads in one open of the file (each open reads its metadata)
        records = {n: load_set_records(catalog, n) for n in sims + [real]}
        given = {n: catalog.get_set(n) or {} for n in roles}
        infos = {n: set_info(catalog, n) for n in sims + [real]}
    notes, step_findings = step_notes(records, roles, {n: g.get("source") for n, g in given.items()})
    findings: list[Finding] = role_findings(roles, {n: g.get("domain") for n, g in given.items()}) + step_findings
    for s in sims:
        for f in diagnose(records[s], records[real]):
            findings.append(Finding(code=f.code, severity=f.severity, title=f"[{s}] {f.title}",
                                    evidence={**f.evidence, "sim_set": s}, action=f.action, score=f.score))
    # the views: raw statistics, then each encoder
    view_inputs = [_statistics_view(records)]
    encoders_info = []
    if names:
        encs = [load_encoder(c.name, device=device, precision=c.precision or precision) for c in cands]
        embed_sets(catalog, cands, sims + [real], device=device, batch_size=batch_size, workers=2, progress=progress,
                   precision=precision, built=encs)
        for cand, enc in zip(cands, encs):
            embs, k2, e2 = {}, {}, {}
            with catalog.session():
                loaded = {n: catalog.load_embeddings(n, enc.fingerprint) for n in sims + [real]}
            for n, (meta, arr) in loaded.items():
                embs[n], k2[n], e2[n] = arr, [m["pair_key"] for m in meta], [m["episode"] for m in meta]
            view_inputs.append((cand.label, embs, k2, e2))
            encoders_info.append(encoder_identity(enc, label=cand.label, candidate=cand.name))
    # one set of cluster draws for every view: the union of every view's scenes
    all_keys = {n: sorted(set().union(*(set(v[2][n]) for v in view_inputs))) for n in sims + [real]}
    key_ep = {n: {} for n in sims + [real]}
    for _view, _e, ks, es in view_inputs:
        for n in ks:
            for k, e in zip(ks[n], es[n]):
                key_ep[n].setdefault(k, e)
    union_clusters = screening.scene_clusters(all_keys, {n: [key_ep[n][k] for k in all_keys[n]] for n in all_keys}, real)
    cluster_of = {n: dict(zip(all_keys[n], union_clusters[n])) for n in all_keys}
    draws, index = screening.shared_draws(union_clusters, n_boot=n_boot, random_state=random_state)
    views, skipped_views = [], {}
    for view, embs, ks, _es in view_inputs:
        try:
            clusters = {n: [cluster_of[n][k] for k in ks[n]] for n in ks}
            views.append(screening.view_distances(view, embs, clusters, real, draws=draws, labels_index=index,
                                                  random_state=random_state))
        except InsufficientData as e:
            skipped_views[view] = str(e)
    if not views:
        raise InputError("No view could be computed: " + "; ".join(f"{k}: {v}" for k, v in skipped_views.items()))
    scr = screening.rank_renderings(views, sims, baseline=baseline, ci=level)
    scr["skipped_views"] = skipped_views
    scr["n_scenes"] = len(index)  # the bootstrap's clusters, counted by kind in `resampling_units`
    scr["resampling_units"] = _unit_counts(index)
    scr["n_pairs"] = len(set(all_keys[real]) & set().union(*(all_keys[s] for s in sims)))  # real keys a sim shares
    findings += _screen_findings(scr)
    sets = {n: {**infos[n], "role": roles[n], **notes[n]} for n in sims + [real]}
    res: dict[str, Any] = {
        "version": __version__,
        "config": {"kind": "screen", "sims": sims, "real": real, "encoders": names, "baseline": baseline,
                   "n_boot": n_boot, "random_state": random_state, "device": device,
                   "precision": precision, **sweep_config(cands)},
        "sets": sets,
        "stats": {n: summarize_set(r).to_dict() for n, r in records.items()},
        "encoders": encoders_info,
        "findings": [f.to_dict() for f in order_findings(findings)],
        "screen": scr,
    }
    res["run_id"] = catalog.record_run("screen", res["config"], __version__, _screen_rows(scr, res["findings"]))
    return res


def _unit_counts(labels: Any) -> dict[str, int]:
    """How many of the bootstrap's clusters (`screening.scene_clusters` labels) are of each kind."""
    out: dict[str, int] = {}
    for lab in labels:
        if len(lab) == 3 and lab[1] == "block":
            kind = "blocks of consecutive frames within an episode"
        elif lab[0] == "episode" or (len(lab) == 3 and lab[1] == "episode"):
            kind = "episodes"
        elif lab[0] == "scene":
            kind = "scenes without an episode"
        else:
            kind = "unpaired frames without an episode"
        out[kind] = out.get(kind, 0) + 1
    return out


def _fmt_ci(c: dict[str, Any]) -> str:
    if c.get("low") is None:
        return "CI n/a"
    return f"{round(100 * c['level'])}% CI {c['low']:+.3f} to {c['high']:+.3f}"


def _screen_findings(scr: dict[str, Any]) -> list[Finding]:
    out = []
    rk = scr["ranking"]
    first = rk[0]
    for p in scr["pairwise"]:
        if p["closer"] != first["set"]:
            continue
        if p["significant"]:
            against = (p.get("prefer") or {}).get(p["farther"]) or []
            out.append(Finding(
                code="screen_closer", severity="info",
                title=f"Rendering {p['closer']!r} is closer to real than {p['farther']!r}: distance "
                      f"{first['distance']:.3f} vs {first['distance'] + p['difference']:.3f} (difference {_fmt_ci(p['ci'])})"
                      + (f", though {', '.join(against)} significantly prefer{'s' if len(against) == 1 else ''} "
                         f"{p['farther']!r}" if against else ""),
                evidence={"closer": p["closer"], "farther": p["farther"], "difference": p["difference"], "ci": p["ci"],
                          "per_view": {k: v["difference"] for k, v in p["per_view"].items()}},
                action=f"Prefer {p['closer']!r}; the per-view table says which encoders and statistics moved.",
                score=float(p["difference"])))
        elif p.get("views_disagree"):
            out.append(Finding(
                code="screen_views_disagree", severity="info",
                title=f"Renderings {p['closer']!r} and {p['farther']!r} are not significantly different on average "
                      f"because their views disagree: {screening.views_disagree_words(p)} (difference {p['difference']:+.3f}, "
                      f"{_fmt_ci(p['ci'])})",
                evidence={"a": p["closer"], "b": p["farther"], "difference": p["difference"], "ci": p["ci"],
                          "prefer": p["prefer"],
                          "per_view": {k: v["difference"] for k, v in p["per_view"].items()}},
                action=("Do not treat them as equivalent: each rendering is closer to real in some views. The raw "
                        "statistics read exposure, contrast, sharpness, noise and compression; the encoders read "
                        "content as a network sees it. Fix what the statistics findings name for the rendering the "
                        "encoders prefer (or the reverse), then screen again."),
                score=0.0))
        else:
            out.append(Finding(
                code="screen_not_significant", severity="info",
                title=f"Renderings {p['closer']!r} and {p['farther']!r} are not significantly different in distance "
                      f"to real (difference {p['difference']:+.3f}, {_fmt_ci(p['ci'])})",
                evidence={"a": p["closer"], "b": p["farther"], "difference": p["difference"], "ci": p["ci"]},
                action="Treat them as equivalent at this sample size; more paired scenes narrow the interval.",
                score=0.0))
    for worse in scr.get("worse_than_baseline") or []:
        p = next(q for q in scr["pairwise"] if q["closer"] == scr["baseline"] and q["farther"] == worse)
        out.append(Finding(
            code="screen_worse", severity="gap",
            title=f"Rendering {worse!r} is significantly farther from real than the baseline {scr['baseline']!r} "
                  f"(difference {p['difference']:+.3f}, {_fmt_ci(p['ci'])})",
            evidence={"baseline": scr["baseline"], "worse": worse, "difference": p["difference"], "ci": p["ci"]},
            action=f"Do not adopt {worse!r} as it is: it moves sim away from real. The per-view differences "
                   "and the raw-statistics findings say where.",
            score=float(p["difference"])))
    return out


def _screen_rows(scr: dict[str, Any], findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in scr["ranking"]:
        rows.append({"scope": f"screen:{r['set']}", "name": "distance", "value": r["distance"],
                     "ci_low": r["ci"]["low"], "ci_high": r["ci"]["high"]})
        rows.append({"scope": f"screen:{r['set']}", "name": "rank", "value": float(r["rank"])})
        for view, v in r["per_view"].items():
            rows.append({"scope": f"screen:{r['set']}", "name": f"distance:{view}", "value": v["distance"],
                         "ci_low": v["ci"]["low"], "ci_high": v["ci"]["high"]})
    for f in findings:
        rows.append({"scope": "finding", "name": f["code"], "value": f.get("score"), "detail": f})
    return rows

