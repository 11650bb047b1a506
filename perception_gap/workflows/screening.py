"""Screening renderings: which of several sim sets is closest to one real set, with confidence.

Pure functions on arrays. One *view* is one way of describing a frame as a vector: an
encoder's embedding, or the frame's raw statistics (`stat_features`). For each view every sim
set is measured against the real set in one common space:

    StandardScaler -> PCA(k) fitted on the pooled frames of every set -> per-component min-max
    over the pooled projections -> Euclidean distance between the sim and real centroids / sqrt(k).

With one sim set this is exactly the published centroid distance (`metrics.centroid_distance`);
with several, the shared projection and range make the distances comparable with each other
(separate fits would each rescale to their own pair).

Confidence comes from one *paired* cluster bootstrap shared by every set and every view: a
replicate draws clusters with replacement from the union of all sets' clusters and weighs each
set's per-cluster sums by the draw. A cluster is a scene: frames that share a pair key across
sets are one cluster (or one episode, when the real frame of that key has one), so when the sim
sets render the same scenes as the real set, a replicate reweighs the same scenes everywhere and
the scene-to-scene variation cancels in the differences. That is what makes two renderings that
differ by little still separable, and two identical renderings exactly "not significant"
(their replicates are equal, the difference is 0 in every one).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.errors import InputError, InsufficientData
from perception_gap.gates import Gate, make_gate
from perception_gap.metrics.bootstrap import centred_ci
from perception_gap.metrics.centroid import DEFAULT_N_COMPONENTS, cluster_stats, normed, scaled_distance
from perception_gap.metrics.projection import Rows, fit_projection
from perception_gap.metrics.resampling import cluster_counts, episode_blocks, few_clusters
from perception_gap.metrics.settings import REPLICATES
from perception_gap.statistics.image import ImageStats

N_BOOT = REPLICATES["screen"]


@dataclass(frozen=True)
class ViewDistances:
    """Distances of each sim set to the real set in one view, with their bootstrap replicates.

    Attributes:
        view: the view's name (an encoder name or `raw statistics`).
        values: sim set -> normalized centroid distance to real, in [0, 1].
        replicates: sim set -> (n_boot,) replicate distances (the same draws for every set).
        n_components: k of the shared projection.
    """

    view: str
    values: dict[str, float]
    replicates: dict[str, np.ndarray]
    n_components: int


def scene_clusters(keys: dict[str, Sequence[str]], episodes: dict[str, Sequence[Hashable | None]],
                   real: str) -> dict[str, list[Hashable]]:
    """Bootstrap cluster of every frame of every set: its scene.

    A pair key present in more than one set is one scene, labelled by the real frame's
    episode where known (so an episode is never split), else by the key. A frame whose key
    no other set has is a cluster of its own set (its episode where known, else its key).
    Where fewer than `MIN_EPISODES` (5) episodes label the shared scenes (or a set's own
    frames), whole episodes are too few to resample: each is cut into contiguous blocks of
    its keys, in the order given (`episode_blocks`), so a one-episode set still has about
    `N_BLOCKS` units, and a shared key gets the same block in every set.
    """
    count: dict[str, int] = {}
    for name, ks in keys.items():
        for k in set(ks):
            count[k] = count.get(k, 0) + 1
    real_ep = {k: e for k, e in zip(keys.get(real, ()), episodes.get(real, ())) if e is not None}
    in_order = [k for name in [real] + [n for n in keys if n != real] for k in keys.get(name, ())]
    shared = [k for k in dict.fromkeys(in_order) if count.get(k, 0) > 1 and k in real_ep]
    scene = _blocks_if_few({k: ("episode", real_ep[k]) for k in shared})
    out: dict[str, list[Hashable]] = {}
    for name, ks in keys.items():
        eps = episodes.get(name) or [None] * len(ks)
        own = _blocks_if_few({k: (name, "episode", e) for k, e in zip(ks, eps) if count.get(k, 0) <= 1 and e is not None})
        labels: list[Hashable] = []
        for k, e in zip(ks, eps):
            if count.get(k, 0) > 1:
                labels.append(scene[k] if k in scene else ("scene", k))
            else:
                labels.append(own[k] if k in own else (name, "frame", k))
        out[name] = labels
    return out


def _blocks_if_few(label_of: dict[str, Hashable]) -> dict[str, Hashable]:
    """Key -> cluster label, refined into contiguous blocks of keys when the labels are few."""
    labels = list(label_of.values())
    if not labels or not few_clusters(labels):
        return label_of
    return dict(zip(label_of, episode_blocks(labels)))


def view_distances(view: str, embs: dict[str, np.ndarray], clusters: dict[str, Sequence[Hashable]], real: str, *,
                   n_components: int = DEFAULT_N_COMPONENTS, draws: np.ndarray,
                   labels_index: dict[Hashable, int], random_state: int = 0) -> ViewDistances:
    """Normalized centroid distance of every sim set to `real` in one shared projection, and its
    replicates under the shared cluster draws `draws` (n_boot, G): times each cluster is drawn
    in each replicate (`shared_draws`)."""
    names = list(embs)
    for n in names:
        if len(embs[n]) < 2:
            raise InsufficientData(f"Expected at least 2 frames of set {n!r} in view {view!r}, got {len(embs[n])}.")
    rows = [Rows(np.ascontiguousarray(embs[n])) for n in names]
    proj = fit_projection(rows, n_components, np.random.default_rng(random_state))
    z = {n: proj.transform(r) for n, r in zip(names, rows)}
    k = proj.k
    sims = [n for n in names if n != real]
    if k == 0:  # every frame identical in this view
        zero = np.zeros(len(draws))
        return ViewDistances(view, {s: 0.0 for s in sims}, {s: zero for s in sims}, 0)
    lo = np.min([z[n].min(axis=0) for n in names], axis=0)
    hi = np.max([z[n].max(axis=0) for n in names], axis=0)
    values = {s: normed(scaled_distance(z[s].mean(axis=0), z[real].mean(axis=0), lo, hi), k) for s in sims}
    g = len(labels_index)
    parts = {}
    for n in names:
        lab = np.asarray([labels_index[c] for c in clusters[n]], dtype=np.int64)
        sums, cnt, mins, maxs = cluster_stats(z[n], lab)
        present = np.unique(lab)
        full_sum = np.zeros((g, k)); full_sum[present] = sums
        full_cnt = np.zeros(g); full_cnt[present] = cnt
        full_min = np.full((g, k), np.inf); full_min[present] = mins
        full_max = np.full((g, k), -np.inf); full_max[present] = maxs
        parts[n] = (full_sum, full_cnt, full_min, full_max)
    reps = {s: np.full(len(draws), np.nan) for s in sims}
    for b, d in enumerate(draws):
        w = d.astype(np.float64)
        sel = w > 0
        cents, los, his = {}, [], []
        ok = True
        for n in names:
            s_, c_, mn, mx = parts[n]
            tot = w @ c_
            if tot == 0:
                ok = False
                break
            cents[n] = (w @ s_) / tot
            los.append(mn[sel].min(axis=0))
            his.append(mx[sel].max(axis=0))
        if not ok:
            continue
        lo_b, hi_b = np.min(los, axis=0), np.max(his, axis=0)
        for s in sims:
            reps[s][b] = normed(scaled_distance(cents[s], cents[real], lo_b, hi_b), k)
    return ViewDistances(view, values, reps, k)


def shared_draws(clusters: dict[str, Sequence[Hashable]], n_boot: int = N_BOOT,
                 random_state: int = 0) -> tuple[np.ndarray, dict[Hashable, int]]:
    """(n_boot, G) times each cluster is drawn in each replicate (`cluster_counts`: G draws with
    replacement from the union of all clusters) and the cluster -> index map; every view uses the
    same draws, so views can be averaged per replicate."""
    union: dict[Hashable, int] = {}
    for labs in clusters.values():
        for c in labs:
            union.setdefault(c, len(union))
    g = len(union)
    if g < 2:
        raise InsufficientData(f"Expected at least 2 scenes (pair keys or episodes) to bootstrap, got {g}.")
    return cluster_counts(g, n_boot, np.random.default_rng(random_state)), union


def _ci(reps: np.ndarray, estimate: float, level: float) -> dict[str, Any]:
    r = reps[np.isfinite(reps)]
    if len(r) < max(10, len(reps) // 2):
        return {"low": None, "high": None, "level": level, "n_boot": int(len(r))}
    lo, hi, _ = centred_ci(r, estimate, level)
    return {"low": float(lo), "high": float(hi), "level": level, "n_boot": int(len(r))}


def rank_renderings(views: list[ViewDistances], sims: list[str], *, ci: float = 0.95,
                    baseline: str | None = None) -> dict[str, Any]:
    """The `screen` block of results.json from per-view distances.

    Each sim's `distance` is the mean of its per-view normalized distances (every view weighs
    the same); its CI and every pairwise difference's CI come from the shared replicates.
    A difference is significant when its CI excludes 0. Each pair also says which views
    significantly prefer each rendering (`prefer`), and `views_disagree` when some prefer one and
    some the other: the mean over views can then cancel to "not significant" although every view
    is sure, and the pair's `verdict` reads "views disagree" instead.

    Args:
        views: one ViewDistances per view, all computed with the same draws.
        sims: the sim sets, in the order given on the command line.
        ci: coverage.
        baseline: the `--fail-if-worse` rendering: `worse_than_baseline` lists every other
            rendering significantly farther from real than it.
    """
    if not views:
        raise InputError("Expected at least one view (raw statistics or an encoder) to screen on.")
    if baseline is not None and baseline not in sims:
        raise InputError(f"Expected `--fail-if-worse` to name one of the --sim sets {sims}, got {baseline!r}.")
    dist = {s: float(np.mean([v.values[s] for v in views])) for s in sims}
    reps = {s: np.mean([v.replicates[s] for v in views], axis=0) for s in sims}
    order = sorted(sims, key=lambda s: (dist[s], sims.index(s)))
    ranking = []
    for i, s in enumerate(order):
        ranking.append({
            "set": s, "rank": i + 1, "distance": dist[s], "ci": _ci(reps[s], dist[s], ci),
            "per_view": {v.view: {"distance": v.values[s], "ci": _ci(v.replicates[s], v.values[s], ci)} for v in views},
        })
    pairwise = []
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            d = dist[b] - dist[a]
            c = _ci(reps[b] - reps[a], d, ci)
            sig = c["low"] is not None and (c["low"] > 0 or c["high"] < 0)
            per_view = {}
            for v in views:
                dv = v.values[b] - v.values[a]
                cv = _ci(v.replicates[b] - v.replicates[a], dv, ci)
                per_view[v.view] = {"difference": dv, "ci": cv,
                                    "significant": cv["low"] is not None and (cv["low"] > 0 or cv["high"] < 0)}
            prefer = views_preferring(per_view, a, b)
            disagree = bool(prefer[a] and prefer[b])
            pairwise.append({"closer": a, "farther": b, "difference": d, "ci": c, "significant": sig,
                             "per_view": per_view, "prefer": prefer, "views_disagree": disagree,
                             "verdict": "significant" if sig else "views disagree" if disagree else "not significant"})
    first = order[0]
    beats_all = all(p["significant"] for p in pairwise if p["closer"] == first)
    out: dict[str, Any] = {
        "ranking": ranking,
        "closest": first if len(order) > 1 and beats_all else None,
        "closest_candidate": first,
        "significant": bool(len(order) > 1 and beats_all),
        "pairwise": pairwise,
        "views": [v.view for v in views],
        "n_components": {v.view: v.n_components for v in views},
        "ci_level": ci,
    }
    if baseline is not None:
        worse = [p["farther"] for p in pairwise if p["closer"] == baseline and p["significant"]]
        out["baseline"] = baseline
        out["worse_than_baseline"] = worse
        gate = baseline_gate(baseline, worse, pairwise)
        out["gate"] = gate.to_dict()
        out["passed"] = gate.passed
    return out


def views_preferring(per_view: dict[str, dict[str, Any]], closer: str, farther: str) -> dict[str, list[str]]:
    """Rendering -> the views that significantly prefer it, from one pair's `per_view` entries
    (`difference` = distance of `farther` - distance of `closer`, positive when `closer` is nearer)."""
    return {closer: [v for v, p in per_view.items() if p["significant"] and p["difference"] > 0],
            farther: [v for v, p in per_view.items() if p["significant"] and p["difference"] < 0]}


def views_disagree_words(p: dict[str, Any]) -> str:
    """`raw statistics prefer 'a'; pixel, clip prefer 'b'`: the views significantly preferring each side of a pair."""
    return "; ".join(f"{', '.join(views)} prefer{'s' if len(views) == 1 else ''} {name!r}"
                     for name, views in (p.get("prefer") or {}).items() if views)


def baseline_gate(baseline: str, worse: list[str], pairwise: list[dict[str, Any]]) -> Gate:
    """The `--fail-if-worse` gate: how many renderings are significantly farther from real than
    `baseline` (at most 0 passes). A comparison with the baseline whose interval could not be
    computed leaves the gate not computed: an unknown difference is not shown to be no worse."""
    unknown = sorted({p["closer"] if p["farther"] == baseline else p["farther"] for p in pairwise
                      if baseline in (p["closer"], p["farther"]) and p["ci"]["low"] is None})
    reason = f"no interval for {', '.join(unknown)} against {baseline} (too few computable replicates)"
    return make_gate("worse_than_baseline", None if unknown else len(worse), 0, reason=reason,
                     rule="passes when no rendering is significantly farther from real than the baseline",
                     detail={"baseline": baseline, "worse": worse})


# -- the raw-statistics view --------------------------------------------------------------------------

STAT_FEATURES = ("log2 linear mean R", "log2 linear mean G", "log2 linear mean B", "contrast R", "contrast G",
                 "contrast B", "log10 sharpness", "hf ratio", "grad ratio", "duplicate pixels", "blockiness")


def stat_features(s: ImageStats) -> np.ndarray:
    """A frame's raw statistics as one vector (`STAT_FEATURES`): exposure per channel in stops,
    contrast (std / full scale), sharpness, spectral shape, duplicate pixels, JPEG blockiness.
    Frames without a nominal scale (float arrays) use their own units."""
    scale = s.nominal_max or 1.0
    c = len(s.mean)
    idx = [0, 1, 2] if c >= 3 else [0, 0, 0]
    if s.lin_mean is not None:
        lin = [s.lin_mean[min(i, len(s.lin_mean) - 1)] for i in idx]
    else:
        lin = [s.mean[i] / scale for i in idx]
    exposure = [math.log2(max(float(v), 1e-4)) for v in lin]
    contrast = [float(s.std[i]) / scale for i in idx]
    sharp = math.log10(max(float(s.sharpness), 1e-10))
    rest = [s.hf_ratio if s.hf_ratio is not None else 0.0, s.grad_ratio if s.grad_ratio is not None else 4.0,
            s.dup_frac, s.blockiness if s.blockiness is not None else 1.0]
    v = np.asarray(exposure + contrast + [sharp] + [float(x) for x in rest], dtype=np.float64)
    return np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
