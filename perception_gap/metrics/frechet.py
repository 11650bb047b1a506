"""Frechet distance and kernel inception distance (KID) between sim and real embeddings.

The two standard distribution distances of the rendering literature, on any encoder's vectors
(FID and KID when the encoder is Inception; here the encoder is whichever one is compared):

- Frechet distance (Heusel et al. 2017): fit one Gaussian per side,
  FD = ||mu_sim - mu_real||^2 + Tr(S_sim + S_real - 2 (S_sim S_real)^(1/2)), with S the unbiased
  (N - 1) covariance. The trace of the matrix square root is computed exactly as the nuclear
  norm (sum of singular values) of F_real F_sim', where F'F = S on each side: the non-zero
  eigenvalues of S_sim S_real are those of (F_sim F_real')(F_sim F_real')', so their square
  roots are its singular values. This is the quantity `scipy.linalg.sqrtm(S_sim @ S_real).real`
  traces (tested against it), without a complex Schur decomposition, without the diagonal
  offset reference code adds when the product is singular (always, when N <= D), and at
  O(N^2 D) instead of O(D^3) when the frames are fewer than the dimensions.
- KID (Binkowski et al. 2018): the unbiased squared MMD with the cubic polynomial kernel
  k(x, y) = (x.y / D + 1)^3, averaged over `n_subsets` (50) random subsets of `subset_size`
  (1,000) frames per side drawn without replacement (fewer frames: every subset is the whole
  set). Unbiased, so it can be slightly negative when the sets match.

Confidence intervals come from the cluster bootstrap of `bootstrap_ci` (episodes kept whole,
blocks or matched pairs with few episodes). A replicate sees at most `DIST_MAX_SAMPLES`
(500) frames per side and there are `DIST_N_BOOT` (100) of them: each FD replicate costs an
eigendecomposition of at most 500 x 500 (D x D when D is smaller), each KID replicate one
subset of at most 500 frames per side (costs in bench/README.md). Both distances grow when fewer frames are compared (FD is biased upward by about
Tr(S)/N per side); the interval is centred on the full-set estimate (see `CI`), so it says how
far the estimate moves, and it is wider (conservative) when replicates are capped.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from threadpoolctl import threadpool_limits

from perception_gap.metrics.bootstrap import bootstrap_ci
from perception_gap.metrics.results import CI
from perception_gap.metrics.settings import REPLICATES
from perception_gap.metrics.validation import check_int, check_pair, make_rng
from perception_gap.results import Result

DIST_N_BOOT = REPLICATES["distance"]
DIST_MAX_SAMPLES = 500
KID_SUBSETS = 50  # the defaults of Binkowski et al.'s polynomial_mmd_averages: 50 subsets of 1,000
KID_SUBSET_SIZE = 1_000


@dataclass(frozen=True)
class FrechetDistance(Result):
    """Frechet distance between Gaussians fitted to sim and real embeddings.

    Attributes:
        value: ||mu_sim - mu_real||^2 + Tr(S_sim + S_real - 2 (S_sim S_real)^(1/2)), >= 0, in
            squared embedding units.
        mean_term: ||mu_sim - mu_real||^2, the part of `value` due to the means alone.
        n_sim: frames per side.
        n_real: frames per side.
        dim: embedding width D.
        ci: bootstrap CI of `value` (from `frechet_distance_ci`), else None. Centred on the
            estimate (see `CI`), so its low end can fall below 0 when the distance is small next
            to its resampling spread: read that as "consistent with no difference".
    """

    value: float
    mean_term: float
    n_sim: int
    n_real: int
    dim: int
    ci: CI | None = None

    name: ClassVar[str] = "frechet_distance"
    unit: ClassVar[str] = "squared embedding units"
    higher_is_gap: ClassVar[bool] = True


@dataclass(frozen=True)
class KID(Result):
    """Kernel inception distance: unbiased MMD^2, cubic polynomial kernel, averaged over subsets.

    Attributes:
        value: mean over subsets of the unbiased MMD^2 (can be slightly negative when the
            sets match), in kernel units (the kernel is unitless: x.y / D + 1, cubed).
        std: standard deviation over subsets (0 when every subset is the whole set).
        n_subsets: subsets averaged (1 when every subset would be the whole set).
        subset_size: frames per side in each subset.
        n_sim: frames per side.
        n_real: frames per side.
        ci: bootstrap CI of `value` (from `kid_ci`), else None.
    """

    value: float
    std: float
    n_subsets: int
    subset_size: int
    n_sim: int
    n_real: int
    ci: CI | None = None

    name: ClassVar[str] = "kid"
    unit: ClassVar[str] = "squared MMD, cubic polynomial kernel (x.y / D + 1)^3"
    higher_is_gap: ClassVar[bool] = True


def _centred(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean (D,), centred rows (N, D)) in float64."""
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(axis=0)
    return mu, x - mu


