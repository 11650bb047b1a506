"""`drift`: new production frames gated against a stored baseline set.

Combines the catalog (cached statistics and embeddings: only new frames cost anything) with the
pure gates in `perception_gap.workflows.drift_gates`, returns its part of results.json and
stores every figure in the catalog's `runs`/`results` tables, so history is a query.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from perception_gap.candidates import Candidate, as_candidates, sweep_config
from perception_gap.catalog import Catalog
from perception_gap.embed import default_encoders, embed_sets, load_encoder
from perception_gap.errors import InputError
from perception_gap.findings import Finding, order_findings
from perception_gap.metrics.settings import Resampling
from perception_gap.pairing import pair_by_key
from perception_gap.statistics.summary import summarize_set
from perception_gap.version import __version__
from perception_gap.workflows import drift_gates as dr
from perception_gap.workflows.common import check_sets, encoder_identity
from perception_gap.workflows.detection import boxes_from_rows
from perception_gap.workflows.stats import compute_stats, load_set_records, set_info

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]

# Past this many usable frames, the baseline side of every gate reads a fixed sample of it (see
# `perception_gap.catalog.baselines`: bottom-k by seeded content hash, cached until the baseline
# changes), so a check costs the same against 10^5 or 10^6 baseline frames. Why 20,000 is enough:
# every gate compares current with baseline, and its sampling error scales like
# sqrt(1/n_current + 1/n_baseline); with 20,000 baseline frames that is at most sqrt(1.5) = 1.22x
# the error of an infinite baseline for a 10,000-frame check (1.05x for 1,000 frames). The
# median of a channel's log2 exposure is then known to about 1.25 sigma / sqrt(20,000) = 0.009
# sigma, a format share to sqrt(p (1 - p) / 20,000) <= 0.0035 (the tolerance is 0.01), and a
# domain AUC to about 0.004 (the classifier sees at most 20,000 baseline rows: balanced against
# a 10,000-frame check). Smaller baselines are read whole: their results do not change.
BASELINE_SAMPLE = 20_000


_DRIFT_ACTIONS = {
    "format": ("bug", "The capture format changed (resolution, bit depth or channels): check the camera driver and "
                      "the recording pipeline before anything else; every other gate is measured across that change."),
    "channel_shift": ("gap", "Check exposure, gain and white-balance settings and the lighting; if the change is "
                             "intended (new lighting), re-baseline with these frames."),
    "sharpness": ("gap", "Check focus, the lens (dirt, condensation), motion blur from a loose mount or a longer "
                         "exposure; a rise means sharpening in the image pipeline."),
    "sensor_noise": ("gap", "Check gain/ISO and exposure settings, the light level (a darker scene needs more gain) "
                            "and the sensor temperature; re-baseline if the change is intended."),
    "depth_dropout": ("gap", "Check the depth sensor: IR interference, reflective or transparent objects, a dirty "
                             "window, a changed range or filter setting."),
    "embedding": ("gap", "The frames look different to this encoder beyond the baseline's own variation: look at the "
                         "statistics gates and at sample frames for what changed (scene, camera, lighting)."),
    "domain_auc": ("gap", "A classifier tells current frames from baseline ones: something systematic changed; the "
                          "statistics gates and sample frames say what."),
    "detector_ap": ("gap", "The detector does worse on current frames: inspect its misses on them; fine-tune or "
                           "retrain on recent frames if the scene changed for good."),
}


def _gate_title(g: dict[str, Any], current: str, baseline: str) -> str:
    base = g["name"].split(":")[0]
    v, t = g["value"], g["threshold"]
    if base == "channel_shift":
        per = g["detail"].get("per_channel") or {}
        failed = g["detail"].get("failed") or []
        changes = ", ".join(f"{c} {per[c]['change']:+.2f}" for c in per)
        if len(failed) == len(per) and len({per[c]["change"] > 0 for c in failed}) == 1:
            return (f"{current!r} is {'brighter' if v > 0 else 'darker'} than the baseline in every channel "
                    f"({changes} stops; tolerance {t:g})")
        if len(failed) >= 2 and len({per[c]["change"] > 0 for c in failed}) == 2:
            return (f"The colour balance of {current!r} moved against each other in {', '.join(failed)} ({changes} stops; "
                    f"tolerance {t:g}): a white-balance change, or swapped channels if the changes mirror each other")
        col = g["detail"].get("column")
        return (f"Channel {col} of {current!r} is {abs(v):.2f} stops {'brighter' if v > 0 else 'darker'} than the "
                f"baseline ({changes} stops; tolerance {t:g})")
    if base == "sharpness":
        return (f"{current!r} is {2 ** abs(v):.2f}x {'sharper' if v > 0 else 'blurrier'} than the baseline "
                f"(Laplacian energy without sensor noise; tolerance x{2 ** t:.2f})")
    if base == "sensor_noise":
        return (f"Sensor noise of {current!r} {'rose' if v > 0 else 'fell'} by {abs(v):.1f} luma levels against the "
                f"baseline (tolerance {t:g})")
    if base == "depth_dropout":
        return f"Depth dropout of {current!r} rose by {v:.3f} (tolerance {t:g})"
    if base == "format":
        d = g["detail"]
        return (f"{100 * d.get('current_share', v):.1f}% of {current!r} frames differ in size/dtype/channels from the "
                f"baseline's {d.get('baseline_usual')} (the baseline's own share: {100 * d.get('baseline_share', 0):.1f}%)")
    if base == "embedding":
        return (f"{g['name'].split(':', 1)[1]}: {current!r} is {v:.1f}x the baseline's own noise floor away from it "
                f"(limit {t:g}x)")
    if base == "domain_auc":
        r = g["detail"].get("effect_ratio")
        size = f", {r:.1f}x the baseline's own variation" if r is not None else ""
        return (f"{g['name'].split(':', 1)[1]}: a classifier tells {current!r} from the baseline with AUC {v:.2f} "
                f"(limit {t:g}){size}")
    if base == "detector_ap":
        return f"Detector {g['name'].split(':', 1)[1]!r} lost {v:.3f} AP on {current!r} (limit {t:g})"
    return f"Gate {g['name']} failed: {v} > {t}"


def _on(cfg: dict[str, dict[str, Any]], table: str) -> bool:
    return bool(cfg[table]["enabled"])


def _statistic_gates(cfg: dict[str, dict[str, Any]], rec: dict[str, Any], st: dict[str, list], eps: dict[str, list],
                     pairs: np.ndarray, baseline: str, current: str, kw: dict[str, Any]) -> list[dr.Gate]:
    """The gates on the frames' statistics: channel shift, sharpness, sensor noise, depth dropout."""
    gates: list[dr.Gate] = []

    def on(table: str) -> bool:
        return _on(cfg, table)

    if on("channel_shift"):
        gates.append(dr.shift_gate("channel_shift", dr.exposure_matrix(st[baseline]), dr.exposure_matrix(st[current]),
                                   eps[baseline], eps[current], float(cfg["channel_shift"]["max_stops"]),
                                   labels=["R", "G", "B"], pairs=pairs, **kw))
    if on("sharpness"):
        gates.append(dr.shift_gate("sharpness", dr.sharpness_vector(st[baseline]), dr.sharpness_vector(st[current]),
                                   eps[baseline], eps[current], float(cfg["sharpness"]["max_log2"]),
                                   labels=["log2 sharpness"], pairs=pairs, **kw))
    if on("sensor_noise"):
        nb, nc = dr.noise_vector(st[baseline]), dr.noise_vector(st[current])
        if len(nb) == len(st[baseline]) and len(nc) == len(st[current]):
            gates.append(dr.shift_gate("sensor_noise", nb, nc, eps[baseline], eps[current],
                                       float(cfg["sensor_noise"]["max_levels"]), labels=["noise sigma"], pairs=pairs,
                                       reducer="median", **kw))
        else:
            gates.append(dr.not_computed("sensor_noise", float(cfg["sensor_noise"]["max_levels"]),
                                         "frames without a noise estimate (tiny frames)"))
    if on("depth_dropout"):
        t = float(cfg["depth_dropout"]["max_increase"])
        dep = {n: [f for f in rec[n].frames if f.depth is not None] for n in rec}
        if dep[baseline] and dep[current]:
            gates.append(dr.shift_gate(
                "depth_dropout", np.asarray([[f.depth.dropout] for f in dep[baseline]]),
                np.asarray([[f.depth.dropout] for f in dep[current]]), [f.episode for f in dep[baseline]],
                [f.episode for f in dep[current]], t, labels=["dropout"], reducer="mean", one_sided=True, **kw))
        elif dep[baseline] or dep[current]:  # depth on one side only: the gate applies, with nothing to compare
            gates.append(dr.not_computed("depth_dropout", t, "no depth on " + (baseline if not dep[baseline] else current)))
        else:
            gates.append(dr.skipped("depth_dropout", t, "no depth maps in either set"))
    return gates


