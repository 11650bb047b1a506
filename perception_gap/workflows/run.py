"""The `run` job: statistics, embeddings, comparison, probes, ranking and findings in one go.

Combines the catalog with the pure math of `metrics`, `probes`, `ranking` and `diagnoses.perception`;
returns the results.json structure (docs/contract.md) and stores every figure in the catalog's
`runs`/`results` tables so runs can be compared over time.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from threadpoolctl import threadpool_limits

from perception_gap import probes
from perception_gap.candidates import Candidate, as_candidates, sweep_config
from perception_gap.catalog import Catalog
from perception_gap.diagnoses.perception import insufficient_findings, perception_findings, with_residual
from perception_gap.embed import default_encoders, embed_sets, load_encoder
from perception_gap.errors import InputError, InsufficientData
from perception_gap.findings import Finding, order_findings
from perception_gap.metrics import (
    centroid_distance_ci,
    domain_auc,
    frechet_distance_ci,
    kid_ci,
    mmd,
    noise_floor,
    pair_cosine_distances,
    paired_cosine,
)
from perception_gap.metrics.settings import Resampling
from perception_gap.outputs import as_results
from perception_gap.pairing import pair_by_key
from perception_gap.ranking import (
    EncoderScore,
    clip_band,
    is_reference,
    probe_informative,
    rank_encoders,
    ranking_basis,
)
from perception_gap.schema.sections import FrechetEntry, KIDEntry, MMDEntry, ProbeEntry
from perception_gap.version import __version__
from perception_gap.workflows.common import encoder_identity
from perception_gap.workflows.detection import detection_results
from perception_gap.workflows.refusals import refusal_findings
from perception_gap.workflows.stats import stats_job

if TYPE_CHECKING:
    from perception_gap.schema import Results

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
WORST_PAIRS = 12  # pairs listed per encoder, farthest first (the report shows them side by side)


def _targets(meta: list[dict[str, Any]]) -> tuple[np.ndarray | None, str | None]:
    """(N, T) probe targets: actions when every frame has one of one length, else proprio."""
    for key in ("action", "proprio"):
        vals = [m.get(key) for m in meta]
        if vals and all(v is not None for v in vals) and len({len(v) for v in vals}) == 1 and len(vals[0]) > 0:
            return np.asarray(vals, dtype=np.float64), key
    return None, None


def _groups(meta: list[dict[str, Any]], other: list[dict[str, Any]]) -> list[Any]:
    """Cluster id per frame for folds, permutations and bootstraps.

    The episode where known. Otherwise the pair key when the frame has a partner in the other
    set: a scene's sim and real frames then share a group and never straddle a train/test
    split (a classifier that saw one twin in training would call the other by its label, and
    the AUC would read scene memory, not the domain gap). Unpaired frames of unknown episode get
    None: contiguous blocks stand in for them.
    """
    keys = {m["pair_key"] for m in other}
    return [m["episode"] if m["episode"] is not None else (("pair", m["pair_key"]) if m["pair_key"] in keys else None)
            for m in meta]


PCA_POINTS = 300  # points per side in the report's 2-D PCA scatter


def _pca_2d(emb_s: np.ndarray, emb_r: np.ndarray, random_state: int) -> dict[str, Any] | None:
    """A subsample of both sides projected on the first two principal components of the pooled,
    standardized embeddings (for the report's scatter; no statistic is read from it)."""
    from sklearn.decomposition import PCA

    if len(emb_s) + len(emb_r) < 3 or emb_s.shape[1] < 2:
        return None
    rng = np.random.default_rng(random_state)
    i_s = rng.permutation(len(emb_s))[:PCA_POINTS]
    i_r = rng.permutation(len(emb_r))[:PCA_POINTS]
    x = np.vstack([emb_s[i_s], emb_r[i_r]]).astype(np.float64)
    x -= x.mean(0)
    sd = x.std(0)
    x /= np.where(sd > 0, sd, 1.0)
    if not x.any():  # every embedding the same (blank frames): no direction to project on
        return {"sim": np.zeros((len(i_s), 2)).tolist(), "real": np.zeros((len(i_r), 2)).tolist(),
                "explained_variance": [0.0, 0.0]}
    pca = PCA(n_components=2, random_state=random_state)
    with threadpool_limits(limits=1, user_api="blas"):  # small fit: a second thread only spin-waits
        xy = pca.fit_transform(x)
    return {"sim": np.round(xy[: len(i_s)], 4).tolist(), "real": np.round(xy[len(i_s):], 4).tolist(),
            "explained_variance": np.round(np.nan_to_num(pca.explained_variance_ratio_, nan=0.0), 4).tolist()}


def _try(insufficient: dict[str, str], metric: str, fn: Callable[[], Any]) -> Any:
    """Run one metric; too little data becomes a recorded reason, not a crash or a NaN."""
    try:
        return fn()
    except InsufficientData as e:
        insufficient[metric] = str(e)
        return None


def analyze_encoder(catalog: Catalog, sim: str, real: str, encoder: Any, *, random_state: int = 0,
                    resampling: Resampling = Resampling()) -> dict[str, Any]:
    """The `encoders[]` entry of results.json for one (already embedded) encoder."""

    with catalog.session():
        meta_s, emb_s = catalog.load_embeddings(sim, encoder.fingerprint)
        meta_r, emb_r = catalog.load_embeddings(real, encoder.fingerprint)
    entry: dict[str, Any] = {
        **encoder_identity(encoder), "n_sim": len(meta_s), "n_real": len(meta_r),
        "centroid_distance": None, "centroid_distance_norm": None, "centroid_distance_norm_ci": None,
        "noise_floor": None, "noise_floor_method": None, "paired_cosine": None, "domain_auc": None,
        "mmd": None, "frechet_distance": None, "kid": None, "probe": None, "rank": None,
    }
    insufficient: dict[str, str] = {}
    entry["insufficient"] = insufficient
    if not meta_s or not meta_r:
        insufficient["all metrics"] = f"no embeddings for {'sim' if not meta_s else 'real'} set (every frame skipped for this encoder)"
        return entry
    ep_r = [m["episode"] for m in meta_r]
    grp_s, grp_r = _groups(meta_s, meta_r), _groups(meta_r, meta_s)
    pairing = pair_by_key([m["pair_key"] for m in meta_s], [m["pair_key"] for m in meta_r])
    pairing.log_duplicates(f"{encoder.name} embeddings")
    pairs = pairing.array()
    # pairs matter when a side has few episodes: resampling then draws or swaps matched pairs
    cd = _try(insufficient, "centroid distance", lambda: centroid_distance_ci(
        emb_s, emb_r, episodes_sim=grp_s, episodes_real=grp_r, random_state=random_state, pairs=pairs,
        n_boot=resampling.n("centroid"), ci=resampling.ci()))
    if cd is not None:
        entry["centroid_distance"] = cd.value
        entry["centroid_distance_norm"] = cd.value_norm
        entry["centroid_distance_k"] = cd.n_components
        entry["centroid_distance_norm_ci"] = cd.ci.to_dict() if cd.ci is not None else None
    nf = _try(insufficient, "noise floor", lambda: noise_floor(emb_r, episodes=ep_r, random_state=random_state))
    if nf is not None:
        entry["noise_floor"] = nf.value_norm
        entry["noise_floor_method"] = nf.method
    if len(pairs):
        pc = _try(insufficient, "paired cosine", lambda: paired_cosine(emb_s, emb_r, pairs, random_state=random_state))
        if pc is not None:
            entry["paired_cosine"] = pc.to_dict()
            if encoder.family == "clip":
                entry["paired_cosine"]["clip_band"] = clip_band(pc.mean)
            dist = pair_cosine_distances(emb_s, emb_r, pairs)
            counts, edges = np.histogram(dist, bins=20, range=(0.0, max(float(dist.max()), 1e-6)))
            entry["paired_cosine"]["histogram"] = {"edges": [float(x) for x in edges], "counts": [int(c) for c in counts]}
            order = np.argsort(-dist, kind="stable")[:WORST_PAIRS]
            entry["worst_pairs"] = [{"pair_key": meta_s[pairs[i, 0]]["pair_key"], "sim_path": meta_s[pairs[i, 0]]["rgb_path"],
                                     "real_path": meta_r[pairs[i, 1]]["rgb_path"], "cosine_distance": float(dist[i])}
                                    for i in order]
    else:
        insufficient["paired cosine"] = "no sim and real frames share a pair key"
    entry["pca_2d"] = _pca_2d(emb_s, emb_r, random_state)
    auc = _try(insufficient, "domain AUC", lambda: domain_auc(
        emb_s, emb_r, episodes_sim=grp_s, episodes_real=grp_r, random_state=random_state, pairs=pairs))
    entry["domain_auc"] = auc.value if auc is not None else None
    mm = _try(insufficient, "MMD", lambda: mmd(emb_s, emb_r, episodes_sim=grp_s, episodes_real=grp_r,
                                                        random_state=random_state, pairs=pairs))
    entry["mmd"] = MMDEntry.from_result(mm).to_dict() if mm is not None else None
    fd = _try(insufficient, "Frechet distance", lambda: frechet_distance_ci(
        emb_s, emb_r, episodes_sim=grp_s, episodes_real=grp_r, random_state=random_state, pairs=pairs,
        n_boot=resampling.n("distance"), ci=resampling.ci()))
    entry["frechet_distance"] = FrechetEntry.from_result(fd).to_dict() if fd is not None else None
    kd = _try(insufficient, "KID", lambda: kid_ci(
        emb_s, emb_r, episodes_sim=grp_s, episodes_real=grp_r, random_state=random_state, pairs=pairs,
        n_boot=resampling.n("distance"), ci=resampling.ci()))
    entry["kid"] = KIDEntry.from_result(kd).to_dict() if kd is not None else None
    y_s, key_s = _targets(meta_s)
    y_r, key_r = _targets(meta_r)
    if y_s is not None and y_r is not None and key_s == key_r and y_s.shape[1] == y_r.shape[1]:
        pr = _try(insufficient, "probe", lambda: probes.probe(emb_s, y_s, emb_r, y_r, episodes_sim=grp_s,
                                                               episodes_real=grp_r, random_state=random_state,
                                                               pairs=pairs, n_boot=resampling.n("probe"),
                                                               ci=resampling.ci()))
        if pr is not None:
            per_dim = {k: list(getattr(pr, k).r2_per_dim) for k in probes.SCORES}
            entry["probe"] = ProbeEntry.from_result(pr, target=key_s, per_dim=per_dim).to_dict()
    else:
        insufficient["probe"] = "no actions or proprio of one length on every frame of both sets"
    return entry


def _rank(entries: list[dict[str, Any]]) -> None:
    """Rank, Pareto front, probe_informative and ranking_basis on every entry; the pixel baseline is
    a reference row (`reference` True, `rank` None, `ranking_basis` "reference")."""
    scores = []
    for e in entries:
        probe = e.get("probe") or {}
        e["probe_informative"] = probe_informative(probe.get("sim_to_sim"))
        e["reference"] = is_reference(e.get("family"))
        cd = e.get("centroid_distance_norm")
        e["gap_above_floor"] = None if cd is None else cd - e["noise_floor"] if e.get("noise_floor") is not None else cd
        e["ranking_basis"] = "reference" if e["reference"] else None
        if cd is None or e["reference"]:
            continue
        score = EncoderScore(name=e["name"], gap=e["gap_above_floor"], probe=probe.get("sim_to_real"),
                             probe_informative=e["probe_informative"] is not False)
        e["ranking_basis"] = ranking_basis(score)
        scores.append(score)
    ranked = {r.name: r for r in rank_encoders(scores)}
    for e in entries:
        r = ranked.get(e["name"])
        e["rank"] = r.rank if r else None
        e["pareto_front"] = r.on_front if r else None


def _result_rows(res: Results) -> list[dict[str, Any]]:
    """Every figure as a (scope, name, value, ci) row for the catalog's `results` table, read from the
    results as written (a number that is not finite is null there, and has no row)."""
    rows: list[dict[str, Any]] = []
    for e in res.encoders or []:
        ci = e.centroid_distance_norm_ci
        scope = f"encoder:{e.name}"
        rows.append({"scope": scope, "name": "centroid_distance_norm", "value": e.centroid_distance_norm,
                     "ci_low": ci.low if ci is not None else None, "ci_high": ci.high if ci is not None else None})
        for name, value in (("centroid_distance", e.centroid_distance), ("noise_floor", e.noise_floor),
                            ("domain_auc", e.domain_auc),
                            ("paired_cosine_mean", e.paired_cosine.mean if e.paired_cosine is not None else None),
                            ("mmd", e.mmd.value if e.mmd is not None else None),
                            ("mmd_p_value", e.mmd.p_value if e.mmd is not None else None),
                            ("frechet_distance", e.frechet_distance.value if e.frechet_distance is not None else None),
                            ("kid", e.kid.value if e.kid is not None else None),
                            ("probe_transfer_drop", e.probe.transfer_drop if e.probe is not None else None),
                            ("probe_sim_to_real", e.probe.sim_to_real if e.probe is not None else None),
                            ("rank", e.rank)):
            if value is not None:
                rows.append({"scope": scope, "name": name, "value": float(value)})
    fid = res.fid
    if fid is not None:
        fid_low, fid_high = (fid.ci.low, fid.ci.high) if fid.ci is not None else (None, None)
        kid = fid.kid or {}  # free form: the KID of the reference implementation, its interval as a dict
        kid_ci = kid.get("ci") or {}
        for name, value, low, high in (("fid", fid.value, fid_low, fid_high),
                                       ("kid", kid.get("value"), kid_ci.get("low"), kid_ci.get("high"))):
            if value is not None:
                rows.append({"scope": "fid", "name": name, "value": float(value), "ci_low": low, "ci_high": high})
    for f in res.findings:
        rows.append({"scope": "finding", "name": f.code, "value": f.score, "detail": f.to_dict()})
    return rows


def _attribute(catalog: Catalog, sim: str, real: str, res: dict[str, Any], entries: list[dict[str, Any]],
               encs: list[Any], *, progress: Progress | None, random_state: int, batch_size: int | str) -> None:
    """The camera stage: `res["camera_model"]` and each entry's `attribution` (None where not measured)."""
    from perception_gap.errors import PerceptionGapError
    from perception_gap.workflows.camera import camera_stage

    try:
        cam, attrs = camera_stage(catalog, sim, real, res["findings"], encs, progress=progress,
                                  random_state=random_state, batch_size=batch_size if isinstance(batch_size, int) else 32)
    except (PerceptionGapError, ValueError, ArithmeticError, MemoryError, OSError) as e:
        # the rest of the run stands: the stage's failure is a recorded, reported skip, not lost work
        log.warning("camera model and attribution not computed: %s", e)
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        res["findings"].append({"code": "insufficient_data", "severity": "info",
                                "title": f"camera model and attribution not computed: {why}",
                                "evidence": {"metric": "camera model", "reason": why},
                                "action": "Rerun with -v for details; the rest of the run is complete.", "score": 0.0})
        cam, attrs = None, {}
    if cam is not None:
        res["camera_model"] = cam
    for e, enc in zip(entries, encs):
        e["attribution"] = attrs.get(enc.name)


def run_job(catalog: Catalog, sim: str, real: str, *, encoder_names: list[str | Candidate] | None = None,
            device: str = "auto", batch_size: int | str = 32, workers: int | None = None,
            random_state: int = 0, progress: Progress | None = None, precision: str = "fp32",
            engine: Any = None, inception_weights: str | None = None, attribution: bool = True,
            resampling: Resampling | None = None) -> dict[str, Any]:
    """Statistics, embeddings, comparison, probes, ranking and findings: results.json.

    `engine`, when given, computes statistics and embeddings elsewhere: an object with
    `stats_runner` and `embed_runner` (the Ray engine, `perception_gap.engines.ray_engine`).
    `inception_weights`, a local FID Inception v3 state dict (pytorch-fid's), adds the `fid`
    section: FID and KID on its features (`perception_gap.workflows.fid`); the file is checked
    before any work. `attribution` (default on) fits the real camera on a sample of the frames and
    measures what share of each encoder's gap its factors close (`perception_gap.workflows.camera`):
    the `camera_model` section and each encoder's `attribution`.
    """
    cands = as_candidates(encoder_names or default_encoders())  # a candidate's label names its entry
    names = [c.name for c in cands]
    if not names:
        raise InputError("No encoder has its weights available here; see `perception-gap encoders`.")
    fid_enc = None
    if inception_weights is not None:
        from perception_gap.workflows.fid import fid_encoder, fid_section

        fid_enc = fid_encoder(inception_weights, device=device)  # fp32 always: the reference's precision
    rs = resampling or Resampling()
    random_state = rs.random_state(random_state)
    res = stats_job(catalog, sim, real, workers=workers, progress=progress,
                    runner=engine.stats_runner if engine else None)
    # one object per encoder from here on: the camera stage embeds with the models the pass loaded
    encs = [load_encoder(c.name, device=device, precision=c.precision or precision) for c in cands]
    embed_sets(catalog, cands, [sim, real], device=device, batch_size=batch_size, workers=2, progress=progress,
               precision=precision, runner=engine.embed_runner if engine else None, built=encs)
    if fid_enc is not None:
        embed_sets(catalog, [fid_enc.name], [sim, real], device=device, batch_size=batch_size, workers=2,
                   progress=progress, runner=engine.embed_runner if engine else None)
        res["fid"] = fid_section(catalog, sim, real, fid_enc, groups=_groups, random_state=random_state,
                                 resampling=rs)
    entries = []
    for cand, enc in zip(cands, encs):
        entry = analyze_encoder(catalog, sim, real, enc, random_state=random_state, resampling=rs)
        entry.update(name=cand.label, encoder=cand.name)
        with catalog.session():
            entry["skipped"] = [*catalog.embedding_skip_reasons(sim, enc.fingerprint),
                                *catalog.embedding_skip_reasons(real, enc.fingerprint)]
        entries.append(entry)
    res["camera_model"] = None  # the contract's null: not fitted (--no-attribution, too few frames, a failure)
    if attribution:
        _attribute(catalog, sim, real, res, entries, encs, progress=progress, random_state=random_state,
                   batch_size=batch_size)
    _rank(entries)
    entries.sort(key=lambda e: (e["rank"] is None, e["reference"], e["rank"] or 0, e["name"]))
    stats_findings = with_residual([Finding(**{k: f[k] for k in ("code", "severity", "title", "evidence", "action",
                                                                 "score")}) for f in res["findings"]], entries)
    det, det_findings = detection_results(catalog, sim, real, random_state=random_state, resampling=rs)
    if det is not None:
        res["detection"] = det
    refused, rest = refusal_findings(entries, {n: (res["stats"].get(n) or {}).get("dtypes") or {} for n in (sim, real)},
                                     {"sim": sim, "real": real})
    findings = order_findings(stats_findings + det_findings + perception_findings(entries, stats_findings)
                              + refused + insufficient_findings(rest))
    res.update(
        version=__version__,
        config={"sim": sim, "real": real, "encoders": names, "device": device, "batch_size": batch_size,
                "precision": precision, "random_state": random_state, "attribution": attribution,
                "resampling": rs.to_dict(),
                **sweep_config(cands),
                **({"inception_weights": inception_weights} if inception_weights is not None else {})},
        encoders=entries,
        findings=[f.to_dict() for f in findings],
    )
    res["run_id"] = catalog.record_run("run", res["config"], __version__, _result_rows(as_results(res)))
    return res
