"""Two-sample tests of sim vs real: a grouped domain-classifier AUC and MMD with a permutation p-value.

With fewer than `MIN_EPISODES` (5) episodes on a side, whole episodes are too few units: the
classifier's folds then keep contiguous blocks within episodes (with matched pairs: a pair's
two frames) together, and MMD swaps sim and real within matched pairs (a paired permutation:
exact under the null hypothesis that a pair's two frames are exchangeable) or, without pairs,
relabels blocks within episodes.

Cost caps: at most `AUC_MAX_SAMPLES` (5,000) frames per side for the domain AUC; at most
`MMD_MAX_SAMPLES` (1,000) frames per side (a 2,000 x 2,000 kernel matrix, 32 MB) and
`MMD_PERMUTATIONS` (200) permutations (p-value resolution 1/201) for MMD.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from threadpoolctl import threadpool_limits

from perception_gap.errors import InsufficientData
from perception_gap.metrics.projection import MAX_N_COMPONENTS, Rows, fit_pca, gather_rows, standardize_inplace
from perception_gap.metrics.resampling import (
    check_pairs,
    cluster_keys,
    episode_blocks,
    factorize,
    few_clusters,
    grouped_folds,
    join_how,
    resampling_units,
    subsample,
)
from perception_gap.metrics.results import MMD, DomainAUC
from perception_gap.metrics.validation import check_int, check_pair, draw_seed, make_rng

# Domain AUC: 256 PCA components. A difference can hide in a low-variance direction
# (with isotropic noise in 1280-D a 1-sd shift is not among the top 64 sample components), so
# the classifier keeps many; 256 still fits 5 logistic regressions on 8,000 rows in a few
# seconds (~300 L-BFGS iterations each on pixel-baseline features).
AUC_N_COMPONENTS = 256
AUC_MAX_SAMPLES = 5_000
AUC_MAX_SAMPLES_LIMIT = 20_000  # 2 x 20,000 x D float64: 410 MB at D = 1280
MMD_MAX_SAMPLES = 1_000
MMD_MAX_SAMPLES_LIMIT = 5_000
MMD_PERMUTATIONS = 200
MIN_PAIRS = 8  # a paired permutation needs 2^P >> 1/alpha labellings: 256 at 8 pairs


# -- domain classifier AUC ------------------------------------------------------------------------

def domain_auc(emb_sim: np.ndarray, emb_real: np.ndarray, *, episodes_sim: Sequence[Hashable] | None = None,
               episodes_real: Sequence[Hashable] | None = None, n_splits: int = 5,
               n_components: int = AUC_N_COMPONENTS, max_samples: int = AUC_MAX_SAMPLES,
               random_state: int | np.random.Generator | None = 0, pairs: np.ndarray | None = None) -> DomainAUC:
    """Cross-validated AUC of a logistic-regression sim-vs-real classifier.

    Frames are standardized and reduced by PCA (at most `n_components`, default 256), both
    fitted once on the pooled frames without labels (unsupervised, so no label leaks into the
    test folds); L2 logistic regression (C = 1) is then trained per fold. The PCA scores are
    not whitened: L2 is rotation invariant, so this is the standardized-feature classifier
    restricted to the top components; whitening would give pure-noise components the weight of
    the signal and, with few frames, drown it (a clear shift read as AUC 0.65 instead of 1). Folds are grouped: an
    episode id shared by sim and real frames is one group (paired episodes of one scene never
    straddle train and test), and where episodes are unknown each side's contiguous blocks are
    groups. With fewer than `MIN_EPISODES` episodes on a side the groups are contiguous blocks
    within episodes, and with `pairs` a real frame joins its sim twin's block (see
    `resampling_units`). The AUC is taken over all out-of-fold decision values at once.

    Args:
        emb_sim: (N_sim, D), N_sim >= 4.
        emb_real: (N_real, D), N_real >= 4.
        episodes_sim: optional length-N episode ids per side.
        episodes_real: optional length-N episode ids per side.
        n_splits: folds wanted, in [2, 20]; fewer are used when there are fewer groups.
        n_components: PCA components for the classifier, in [1, MAX_N_COMPONENTS].
        max_samples: frames per side (a seeded random subset beyond it), in [4, 20000];
            default 5000.
        random_state: seed.
        pairs: optional (P, 2) integer (i_sim, i_real) matched pairs; used when episodes are few.

    Returns:
        DomainAUC.
    """
    sim, real = check_pair(emb_sim, emb_real, "domain AUC")
    n_splits = check_int("n_splits", n_splits, 2, 20)
    n_components = check_int("n_components", n_components, 1, MAX_N_COMPONENTS)
    max_samples = check_int("max_samples", max_samples, 4, AUC_MAX_SAMPLES_LIMIT)
    rng = make_rng(random_state)
    keys_sim, how_sim = cluster_keys(episodes_sim, len(sim), "sim", "episodes_sim")
    keys_real, how_real = cluster_keys(episodes_real, len(real), "real", "episodes_real")
    grouping = join_how(how_sim, how_real)
    if few_clusters(keys_sim) or few_clusters(keys_real):
        if pairs is not None and len(check_pairs(pairs, len(sim), len(real))):
            units = resampling_units(episodes_sim, episodes_real, len(sim), len(real), pairs)
            groups, grouping = np.r_[units.sim, units.real], units.how
        else:  # same episode id on both sides: the same block numbers, one group
            groups, grouping = factorize(episode_blocks(keys_sim) + episode_blocks(keys_real)), "episode blocks"
    else:
        groups = factorize(keys_sim + keys_real)
    i_sim = subsample(len(sim), max_samples, rng)
    i_real = subsample(len(real), max_samples, rng)
    groups = np.concatenate([groups[:len(sim)][i_sim], groups[len(sim):][i_real]])
    y = np.r_[np.zeros(len(i_sim), dtype=np.int64), np.ones(len(i_real), dtype=np.int64)]
    for side, g in (("sim", groups[y == 0]), ("real", groups[y == 1])):
        if len(np.unique(g)) < 2:
            raise InsufficientData("Expected at least 2 episodes (or blocks) on "
                                   f"the {side} side for the domain AUC, got 1.")
    folds = grouped_folds(groups, y, n_splits=n_splits, random_state=rng)
    x = gather_rows([Rows(sim, i_sim), Rows(real, i_real)])
    standardize_inplace(x)
    k = min(n_components, x.shape[1], len(x) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        _, feats = fit_pca(x, k, draw_seed(rng), scores=True)  # fit_transform: x may be centred in place
    del x
    oof = np.empty(len(y))
    # One BLAS thread for the fits: an L-BFGS step is two (N x k) matrix-vector products,
    # too small to split, and a second BLAS thread spin-waiting for a busy core made the folds
    # ~10x slower on a loaded 2-core machine (bench/README.md, bench_run.py).
    with threadpool_limits(limits=1, user_api="blas"):
        for train, test in folds:
            clf = LogisticRegression(C=1.0, max_iter=1000).fit(feats[train], y[train])
            oof[test] = clf.decision_function(feats[test])
    return DomainAUC(value=float(roc_auc_score(y, oof)), n_sim=len(i_sim), n_real=len(i_real), n_splits=len(folds),
                     n_groups=len(np.unique(groups)), grouping=grouping, n_components=k)


# -- MMD ---------------------------------------------------------------------------------------------

def _mmd2_batch(kz: np.ndarray, z: np.ndarray, row_sums: np.ndarray, total: float, diag: np.ndarray,
                diag_total: float) -> np.ndarray:
    """Unbiased MMD^2 for each column of the 0/1 membership matrix z (1 = sim), given K @ z."""
    sxx = np.einsum("ij,ij->j", z, kz)  # z' K z
    szr = row_sums @ z  # z' K 1
    syy = total - 2.0 * szr + sxx  # (1-z)' K (1-z)
    sxy = szr - sxx  # z' K (1-z)
    dx = diag @ z
    dy = diag_total - dx
    nx = z.sum(axis=0)
    ny = len(z) - nx
    return (sxx - dx) / (nx * (nx - 1)) + (syy - dy) / (ny * (ny - 1)) - 2.0 * sxy / (nx * ny)


def median_bandwidth(x: np.ndarray) -> float:
    """Median heuristic: the median pairwise Euclidean distance among the rows of x (n, D).

    Falls back to the median of the non-zero distances when more than half are zero, and to
    1.0 when every row is identical (the kernel is then constant and MMD^2 is 0).
    """
    return _median_sigma(_sq_dists(np.asarray(x, dtype=np.float64)))


def _median_sigma(d2: np.ndarray) -> float:
    d = np.sqrt(d2[np.triu_indices(len(d2), 1)])
    med = float(np.median(d)) if len(d) else 0.0
    if med > 0:
        return med
    pos = d[d > 0]
    return float(np.median(pos)) if len(pos) else 1.0


def _sq_dists(x: np.ndarray) -> np.ndarray:
    # distances ignore a common offset, but |a|^2 + |b|^2 - 2ab loses it to cancellation: centre first
    x = x - x.mean(axis=0, keepdims=True)
    sq = np.einsum("ij,ij->i", x, x)
    d2 = sq[:, None] + sq[None, :] - 2.0 * (x @ x.T)
    np.maximum(d2, 0.0, out=d2)
    np.fill_diagonal(d2, 0.0)
    return d2


def _mmd_units(episodes_sim: Sequence[Hashable] | None, episodes_real: Sequence[Hashable] | None, n_sim: int,
               n_real: int, pairs: np.ndarray | None) -> tuple[str, np.ndarray | None, list[Hashable], list[Hashable]]:
    """What an MMD permutation relabels: (`episodes` | `episode blocks` | `pairs` | `frames`,
    unique pairs or None, sim cluster keys, real cluster keys)."""
    if episodes_sim is None or episodes_real is None:
        return "frames", None, [], []
    keys_s, _ = cluster_keys(episodes_sim, n_sim, "sim", "episodes_sim")
    keys_r, _ = cluster_keys(episodes_real, n_real, "real", "episodes_real")
    if not (few_clusters(keys_s) or few_clusters(keys_r)):
        return "episodes", None, keys_s, keys_r
    p = check_pairs(pairs, n_sim, n_real) if pairs is not None else np.zeros((0, 2), dtype=np.int64)
    if len(p) >= MIN_PAIRS:
        return "pairs", p, [], []
    return "episode blocks", None, episode_blocks(keys_s), episode_blocks(keys_r)


def _cluster_memberships(clusters: np.ndarray, n_s: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """(n, m) 0/1 sim memberships: m random relabellings of whole clusters (sim clusters numbered first)."""
    n_clusters = int(clusters.max()) + 1
    sim_clusters = int(clusters[:n_s].max()) + 1
    member = np.zeros((n_clusters, m))
    for j in range(m):
        member[rng.permutation(n_clusters)[:sim_clusters], j] = 1.0
    return member[clusters]


def _paired_memberships(n_pairs: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """(2 n_pairs, m) 0/1 sim memberships: each pair's two frames swapped with probability 1/2."""
    swap = rng.integers(2, size=(n_pairs, m)).astype(np.float64)
    return np.vstack([1.0 - swap, swap])