def _embedding_gates(catalog: Catalog, cfg: dict[str, dict[str, Any]], cand: Candidate, baseline: str, current: str,
                     sample_paths: Any, *, device: str, precision: str, seed: int
                     ) -> tuple[dict[str, Any], list[dr.Gate]]:
    """(the encoder's `encoders[i]` identity, its embedding and domain-AUC gates) for one candidate."""
    gates: list[dr.Gate] = []

    def on(table: str) -> bool:
        return _on(cfg, table)

    enc = load_encoder(cand.name, device=device, precision=cand.precision or precision)
    label = cand.label
    with catalog.session():
        mb, eb = catalog.load_embeddings(baseline, enc.fingerprint, sample_paths)
        mc, ec = catalog.load_embeddings(current, enc.fingerprint)
    info = {**encoder_identity(enc, label=label, candidate=cand.name), "n_sim": len(mc), "n_real": len(mb)}
    e_b, e_c = [m["episode"] for m in mb], [m["episode"] for m in mc]
    # the embedding gate and the classifier's effect size read the same ratio: one PCA fit, not two
    wanted = on("embedding") or (on("domain_auc") and float(cfg["domain_auc"]["min_ratio"]) > 0)
    floor = dr.shared_floor_ratio(eb, ec, e_b, random_state=seed) if wanted and len(mb) and len(mc) else None
    if on("embedding"):
        t = float(cfg["embedding"]["max_ratio"])
        gates.append(dr.embedding_gate(f"embedding:{label}", eb, ec, e_b, e_c, t, random_state=seed, floor=floor)
                     if len(mb) and len(mc) else dr.not_computed(f"embedding:{label}", t, "no embeddings on one side"))
    if on("domain_auc"):
        t = float(cfg["domain_auc"]["max_auc"])
        gates.append(dr.auc_gate(f"domain_auc:{label}", eb, ec, e_b, e_c, t, random_state=seed,
                                 min_ratio=float(cfg["domain_auc"]["min_ratio"]), floor=floor)
                     if len(mb) and len(mc) else dr.not_computed(f"domain_auc:{label}", t, "no embeddings on one side"))
    return info, gates


