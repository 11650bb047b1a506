"""Normalized PCA centroid distance (Yardi et al. 2025), its cluster-bootstrap CI, and the noise floor."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from perception_gap.errors import InsufficientData
from perception_gap.metrics.bootstrap import centred_ci
from perception_gap.metrics.projection import MAX_N_COMPONENTS, Projection, Rows, fit_projection
from perception_gap.metrics.resampling import block_ids, bootstrap_units, cluster_keys, factorize, unit_weights
from perception_gap.metrics.results import CI, CentroidDistance, NoiseFloor
from perception_gap.metrics.settings import REPLICATES
from perception_gap.metrics.validation import (
    MIN_FRAMES,
    check_embeddings,
    check_int,
    check_level,
    check_pair,
    draw_seed,
    make_rng,
)

# Centroid distance keeps 32 components by default. Min-max scaling gives every kept
# component the same weight whatever its variance, so each extra trailing component (mostly
# noise for 512-1280-D encoders) dilutes the distance; 32 holds the dominant structure of
# such embeddings, stays below the row count of small sets (k <= N_total - 1), and keeps
# value_norm comparable across encoders of different widths. The price, inherent to the
# recipe: a shift along a low-variance direction that is not among the top 32 components is
# invisible to it; the domain AUC (256 components) and MMD (no PCA) still see it.
DEFAULT_N_COMPONENTS = 32
# Noise floor: halves by episode when there are at least this many episodes.
MIN_FLOOR_EPISODES = 4
CENTROID_N_BOOT = REPLICATES["centroid"]
# Bootstrap replicates are computed a chunk at a time: (chunk, units, k) temporaries of at most
# this many float64 elements (16 MB).
BOOT_CHUNK_ELEMENTS = 2_000_000


def scaled_distance(mean_sim: np.ndarray, mean_real: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Distance of two centroids after per-component min-max scaling with range [lo, hi]."""
    span = hi - lo
    diff = np.where(span > 0, (mean_sim - mean_real) / np.where(span > 0, span, 1.0), 0.0)
    return float(np.sqrt(np.sum(diff * diff)))


def normed(value: float, k: int) -> float:
    """A centroid distance over k components divided by sqrt(k), capped at 1 (0 when k is 0)."""
    return min(1.0, value / math.sqrt(k)) if k else 0.0


def _centroid_parts(sim: Rows, real: Rows, n_components: int, rng: np.random.Generator
                    ) -> tuple[Projection, np.ndarray, np.ndarray, float]:
    proj = fit_projection([sim, real], n_components, rng)
    z_sim, z_real = proj.transform(sim), proj.transform(real)
    if proj.k == 0:
        return proj, z_sim, z_real, 0.0
    lo = np.minimum(z_sim.min(axis=0), z_real.min(axis=0))
    hi = np.maximum(z_sim.max(axis=0), z_real.max(axis=0))
    return proj, z_sim, z_real, scaled_distance(z_sim.mean(axis=0), z_real.mean(axis=0), lo, hi)


# -- centroid distance and noise floor ---------------------------------------------------------------

def centroid_distance(emb_sim: np.ndarray, emb_real: np.ndarray, *, n_components: int = DEFAULT_N_COMPONENTS,
                      random_state: int | np.random.Generator | None = 0) -> CentroidDistance:
    """Normalized PCA centroid distance, by the published recipe (Yardi et al. 2025).

    StandardScaler fitted on pooled sim+real -> PCA(k) fitted on the pooled standardized data
    -> per-component min-max scaling fitted on all pooled projected frames -> Euclidean
    distance between the sim centroid and the real centroid. k = min(n_components, D,
    N_total - 1), reduced further to the numerical rank (components explaining < RANK_TOL of
    the variance are dropped). Beyond MAX_FIT_ROWS pooled frames the scaler and PCA are fitted
    on a seeded random subset; every frame is still projected (in chunks).

    Args:
        emb_sim: (N_sim, D) sim embeddings, N_sim >= 2.
        emb_real: (N_real, D) real embeddings, N_real >= 2.
        n_components: k wanted, in [1, MAX_N_COMPONENTS]; default 32 (see module constants).
        random_state: seed for the fit subset and the PCA.

    Returns:
        CentroidDistance (value in [0, sqrt(k)], value_norm in [0, 1]).
    """
    sim, real = check_pair(emb_sim, emb_real, "centroid distance")
    n_components = check_int("n_components", n_components, 1, MAX_N_COMPONENTS)
    proj, _, _, value = _centroid_parts(Rows(sim), Rows(real), n_components, make_rng(random_state))
    return CentroidDistance(value=value, value_norm=normed(value, proj.k), n_components=proj.k,
                            n_sim=len(sim), n_real=len(real), n_fit=proj.n_fit,
                            explained_variance=proj.explained)


