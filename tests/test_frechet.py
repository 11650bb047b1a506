"""metrics/frechet.py against independent computations and known answers."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import scipy.linalg

from perception_gap.errors import InputError, InsufficientData
from perception_gap.metrics import frechet_distance, frechet_distance_ci, kid, kid_ci
from perception_gap.metrics.frechet import KID, FrechetDistance, mmd2_unbiased


def gaussians(n_sim=400, n_real=300, d=6, shift=0.0, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(d, d)) / np.sqrt(d)
    xs = rng.normal(size=(n_sim, d)) @ a
    xr = rng.normal(size=(n_real, d)) @ a * 1.3 + shift
    return xs, xr


def fd_by_scipy_sqrtm(xs, xr):
    """The reference implementations' recipe: scipy.linalg.sqrtm of the covariance product, real part."""
    mu_s, mu_r = xs.mean(0), xr.mean(0)
    s_s, s_r = np.cov(xs, rowvar=False), np.cov(xr, rowvar=False)
    covmean = scipy.linalg.sqrtm(s_s @ s_r).real
    return float(np.sum((mu_s - mu_r) ** 2) + np.trace(s_s) + np.trace(s_r) - 2 * np.trace(covmean))


def fd_by_symmetric_root(xs, xr):
    """Tr((S_s S_r)^(1/2)) = sum of sqrt eigenvalues of the PSD matrix S_s^(1/2) S_r S_s^(1/2)."""
    s_s, s_r = np.cov(xs, rowvar=False), np.cov(xr, rowvar=False)
    lam, v = np.linalg.eigh(s_s)
    root = (v * np.sqrt(np.clip(lam, 0, None))) @ v.T
    ev = np.linalg.eigvalsh(root @ s_r @ root)
    tr = np.sqrt(np.clip(ev, 0, None)).sum()
    return float(np.sum((xs.mean(0) - xr.mean(0)) ** 2) + np.trace(s_s) + np.trace(s_r) - 2 * tr)