def _cov_factor(xc: np.ndarray) -> np.ndarray:
    """F with F'F = the unbiased covariance of centred rows xc (N, D): (N, D) when N <= D, else (D, D)."""
    n, d = xc.shape
    if n <= d:
        return xc / np.sqrt(n - 1)
    lam, vecs = np.linalg.eigh(xc.T @ xc / (n - 1))
    return (vecs * np.sqrt(np.clip(lam, 0.0, None))).T


def sqrt_trace(xc_sim: np.ndarray, xc_real: np.ndarray) -> float:
    """Tr((S_sim S_real)^(1/2)) of two sets of centred rows, exactly, as a nuclear norm.

    Args:
        xc_sim: (N_sim, D) centred sim rows, N_sim >= 2.
        xc_real: (N_real, D) centred real rows, N_real >= 2.

    Returns:
        The sum of the singular values of F_sim F_real' (F'F = S per side), >= 0.
    """
    m = _cov_factor(xc_sim) @ _cov_factor(xc_real).T
    # Singular values as square roots of the eigenvalues of the smaller Gram matrix: the same
    # numbers to ~1e-15 relative, several times faster than an SVD.
    gram = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None)).sum())


def frechet_value(emb_sim: np.ndarray, emb_real: np.ndarray) -> tuple[float, float]:
    """(Frechet distance, mean term) of two sets of rows; no argument checks.

    Args:
        emb_sim: (N_sim, D), N_sim >= 2.
        emb_real: (N_real, D), N_real >= 2.

    Returns:
        (FD >= 0, ||mu_sim - mu_real||^2), squared embedding units.
    """
    mu_s, xs = _centred(emb_sim)
    mu_r, xr = _centred(emb_real)
    mean_term = float(np.sum((mu_s - mu_r) ** 2))
    tr_s = float(np.sum(xs * xs)) / (len(xs) - 1)
    tr_r = float(np.sum(xr * xr)) / (len(xr) - 1)
    # Clipped at 0 only against rounding: the exact value is a squared distance (>= 0).
    return max(0.0, mean_term + tr_s + tr_r - 2.0 * sqrt_trace(xs, xr)), mean_term


def frechet_distance(emb_sim: np.ndarray, emb_real: np.ndarray) -> FrechetDistance:
    """Frechet distance between Gaussians fitted to sim and real embeddings (no CI).

    Args:
        emb_sim: (N_sim, D) sim embeddings, N_sim >= 2.
        emb_real: (N_real, D) real embeddings, N_real >= 2.

    Returns:
        FrechetDistance (ci None).
    """
    sim, real = check_pair(emb_sim, emb_real, "Frechet distance")
    value, mean_term = frechet_value(sim, real)
    return FrechetDistance(value=value, mean_term=mean_term, n_sim=len(sim), n_real=len(real), dim=sim.shape[1])


