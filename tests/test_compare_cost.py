"""The comparison stage's cost cuts against the implementations they replaced (same seeds, same numbers)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from perception_gap.metrics import centroid
from perception_gap.metrics.centroid import centroid_distance_ci
from perception_gap.metrics.projection import Rows, fit_pca, gather_rows, standardize_inplace


def _direct_replicate(z_sim, z_real, lab_sim, lab_real, w, k):
    """One replicate written out from the frames: every frame of a drawn unit repeated as often
    as the unit was drawn, the centroids and the pooled min-max range of those frames, their
    min-max scaled distance over sqrt(k), capped at 1 (NaN when a side drew no frame)."""
    rs, rr = np.repeat(z_sim, w[lab_sim], axis=0), np.repeat(z_real, w[lab_real], axis=0)
    if len(rs) == 0 or len(rr) == 0:
        return np.nan
    both = np.vstack([rs, rr])
    span = both.max(axis=0) - both.min(axis=0)
    d = np.where(span > 0, (rs.mean(axis=0) - rr.mean(axis=0)) / np.where(span > 0, span, 1), 0.0)
    return min(1.0, float(np.sqrt((d * d).sum())) / np.sqrt(k))


def _loop_ci(sim, real, k, units, draws):
    """The published recipe and its cluster bootstrap written out in the test (sklearn's scaler and
    PCA on the pooled frames, one Python iteration per replicate over the resampled frames
    themselves), given the units and the per-replicate unit draws the engine used. A component's
    sign is arbitrary and the min-max scaled distance does not see it."""
    pooled = np.vstack([sim, real])
    scaler = StandardScaler().fit(pooled)
    pca = PCA(n_components=k, svd_solver="full").fit(scaler.transform(pooled))
    z_sim, z_real = pca.transform(scaler.transform(sim)), pca.transform(scaler.transform(real))
    w_all = np.ones(units.n_units, dtype=np.int64)
    estimate = _direct_replicate(z_sim, z_real, units.sim, units.real, w_all, k)
    reps = np.array([_direct_replicate(z_sim, z_real, units.sim, units.real, w, k) for w in draws])
    ok = reps[np.isfinite(reps)]
    # centred percentile interval: the replicates shifted so that their median is the estimate
    q_lo, med, q_hi = np.quantile(ok, [0.025, 0.5, 0.975])
    return (estimate - (med - q_lo), estimate + (q_hi - med), med - estimate), len(ok), len(reps) - len(ok), estimate


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
    # the units and each replicate's draw are recorded as the engine makes them (the real
    # functions run); everything computed from them is recomputed here from the frames
    seen_units, draws = [], []
    real_units, real_weights = centroid.bootstrap_units, centroid.unit_weights
    monkeypatch.setattr(centroid, "bootstrap_units", lambda *a: seen_units.append(real_units(*a)) or seen_units[-1])
    monkeypatch.setattr(centroid, "unit_weights", lambda u, rng: draws.append(real_weights(u, rng)) or draws[-1])
    got = centroid_distance_ci(sim, real, episodes_sim=eps_s, episodes_real=eps_r, pairs=pairs,
                               n_components=6, n_boot=300, random_state=5)
    (units,) = seen_units
    assert len(draws) == 300 and all(w.sum() == units.n_units or not units.paired for w in draws)
    if kind == "episodes":  # one unit per episode, sim's numbered first
        assert list(units.sim) == list(eps_s) and list(units.real) == list(eps_r + eps_s.max() + 1)
    (low, high, bias), n_ok, n_nan, estimate = _loop_ci(sim, real, 6, units, draws)
    # equal up to the PCA solver's rounding and the summation order (unit sums vs frame rows)
    assert got.value_norm == pytest.approx(estimate, rel=1e-9)
    assert got.ci.n_boot == n_ok
    assert (got.ci.low, got.ci.high, got.ci.bias) == pytest.approx((max(0.0, low), min(1.0, high), bias),
                                                                   rel=1e-9, abs=1e-12)
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
