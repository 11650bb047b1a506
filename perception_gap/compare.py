"""Sim-vs-real comparison of embeddings: pure functions on arrays, frozen results.

Every metric takes `emb_sim` (N_sim, D) and `emb_real` (N_real, D) (any real float or int
dtype; float32 stays float32 in memory and is converted to float64 one chunk at a time) and
returns a frozen dataclass whose class attributes say what it is (`name`, `unit`) and how to
read it (`higher_is_gap`). `to_dict()` gives JSON-safe plain Python numbers, None where a
value does not exist. No metric returns NaN: too little data raises `InsufficientData`, bad
arguments raise `InputError`.

Episodes. `episodes_sim` / `episodes_real` are optional length-N sequences of hashable
episode ids (None for the whole sequence, or for one frame, means "unknown"). Frames of one
episode are near-duplicates, so they are kept together wherever data is split or resampled
(cross-validation folds, noise-floor halves, bootstrap clusters). Where episodes are unknown,
frames are assumed to be stored in capture order and contiguous blocks stand in for
episodes: `N_BLOCKS` (16) blocks of near-equal length per side (each frame its own block
below 16 frames). Sixteen clusters per side are enough for 5-fold grouped CV and for a
cluster bootstrap, and blocks of N/16 frames keep most near-duplicate neighbours together.

Cost caps (all documented defaults; every cap draws a seeded random subset):
- PCA fits (centroid distance, noise floor) use at most `MAX_FIT_ROWS` (20,000) pooled rows;
  every row is then projected, in chunks of `CHUNK_ROWS`, so centroids and the min-max range
  cover all frames. The projected data is only (N, k) float64 (25 MB for 100k x 32).
- Domain AUC: at most `AUC_MAX_SAMPLES` (5,000) frames per side.
- MMD: at most `MMD_MAX_SAMPLES` (1,000) frames per side (a 2,000 x 2,000 kernel matrix,
  32 MB) and `MMD_PERMUTATIONS` (200) permutations (p-value resolution 1/201).
- Bootstrap: `N_BOOT` (200) replicates for an arbitrary statistic, each seeing at most
  `BOOT_MAX_SAMPLES` (5,000) frames per side; the centroid-distance CI reuses one projection
  and costs O(clusters x k) per replicate, so it defaults to `CENTROID_N_BOOT` (1,000).
With these caps 100k x 1280 float32 per side runs every metric in well under 2 GB RSS
(inputs included; see bench/bench_compare.py).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.preprocessing import StandardScaler

from perception_gap.errors import InputError, InsufficientData
from perception_gap.results import Result

log = logging.getLogger(__name__)

# Centroid distance keeps 32 components by default. Min-max scaling gives every kept
# component the same weight whatever its variance, so each extra trailing component (mostly
# noise for 512-1280-D encoders) dilutes the distance; 32 holds the dominant structure of
# such embeddings, stays below the row count of small sets (k <= N_total - 1), and keeps
# value_norm comparable across encoders of different widths. The price, inherent to the
# recipe: a shift along a low-variance direction that is not among the top 32 components is
# invisible to it; the domain AUC (256 components) and MMD (no PCA) still see it.
DEFAULT_N_COMPONENTS = 32
MAX_N_COMPONENTS = 512
MAX_FIT_ROWS = 20_000
CHUNK_ROWS = 4096
N_BLOCKS = 16
# A PCA component explaining less than this fraction of the standardized variance is numerical
# rank deficiency (duplicate rows, constant features), not signal: min-max scaling would blow
# its rounding noise up to [0, 1], so it is dropped and k shrinks to the numerical rank.
RANK_TOL = 1e-9
# Noise floor: halves by episode when there are at least this many episodes.
MIN_FLOOR_EPISODES = 4
# Domain AUC: 256 PCA components. A difference can hide in a low-variance direction
# (with isotropic noise in 1280-D a 1-sd shift is not among the top 64 sample components), so
# the classifier keeps many; 256 still fits 5 logistic regressions on 8,000 rows in about a
# second.
AUC_N_COMPONENTS = 256
AUC_MAX_SAMPLES = 5_000
AUC_MAX_SAMPLES_LIMIT = 20_000  # 2 x 20,000 x D float64: 410 MB at D = 1280
MMD_MAX_SAMPLES = 1_000
MMD_MAX_SAMPLES_LIMIT = 5_000
MMD_PERMUTATIONS = 200
N_BOOT = 200
CENTROID_N_BOOT = 1_000
BOOT_MAX_SAMPLES = 5_000

_MIN_FRAMES = {"centroid distance": 2, "noise floor": 4, "domain AUC": 4, "MMD": 4, "bootstrap CI": 2}


# -- results -----------------------------------------------------------------------------------------



@dataclass(frozen=True)
class CI(Result):
    """A cluster-bootstrap confidence interval, in the units of its statistic.

    Centred percentile interval: the bootstrap distribution is shifted so that its median
    falls on the point estimate, and its (1 - level)/2 and (1 + level)/2 quantiles are read
    off. Plain percentile intervals of a distance sit above the estimate whenever the gap is
    small next to sampling noise (resampling noise only ever adds distance); centred, the
    interval says how far the estimate moves when whole episodes are resampled, which is what
    comparing two candidates or a baseline at similar set sizes needs. It is not an interval
    for the infinite-data distance (smaller by about `bias`).

    Attributes:
        low, high: interval bounds; low <= estimate <= high.
        level: nominal coverage (0.95).
        bias: median of the replicates minus the estimate (> 0: resampling inflates it).
        n_boot: replicates the interval was read from.
        n_clusters_sim, n_clusters_real: clusters (episodes or blocks) resampled per side.
        clusters: `episodes`, `blocks` (episodes unknown) or `mixed`.
        capped: True when replicates saw a random subset of at most `max_samples` frames per
            side (the interval is then wider than for the full sets: conservative).
    """

    low: float
    high: float
    level: float
    n_boot: int
    n_clusters_sim: int
    n_clusters_real: int
    clusters: str
    bias: float = 0.0
    capped: bool = False
    method: str = "centred percentile"

    name: ClassVar[str] = "bootstrap_ci"
    unit: ClassVar[str] = "units of the statistic"

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class CentroidDistance(Result):
    """Normalized PCA centroid distance between sim and real (Yardi et al. 2025).

    Attributes:
        value: Euclidean distance between the sim and real centroids after pooled
            standardization, pooled PCA to k components and per-component min-max scaling;
            in [0, sqrt(k)].
        value_norm: value / sqrt(k), in [0, 1]; comparable across k and encoders.
        n_components: k actually used: min(n_components, D, N_total - 1, numerical rank).
        n_sim, n_real: frames per side (all of them enter the centroids and the min-max).
        n_fit: pooled rows the scaler and PCA were fitted on (<= MAX_FIT_ROWS).
        explained_variance: fraction of the standardized variance the k components hold.
        ci: bootstrap CI of `value_norm` (from `centroid_distance_ci`), else None.
    """

    value: float
    value_norm: float
    n_components: int
    n_sim: int
    n_real: int
    n_fit: int
    explained_variance: float
    ci: CI | None = None

    name: ClassVar[str] = "centroid_distance"
    unit: ClassVar[str] = "min-max scaled PCA units (value_norm: fraction of the unit-cube diagonal)"
    higher_is_gap: ClassVar[bool] = True


@dataclass(frozen=True)
class NoiseFloor(Result):
    """The centroid distance between two halves of the real set that cover the same scenes.

    A sim-vs-real distance at or below this is indistinguishable from real-vs-real sampling
    variation. The halves hold about N_real / 2 frames each, so compare it with a sim-vs-real
    distance on sets of similar size (the min-max range grows slowly with N).

    Attributes:
        value, value_norm, n_components: as in `CentroidDistance`.
        method: `episodes` (alternate episodes, >= 4 of them) or `blocks` (alternate
            contiguous blocks, N_BLOCKS of them).
        n_groups: episodes or blocks that were alternated.
        n_a, n_b: frames in each half.
    """

    value: float
    value_norm: float
    n_components: int
    method: str
    n_groups: int
    n_a: int
    n_b: int

    name: ClassVar[str] = "noise_floor"
    unit: ClassVar[str] = "min-max scaled PCA units (value_norm: fraction of the unit-cube diagonal)"
    higher_is_gap: ClassVar[bool] = True


@dataclass(frozen=True)
class PairedCosine(Result):
    """Cosine distance 1 - cos(e_sim, e_real) over matched pairs.

    Attributes:
        mean, median, p90: over the matched pairs, in [0, 2].
        shuffled_mean: the expected mean over mismatched pairs (every sim side of a pair
            against every other pair's real side): the "no correspondence" reference.
        n_pairs: matched pairs.
        n_zero_norm: pairs where either embedding is all zeros (their cosine counts as 0).
    """

    mean: float
    median: float
    p90: float
    shuffled_mean: float
    n_pairs: int
    n_zero_norm: int = 0

    name: ClassVar[str] = "paired_cosine"
    unit: ClassVar[str] = "cosine distance (1 - cos), in [0, 2]"
    higher_is_gap: ClassVar[bool] = True


@dataclass(frozen=True)
class DomainAUC(Result):
    """Out-of-fold ROC AUC of a linear sim-vs-real classifier (0.5: indistinguishable).

    Attributes:
        value: AUC of the out-of-fold decision values (real = positive class), in [0, 1].
        n_sim, n_real: frames used per side (<= max_samples).
        n_splits: cross-validation folds actually used.
        n_groups: groups (episodes or blocks) the folds were drawn from.
        grouping: `episodes`, `blocks` or `mixed`.
        n_components: PCA components fed to the classifier.
    """

    value: float
    n_sim: int
    n_real: int
    n_splits: int
    n_groups: int
    grouping: str
    n_components: int

    name: ClassVar[str] = "domain_auc"
    unit: ClassVar[str] = "ROC AUC"
    higher_is_gap: ClassVar[bool] = True


@dataclass(frozen=True)
class MMD(Result):
    """Unbiased squared maximum mean discrepancy with an RBF kernel, and a permutation p-value.

    Attributes:
        value: unbiased MMD^2 estimate (can be slightly negative when the sets match).
        p_value: (b + 1) / (n_permutations + 1), b = permutations with MMD^2 >= value.
        bandwidth: sigma of k(x, y) = exp(-|x - y|^2 / (2 sigma^2)): the median pairwise
            Euclidean distance of the pooled (subsampled) frames, in embedding units.
        n_sim, n_real: frames used per side (<= max_samples).
        n_permutations: permutations drawn.
        permutation: `episodes` (whole episodes relabelled: valid for correlated frames) or
            `frames` (frames relabelled: assumes exchangeable frames).
    """

    value: float
    p_value: float
    bandwidth: float
    n_sim: int
    n_real: int
    n_permutations: int
    permutation: str

    name: ClassVar[str] = "mmd"
    unit: ClassVar[str] = "squared RKHS distance (RBF kernel, median-heuristic bandwidth)"
    higher_is_gap: ClassVar[bool] = True


# -- validation ---------------------------------------------------------------------------------

def _rng(random_state: int | np.random.Generator | None) -> np.random.Generator:
    if isinstance(random_state, (bool, np.bool_)):
        raise InputError(f"Expected `random_state` an int, a numpy Generator or None, got {random_state!r}.")
    if random_state is None or isinstance(random_state, (int, np.integer, np.random.Generator)):
        return np.random.default_rng(random_state)
    raise InputError(f"Expected `random_state` an int, a numpy Generator or None, got {random_state!r}.")


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2**31 - 1))


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise InputError(f"Expected `{name}` in [{lo}, {hi}], got {value!r}.")
    return int(value)


def _check_level(ci: Any) -> float:
    if isinstance(ci, (bool, np.bool_)) or not isinstance(ci, (int, float, np.floating)) or not 0.0 < ci < 1.0:
        raise InputError(f"Expected `ci` in (0, 1), got {ci!r}.")
    return float(ci)


def _check_embeddings(emb: Any, name: str) -> np.ndarray:
    a = np.asarray(emb)
    if a.ndim != 2 or a.shape[1] < 1:
        raise InputError(f"Expected `{name}` of shape (N, D) with D >= 1, got shape {a.shape}.")
    if a.dtype.kind not in "fiu":
        raise InputError(f"Expected `{name}` of a real numeric dtype, got {a.dtype}.")
    if a.dtype.kind == "f":
        bad = sum(int((~np.isfinite(a[s:s + CHUNK_ROWS])).any(axis=1).sum()) for s in range(0, len(a), CHUNK_ROWS))
        if bad:
            raise InputError(f"Expected finite values in `{name}`, found NaN or inf in {bad} of {len(a)} rows.")
    return a


def _check_pair(emb_sim: Any, emb_real: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    sim = _check_embeddings(emb_sim, "emb_sim")
    real = _check_embeddings(emb_real, "emb_real")
    if sim.shape[1] != real.shape[1]:
        raise InputError("Expected `emb_sim` and `emb_real` of the same "
                         f"width D, got {sim.shape[1]} and {real.shape[1]}.")
    need = _MIN_FRAMES[what]
    if len(sim) < need or len(real) < need:
        raise InsufficientData(f"Expected at least {need} frames per side for the "
                               f"{what}, got {len(sim)} sim and {len(real)} real.")
    return sim, real


# -- episodes, blocks, folds, resampling -----------------------------------------------------------

class _Unknown:
    """Sentinel inside block keys, so a block never equals a user's episode id."""

    def __repr__(self) -> str:
        return "<unknown episode>"


_UNKNOWN = _Unknown()


def block_ids(n: int) -> np.ndarray:
    """(n,) contiguous block number per frame: min(n, N_BLOCKS) blocks of near-equal length.

    Blocks stand in for episodes where episodes are unknown (frames in capture order).
    """
    q, r = divmod(n, N_BLOCKS)
    # Like numpy.array_split: the first r blocks hold one extra frame, so alternating blocks
    # gives halves that differ by at most one frame.
    return np.repeat(np.arange(N_BLOCKS), [q + 1] * r + [q] * (N_BLOCKS - r))


def _is_unknown(e: Any) -> bool:
    return e is None or (isinstance(e, (float, np.floating)) and math.isnan(e))


def _cluster_keys(episodes: Sequence[Hashable] | None, n: int, side: str, name: str) -> tuple[list[Hashable], str]:
    """One hashable cluster key per frame, and how the clusters were formed."""
    block = block_ids(n).tolist()
    if episodes is None:
        return [(_UNKNOWN, side, b) for b in block], "blocks"
    if isinstance(episodes, (str, bytes)) or not hasattr(episodes, "__len__"):
        raise InputError(f"Expected `{name}` a sequence of {n} episode ids or None, got {type(episodes).__name__}.")
    if len(episodes) != n:
        raise InputError(f"Expected `{name}` of length {n} (one episode id per frame), got {len(episodes)}.")
    keys: list[Hashable] = []
    n_unknown = 0
    for i, e in enumerate(episodes):
        if _is_unknown(e):
            keys.append((_UNKNOWN, side, block[i]))
            n_unknown += 1
        else:
            try:
                hash(e)
            except TypeError:
                raise InputError(f"Expected hashable episode ids in `{name}`, "
                                 f"got {type(e).__name__} at frame {i}.") from None
            keys.append(e.item() if isinstance(e, np.generic) else e)
    how = "blocks" if n_unknown == n else "mixed" if n_unknown else "episodes"
    return keys, how


def _factorize(keys: list[Hashable]) -> np.ndarray:
    """Integer labels 0..G-1 in order of first appearance."""
    index: dict[Hashable, int] = {}
    return np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=len(keys))


