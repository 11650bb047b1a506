"""Frozen results of the sim-vs-real metrics: what each number is, its unit, and which way is a gap.

Each class says what it is (`name`, `unit`) and how to read it (`higher_is_gap`); `to_dict()`
gives JSON-safe plain Python numbers, None where a value does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from perception_gap.results import Result


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
        permutation: `episodes` (whole episodes relabelled: valid for correlated frames), `pairs`
            (sim and real swapped within matched pairs), `episode blocks` (blocks within
            episodes relabelled, few episodes and no pairs) or
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
