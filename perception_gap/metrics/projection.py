"""The pooled projection (standardize -> PCA) and chunked float64 row views of (N, D) embeddings.

PCA fits use at most `MAX_FIT_ROWS` (20,000) pooled rows (a seeded random subset beyond it);
every row is then projected, in chunks of `CHUNK_ROWS`, so float32 inputs stay float32 in
memory and are converted to float64 one chunk at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from perception_gap.metrics.validation import CHUNK_ROWS, draw_seed

log = logging.getLogger(__name__)

MAX_N_COMPONENTS = 512
MAX_FIT_ROWS = 20_000
# A PCA component explaining less than this fraction of the standardized variance is numerical
# rank deficiency (duplicate rows, constant features), not signal: min-max scaling would blow
# its rounding noise up to [0, 1], so it is dropped and k shrinks to the numerical rank.
RANK_TOL = 1e-9


class Rows:
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

    def subset(self, sel: np.ndarray) -> Rows:
        """The rows `sel` (indices into this view) as a new view."""
        return Rows(self.arr, sel if self.idx is None else self.idx[sel])


def gather_rows(parts: list[Rows]) -> np.ndarray:
    """Stack row views into one new float64 array, filled chunk by chunk (one full-size array)."""
    out = np.empty((sum(len(p) for p in parts), parts[0].arr.shape[1]))
    pos = 0
    for p in parts:
        for chunk in p.chunks():
            out[pos:pos + len(chunk)] = chunk
            pos += len(chunk)
    return out


def standardize_inplace(x: np.ndarray) -> StandardScaler:
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


def pca_solver(n: int, d: int) -> str:
    """The sklearn PCA `svd_solver` for an (n, d) fit."""
    # Exact solvers wherever affordable (results reproducible to rounding, and tests can match
    # a plain SVD): covariance eigh costs n*d^2 and d^2 memory; full SVD n*d*min(n, d).
    if d <= 4096 and n >= d:
        return "covariance_eigh"
    if min(n, d) <= 2048:
        return "full"
    return "randomized"


def fit_pca(x: np.ndarray, k: int, seed: int, *, scores: bool = False) -> tuple[PCA, np.ndarray | None]:
    """sklearn PCA(k) fitted on x (N, D) float64 (`copy=False`: x may be centred in place), on one BLAS thread.

    Returns the fitted PCA and, with `scores`, its `fit_transform` of x (N, k) (else None).

    The exact solvers' cost is one symmetric eigendecomposition (or SVD): LAPACK runs it as a
    long chain of small steps, and a second BLAS thread spin-waiting for a busy core made the
    816-D fit ~10x dearer in CPU time on a loaded 2-core machine (1.7 vs 0.15 CPU s; bench/README.md,
    bench_run.py). One thread changes the result only by rounding.
    """
    pca = PCA(n_components=k, copy=False, svd_solver=pca_solver(*x.shape), random_state=seed)
    with threadpool_limits(limits=1, user_api="blas"):
        if scores:
            return pca, pca.fit_transform(x)
        return pca.fit(x), None


@dataclass(frozen=True)
class Projection:
    """A fitted standardize -> PCA map, folded into one affine map x @ weights - offset."""

    weights: np.ndarray  # (D, k): components / scale
    offset: np.ndarray  # (k,)
    explained: float
    n_fit: int

    @property
    def k(self) -> int:
        return self.weights.shape[1]

    def transform(self, rows: Rows) -> np.ndarray:
        """(len(rows), k) float64 projections, computed chunk by chunk."""
        out = np.empty((len(rows), self.k))
        s = 0
        for chunk in rows.chunks():
            out[s:s + len(chunk)] = chunk @ self.weights - self.offset
            s += len(chunk)
        return out


def fit_projection(sides: list[Rows], n_components: int, rng: np.random.Generator) -> Projection:
    """StandardScaler then PCA, both fitted on the pooled rows (a seeded subset beyond MAX_FIT_ROWS)."""
    sizes = [len(r) for r in sides]
    n = sum(sizes)
    pick = np.arange(n) if n <= MAX_FIT_ROWS else np.sort(rng.choice(n, MAX_FIT_ROWS, replace=False))
    if n > MAX_FIT_ROWS:
        log.debug("fitting the pooled scaler and PCA on %d of %d rows", MAX_FIT_ROWS, n)
    starts = np.cumsum([0] + sizes)
    x = gather_rows([r.subset(pick[(pick >= a) & (pick < b)] - a) for r, a, b in zip(sides, starts[:-1], starts[1:])])
    scaler = standardize_inplace(x)
    d = x.shape[1]
    k0 = min(n_components, d, n - 1, len(x) - 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # all-constant data: 0 / 0 variance ratios
        pca, _ = fit_pca(x, k0, draw_seed(rng))
        ratio = np.nan_to_num(pca.explained_variance_ratio_, nan=0.0)
    keep = ratio > RANK_TOL
    comps = pca.components_[keep]
    weights = (comps / scaler.scale_).T
    offset = (scaler.mean_ / scaler.scale_ + pca.mean_) @ comps.T
    return Projection(np.ascontiguousarray(weights), offset, float(ratio[keep].sum()), len(x))