def _join_how(a: str, b: str) -> str:
    return a if a == b else "mixed"


def cluster_labels(episodes: Sequence[Hashable] | None, n: int) -> np.ndarray:
    """Cluster label per frame: episodes where known, contiguous blocks where unknown.

    Args:
        episodes: length-n episode ids, or None (all unknown); None/NaN entries are unknown.
        n: number of frames.

    Returns:
        (n,) int64 labels numbered 0..G-1 in order of first appearance.
    """
    return _factorize(_cluster_keys(episodes, n, "frames", "episodes")[0])


def resample_clusters(labels: np.ndarray, *, random_state: int | np.random.Generator | None = 0) -> np.ndarray:
    """One cluster-bootstrap draw: G clusters with replacement, each contributing all its frames.

    Args:
        labels: (N,) integer cluster label per frame.
        random_state: seed or Generator.

    Returns:
        Frame indices (sorted by frame), each frame repeated as often as its cluster was drawn.
    """
    _, inv = np.unique(np.asarray(labels), return_inverse=True)
    return _resample(inv, int(inv.max()) + 1 if len(inv) else 0, _rng(random_state))


def _resample(labels: np.ndarray, g: int, rng: np.random.Generator) -> np.ndarray:
    """`resample_clusters` on labels already numbered 0..g-1."""
    counts = np.bincount(rng.integers(g, size=g), minlength=g)
    return np.repeat(np.arange(len(labels)), counts[labels])