def noise_floor_halves(n: int, episodes: Sequence[Hashable] | None = None) -> tuple[np.ndarray, np.ndarray, str, int]:
    """Split n real frames into two halves that cover the same scenes.

    With >= MIN_FLOOR_EPISODES episodes, episodes (in order of first appearance) alternate
    between the halves; otherwise the contiguous blocks of `block_ids` (min(n, N_BLOCKS) of
    them, ~n/16 frames each) alternate, so near-duplicate neighbours mostly land in the same
    half (splitting them would make the floor look too low).

    Returns:
        (indices of half A, indices of half B, method `episodes` | `blocks`, groups alternated).
    """
    if episodes is not None:
        keys, how = cluster_keys(episodes, n, "real", "episodes")
        labels = factorize(keys)
        g = int(labels.max()) + 1 if n else 0
        if how != "blocks" and g >= MIN_FLOOR_EPISODES:
            a = np.flatnonzero(labels % 2 == 0)
            b = np.flatnonzero(labels % 2 == 1)
            if min(len(a), len(b)) >= 2:
                return a, b, "episodes", g
    block_id = block_ids(n)
    return (np.flatnonzero(block_id % 2 == 0), np.flatnonzero(block_id % 2 == 1), "blocks",
            int(block_id[-1]) + 1 if n else 0)


def noise_floor(emb_real: np.ndarray, *, episodes: Sequence[Hashable] | None = None,
                n_components: int = DEFAULT_N_COMPONENTS,
                random_state: int | np.random.Generator | None = 0) -> NoiseFloor:
    """The centroid distance between two halves of the real set (see `noise_floor_halves`).

    Args:
        emb_real: (N_real, D) real embeddings, N_real >= 4.
        episodes: optional length-N_real episode ids.
        n_components: as in `centroid_distance`.
        random_state: as in `centroid_distance`.

    Returns:
        NoiseFloor.
    """
    real = check_embeddings(emb_real, "emb_real")
    need = MIN_FRAMES["noise floor"]
    if len(real) < need:
        raise InsufficientData(f"Expected at least {need} real frames for the noise floor, got {len(real)}.")
    n_components = check_int("n_components", n_components, 1, MAX_N_COMPONENTS)
    a, b, method, g = noise_floor_halves(len(real), episodes)
    proj, _, _, value = _centroid_parts(Rows(real, a), Rows(real, b), n_components, make_rng(random_state))
    return NoiseFloor(value=value, value_norm=normed(value, proj.k), n_components=proj.k,
                      method=method, n_groups=g, n_a=len(a), n_b=len(b))

# -- centroid distance CI ------------------------------------------------------------------------------