def _gate_findings(gate_dicts: list[dict[str, Any]], baseline: str, current: str) -> list[Finding]:
    """One finding per failed gate, scored by how far past its threshold it is."""
    findings = []
    for g in gate_dicts:
        if g["status"] != "failed":
            continue
        sev, action = _DRIFT_ACTIONS.get(g["name"].split(":")[0], ("gap", "Inspect the frames."))
        over = abs(g["value"]) / g["threshold"] if g["threshold"] else float(abs(g["value"]))
        findings.append(Finding(code=f"drift_{g['name'].split(':')[0]}", severity=sev,
                                title=_gate_title(g, current, baseline), evidence={k: g[k] for k in ("name", "value", "threshold", "ci", "detail")},
                                action=action, score=float(over)))
    return findings


def drift_job(catalog: Catalog, baseline: str, current: str, *, encoder_names: list[str | Candidate] | None = None,
              config: dict[str, dict[str, Any]] | None = None, device: str = "auto", batch_size: int | str = 32,
              workers: int | None = None, progress: Progress | None = None,
              baseline_sample: int = BASELINE_SAMPLE, precision: str = "fp32", engine: Any = None,
              resampling: Resampling | None = None) -> dict[str, Any]:
    """Gate new frames (`current`) against a stored `baseline` set.

    Only what is not cached is computed: statistics and embeddings are keyed by content, so a
    recurring check pays for the new frames (plus the comparison itself). A baseline of more than
    `baseline_sample` usable frames is read through its cached sample of that many frames (seed:
    the bootstrap's `random_state`); `drift.baseline_sample` says which. `engine` computes the
    missing statistics and embeddings elsewhere, as in `run_job` (the Ray engine).

    Returns:
        results.json with `sets`, `stats`, `findings` (one per failed gate), `drift` (`gates`,
        `passed`, `history`), `encoders`, `config`, `version`.
    """

    cfg = dr.validate_config(config or dr.load_config(None))
    if baseline == current:
        raise InputError(f"Expected two different sets for --baseline and --current, got {baseline!r} twice.")
    check_sets(catalog, [baseline, current], {baseline: "--baseline", current: "--current"})
    cands = as_candidates(default_encoders() if encoder_names is None else encoder_names)
    names = [c.name for c in cands]
    boot = cfg["bootstrap"]
    n_boot, level, seed = int(boot["n_boot"]), float(boot["ci"]), int(boot["random_state"])
    if resampling is not None:  # what the caller sets wins over the config file's [bootstrap]
        n_boot, level, seed = resampling.n("drift", n_boot), resampling.ci(level), resampling.random_state(seed)
        cfg = {**cfg, "bootstrap": {**boot, "n_boot": n_boot, "ci": level, "random_state": seed}}
    compute_stats(catalog, [baseline, current], workers=workers, progress=progress,
                  runner=engine.stats_runner if engine else None)
    with catalog.session():  # the reads in one open of the file (each open reads its metadata)
        sample = catalog.baseline_sample(baseline, int(baseline_sample), seed)
        rec = {baseline: load_set_records(catalog, baseline, paths=sample.paths),
               current: load_set_records(catalog, current)}
    img = {n: [f for f in rec[n].frames if f.image is not None] for n in rec}
    st = {n: [f.image for f in img[n]] for n in img}
    eps = {n: [f.episode for f in img[n]] for n in img}
    gates: list[dr.Gate] = []

    def on(table: str) -> bool:
        return _on(cfg, table)

    if on("format"):
        gates.append(dr.format_gate(st[baseline], st[current], float(cfg["format"]["max_fraction"])))
    # current frames of the baseline's scenes (matched by pair key) are drawn with their twins
    # (baseline position, current position), in current order: the current set is the side under test
    pairing = pair_by_key([f.pair_key for f in img[current]], [f.pair_key for f in img[baseline]])
    pairing.log_duplicates(f"drift {baseline!r} vs {current!r}")
    pairs = pairing.array()[:, ::-1].copy()
    kw = dict(n_boot=n_boot, ci=level, random_state=seed)
    gates += _statistic_gates(cfg, rec, st, eps, pairs, baseline, current, kw)
    encoders_info: list[dict[str, Any]] = []
    if names and (on("embedding") or on("domain_auc")):
        embed_sets(catalog, cands, [baseline, current], device=device, batch_size=batch_size, workers=2,
                   progress=progress, precision=precision, runner=engine.embed_runner if engine else None)
        for cand in cands:
            info, got = _embedding_gates(catalog, cfg, cand, baseline, current, sample.paths, device=device,
                                         precision=precision, seed=seed)
            encoders_info.append(info)
            gates += got
    if on("detector_ap"):
        gates += _detector_gates(catalog, baseline, current, float(cfg["detector_ap"]["max_drop"]))
    gate_dicts = [g.to_dict() for g in gates]
    passed = all(g.passed for g in gates)
    findings = _gate_findings(gate_dicts, baseline, current)
    # the closing reads and the run's record: one open of the catalog file, not ten (each open
    # costs with the file's size: ~70 ms next to a 10^6-frame baseline)
    summaries = {n: summarize_set(r).to_dict() for n, r in rec.items()}
    with catalog.session():
        res: dict[str, Any] = {
            "version": __version__,
            "config": {"kind": "drift", "baseline": baseline, "current": current, "encoders": names, "gates": cfg,
                       "device": device, "precision": precision, **sweep_config(cands)},
            "sets": {baseline: {**set_info(catalog, baseline), "role": "baseline"},
                     current: {**set_info(catalog, current), "role": "current"}},
            "stats": summaries,
            "encoders": encoders_info,
            "findings": [f.to_dict() for f in order_findings(findings)],
            "drift": {"baseline": baseline, "current": current, "gates": gate_dicts, "passed": passed,
                      "baseline_sample": sample.to_dict()},
        }
        rows = [{"scope": "drift", "name": "passed", "value": 1.0 if passed else 0.0}]
        for g in gate_dicts:
            ci = g.get("ci") or {}
            rows.append({"scope": "gate", "name": g["name"], "value": g["value"], "ci_low": ci.get("low"),
                         "ci_high": ci.get("high"), "detail": {"threshold": g["threshold"], "status": g["status"]}})
        res["run_id"] = catalog.record_run("drift", res["config"], __version__, rows)
        res["drift"]["history"] = drift_history(catalog, baseline)
    return res


