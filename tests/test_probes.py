"""probes.py on synthetic data with known answers: linear maps, broken transfer, noise, leaks."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import Ridge, RidgeCV
from sklearn.metrics import r2_score
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

from perception_gap.errors import InputError, InsufficientData
from perception_gap.metrics.validation import draw_seed
from perception_gap.probes import ALPHAS, ProbeResult, choose_alpha, probe


def linear_sets(n_sim=300, n_real=240, d=24, t=3, noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(d, t))
    xs, xr = rng.normal(size=(n_sim, d)), rng.normal(size=(n_real, d))
    ys = xs @ w + noise * rng.normal(size=(n_sim, t))
    yr = xr @ w + noise * rng.normal(size=(n_real, t))
    return xs, ys, xr, yr


def test_linear_targets_are_recovered_everywhere():
    xs, ys, xr, yr = linear_sets()
    res = probe(xs, ys, xr, yr, episodes_sim=np.arange(300) // 10, episodes_real=np.arange(240) // 10)
    for score in (res.sim_to_sim, res.real_to_real, res.sim_to_real):
        assert score.r2 > 0.99
        assert all(v > 0.99 for v in score.r2_per_dim)
    assert res.sim_to_sim.n_splits == 5 and res.sim_to_real.n_test == 240 and res.n_targets == 3
    assert abs(res.transfer_drop) < 0.01


def test_a_shift_that_breaks_the_mapping_drops_transfer_only():
    xs, ys, xr, yr = linear_sets(seed=1)
    xr = xr[:, np.random.default_rng(0).permutation(xr.shape[1])]  # real features scrambled
    res = probe(xs, ys, xr, yr)
    assert res.sim_to_sim.r2 > 0.99 and res.real_to_real.r2 > 0.99
    assert res.sim_to_real.r2 < 0.3
    assert res.transfer_drop > 0.7


def test_random_targets_score_near_zero():
    xs, _, xr, _ = linear_sets(seed=2)
    rng = np.random.default_rng(3)
    res = probe(xs, rng.normal(size=300), xr, rng.normal(size=240))
    for score in (res.sim_to_sim, res.real_to_real, res.sim_to_real):
        assert score.r2 < 0.1


def test_held_out_episodes_stop_memorization():
    # Every episode is one scene (near-duplicate frames) with its own random target: a probe
    # that saw frames of a test episode in training would score R^2 ~ 1 by memorizing it.
    rng = np.random.default_rng(4)

    def episodic(n_ep, per=10):
        centres, targets = rng.normal(size=(n_ep, 40)), rng.normal(size=(n_ep, 2))
        ep = np.repeat(np.arange(n_ep), per)
        return centres[ep] + 0.01 * rng.normal(size=(n_ep * per, 40)), targets[ep], ep

    xs, ys, es = episodic(30)
    xr, yr, er = episodic(30)
    res = probe(xs, ys, xr, yr, episodes_sim=es, episodes_real=er)
    assert res.sim_to_sim.r2 < 0.3 and res.real_to_real.r2 < 0.3


def test_constant_target_dimension_is_none_and_left_out():
    xs, ys, xr, yr = linear_sets(seed=5)
    ys[:, 1] = 2.5
    yr[:, 1] = 2.5
    res = probe(xs, ys, xr, yr)
    s2r = res.sim_to_real
    assert s2r.r2_per_dim[1] is None
    assert s2r.r2 == pytest.approx(np.mean([s2r.r2_per_dim[0], s2r.r2_per_dim[2]]))
    out = res.to_dict()
    json.dumps(out, allow_nan=False)
    assert set(out) >= {"sim_to_sim", "real_to_real", "sim_to_real"}
    assert out["detail"]["sim_to_real"]["r2_per_dim"][1] is None


def test_transfer_r2_matches_plain_sklearn_ridges_on_held_out_episodes():
    # With k = D the PCA is a rotation, and ridge is rotation invariant: with one alpha and five
    # episodes (so each fold holds out exactly one), sim->real must equal, per held-out episode,
    # StandardScaler (fitted on all sim frames, label-free as in the probe) -> Ridge trained on
    # the other episodes' sim frames, scored on that episode's real frames by r2_score.
    xs, ys, xr, yr = linear_sets(noise=1.5, seed=6)
    eps_s, eps_r = np.arange(300) // 60, np.arange(240) // 48
    res = probe(xs, ys, xr, yr, episodes_sim=eps_s, episodes_real=eps_r, alphas=[3.0])
    assert res.n_components == xs.shape[1] and res.sim_to_real.n_splits == 5
    scaler = StandardScaler().fit(xs)
    ref = np.empty_like(yr)
    for e in range(5):
        ridge = Ridge(alpha=3.0).fit(scaler.transform(xs[eps_s != e]), ys[eps_s != e])
        ref[eps_r == e] = ridge.predict(scaler.transform(xr[eps_r == e]))
    per = r2_score(yr, ref, multioutput="raw_values")
    assert res.sim_to_real.r2_per_dim == pytest.approx(tuple(per), abs=1e-8)
    assert res.sim_to_real.r2 == pytest.approx(r2_score(yr, ref, multioutput="uniform_average"), abs=1e-8)
    assert 0.2 < res.sim_to_real.r2 < 0.95  # a non-trivial value


@pytest.mark.parametrize("seed", range(4))
def test_choose_alpha_agrees_with_sklearn_ridgecv(seed):
    rng = np.random.default_rng(seed)
    feats = rng.normal(size=(90, 30))
    y = feats[:, :3] @ rng.normal(size=(3, 2)) * 0.3 + rng.normal(size=(90, 2))
    y[:, 1] *= 50.0  # mixed units: the criterion averages R^2, it does not add squared errors
    groups = np.arange(90) // 6
    splits = list(GroupKFold(n_splits=3, shuffle=True, random_state=draw_seed(np.random.default_rng(seed)))
                  .split(feats, y, groups))
    ref = RidgeCV(alphas=ALPHAS, cv=splits).fit(feats, y).alpha_
    assert choose_alpha(feats, y, groups, ALPHAS, random_state=seed) == ref


def test_probe_errors():
    xs, ys, xr, yr = linear_sets()
    with pytest.raises(InsufficientData, match="Expected at least 8 frames per side for the probes, got 5 sim and 240 real."):
        probe(xs[:5], ys[:5], xr, yr)
    with pytest.raises(InsufficientData, match="at least 2 episodes .* sim set"):
        probe(xs, ys, xr, yr, episodes_sim=["one"] * 300)
    with pytest.raises(InputError, match="same number of target dimensions"):
        probe(xs, ys, xr, yr[:, :2])
    with pytest.raises(InputError, match=r"Expected `y_real` of shape \(240,\) or \(240, T\)"):
        probe(xs, ys, xr, yr[:10])
    with pytest.raises(InputError, match="alphas"):
        probe(xs, ys, xr, yr, alphas=[0.0])
    bad = yr.copy()
    bad[0, 0] = np.inf
    with pytest.raises(InputError, match="finite values in `y_real`"):
        probe(xs, ys, xr, bad)


def test_inputs_are_never_modified():
    xs, ys, xr, yr = linear_sets(seed=7)
    before = [a.copy() for a in (xs, ys, xr, yr)]
    probe(xs, ys, xr, yr)
    probe(xs.astype(np.float32), ys, xr, yr)
    for a, b in zip((xs, ys, xr, yr), before):
        np.testing.assert_array_equal(a, b)


def test_result_direction():
    assert ProbeResult.higher_is_gap is False
