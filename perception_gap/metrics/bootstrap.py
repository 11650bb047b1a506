"""Cluster bootstrap: replicates of a statistic and their centred percentile interval.

Every cluster bootstrap of the project draws with `metrics.resampling.cluster_counts` and reads
its interval with `centred_ci`: `bootstrap_ci` here (any sim-vs-real statistic of embeddings),
the centroid distance and probe intervals, the drift gates (`cluster_replicates` on each side,
or on both at once when frames pair) and the rendering screen (one draw shared by every set).

`bootstrap_ci` draws `N_BOOT` (200) replicates, each seeing at most `BOOT_MAX_SAMPLES` (5,000)
frames per side. The centroid distance computes its replicates far more cheaply from per-cluster
sums (`centroid_distance_ci`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np

from perception_gap.errors import InputError, InsufficientData
from perception_gap.metrics.resampling import bootstrap_units, frame_rows, unit_weights
from perception_gap.metrics.results import CI
from perception_gap.metrics.settings import REPLICATES
from perception_gap.metrics.validation import check_int, check_level, check_pair, make_rng

N_BOOT = REPLICATES["statistic"]

T = TypeVar("T")
BOOT_MAX_SAMPLES = 5_000


def centred_ci(reps: np.ndarray, estimate: float, level: float) -> tuple[float, float, float]:
    """The interval of every cluster bootstrap here: the replicates' percentile interval shifted so
    that their median falls on the estimate (see `CI`).

    Args:
        reps: (n_boot,) replicate values, finite.
        estimate: the point estimate on the full data.
        level: coverage in (0, 1).

    Returns:
        (low, high, bias): estimate - (median - q_a), estimate + (q_1-a - median), and
        median - estimate, with q the replicates' quantiles (numpy's linear interpolation) and
        a = (1 - level) / 2.
    """
    a = (1.0 - level) / 2.0
    q_lo, med, q_hi = np.quantile(reps, [a, 0.5, 1.0 - a])
    return estimate - float(med - q_lo), estimate + float(q_hi - med), float(med - estimate)


def cluster_replicates(statistic: Callable[[np.ndarray], T], labels: np.ndarray,
                       counts: np.ndarray) -> list[T | None]:
    """A statistic of each replicate of a cluster bootstrap, given the frames' draw counts.

    Args:
        statistic: (N,) times each frame is drawn -> value (`WeightedMedian` is one; `on_rows`
            makes one of a statistic of the drawn rows).
        labels: (N,) cluster label per frame, in 0..G-1.
        counts: (n_boot, G) draws of `cluster_counts`; a paired bootstrap passes the same counts
            for both sides, labelled in one numbering.

    Returns:
        n_boot values; None for a replicate that draws no frame of these.
    """
    out: list[T | None] = []
    for c in counts:
        w = c[labels]
        out.append(statistic(w) if w.any() else None)
    return out


def on_rows(statistic: Callable[[np.ndarray], T], values: np.ndarray) -> Callable[[np.ndarray], T]:
    """`statistic(values[rows])` as a function of the frames' draw counts, for `cluster_replicates`
    (rows in frame order, each repeated as often as drawn: `frame_rows`)."""
    idx = np.arange(len(values))
    return lambda w: statistic(values[np.repeat(idx, w)])


def bootstrap_ci(statistic: Callable[[np.ndarray, np.ndarray], float], emb_sim: np.ndarray, emb_real: np.ndarray, *,
                 episodes_sim: Sequence[Hashable] | None = None, episodes_real: Sequence[Hashable] | None = None,
                 n_boot: int = N_BOOT, ci: float = 0.95, max_samples: int = BOOT_MAX_SAMPLES,
                 estimate: float | None = None, random_state: int | np.random.Generator | None = 0,
                 pairs: np.ndarray | None = None) -> CI:
    """Centred percentile CI (see `CI`) of `statistic(emb_sim, emb_real)` by a cluster bootstrap.

    Each replicate draws, on each side independently, as many clusters as there are, with
    replacement, and keeps all frames of every drawn cluster (episodes; contiguous blocks where
    episodes are unknown), so frames of one episode never split. A replicate larger than
    `max_samples` frames on a side is cut to a random `max_samples` of them (the CI is then
    conservative: wider than for the full set). With fewer than `MIN_EPISODES` (5) episodes on
    a side the clusters are contiguous blocks within episodes, and with `pairs` a replicate draws
    a block of matched pairs for both sides at once (see `resampling_units`). A replicate where the statistic raises
    InsufficientData or returns a non-finite value is skipped; if more than half are skipped,
    InsufficientData is raised.

    For the centroid distance use `centroid_distance_ci`: its min-max range depends on N, so
    subsampled replicates would be biased, and it is far cheaper.

    Args:
        statistic: (emb_sim_resampled, emb_real_resampled) -> float.
        emb_sim: (N, D) arrays, >= 2 frames per side.
        emb_real: (N, D) arrays, >= 2 frames per side.
        episodes_sim: optional length-N episode ids per side.
        episodes_real: optional length-N episode ids per side.
        n_boot: replicates, in [10, 100000]; default 200.
        ci: coverage in (0, 1).
        max_samples: frames per side per replicate, >= 2 (each replicate copies that many
            rows per side in the input dtype); default 5000.
        estimate: the point estimate the interval is centred on; None computes
            `statistic(emb_sim, emb_real)` on the full sets.
        random_state: seed.
        pairs: optional (P, 2) integer (i_sim, i_real) matched pairs; used when episodes are few.

    Returns:
        CI.
    """
    sim, real = check_pair(emb_sim, emb_real, "bootstrap CI")
    n_boot = check_int("n_boot", n_boot, 10, 100_000)
    level = check_level(ci)
    max_samples = check_int("max_samples", max_samples, 2, 10_000_000)
    rng = make_rng(random_state)
    units = bootstrap_units(episodes_sim, episodes_real, len(sim), len(real), pairs)
    estimate = float(statistic(sim, real)) if estimate is None else float(estimate)
    if not math.isfinite(estimate):
        raise InputError(f"Expected a finite point estimate for the bootstrap CI, got {estimate}.")
    reps = []
    capped = False
    for _ in range(n_boot):
        w = unit_weights(units, rng)
        idx_s, idx_r = frame_rows(units.sim, w), frame_rows(units.real, w)
        if len(idx_s) < 2 or len(idx_r) < 2:  # a paired draw can miss one side's own blocks
            continue
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
    lo, hi, bias = centred_ci(np.asarray(reps), estimate, level)
    return CI(low=lo, high=hi, level=level, n_boot=len(reps), n_clusters_sim=len(np.unique(units.sim)),
              n_clusters_real=len(np.unique(units.real)), clusters=units.how, bias=bias, capped=capped)