def kid_by_loop(xs, xr):
    """Unbiased MMD^2 with k(x, y) = (x.y / d + 1)^3, written out pair by pair."""
    d = xs.shape[1]

    def k(a, b):
        return (float(np.dot(a, b)) / d + 1.0) ** 3

    m, n = len(xs), len(xr)
    xx = sum(k(xs[i], xs[j]) for i in range(m) for j in range(m) if i != j) / (m * (m - 1))
    yy = sum(k(xr[i], xr[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    xy = sum(k(xs[i], xr[j]) for i in range(m) for j in range(n)) / (m * n)
    return xx + yy - 2 * xy


@pytest.mark.parametrize("n_sim, n_real, d", [(400, 300, 6), (30, 25, 40), (50, 200, 20)])
def test_fd_equals_scipy_sqrtm_and_the_symmetric_root(n_sim, n_real, d):
    # Covers frames > dims, frames < dims on both sides (singular covariances) and mixed.
    xs, xr = gaussians(n_sim, n_real, d, shift=0.3, seed=d)
    res = frechet_distance(xs, xr)
    assert res.value == pytest.approx(fd_by_symmetric_root(xs, xr), rel=1e-7, abs=1e-9)
    assert res.value == pytest.approx(fd_by_scipy_sqrtm(xs, xr), rel=1e-5, abs=1e-6)
    assert res.mean_term == pytest.approx(float(np.sum((xs.mean(0) - xr.mean(0)) ** 2)))
    assert (res.n_sim, res.n_real, res.dim) == (n_sim, n_real, d)


def test_fd_known_answers():
    xs, _ = gaussians(500, 500, 8, seed=1)
    assert frechet_distance(xs, xs).value == pytest.approx(0.0, abs=1e-9)
    delta = np.array([0.5, -1.0, 0, 0, 2.0, 0, 0, 0])
    res = frechet_distance(xs, xs + delta)  # same covariance, means moved by delta
    assert res.value == pytest.approx(float(delta @ delta), rel=1e-9)
    assert res.mean_term == pytest.approx(5.25)
    # Two isotropic Gaussians, closed form d * (sigma_s - sigma_r)^2 + ||delta||^2, up to sampling.
    rng = np.random.default_rng(2)
    big_s, big_r = rng.normal(size=(20000, 4)), 2.0 * rng.normal(size=(20000, 4)) + 1.0
    assert frechet_distance(big_s, big_r).value == pytest.approx(4 * 1.0 + 4 * 1.0, rel=0.03)


def test_kid_equals_a_direct_loop_and_known_answers():
    xs, xr = gaussians(40, 30, 5, shift=0.4, seed=3)
    res = kid(xs, xr)
    assert res.n_subsets == 1 and res.std == 0.0  # every subset would be the whole set
    assert res.value == pytest.approx(kid_by_loop(xs, xr), rel=1e-10)
    assert mmd2_unbiased(xs, xr) == pytest.approx(kid_by_loop(xs, xr), rel=1e-10)
    # Subsets: the average of the loop over the same subsets the function draws.
    sub = kid(xs, xr, n_subsets=5, subset_size=20, random_state=7)
    rng = np.random.default_rng(7)
    ref = []
    for _ in range(5):
        i_s = np.sort(rng.choice(40, 20, replace=False))
        i_r = np.sort(rng.choice(30, 20, replace=False))
        ref.append(kid_by_loop(xs[i_s], xr[i_r]))
    assert sub.value == pytest.approx(np.mean(ref), rel=1e-10)
    assert sub.std == pytest.approx(np.std(ref), rel=1e-8)
    # Same distribution: near 0 (unbiased, so it can be negative); a shift: clearly positive.
    rng = np.random.default_rng(4)
    same = kid(rng.normal(size=(600, 8)), rng.normal(size=(600, 8)))
    shifted = kid(rng.normal(size=(600, 8)), rng.normal(size=(600, 8)) + 1.0)
    assert abs(same.value) < 0.02 and shifted.value > 0.5


def test_cis_contain_the_estimate_and_separate_a_shift():
    rng = np.random.default_rng(5)
    eps = np.repeat(np.arange(20), 15)
    xs = rng.normal(size=(300, 16))
    xr = rng.normal(size=(300, 16)) + 0.8
    fd = frechet_distance_ci(xs, xr, episodes_sim=eps, episodes_real=eps, n_boot=50)
    assert fd.ci.low <= fd.value <= fd.ci.high and fd.ci.low > 16 * 0.8 ** 2 * 0.6
    assert fd.ci.clusters == "episodes" and fd.ci.n_clusters_sim == 20
    k = kid_ci(xs, xr, episodes_sim=eps, episodes_real=eps, n_boot=50)
    assert k.ci.low <= k.value <= k.ci.high and k.ci.low > 0
    same = kid_ci(xs, rng.normal(size=(300, 16)), episodes_sim=eps, episodes_real=eps, n_boot=50)
    assert same.ci.low < 0 < same.ci.high
    out = fd.to_dict()
    json.dumps([out, k.to_dict()], allow_nan=False)
    assert set(out) >= {"value", "ci"} and set(out["ci"]) >= {"low", "high", "level"}
    assert FrechetDistance.higher_is_gap and KID.higher_is_gap


def test_errors_and_small_sets():
    xs, xr = gaussians(10, 10, 3)
    with pytest.raises(InsufficientData, match="at least 2 frames per side for the Frechet distance"):
        frechet_distance(xs[:1], xr)
    with pytest.raises(InsufficientData, match="for the KID"):
        kid(xs, xr[:1])
    with pytest.raises(InputError, match="same width"):
        frechet_distance(xs, xr[:, :2])
    with pytest.raises(InputError, match="`n_subsets`"):
        kid(xs, xr, n_subsets=0)


def test_wide_embeddings_stay_cheap():
    # 1,280-D (EfficientNet-Lite) with fewer frames than dimensions: the N x N route.
    rng = np.random.default_rng(6)
    xs, xr = rng.normal(size=(300, 1280)).astype(np.float32), rng.normal(size=(300, 1280)).astype(np.float32)
    t0 = time.perf_counter()
    res = frechet_distance_ci(xs, xr, n_boot=20)
    assert time.perf_counter() - t0 < 20
    assert res.value == pytest.approx(fd_by_symmetric_root(xs.astype(np.float64), xr.astype(np.float64)), rel=1e-6)
