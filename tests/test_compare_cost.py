"""The comparison stage's cost cuts against the implementations they replaced (same seeds, same numbers)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA

from perception_gap.metrics import centroid
from perception_gap.metrics.bootstrap import centred_ci
from perception_gap.metrics.centroid import centroid_distance_ci, normed, scaled_distance, unit_stats
from perception_gap.metrics.projection import Rows, fit_pca, fit_projection, gather_rows, standardize_inplace
from perception_gap.metrics.resampling import bootstrap_units, unit_weights
from perception_gap.metrics.validation import draw_seed, make_rng


def _loop_ci(sim, real, eps_s, eps_r, pairs, k_want, n_boot, seed):
    """centroid_distance_ci's bootstrap as it was: one Python iteration per replicate."""
    units = bootstrap_units(eps_s, eps_r, len(sim), len(real), pairs)
    rng = make_rng(seed)
    proj = fit_projection([Rows(sim), Rows(real)], k_want, rng)
    z_sim, z_real = proj.transform(Rows(sim)), proj.transform(Rows(real))
    lo = np.minimum(z_sim.min(axis=0), z_real.min(axis=0))
    hi = np.maximum(z_sim.max(axis=0), z_real.max(axis=0))
    k, value = proj.k, scaled_distance(z_sim.mean(axis=0), z_real.mean(axis=0), lo, hi)
    g = units.n_units
    sum_s, cnt_s, min_s, max_s = unit_stats(z_sim, units.sim, g)
    sum_r, cnt_r, min_r, max_r = unit_stats(z_real, units.real, g)
    boot_rng = np.random.default_rng(draw_seed(rng))
    reps = np.zeros(n_boot)
    for b in range(n_boot):
        w = unit_weights(units, boot_rng).astype(np.float64)
        tot_s, tot_r = w @ cnt_s, w @ cnt_r
        if tot_s == 0 or tot_r == 0:
            reps[b] = np.nan
            continue
        sel = w > 0
        lo = np.minimum(min_s[sel].min(axis=0), min_r[sel].min(axis=0))
        hi = np.maximum(max_s[sel].max(axis=0), max_r[sel].max(axis=0))
        reps[b] = normed(scaled_distance((w @ sum_s) / tot_s, (w @ sum_r) / tot_r, lo, hi), k)
    n_nan = int(np.isnan(reps).sum())
    return centred_ci(reps[np.isfinite(reps)], normed(value, k), 0.95), n_boot - n_nan, n_nan


def _case(kind):
    rng = np.random.default_rng({"episodes": 1, "blocks": 2, "paired": 3}[kind])
    n = 240
    sim = rng.normal(size=(n, 20))
    real = sim * 1.1 + rng.normal(0, 0.5, size=(n, 20)) + 0.3
    if kind == "episodes":
        eps = np.arange(n) // 12
        return sim, real, eps, eps, None
    if kind == "blocks":
        return sim, real, None, None, None
    # two episodes a side, one pair: units are blocks within episodes, drawn for both sides at
    # once, and with 2 real frames against 240 sim some draws miss the real side (NaN replicates)
    eps = np.arange(n) // 120
    return sim, real[:2], eps, np.array([0, 1]), np.array([[0, 0]])


@pytest.mark.parametrize("kind", ["episodes", "blocks", "paired"])
@pytest.mark.parametrize("chunk", [None, 1000])
def test_centroid_ci_replicates_as_matrix_ops_equal_the_per_replicate_loop(kind, chunk, monkeypatch):
    if chunk is not None:  # several chunks of replicates, one of them partial
        monkeypatch.setattr(centroid, "BOOT_CHUNK_ELEMENTS", chunk)
    sim, real, eps_s, eps_r, pairs = _case(kind)
    (low, high, bias), n_ok, n_nan = _loop_ci(sim, real, eps_s, eps_r, pairs, 6, 300, 5)
    got = centroid_distance_ci(sim, real, episodes_sim=eps_s, episodes_real=eps_r, pairs=pairs,
                               n_components=6, n_boot=300, random_state=5)
    # equal up to the summation order of a matrix product against a vector product
    assert got.ci.n_boot == n_ok
    assert (got.ci.low, got.ci.high, got.ci.bias) == pytest.approx((max(0.0, low), min(1.0, high), bias),
                                                                   rel=1e-12, abs=1e-14)
    if kind == "paired":
        assert n_nan > 0  # the NaN branch was exercised


@pytest.mark.parametrize("shape", [(300, 40), (30, 40)])  # covariance_eigh, and full SVD (n < d)
def test_one_thread_pca_equals_the_default_fit(shape):
    rng = np.random.default_rng(7)
    x = rng.normal(size=shape) @ rng.normal(size=(shape[1], shape[1]))
    x = gather_rows([Rows(x)])
    standardize_inplace(x)
    k = min(10, shape[0] - 1)
    solver = "covariance_eigh" if shape[0] >= shape[1] else "full"
    ref = PCA(n_components=k, svd_solver=solver).fit(x.copy())
    ref_scores = ref.transform(x)
    pca, scores = fit_pca(x.copy(), k, 0, scores=True)
    signs = np.sign(np.sum(pca.components_ * ref.components_, axis=1))  # a component's sign is arbitrary
    np.testing.assert_allclose(pca.components_ * signs[:, None], ref.components_, atol=1e-9)
    np.testing.assert_allclose(pca.explained_variance_ratio_, ref.explained_variance_ratio_, rtol=1e-10)
    np.testing.assert_allclose(scores * signs, ref_scores, atol=1e-9)
    fitted, none = fit_pca(x.copy(), k, 0)
    assert none is None
    np.testing.assert_allclose(fitted.components_, pca.components_, atol=1e-12)