def drift_history(catalog: Catalog, baseline: str | None = None) -> list[dict[str, Any]]:
    """Earlier drift runs (against `baseline`, or all), oldest first, from the `results` table."""
    out = []
    for run in catalog.run_history("drift"):
        cfg = run["config"]
        if baseline is not None and cfg.get("baseline") != baseline:
            continue
        passed, values, ratios, failed = None, {}, {}, []
        for r in run["results"]:
            if r["scope"] == "drift" and r["name"] == "passed":
                passed = bool(r["value"])
            elif r["scope"] == "gate":
                d = r.get("detail") or {}
                values[r["name"]] = r["value"]
                t = d.get("threshold")
                if r["value"] is not None and t:
                    ratios[r["name"]] = abs(r["value"]) / t
                if d.get("status") in ("failed", "not computed"):  # both hold the verdict back
                    failed.append(r["name"])
        out.append({"run_id": run["run_id"], "started_at": run["started_at"], "baseline": cfg.get("baseline"),
                    "current": cfg.get("current"), "passed": passed, "values": values, "ratios": ratios,
                    "failed": failed})
    return out


def _detector_gates(catalog: Catalog, baseline: str, current: str, threshold: float) -> list[Any]:
    from perception_gap.detection import coco_summary

    with catalog.session():
        ann = {n: catalog.load_annotations(n) for n in (baseline, current)}
        if "gt" not in ann[baseline] or "gt" not in ann[current]:
            return []
        frame_sizes = {n: catalog.frame_sizes(n) for n in (baseline, current)}
    out = []
    sources = sorted((set(ann[baseline]) & set(ann[current])) - {"gt"})
    for source in sources:
        aps = {}
        for n in (baseline, current):
            sizes = {p: (w, h) for p, _k, w, h in frame_sizes[n]}
            gt = boxes_from_rows(ann[n]["gt"])
            aps[n] = coco_summary(gt, boxes_from_rows(ann[n][source]), {p: sizes[p] for p in gt if p in sizes}).to_dict().get("AP")
        out.append(dr.ap_gate(f"detector_ap:{source}", aps[baseline], aps[current], threshold))
    return out
