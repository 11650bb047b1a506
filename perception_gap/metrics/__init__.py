"""Sim-vs-real comparison of embeddings: pure functions on arrays, frozen results.

This folder owns step 4 of the pipeline (compare): the result dataclasses (`results`), argument
checks (`validation`), episodes, blocks, folds and cluster resampling (`resampling`), the pooled
standardize -> PCA projection (`projection`), the centroid distance, its CI and the noise floor
(`centroid`), the paired cosine distance (`paired`), the domain AUC and MMD (`twosample`) and
the cluster bootstrap of an arbitrary statistic (`bootstrap`), and the Frechet distance and
KID (`frechet`).

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
With fewer than `MIN_EPISODES` (5) episodes on a side, whole episodes are too few units: the
metrics that take `pairs=` (MMD, domain AUC, the bootstrap CIs) then permute or draw matched
pairs, and otherwise contiguous blocks within episodes (`resampling_units`).

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

import importlib
from typing import TYPE_CHECKING, Any

# Each public name and the submodule it lives in. The submodules load on first use (`__getattr__`):
# the result classes (`metrics.results`) are read by code that needs no scikit-learn, such as
# `perception_gap.schema`, and importing them must not load the metrics that fit models.
_HOME = {
    "BOOT_MAX_SAMPLES": "bootstrap", "N_BOOT": "bootstrap", "bootstrap_ci": "bootstrap", "centred_ci": "bootstrap",
    "cluster_replicates": "bootstrap",
    "CENTROID_N_BOOT": "centroid", "DEFAULT_N_COMPONENTS": "centroid", "MIN_FLOOR_EPISODES": "centroid",
    "centroid_distance": "centroid", "centroid_distance_ci": "centroid", "noise_floor": "centroid",
    "noise_floor_halves": "centroid",
    "DIST_MAX_SAMPLES": "frechet", "DIST_N_BOOT": "frechet", "KID": "frechet", "KID_SUBSET_SIZE": "frechet",
    "KID_SUBSETS": "frechet", "FrechetDistance": "frechet", "frechet_distance": "frechet",
    "frechet_distance_ci": "frechet", "kid": "frechet", "kid_ci": "frechet",
    "pair_cosine_distances": "paired", "paired_cosine": "paired",
    "MAX_FIT_ROWS": "projection", "MAX_N_COMPONENTS": "projection", "RANK_TOL": "projection",
    "MIN_EPISODES": "resampling", "N_BLOCKS": "resampling", "block_ids": "resampling",
    "cluster_counts": "resampling", "cluster_labels": "resampling", "episode_blocks": "resampling",
    "grouped_folds": "resampling", "resample_clusters": "resampling", "resampling_labels": "resampling",
    "resampling_units": "resampling",
    "CI": "results", "MMD": "results", "CentroidDistance": "results", "DomainAUC": "results",
    "NoiseFloor": "results", "PairedCosine": "results",
    "AUC_MAX_SAMPLES": "twosample", "AUC_MAX_SAMPLES_LIMIT": "twosample", "AUC_N_COMPONENTS": "twosample",
    "MIN_PAIRS": "twosample", "MMD_MAX_SAMPLES": "twosample", "MMD_MAX_SAMPLES_LIMIT": "twosample",
    "MMD_PERMUTATIONS": "twosample", "domain_auc": "twosample", "median_bandwidth": "twosample",
    "mmd": "twosample",
    "CHUNK_ROWS": "validation",
}
_SUBMODULES = frozenset(_HOME.values()) | {"settings"}

if TYPE_CHECKING:  # the names as eager imports, for type checkers and editors
    from perception_gap.metrics.bootstrap import BOOT_MAX_SAMPLES, N_BOOT, bootstrap_ci, centred_ci, cluster_replicates
    from perception_gap.metrics.centroid import (
        CENTROID_N_BOOT,
        DEFAULT_N_COMPONENTS,
        MIN_FLOOR_EPISODES,
        centroid_distance,
        centroid_distance_ci,
        noise_floor,
        noise_floor_halves,
    )
    from perception_gap.metrics.frechet import (
        DIST_MAX_SAMPLES,
        DIST_N_BOOT,
        KID,
        KID_SUBSET_SIZE,
        KID_SUBSETS,
        FrechetDistance,
        frechet_distance,
        frechet_distance_ci,
        kid,
        kid_ci,
    )
    from perception_gap.metrics.paired import pair_cosine_distances, paired_cosine
    from perception_gap.metrics.projection import MAX_FIT_ROWS, MAX_N_COMPONENTS, RANK_TOL
    from perception_gap.metrics.resampling import (
        MIN_EPISODES,
        N_BLOCKS,
        block_ids,
        cluster_counts,
        cluster_labels,
        episode_blocks,
        grouped_folds,
        resample_clusters,
        resampling_labels,
        resampling_units,
    )
    from perception_gap.metrics.results import CI, MMD, CentroidDistance, DomainAUC, NoiseFloor, PairedCosine
    from perception_gap.metrics.twosample import (
        AUC_MAX_SAMPLES,
        AUC_MAX_SAMPLES_LIMIT,
        AUC_N_COMPONENTS,
        MIN_PAIRS,
        MMD_MAX_SAMPLES,
        MMD_MAX_SAMPLES_LIMIT,
        MMD_PERMUTATIONS,
        domain_auc,
        median_bandwidth,
        mmd,
    )
    from perception_gap.metrics.validation import CHUNK_ROWS

__all__ = [
    "AUC_MAX_SAMPLES", "AUC_MAX_SAMPLES_LIMIT", "AUC_N_COMPONENTS", "BOOT_MAX_SAMPLES", "CENTROID_N_BOOT", "CHUNK_ROWS",
    "CI", "DEFAULT_N_COMPONENTS", "MAX_FIT_ROWS", "MAX_N_COMPONENTS", "MIN_EPISODES", "MIN_FLOOR_EPISODES", "MIN_PAIRS", "MMD", "MMD_MAX_SAMPLES",
    "MMD_MAX_SAMPLES_LIMIT", "MMD_PERMUTATIONS", "N_BLOCKS", "N_BOOT", "RANK_TOL", "CentroidDistance", "DomainAUC",
    "NoiseFloor", "PairedCosine", "block_ids", "bootstrap_ci", "centred_ci", "centroid_distance", "centroid_distance_ci",
    "cluster_counts", "cluster_labels", "cluster_replicates", "domain_auc", "episode_blocks", "grouped_folds", "median_bandwidth", "mmd", "noise_floor", "noise_floor_halves",
    "pair_cosine_distances", "paired_cosine", "resample_clusters", "resampling_labels", "resampling_units",
    "DIST_MAX_SAMPLES", "DIST_N_BOOT", "KID", "KID_SUBSETS", "KID_SUBSET_SIZE", "FrechetDistance",
    "frechet_distance", "frechet_distance_ci", "kid", "kid_ci",
]


def __getattr__(name: str) -> Any:
    """A public name (or a submodule) of the package, its submodule imported on first use."""
    if name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