def grouped_folds(groups: np.ndarray, labels: np.ndarray, *, n_splits: int = 5,
                  random_state: int | np.random.Generator | None = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified, grouped cross-validation folds: a group never straddles train and test.

    Args:
        groups: (N,) group id per sample (an episode, or a block of frames).
        labels: (N,) class per sample (0 = sim, 1 = real).
        n_splits: folds wanted; at most the number of groups, and of samples in the smallest
            class, is used.
        random_state: seed for the group shuffle.

    Returns:
        (train_indices, test_indices) per fold; every sample is in exactly one test fold.

    Raises:
        InsufficientData: fewer than 2 groups, or a training fold missing a class.
    """
    groups = np.asarray(groups)
    labels = np.asarray(labels)
    n_groups = len(np.unique(groups))
    smallest_class = int(np.unique(labels, return_counts=True)[1].min()) if len(labels) else 0
    k = min(n_splits, n_groups, smallest_class)
    if k < 2:
        raise InsufficientData(f"Expected at least 2 episodes (or blocks) for grouped folds, got {n_groups}.")
    splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=_seed(_rng(random_state)))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*least populated class.*")
        folds = list(splitter.split(np.zeros(len(labels)), labels, groups))
    classes = np.unique(labels)
    for train, test in folds:
        if len(test) == 0 or len(np.unique(labels[train])) < len(classes):
            raise InsufficientData(
                f"Expected every training fold to hold both domains; with {n_groups} episodes (or blocks) "
                f"in {k} folds one did not. Supply more episodes or fewer folds.")
    return folds


# -- the pooled projection (standardize -> PCA) ------------------------------------------------------

class _Rows:
    """A row subset of an (N, D) array, read as float64 copies one chunk at a time (no full copy)."""

    __slots__ = ("arr", "idx")

    def __init__(self, arr: np.ndarray, idx: np.ndarray | None = None) -> None:
        self.arr = arr
        self.idx = idx

    def __len__(self) -> int:
        return len(self.arr) if self.idx is None else len(self.idx)

    def take(self, sel: np.ndarray | slice) -> np.ndarray:
        rows = self.arr[sel] if self.idx is None else self.arr[self.idx[sel]]
        out = np.asarray(rows, dtype=np.float64)
        # Always a private array: callers standardize it in place, never the caller's input.
        return out.copy() if np.may_share_memory(out, self.arr) else out

    def chunks(self) -> Iterator[np.ndarray]:
        for s in range(0, len(self), CHUNK_ROWS):
            yield self.take(slice(s, s + CHUNK_ROWS))

    def subset(self, sel: np.ndarray) -> _Rows:
        """The rows `sel` (indices into this view) as a new view."""
        return _Rows(self.arr, sel if self.idx is None else self.idx[sel])


def _gather(parts: list[_Rows]) -> np.ndarray:
    """Stack row views into one new float64 array, filled chunk by chunk (one full-size array)."""
    out = np.empty((sum(len(p) for p in parts), parts[0].arr.shape[1]))
    pos = 0
    for p in parts:
        for chunk in p.chunks():
            out[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
    return out


def _standardize_inplace(x: np.ndarray) -> StandardScaler:
    """Fit a StandardScaler on x (N, D) float64 and apply it in place, chunk by chunk.

    `partial_fit` over chunks gives the same mean and variance as `fit` (to rounding) without
    `fit`'s full-size temporaries.
    """
    scaler = StandardScaler()
    for s in range(0, len(x), CHUNK_ROWS):
        scaler.partial_fit(x[s:s + CHUNK_ROWS])
    for s in range(0, len(x), CHUNK_ROWS):
        x[s:s + CHUNK_ROWS] -= scaler.mean_
        x[s:s + CHUNK_ROWS] /= scaler.scale_
    return scaler


def _pca_solver(n: int, d: int) -> str:
    # Exact solvers wherever affordable (results reproducible to rounding, and tests can match
    # a plain SVD): covariance eigh costs n*d^2 and d^2 memory; full SVD n*d*min(n, d).
    if d <= 4096 and n >= d:
        return "covariance_eigh"
    if min(n, d) <= 2048:
        return "full"
    return "randomized"


@dataclass(frozen=True)
class _Projection:
    weights: np.ndarray  # (D, k): components / scale
    offset: np.ndarray  # (k,)
    explained: float
    n_fit: int

    @property
    def k(self) -> int:
        return self.weights.shape[1]

    def transform(self, rows: _Rows) -> np.ndarray:
        """(len(rows), k) float64 projections, computed chunk by chunk."""
        out = np.empty((len(rows), self.k))
        s = 0
        for chunk in rows.chunks():
            out[s:s + len(chunk)] = chunk @ self.weights - self.offset
            s += len(chunk)
        return out


def _fit_projection(sides: list[_Rows], n_components: int, rng: np.random.Generator) -> _Projection:
    """StandardScaler then PCA, both fitted on the pooled rows (a seeded subset beyond MAX_FIT_ROWS)."""
    sizes = [len(r) for r in sides]
    n = sum(sizes)
    pick = np.arange(n) if n <= MAX_FIT_ROWS else np.sort(rng.choice(n, MAX_FIT_ROWS, replace=False))
    if n > MAX_FIT_ROWS:
        log.debug("fitting the pooled scaler and PCA on %d of %d rows", MAX_FIT_ROWS, n)
    starts = np.cumsum([0] + sizes)
    x = _gather([r.subset(pick[(pick >= a) & (pick < b)] - a) for r, a, b in zip(sides, starts[:-1], starts[1:])])
    scaler = _standardize_inplace(x)
    d = x.shape[1]
    k0 = min(n_components, d, n - 1, len(x) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # all-constant data: 0 / 0 variance ratios
        pca = PCA(n_components=k0, copy=False, svd_solver=_pca_solver(*x.shape), random_state=_seed(rng)).fit(x)
        ratio = np.nan_to_num(pca.explained_variance_ratio_, nan=0.0)
    keep = ratio > RANK_TOL
    comps = pca.components_[keep]
    weights = (comps / scaler.scale_).T
    offset = (scaler.mean_ / scaler.scale_ + pca.mean_) @ comps.T
    return _Projection(np.ascontiguousarray(weights), offset, float(ratio[keep].sum()), len(x))


def _scaled_distance(mean_sim: np.ndarray, mean_real: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
    """Distance of two centroids after per-component min-max scaling with range [lo, hi]."""
    span = hi - lo
    diff = np.where(span > 0, (mean_sim - mean_real) / np.where(span > 0, span, 1.0), 0.0)
    return float(np.sqrt(np.sum(diff * diff)))


def _normed(value: float, k: int) -> float:
    return min(1.0, value / math.sqrt(k)) if k else 0.0


def _centroid_parts(sim: _Rows, real: _Rows, n_components: int, rng: np.random.Generator
                    ) -> tuple[_Projection, np.ndarray, np.ndarray, float]:
    proj = _fit_projection([sim, real], n_components, rng)
    z_sim, z_real = proj.transform(sim), proj.transform(real)
    if proj.k == 0:
        return proj, z_sim, z_real, 0.0
    lo = np.minimum(z_sim.min(axis=0), z_real.min(axis=0))
    hi = np.maximum(z_sim.max(axis=0), z_real.max(axis=0))
    return proj, z_sim, z_real, _scaled_distance(z_sim.mean(axis=0), z_real.mean(axis=0), lo, hi)


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
    sim, real = _check_pair(emb_sim, emb_real, "centroid distance")
    n_components = _check_int("n_components", n_components, 1, MAX_N_COMPONENTS)
    proj, _, _, value = _centroid_parts(_Rows(sim), _Rows(real), n_components, _rng(random_state))
    return CentroidDistance(value=value, value_norm=_normed(value, proj.k), n_components=proj.k,
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
        keys, how = _cluster_keys(episodes, n, "real", "episodes")
        labels = _factorize(keys)
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
    real = _check_embeddings(emb_real, "emb_real")
    need = _MIN_FRAMES["noise floor"]
    if len(real) < need:
        raise InsufficientData(f"Expected at least {need} real frames for the noise floor, got {len(real)}.")
    n_components = _check_int("n_components", n_components, 1, MAX_N_COMPONENTS)
    a, b, method, g = noise_floor_halves(len(real), episodes)
    proj, _, _, value = _centroid_parts(_Rows(real, a), _Rows(real, b), n_components, _rng(random_state))
    return NoiseFloor(value=value, value_norm=_normed(value, proj.k), n_components=proj.k,
                      method=method, n_groups=g, n_a=len(a), n_b=len(b))


# -- paired cosine -------------------------------------------------------------------------------

def pair_cosine_distances(emb_sim: np.ndarray, emb_real: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """(P,) 1 - cos(e_sim[i], e_real[j]) for each matched pair (i, j); 0-norm vectors give 1.

    The per-pair values behind `paired_cosine`, e.g. to show the worst pairs.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    u = np.asarray(emb_sim, dtype=np.float64)[pairs[:, 0]]
    v = np.asarray(emb_real, dtype=np.float64)[pairs[:, 1]]
    nu = np.linalg.norm(u, axis=1)
    nv = np.linalg.norm(v, axis=1)
    denom = np.where((nu > 0) & (nv > 0), nu * nv, 1.0)
    cos = np.clip(np.einsum("ij,ij->i", u, v) / denom, -1.0, 1.0)
    return 1.0 - cos


def paired_cosine(emb_sim: np.ndarray, emb_real: np.ndarray, pairs: np.ndarray, *,
                  random_state: int | np.random.Generator | None = 0) -> PairedCosine:
    """Cosine distance 1 - cos at matched pairs, against the mismatched-pairs reference.

    `shuffled_mean` is the exact expectation of the mean over a uniformly random derangement
    of the real sides: the mean of 1 - cos(u_i, v_j) over all i != j, computed in O(P D) as
    1 - ((sum_i u_i) . (sum_j v_j) - sum_i u_i . v_i) / (P (P - 1)) on unit vectors. It is
    therefore deterministic; `random_state` is accepted for a uniform signature only.

    Args:
        emb_sim: (N_sim, D) sim embeddings.
        emb_real: (N_real, D) real embeddings.
        pairs: (P, 2) integer (i_sim, i_real) rows, P >= 2.

    Returns:
        PairedCosine.
    """
    del random_state  # deterministic: the shuffled reference is an exact expectation
    sim = _check_embeddings(emb_sim, "emb_sim")
    real = _check_embeddings(emb_real, "emb_real")
    if sim.shape[1] != real.shape[1]:
        raise InputError("Expected `emb_sim` and `emb_real` of the same "
                         f"width D, got {sim.shape[1]} and {real.shape[1]}.")
    p = np.asarray(pairs)
    if p.size == 0:
        p = p.reshape(0, 2)
    if p.ndim != 2 or p.shape[1] != 2 or (p.size and p.dtype.kind not in "iu"):
        raise InputError("Expected `pairs` an integer array of shape (P, 2), "
                         f"got shape {p.shape} of dtype {p.dtype}.")
    if len(p) < 2:
        raise InsufficientData(f"Expected at least 2 matched pairs for the paired cosine distance, got {len(p)}.")
    for col, emb, side in ((0, sim, "sim"), (1, real, "real")):
        if p[:, col].min() < 0 or p[:, col].max() >= len(emb):
            raise InputError(f"Expected {side} indices of `pairs` in [0, {len(emb) - 1}], "
                             f"got values in [{p[:, col].min()}, {p[:, col].max()}].")
    n = len(p)
    cos = np.empty(n)
    sum_u = np.zeros(sim.shape[1])
    sum_v = np.zeros(sim.shape[1])
    n_zero = 0
    for s in range(0, n, CHUNK_ROWS):
        u = np.asarray(sim[p[s:s + CHUNK_ROWS, 0]], dtype=np.float64)
        v = np.asarray(real[p[s:s + CHUNK_ROWS, 1]], dtype=np.float64)
        nu = np.linalg.norm(u, axis=1)
        nv = np.linalg.norm(v, axis=1)
        n_zero += int(((nu == 0) | (nv == 0)).sum())
        u /= np.where(nu > 0, nu, 1.0)[:, None]  # a zero vector stays zero: cos 0
        v /= np.where(nv > 0, nv, 1.0)[:, None]
        cos[s:s + len(u)] = np.einsum("ij,ij->i", u, v)
        sum_u += u.sum(axis=0)
        sum_v += v.sum(axis=0)
    if n_zero:
        log.warning("%d of %d pairs have an all-zero embedding; their cosine counts as 0", n_zero, n)
    np.clip(cos, -1.0, 1.0, out=cos)
    dist = 1.0 - cos
    off_diag = (float(sum_u @ sum_v) - float(cos.sum())) / (n * (n - 1))
    return PairedCosine(mean=float(dist.mean()), median=float(np.median(dist)), p90=float(np.percentile(dist, 90)),
                        shuffled_mean=float(min(2.0, max(0.0, 1.0 - off_diag))), n_pairs=n, n_zero_norm=n_zero)


# -- domain classifier AUC ------------------------------------------------------------------------

def _subsample(n: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    return np.arange(n) if n <= cap else np.sort(rng.choice(n, cap, replace=False))


def domain_auc(emb_sim: np.ndarray, emb_real: np.ndarray, *, episodes_sim: Sequence[Hashable] | None = None,
               episodes_real: Sequence[Hashable] | None = None, n_splits: int = 5,
               n_components: int = AUC_N_COMPONENTS, max_samples: int = AUC_MAX_SAMPLES,
               random_state: int | np.random.Generator | None = 0) -> DomainAUC:
    """Cross-validated AUC of a logistic-regression sim-vs-real classifier.

    Frames are standardized and reduced by PCA (at most `n_components`, default 256), both
    fitted once on the pooled frames without labels (unsupervised, so no label leaks into the
    test folds); L2 logistic regression (C = 1) is then trained per fold. The PCA scores are
    not whitened: L2 is rotation invariant, so this is the standardized-feature classifier
    restricted to the top components; whitening would give pure-noise components the weight of
    the signal and, with few frames, drown it (a clear shift read as AUC 0.65 instead of 1). Folds are grouped: an
    episode id shared by sim and real frames is one group (paired episodes of one scene never
    straddle train and test), and where episodes are unknown each side's contiguous blocks are
    groups. The AUC is taken over all out-of-fold decision values at once.

    Args:
        emb_sim: (N_sim, D), N_sim >= 4.
        emb_real: (N_real, D), N_real >= 4.
        episodes_sim, episodes_real: optional length-N episode ids per side.
        n_splits: folds wanted, in [2, 20]; fewer are used when there are fewer groups.
        n_components: PCA components for the classifier, in [1, MAX_N_COMPONENTS].
        max_samples: frames per side (a seeded random subset beyond it), in [4, 20000];
            default 5000.
        random_state: seed.

    Returns:
        DomainAUC.
    """
    sim, real = _check_pair(emb_sim, emb_real, "domain AUC")
    n_splits = _check_int("n_splits", n_splits, 2, 20)
    n_components = _check_int("n_components", n_components, 1, MAX_N_COMPONENTS)
    max_samples = _check_int("max_samples", max_samples, 4, AUC_MAX_SAMPLES_LIMIT)
    rng = _rng(random_state)
    keys_sim, how_sim = _cluster_keys(episodes_sim, len(sim), "sim", "episodes_sim")
    keys_real, how_real = _cluster_keys(episodes_real, len(real), "real", "episodes_real")
    groups = _factorize(keys_sim + keys_real)
    i_sim = _subsample(len(sim), max_samples, rng)
    i_real = _subsample(len(real), max_samples, rng)
    groups = np.concatenate([groups[:len(sim)][i_sim], groups[len(sim):][i_real]])
    y = np.r_[np.zeros(len(i_sim), dtype=np.int64), np.ones(len(i_real), dtype=np.int64)]
    for side, g in (("sim", groups[y == 0]), ("real", groups[y == 1])):
        if len(np.unique(g)) < 2:
            raise InsufficientData("Expected at least 2 episodes (or blocks) on "
                                   f"the {side} side for the domain AUC, got 1.")
    folds = grouped_folds(groups, y, n_splits=n_splits, random_state=rng)
    x = _gather([_Rows(sim, i_sim), _Rows(real, i_real)])
    _standardize_inplace(x)
    k = min(n_components, x.shape[1], len(x) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pca = PCA(n_components=k, copy=False, svd_solver=_pca_solver(*x.shape), random_state=_seed(rng))
        feats = pca.fit_transform(x)  # handles x centred in place by copy=False
    del x
    oof = np.empty(len(y))
    for train, test in folds:
        clf = LogisticRegression(C=1.0, max_iter=1000).fit(feats[train], y[train])
        oof[test] = clf.decision_function(feats[test])
    return DomainAUC(value=float(roc_auc_score(y, oof)), n_sim=len(i_sim), n_real=len(i_real), n_splits=len(folds),
                     n_groups=len(np.unique(groups)), grouping=_join_how(how_sim, how_real), n_components=k)


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


def mmd(emb_sim: np.ndarray, emb_real: np.ndarray, *, episodes_sim: Sequence[Hashable] | None = None,
        episodes_real: Sequence[Hashable] | None = None, n_permutations: int = MMD_PERMUTATIONS,
        max_samples: int = MMD_MAX_SAMPLES, random_state: int | np.random.Generator | None = 0) -> MMD:
    """Unbiased MMD^2 (RBF kernel, median-heuristic bandwidth) with a permutation p-value.

    Each side is subsampled to `max_samples` frames (seeded); the kernel matrix of the pooled
    subsample is computed once and every permutation only relabels rows (one matrix product
    per batch of permutations). When both sides carry episode ids (>= 2 episodes each), whole
    episodes are relabelled (frames of an episode are not exchangeable); otherwise single
    frames are.

    Args:
        emb_sim: (N_sim, D), N_sim >= 4.
        emb_real: (N_real, D), N_real >= 4.
        episodes_sim, episodes_real: optional length-N episode ids per side.
        n_permutations: in [1, 100000]; default 200.
        max_samples: frames per side, in [4, 5000]; default 1000. The kernel matrix is
            (2 max_samples)^2 float64: 32 MB at 1000, 800 MB at 5000.
        random_state: seed.

    Returns:
        MMD.
    """
    sim, real = _check_pair(emb_sim, emb_real, "MMD")
    n_permutations = _check_int("n_permutations", n_permutations, 1, 100_000)
    max_samples = _check_int("max_samples", max_samples, 4, MMD_MAX_SAMPLES_LIMIT)
    rng = _rng(random_state)
    i_sim = _subsample(len(sim), max_samples, rng)
    i_real = _subsample(len(real), max_samples, rng)
    x = _gather([_Rows(sim, i_sim), _Rows(real, i_real)])
    n_s, n = len(i_sim), len(x)
    d2 = _sq_dists(x)
    del x
    sigma = _median_sigma(d2)
    kern = np.exp(d2 / (-2.0 * sigma * sigma), out=d2)
    row_sums = kern.sum(axis=1)
    total = float(row_sums.sum())
    diag = np.diagonal(kern).copy()
    diag_total = float(diag.sum())

    permutation = "frames"
    clusters = np.arange(n)
    if episodes_sim is not None and episodes_real is not None:
        keys_s, how_s = _cluster_keys(episodes_sim, len(sim), "sim", "episodes_sim")
        keys_r, how_r = _cluster_keys(episodes_real, len(real), "real", "episodes_real")
        lab_s = _factorize([(0, k) for k in keys_s])[i_sim]
        lab_r = _factorize([(1, k) for k in keys_r])[i_real]
        if len(np.unique(lab_s)) >= 2 and len(np.unique(lab_r)) >= 2:
            _, lab_s = np.unique(lab_s, return_inverse=True)
            _, lab_r = np.unique(lab_r, return_inverse=True)
            clusters = np.r_[lab_s, lab_r + lab_s.max() + 1]
            permutation = "episodes"
    n_clusters = int(clusters.max()) + 1
    sim_clusters = int(clusters[:n_s].max()) + 1  # sim clusters are numbered first

    z0 = np.zeros((n, 1))
    z0[:n_s] = 1.0
    observed = float(_mmd2_batch(kern @ z0, z0, row_sums, total, diag, diag_total)[0])
    exceed = 0
    batch = 64
    for s in range(0, n_permutations, batch):
        m = min(batch, n_permutations - s)
        member = np.zeros((n_clusters, m))
        for j in range(m):
            member[rng.permutation(n_clusters)[:sim_clusters], j] = 1.0
        z = member[clusters]
        ok = (z.sum(axis=0) >= 2) & (z.sum(axis=0) <= n - 2)
        stats = np.full(m, np.inf)  # a relabelling too lopsided to estimate counts as extreme
        stats[ok] = _mmd2_batch(kern @ z[:, ok], z[:, ok], row_sums, total, diag, diag_total)
        exceed += int((stats >= observed - 1e-12 * max(1.0, abs(observed))).sum())
    p_value = (exceed + 1) / (n_permutations + 1)
    return MMD(value=observed, p_value=float(p_value), bandwidth=sigma, n_sim=n_s, n_real=n - n_s,
               n_permutations=n_permutations, permutation=permutation)


# -- bootstrap -----------------------------------------------------------------------------------

def _centred_ci(reps: np.ndarray, estimate: float, level: float) -> tuple[float, float, float]:
    """(low, high, bias) of the replicates shifted so their median is the estimate (see `CI`)."""
    a = (1.0 - level) / 2.0
    q_lo, med, q_hi = np.quantile(reps, [a, 0.5, 1.0 - a])
    return estimate - float(med - q_lo), estimate + float(q_hi - med), float(med - estimate)


def bootstrap_ci(statistic: Callable[[np.ndarray, np.ndarray], float], emb_sim: np.ndarray, emb_real: np.ndarray, *,
                 episodes_sim: Sequence[Hashable] | None = None, episodes_real: Sequence[Hashable] | None = None,
                 n_boot: int = N_BOOT, ci: float = 0.95, max_samples: int = BOOT_MAX_SAMPLES,
                 estimate: float | None = None, random_state: int | np.random.Generator | None = 0) -> CI:
    """Centred percentile CI (see `CI`) of `statistic(emb_sim, emb_real)` by a cluster bootstrap.

    Each replicate draws, on each side independently, as many clusters as there are, with
    replacement, and keeps all frames of every drawn cluster (episodes; contiguous blocks where
    episodes are unknown), so frames of one episode never split. A replicate larger than
    `max_samples` frames on a side is cut to a random `max_samples` of them (the CI is then
    conservative: wider than for the full set). A replicate where the statistic raises
    InsufficientData or returns a non-finite value is skipped; if more than half are skipped,
    InsufficientData is raised.

    For the centroid distance use `centroid_distance_ci`: its min-max range depends on N, so
    subsampled replicates would be biased, and it is far cheaper.

    Args:
        statistic: (emb_sim_resampled, emb_real_resampled) -> float.
        emb_sim, emb_real: (N, D) arrays, >= 2 frames per side.
        episodes_sim, episodes_real: optional length-N episode ids per side.
        n_boot: replicates, in [10, 100000]; default 200.
        ci: coverage in (0, 1).
        max_samples: frames per side per replicate, >= 2 (each replicate copies that many
            rows per side in the input dtype); default 5000.
        estimate: the point estimate the interval is centred on; None computes
            `statistic(emb_sim, emb_real)` on the full sets.
        random_state: seed.

    Returns:
        CI.
    """
    sim, real = _check_pair(emb_sim, emb_real, "bootstrap CI")
    n_boot = _check_int("n_boot", n_boot, 10, 100_000)
    level = _check_level(ci)
    max_samples = _check_int("max_samples", max_samples, 2, 10_000_000)
    rng = _rng(random_state)
    keys_s, how_s = _cluster_keys(episodes_sim, len(sim), "sim", "episodes_sim")
    keys_r, how_r = _cluster_keys(episodes_real, len(real), "real", "episodes_real")
    lab_s, lab_r = _factorize(keys_s), _factorize(keys_r)
    g_s, g_r = int(lab_s.max()) + 1, int(lab_r.max()) + 1
    if g_s < 2 or g_r < 2:
        raise InsufficientData("Expected at least 2 episodes (or blocks) per side "
                               f"for a bootstrap CI, got {g_s} sim and {g_r} real.")
    estimate = float(statistic(sim, real)) if estimate is None else float(estimate)
    if not math.isfinite(estimate):
        raise InputError(f"Expected a finite point estimate for the bootstrap CI, got {estimate}.")
    reps = []
    capped = False
    for _ in range(n_boot):
        idx_s = _resample(lab_s, g_s, rng)
        idx_r = _resample(lab_r, g_r, rng)
        if len(idx_s) > max_samples:
            idx_s, capped = np.sort(rng.choice(idx_s, max_samples, replace=False)), True
        if len(idx_r) > max_samples:
            idx_r, capped = np.sort(rng.choice(idx_r, max_samples, replace=False)), True
        try:
            v = float(statistic(sim[idx_s], real[idx_r]))
        except InsufficientData:
            continue
        if math.isfinite(v):
            reps.append(v)
    if len(reps) * 2 < n_boot:
        raise InsufficientData(f"Expected most bootstrap replicates to be computable, got {len(reps)} of {n_boot}; "
                               "supply more episodes or frames.")
    lo, hi, bias = _centred_ci(np.asarray(reps), estimate, level)
    return CI(low=lo, high=hi, level=level, n_boot=len(reps), n_clusters_sim=g_s, n_clusters_real=g_r,
              clusters=_join_how(how_s, how_r), bias=bias, capped=capped)


def _cluster_stats(z: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-cluster sums (G, k), counts (G,), minima (G, k) and maxima (G, k) of projections z (N, k)."""
    order = np.argsort(labels, kind="stable")
    zs, ls = z[order], labels[order]
    starts = np.r_[0, np.flatnonzero(np.diff(ls)) + 1]
    counts = np.diff(np.r_[starts, len(ls)])
    return (np.add.reduceat(zs, starts, axis=0), counts.astype(np.float64),
            np.minimum.reduceat(zs, starts, axis=0), np.maximum.reduceat(zs, starts, axis=0))


def centroid_distance_ci(emb_sim: np.ndarray, emb_real: np.ndarray, *, episodes_sim: Sequence[Hashable] | None = None,
                         episodes_real: Sequence[Hashable] | None = None, n_components: int = DEFAULT_N_COMPONENTS,
                         n_boot: int = CENTROID_N_BOOT, ci: float = 0.95,
                         random_state: int | np.random.Generator | None = 0) -> CentroidDistance:
    """`centroid_distance` plus a cluster-bootstrap percentile CI of its `value_norm`.

    The standardization and PCA are fitted once (as in `centroid_distance`) and held fixed;
    each replicate resamples whole clusters (episodes, or contiguous blocks where unknown) on
    each side with replacement and recomputes the centroids and the pooled min-max range from
    per-cluster sums, minima and maxima. A replicate costs O(clusters x k), not a refit, so
    1,000 replicates take well under a second; the interval leaves out the PCA's own sampling
    variation (small next to the centroids' for sets of hundreds of frames or more).

    Args:
        emb_sim, emb_real: (N, D) arrays, >= 2 frames per side.
        episodes_sim, episodes_real: optional length-N episode ids per side.
        n_components: as in `centroid_distance`.
        n_boot: replicates, in [10, 100000]; default 1000.
        ci: coverage in (0, 1).
        random_state: seed (the same seed gives the same point estimate as
            `centroid_distance`).

    Returns:
        CentroidDistance with `ci` set (bounds in value_norm units).
    """
    sim, real = _check_pair(emb_sim, emb_real, "centroid distance")
    n_components = _check_int("n_components", n_components, 1, MAX_N_COMPONENTS)
    n_boot = _check_int("n_boot", n_boot, 10, 100_000)
    level = _check_level(ci)
    keys_s, how_s = _cluster_keys(episodes_sim, len(sim), "sim", "episodes_sim")
    keys_r, how_r = _cluster_keys(episodes_real, len(real), "real", "episodes_real")
    lab_s, lab_r = _factorize(keys_s), _factorize(keys_r)
    g_s, g_r = int(lab_s.max()) + 1, int(lab_r.max()) + 1
    if g_s < 2 or g_r < 2:
        raise InsufficientData("Expected at least 2 episodes (or blocks) per side "
                               f"for a bootstrap CI, got {g_s} sim and {g_r} real.")
    rng = _rng(random_state)
    proj, z_sim, z_real, value = _centroid_parts(_Rows(sim), _Rows(real), n_components, rng)
    k = proj.k
    reps = np.zeros(n_boot)
    if k:
        sum_s, cnt_s, min_s, max_s = _cluster_stats(z_sim, lab_s)
        sum_r, cnt_r, min_r, max_r = _cluster_stats(z_real, lab_r)
        boot_rng = np.random.default_rng(_seed(rng))
        for b in range(n_boot):
            w_s = np.bincount(boot_rng.integers(g_s, size=g_s), minlength=g_s).astype(np.float64)
            w_r = np.bincount(boot_rng.integers(g_r, size=g_r), minlength=g_r).astype(np.float64)
            sel_s, sel_r = w_s > 0, w_r > 0
            lo = np.minimum(min_s[sel_s].min(axis=0), min_r[sel_r].min(axis=0))
            hi = np.maximum(max_s[sel_s].max(axis=0), max_r[sel_r].max(axis=0))
            mean_s, mean_r = (w_s @ sum_s) / (w_s @ cnt_s), (w_r @ sum_r) / (w_r @ cnt_r)
            reps[b] = _normed(_scaled_distance(mean_s, mean_r, lo, hi), k)
    estimate = _normed(value, k)
    low, high, bias = _centred_ci(reps, estimate, level)
    interval = CI(low=max(0.0, low), high=min(1.0, high), level=level, n_boot=n_boot, n_clusters_sim=g_s,
                  n_clusters_real=g_r, clusters=_join_how(how_s, how_r), bias=bias)
    return CentroidDistance(value=value, value_norm=_normed(value, k), n_components=k, n_sim=len(sim),
                            n_real=len(real), n_fit=proj.n_fit, explained_variance=proj.explained, ci=interval)