def cluster_stats(z: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-cluster sums (G, k), counts (G,), minima (G, k) and maxima (G, k) of projections z (N, k)."""
    order = np.argsort(labels, kind="stable")
    zs, ls = z[order], labels[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ls)) + 1]
    counts = np.diff(np.r_[starts, len(ls)])
    return (np.add.reduceat(zs, starts, axis=0), counts.astype(np.float64),
            np.minimum.reduceat(zs, starts, axis=0), np.maximum.reduceat(zs, starts, axis=0))


def unit_stats(z: np.ndarray, labels: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`cluster_stats` over all g units (absent units: sum 0, count 0, min +inf, max -inf)."""
    k = z.shape[1]
    full = (np.zeros((g, k)), np.zeros(g), np.full((g, k), np.inf), np.full((g, k), -np.inf))
    present = np.unique(labels)
    for dst, src in zip(full, cluster_stats(z, labels)):
        dst[present] = src
    return full


def bootstrap_norms(weights: np.ndarray, sim: tuple[np.ndarray, ...], real: tuple[np.ndarray, ...], k: int
                    ) -> np.ndarray:
    """`value_norm` of each bootstrap replicate, all replicates at once (NaN where a side drew no frame).

    Args:
        weights: (B, G) times each unit is drawn, one row per replicate.
        sim: `unit_stats` of each side over the G units (sums, counts, minima, maxima).
        real: `unit_stats` of each side over the G units (sums, counts, minima, maxima).
        k: kept components.

    Returns:
        (B,) normalized distances: replicate b's centroids are its weighted unit sums over its
        weighted counts, its min-max range the extremes of the units it drew (weight > 0). Callers
        pass B in chunks: the temporaries are (B, G, k).
    """
    sum_s, cnt_s, min_s, max_s = sim
    sum_r, cnt_r, min_r, max_r = real
    tot_s, tot_r = weights @ cnt_s, weights @ cnt_r
    ok = (tot_s > 0) & (tot_r > 0)  # a paired draw can miss one side's own blocks
    out = np.full(len(weights), np.nan)
    b = np.flatnonzero(ok)
    w = weights[b]
    sel = (w > 0)[:, :, None]
    lo = np.where(sel, np.minimum(min_s, min_r), np.inf).min(axis=1)
    hi = np.where(sel, np.maximum(max_s, max_r), -np.inf).max(axis=1)
    diff_mean = (w @ sum_s) / tot_s[b, None] - (w @ sum_r) / tot_r[b, None]
    span = hi - lo
    diff = np.where(span > 0, diff_mean / np.where(span > 0, span, 1.0), 0.0)
    out[b] = np.minimum(1.0, np.sqrt(np.sum(diff * diff, axis=1)) / math.sqrt(k))
    return out


def centroid_distance_ci(emb_sim: np.ndarray, emb_real: np.ndarray, *, episodes_sim: Sequence[Hashable] | None = None,
                         episodes_real: Sequence[Hashable] | None = None, n_components: int = DEFAULT_N_COMPONENTS,
                         n_boot: int = CENTROID_N_BOOT, ci: float = 0.95,
                         random_state: int | np.random.Generator | None = 0,
                         pairs: np.ndarray | None = None) -> CentroidDistance:
    """`centroid_distance` plus a cluster-bootstrap percentile CI of its `value_norm`.

    The standardization and PCA are fitted once (as in `centroid_distance`) and held fixed;
    each replicate resamples whole clusters (episodes, or contiguous blocks where unknown) on
    each side with replacement and recomputes the centroids and the pooled min-max range from
    per-cluster sums, minima and maxima. A replicate costs O(clusters x k), not a refit, so
    1,000 replicates take well under a second; the interval leaves out the PCA's own sampling
    variation (small next to the centroids' for sets of hundreds of frames or more). With fewer
    than `MIN_EPISODES` (5) episodes on a side, the clusters are contiguous blocks within
    episodes, drawn for both sides at once where `pairs` match them (see `resampling_units`).

    Args:
        emb_sim: (N, D) arrays, >= 2 frames per side.
        emb_real: (N, D) arrays, >= 2 frames per side.
        episodes_sim: optional length-N episode ids per side.
        episodes_real: optional length-N episode ids per side.
        n_components: as in `centroid_distance`.
        n_boot: replicates, in [10, 100000]; default 1000.
        ci: coverage in (0, 1).
        random_state: seed (the same seed gives the same point estimate as
            `centroid_distance`).
        pairs: optional (P, 2) integer (i_sim, i_real) matched pairs; used when episodes are few.

    Returns:
        CentroidDistance with `ci` set (bounds in value_norm units).
    """
    sim, real = check_pair(emb_sim, emb_real, "centroid distance")
    n_components = check_int("n_components", n_components, 1, MAX_N_COMPONENTS)
    n_boot = check_int("n_boot", n_boot, 10, 100_000)
    level = check_level(ci)
    units = bootstrap_units(episodes_sim, episodes_real, len(sim), len(real), pairs)
    rng = make_rng(random_state)
    proj, z_sim, z_real, value = _centroid_parts(Rows(sim), Rows(real), n_components, rng)
    k = proj.k
    reps = np.zeros(n_boot)
    if k:
        g = units.n_units
        sum_s, cnt_s, min_s, max_s = unit_stats(z_sim, units.sim, g)
        sum_r, cnt_r, min_r, max_r = unit_stats(z_real, units.real, g)
        boot_rng = np.random.default_rng(draw_seed(rng))
        step = max(1, BOOT_CHUNK_ELEMENTS // (g * k))  # replicates per chunk
        for c in range(0, n_boot, step):
            weights = np.stack([unit_weights(units, boot_rng) for _ in range(min(step, n_boot - c))])
            reps[c:c + len(weights)] = bootstrap_norms(weights.astype(np.float64), (sum_s, cnt_s, min_s, max_s),
                                                       (sum_r, cnt_r, min_r, max_r), k)
    reps = reps[np.isfinite(reps)]
    estimate = normed(value, k)
    low, high, bias = centred_ci(reps, estimate, level)
    interval = CI(low=max(0.0, low), high=min(1.0, high), level=level, n_boot=len(reps),
                  n_clusters_sim=len(np.unique(units.sim)), n_clusters_real=len(np.unique(units.real)),
                  clusters=units.how, bias=bias)
    return CentroidDistance(value=value, value_norm=normed(value, k), n_components=k, n_sim=len(sim),
                            n_real=len(real), n_fit=proj.n_fit, explained_variance=proj.explained, ci=interval)
