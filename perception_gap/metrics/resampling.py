"""Episodes, blocks, grouped folds and cluster resampling: frames of one episode stay together.

Episodes are optional length-N sequences of hashable ids (None for the whole sequence, or for
one frame, means "unknown"). Where episodes are unknown, frames are assumed to be stored in
capture order and contiguous blocks stand in for episodes: `N_BLOCKS` (16) blocks of
near-equal length per side (each frame its own block below 16 frames).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold

from perception_gap.errors import InputError, InsufficientData
from perception_gap.metrics.validation import draw_seed, make_rng

N_BLOCKS = 16


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


def cluster_keys(episodes: Sequence[Hashable] | None, n: int, side: str, name: str) -> tuple[list[Hashable], str]:
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


def factorize(keys: list[Hashable]) -> np.ndarray:
    """Integer labels 0..G-1 in order of first appearance."""
    index: dict[Hashable, int] = {}
    return np.fromiter((index.setdefault(k, len(index)) for k in keys), dtype=np.int64, count=len(keys))


def join_how(a: str, b: str) -> str:
    """How two sides' clusters were formed, together: the common word, else `mixed`."""
    return a if a == b else "mixed"


def cluster_labels(episodes: Sequence[Hashable] | None, n: int) -> np.ndarray:
    """Cluster label per frame: episodes where known, contiguous blocks where unknown.

    Args:
        episodes: length-n episode ids, or None (all unknown); None/NaN entries are unknown.
        n: number of frames.

    Returns:
        (n,) int64 labels numbered 0..G-1 in order of first appearance.
    """
    return factorize(cluster_keys(episodes, n, "frames", "episodes")[0])


def bootstrap_clusters(episodes_sim: Sequence[Hashable] | None, episodes_real: Sequence[Hashable] | None,
                       n_sim: int, n_real: int) -> tuple[np.ndarray, np.ndarray, int, int, str]:
    """Cluster labels per side for a cluster bootstrap, with at least 2 clusters per side.

    Returns:
        (sim labels (n_sim,), real labels (n_real,), sim clusters, real clusters, how the
        clusters were formed: `episodes`, `blocks` or `mixed`).
    """
    keys_s, how_s = cluster_keys(episodes_sim, n_sim, "sim", "episodes_sim")
    keys_r, how_r = cluster_keys(episodes_real, n_real, "real", "episodes_real")
    lab_s, lab_r = factorize(keys_s), factorize(keys_r)
    g_s, g_r = int(lab_s.max()) + 1, int(lab_r.max()) + 1
    if g_s < 2 or g_r < 2:
        raise InsufficientData("Expected at least 2 episodes (or blocks) per side "
                               f"for a bootstrap CI, got {g_s} sim and {g_r} real.")
    return lab_s, lab_r, g_s, g_r, join_how(how_s, how_r)


def resample_clusters(labels: np.ndarray, *, random_state: int | np.random.Generator | None = 0) -> np.ndarray:
    """One cluster-bootstrap draw: G clusters with replacement, each contributing all its frames.

    Args:
        labels: (N,) integer cluster label per frame.
        random_state: seed or Generator.

    Returns:
        Frame indices (sorted by frame), each frame repeated as often as its cluster was drawn.
    """
    _, inv = np.unique(np.asarray(labels), return_inverse=True)
    return resample_labels(inv, int(inv.max()) + 1 if len(inv) else 0, make_rng(random_state))


def resample_labels(labels: np.ndarray, g: int, rng: np.random.Generator) -> np.ndarray:
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
    splitter = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=draw_seed(make_rng(random_state)))
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


def subsample(n: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of a seeded random `cap` of n rows (all n rows when n <= cap)."""
    return np.arange(n) if n <= cap else np.sort(rng.choice(n, cap, replace=False))