def poly_kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(N_x, N_y) cubic polynomial kernel (x.y / D + 1)^3 of (N_x, D) and (N_y, D) rows."""
    return (x @ y.T / x.shape[1] + 1.0) ** 3


def mmd2_unbiased(emb_sim: np.ndarray, emb_real: np.ndarray) -> float:
    """Unbiased MMD^2 with the cubic polynomial kernel (one KID subset); no argument checks.

    Args:
        emb_sim: (m, D), m >= 2.
        emb_real: (n, D), n >= 2.

    Returns:
        mean_{i != j} k(s_i, s_j) + mean_{i != j} k(r_i, r_j) - 2 mean_{i, j} k(s_i, r_j).
    """
    s = np.asarray(emb_sim, dtype=np.float64)
    r = np.asarray(emb_real, dtype=np.float64)
    m, n = len(s), len(r)
    k_ss, k_rr = poly_kernel(s, s), poly_kernel(r, r)
    xx = (k_ss.sum() - np.trace(k_ss)) / (m * (m - 1))
    yy = (k_rr.sum() - np.trace(k_rr)) / (n * (n - 1))
    return float(xx + yy - 2.0 * poly_kernel(s, r).mean())


def kid(emb_sim: np.ndarray, emb_real: np.ndarray, *, n_subsets: int = KID_SUBSETS,
        subset_size: int = KID_SUBSET_SIZE, random_state: int | np.random.Generator | None = 0) -> KID:
    """KID: the unbiased cubic-kernel MMD^2 averaged over random subsets (no CI).

    Each subset draws min(subset_size, N_sim) sim and min(subset_size, N_real) real frames
    without replacement. When both sides hold at most `subset_size` frames every subset is the
    whole set, so it is computed once (`n_subsets` 1 in the result).

    Args:
        emb_sim: (N_sim, D), N_sim >= 2.
        emb_real: (N_real, D), N_real >= 2.
        n_subsets: subsets, in [1, 10000]; default 50.
        subset_size: frames per side per subset, in [2, 100000]; default 1000.
        random_state: seed of the subset draws.

    Returns:
        KID (ci None).
    """
    sim, real = check_pair(emb_sim, emb_real, "KID")
    n_subsets = check_int("n_subsets", n_subsets, 1, 10_000)
    subset_size = check_int("subset_size", subset_size, 2, 100_000)
    rng = make_rng(random_state)
    m_s, m_r = min(subset_size, len(sim)), min(subset_size, len(real))
    if m_s == len(sim) and m_r == len(real):
        return KID(value=mmd2_unbiased(sim, real), std=0.0, n_subsets=1, subset_size=max(m_s, m_r),
                   n_sim=len(sim), n_real=len(real))
    vals = np.array([mmd2_unbiased(sim[np.sort(rng.choice(len(sim), m_s, replace=False))],
                                   real[np.sort(rng.choice(len(real), m_r, replace=False))])
                     for _ in range(n_subsets)])
    return KID(value=float(vals.mean()), std=float(vals.std()), n_subsets=n_subsets, subset_size=max(m_s, m_r),
               n_sim=len(sim), n_real=len(real))


def frechet_distance_ci(emb_sim: np.ndarray, emb_real: np.ndarray, *,
                        episodes_sim: Sequence[Hashable] | None = None,
                        episodes_real: Sequence[Hashable] | None = None, n_boot: int = DIST_N_BOOT,
                        ci: float = 0.95, max_samples: int = DIST_MAX_SAMPLES,
                        random_state: int | np.random.Generator | None = 0,
                        pairs: np.ndarray | None = None) -> FrechetDistance:
    """`frechet_distance` with a cluster-bootstrap CI (`bootstrap_ci`: episodes kept whole).

    Args:
        emb_sim: (N, D) per side, >= 2 frames each.
        emb_real: (N, D) per side, >= 2 frames each.
        episodes_sim: optional length-N episode ids per side.
        episodes_real: optional length-N episode ids per side.
        n_boot: replicates; default 100.
        ci: coverage in (0, 1).
        max_samples: frames per side per replicate; default 500.
        random_state: seed.
        pairs: optional (P, 2) matched (i_sim, i_real) pairs, drawn together when episodes are few.

    Returns:
        FrechetDistance with `ci`.
    """
    # One BLAS thread, as the other comparison metrics: on a shared machine a second thread only
    # spin-waits (a 5,000 x 1,280 point estimate took 13 s with two threads, 3 s with one).
    with threadpool_limits(limits=1, user_api="blas"):
        point = frechet_distance(emb_sim, emb_real)
        interval = bootstrap_ci(lambda s, r: frechet_value(s, r)[0], emb_sim, emb_real, episodes_sim=episodes_sim,
                                episodes_real=episodes_real, n_boot=n_boot, ci=ci, max_samples=max_samples,
                                estimate=point.value, random_state=random_state, pairs=pairs)
    return FrechetDistance(value=point.value, mean_term=point.mean_term, n_sim=point.n_sim, n_real=point.n_real,
                           dim=point.dim, ci=interval)


def kid_ci(emb_sim: np.ndarray, emb_real: np.ndarray, *, episodes_sim: Sequence[Hashable] | None = None,
           episodes_real: Sequence[Hashable] | None = None, n_subsets: int = KID_SUBSETS,
           subset_size: int = KID_SUBSET_SIZE, n_boot: int = DIST_N_BOOT, ci: float = 0.95,
           max_samples: int = DIST_MAX_SAMPLES, random_state: int | np.random.Generator | None = 0,
           pairs: np.ndarray | None = None) -> KID:
    """`kid` with a cluster-bootstrap CI: each replicate is one KID subset of an episode resample.

    A replicate resamples whole episodes (`bootstrap_ci`), keeps at most min(max_samples,
    subset_size) frames per side of it (the cap of `bootstrap_ci`) and takes their unbiased
    MMD^2, so subset noise and episode noise are both in the interval.

    Args:
        emb_sim: (N, D) per side, >= 2 frames each.
        emb_real: (N, D) per side, >= 2 frames each.
        episodes_sim: optional length-N episode ids per side.
        episodes_real: optional length-N episode ids per side.
        n_subsets: as in `kid`.
        subset_size: as in `kid`.
        n_boot: replicates; default 100.
        ci: coverage in (0, 1).
        max_samples: frames per side per replicate (with `subset_size`, the smaller); default 500.
        random_state: seed.
        pairs: optional (P, 2) matched (i_sim, i_real) pairs, drawn together when episodes are few.

    Returns:
        KID with `ci`.
    """
    rng = make_rng(random_state)
    with threadpool_limits(limits=1, user_api="blas"):
        point = kid(emb_sim, emb_real, n_subsets=n_subsets, subset_size=subset_size, random_state=rng)
        interval = bootstrap_ci(mmd2_unbiased, emb_sim, emb_real, episodes_sim=episodes_sim,
                                episodes_real=episodes_real, n_boot=n_boot, ci=ci,
                                max_samples=min(max_samples, subset_size), estimate=point.value, random_state=rng,
                                pairs=pairs)
    return KID(value=point.value, std=point.std, n_subsets=point.n_subsets, subset_size=point.subset_size,
               n_sim=point.n_sim, n_real=point.n_real, ci=interval)