def mmd(emb_sim: np.ndarray, emb_real: np.ndarray, *, episodes_sim: Sequence[Hashable] | None = None,
        episodes_real: Sequence[Hashable] | None = None, n_permutations: int = MMD_PERMUTATIONS,
        max_samples: int = MMD_MAX_SAMPLES, random_state: int | np.random.Generator | None = 0,
        pairs: np.ndarray | None = None) -> MMD:
    """Unbiased MMD^2 (RBF kernel, median-heuristic bandwidth) with a permutation p-value.

    Each side is subsampled to `max_samples` frames (seeded); the kernel matrix of the pooled
    subsample is computed once and every permutation only relabels rows (one matrix product
    per batch of permutations). What is relabelled (`MMD.permutation`):
    - `episodes`: both sides carry episode ids, >= `MIN_EPISODES` (5) each: whole episodes
      (frames of an episode are not exchangeable);
    - `pairs`: fewer episodes on a side and >= `MIN_PAIRS` matched `pairs`: the statistic is
      taken over the paired frames only (at most `max_samples` pairs, each frame in one pair)
      and each permutation swaps sim and real within every pair with probability 1/2, which
      the null hypothesis (a pair's two frames are exchangeable) makes exact however
      correlated the frames of an episode are;
    - `episode blocks`: fewer episodes and no pairs: contiguous blocks within episodes;
    - `frames`: episodes unknown on a side: single frames.

    Args:
        emb_sim: (N_sim, D), N_sim >= 4.
        emb_real: (N_real, D), N_real >= 4.
        episodes_sim: optional length-N episode ids per side.
        episodes_real: optional length-N episode ids per side.
        n_permutations: in [1, 100000]; default 200.
        max_samples: frames per side, in [4, 5000]; default 1000. The kernel matrix is
            (2 max_samples)^2 float64: 32 MB at 1000, 800 MB at 5000.
        random_state: seed.
        pairs: optional (P, 2) integer (i_sim, i_real) matched pairs; used when episodes are few.

    Returns:
        MMD.
    """
    sim, real = check_pair(emb_sim, emb_real, "MMD")
    n_permutations = check_int("n_permutations", n_permutations, 1, 100_000)
    max_samples = check_int("max_samples", max_samples, 4, MMD_MAX_SAMPLES_LIMIT)
    rng = make_rng(random_state)
    permutation, p, keys_s, keys_r = _mmd_units(episodes_sim, episodes_real, len(sim), len(real), pairs)
    if p is not None:
        p = p[subsample(len(p), max_samples, rng)]
        i_sim, i_real = p[:, 0], p[:, 1]
    else:
        i_sim = subsample(len(sim), max_samples, rng)
        i_real = subsample(len(real), max_samples, rng)
    x = gather_rows([Rows(sim, i_sim), Rows(real, i_real)])
    n_s, n = len(i_sim), len(x)
    d2 = _sq_dists(x)
    del x
    sigma = _median_sigma(d2)
    kern = np.exp(d2 / (-2.0 * sigma * sigma), out=d2)
    row_sums = kern.sum(axis=1)
    total = float(row_sums.sum())
    diag = np.diagonal(kern).copy()
    diag_total = float(diag.sum())

    clusters = np.arange(n)
    if permutation in ("episodes", "episode blocks"):
        lab_s = factorize([(0, k) for k in keys_s])[i_sim]
        lab_r = factorize([(1, k) for k in keys_r])[i_real]
        if len(np.unique(lab_s)) >= 2 and len(np.unique(lab_r)) >= 2:
            _, lab_s = np.unique(lab_s, return_inverse=True)
            _, lab_r = np.unique(lab_r, return_inverse=True)
            clusters = np.r_[lab_s, lab_r + lab_s.max() + 1]
        else:
            permutation = "frames"

    z0 = np.zeros((n, 1))
    z0[:n_s] = 1.0
    observed = float(_mmd2_batch(kern @ z0, z0, row_sums, total, diag, diag_total)[0])
    exceed = 0
    batch = 64
    for s in range(0, n_permutations, batch):
        m = min(batch, n_permutations - s)
        z = _paired_memberships(n_s, m, rng) if permutation == "pairs" else _cluster_memberships(clusters, n_s, m, rng)
        ok = (z.sum(axis=0) >= 2) & (z.sum(axis=0) <= n - 2)
        stats = np.full(m, np.inf)  # a relabelling too lopsided to estimate counts as extreme
        stats[ok] = _mmd2_batch(kern @ z[:, ok], z[:, ok], row_sums, total, diag, diag_total)
        exceed += int((stats >= observed - 1e-12 * max(1.0, abs(observed))).sum())
    p_value = (exceed + 1) / (n_permutations + 1)
    return MMD(value=observed, p_value=float(p_value), bandwidth=sigma, n_sim=n_s, n_real=n - n_s,
               n_permutations=n_permutations, permutation=permutation)
