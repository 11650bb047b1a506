"""compare.py against independent references (numpy SVD recipe, sklearn, scipy) and known answers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.distance import cdist, pdist
from sklearn.metrics.pairwise import cosine_distances, paired_cosine_distances

from perception_gap.errors import InputError, InsufficientData
from perception_gap.metrics import projection, twosample
from perception_gap.metrics.bootstrap import bootstrap_ci
from perception_gap.metrics.centroid import centroid_distance, centroid_distance_ci, noise_floor, noise_floor_halves
from perception_gap.metrics.paired import paired_cosine
from perception_gap.metrics.resampling import block_ids, cluster_labels, grouped_folds, resample_clusters
from perception_gap.metrics.results import CI, MMD, CentroidDistance, DomainAUC, NoiseFloor, PairedCosine
from perception_gap.metrics.twosample import domain_auc, mmd


def gaussians(n_sim=120, n_real=100, d=12, shift=0.0, seed=0):
    rng = np.random.default_rng(seed)
    sim = rng.normal(size=(n_sim, d))
    real = rng.normal(size=(n_real, d))
    real[:, 0] += shift
    return sim, real


def ref_centroid(sim, real, k):
    """The published recipe written out: standardize, SVD-PCA, min-max, centroid distance."""
    x = np.vstack([sim, real]).astype(np.float64)
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    z = (x - x.mean(axis=0)) / sd
    zc = z - z.mean(axis=0)
    _, _, vt = np.linalg.svd(zc, full_matrices=False)
    p = zc @ vt[:k].T
    m = (p - p.min(axis=0)) / (p.max(axis=0) - p.min(axis=0))
    return float(np.linalg.norm(m[:len(sim)].mean(axis=0) - m[len(sim):].mean(axis=0)))


# -- centroid distance --------------------------------------------------------------------------

@pytest.mark.parametrize(("n_sim", "n_real", "d", "k"), [(80, 60, 10, 4), (80, 60, 10, 10), (15, 12, 40, 8),
                                                          (15, 12, 40, 26), (200, 150, 6, 3)])
def test_centroid_matches_reference_recipe(n_sim, n_real, d, k):
    sim, real = gaussians(n_sim, n_real, d, shift=0.7, seed=d + k)
    res = centroid_distance(sim, real, n_components=k)
    assert res.n_components == k
    assert res.n_fit == n_sim + n_real
    assert res.value == pytest.approx(ref_centroid(sim, real, k), abs=1e-6)
    assert res.value_norm == pytest.approx(res.value / math.sqrt(k), abs=1e-12)


def test_centroid_default_k_is_capped_by_width_and_rows():
    sim, real = gaussians(10, 8, 40)
    res = centroid_distance(sim, real)  # default 32 > N_total - 1 = 17
    assert res.n_components == 17
    assert res.value == pytest.approx(ref_centroid(sim, real, 17), abs=1e-6)
    assert centroid_distance(*gaussians(100, 100, 5)).n_components == 5


def test_identical_sets_give_zero():
    sim, _ = gaussians()
    res = centroid_distance(sim, sim.copy())
    assert res.value == 0.0 and res.value_norm == 0.0


def test_point_masses_in_one_dimension_are_one_apart():
    res = centroid_distance(np.zeros((5, 1)), np.ones((7, 1)))
    assert res.n_components == 1
    assert res.value == pytest.approx(1.0, abs=1e-12)
    assert res.value_norm == pytest.approx(1.0, abs=1e-12)


def test_known_shift_in_one_dimension():
    # sim at {0, 2}, real at {1, 3}: after min-max over [0, 3] the centroids are 1/3 and 2/3.
    sim = np.array([[0.0], [2.0]] * 4)
    real = np.array([[1.0], [3.0]] * 4)
    assert centroid_distance(sim, real).value == pytest.approx(1 / 3, abs=1e-12)
    # Standardization and PCA are affine in 1-D, so scale and offset change nothing.
    assert centroid_distance(5 * sim - 7, 5 * real - 7).value == pytest.approx(1 / 3, abs=1e-12)


def test_two_point_masses_in_many_dimensions_keep_only_the_real_rank():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=10), rng.normal(size=10)
    res = centroid_distance(np.tile(a, (6, 1)), np.tile(b, (9, 1)))
    # The pooled data has rank 1: the other components are rounding noise and are dropped.
    assert res.n_components == 1
    assert res.value == pytest.approx(1.0, abs=1e-9)
    assert res.value_norm == pytest.approx(1.0, abs=1e-9)


def test_centroid_invariant_to_frame_order_and_symmetric():
    sim, real = gaussians(shift=0.5, seed=3)
    rng = np.random.default_rng(0)
    base = centroid_distance(sim, real, n_components=6).value
    shuffled = centroid_distance(sim[rng.permutation(len(sim))], real[rng.permutation(len(real))], n_components=6)
    assert shuffled.value == pytest.approx(base, abs=1e-9)
    assert centroid_distance(real, sim, n_components=6).value == pytest.approx(base, abs=1e-9)


def test_float32_input_and_chunking_give_the_same_answer(monkeypatch):
    sim, real = gaussians(shift=0.5, seed=4)
    base = centroid_distance(sim, real, n_components=5)
    assert centroid_distance(sim.astype(np.float32), real.astype(np.float32), n_components=5).value == pytest.approx(
        base.value, rel=1e-5)
    monkeypatch.setattr(projection, "CHUNK_ROWS", 7)
    assert centroid_distance(sim, real, n_components=5).value == pytest.approx(base.value, abs=1e-12)


def test_large_sets_fit_on_a_subset_but_use_every_frame(monkeypatch):
    # 1-D: whatever rows the scaler and PCA are fitted on, the projection is affine, so the
    # answer is the closed form over ALL frames, including one extreme real frame at 30 that a
    # 200-row fit subset may well miss: range [0, 30], centroids 1 and 630/301.
    sim = np.array([[0.0], [2.0]] * 150)
    real = np.vstack([np.array([[1.0], [3.0]] * 150), [[30.0]]])
    monkeypatch.setattr(projection, "MAX_FIT_ROWS", 200)
    expected = (630 / 301 - 1.0) / 30.0
    for seed in range(3):
        res = centroid_distance(sim, real, random_state=seed)
        assert res.n_fit == 200 and res.n_sim == 300 and res.n_real == 301
        assert res.value == pytest.approx(expected, abs=1e-12)
    # Many dimensions: the subset fit stays close to the full fit.
    sim, real = gaussians(400, 300, 8, shift=3.0, seed=5)
    sub = centroid_distance(sim, real, n_components=3)
    monkeypatch.setattr(projection, "MAX_FIT_ROWS", 20_000)
    assert sub.value == pytest.approx(centroid_distance(sim, real, n_components=3).value, rel=0.15)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_value_norm_is_in_unit_interval(data):
    n_sim = data.draw(st.integers(2, 12))
    n_real = data.draw(st.integers(2, 12))
    d = data.draw(st.integers(1, 6))
    elems = st.floats(-1e3, 1e3, allow_nan=False, allow_subnormal=False)
    sim = data.draw(arrays(np.float64, (n_sim, d), elements=elems))
    real = data.draw(arrays(np.float64, (n_real, d), elements=elems))
    k = data.draw(st.integers(1, 8))
    res = centroid_distance(sim, real, n_components=k)
    assert 0.0 <= res.value_norm <= 1.0
    assert math.isfinite(res.value) and 0.0 <= res.value <= math.sqrt(max(res.n_components, 1)) + 1e-9
    json.dumps(res.to_dict(), allow_nan=False)


def test_centroid_argument_errors():
    sim, real = gaussians()
    with pytest.raises(InputError, match=r"Expected `n_components` in \[1, 512\], got 0\."):
        centroid_distance(sim, real, n_components=0)
    with pytest.raises(InputError, match="same width"):
        centroid_distance(sim, real[:, :3])
    with pytest.raises(InputError, match="shape"):
        centroid_distance(sim[:, 0], real)
    bad = sim.copy()
    bad[3, 2] = np.nan
    with pytest.raises(InputError, match="finite values in `emb_sim`"):
        centroid_distance(bad, real)
    with pytest.raises(InsufficientData, match="Expected at least 2 frames per side for the centroid distance, got 1 sim and 100 real."):
        centroid_distance(sim[:1], real)


def test_results_say_how_to_read_them():
    for cls in (CentroidDistance, NoiseFloor, PairedCosine, DomainAUC, MMD):
        assert cls.higher_is_gap is True
        assert cls.name and cls.unit


def test_inputs_are_never_modified():
    sim, real = gaussians(60, 50, 6, shift=0.5, seed=22)
    sim32 = sim.astype(np.float32)
    before = (sim.copy(), real.copy(), sim32.copy())
    eps = np.arange(60) // 6
    centroid_distance(sim, real)
    centroid_distance(sim32, real)
    noise_floor(real)
    paired_cosine(sim, real, np.c_[np.arange(50), np.arange(50)])
    domain_auc(sim, real, episodes_sim=eps)
    mmd(sim, real, n_permutations=5)
    centroid_distance_ci(sim, real, n_boot=10)
    bootstrap_ci(lambda s, r: float(s.mean() - r.mean()), sim, real, n_boot=10)
    for a, b in zip((sim, real, sim32), before):
        np.testing.assert_array_equal(a, b)


# -- noise floor ----------------------------------------------------------------------------------

def test_noise_floor_halves_alternate_whole_episodes():
    episodes = np.repeat(["e0", "e1", "e2", "e3", "e4", "e5"], [5, 3, 4, 6, 2, 5])
    a, b, method, g = noise_floor_halves(len(episodes), episodes)
    assert method == "episodes" and g == 6
    assert set(episodes[a]) == {"e0", "e2", "e4"} and set(episodes[b]) == {"e1", "e3", "e5"}
    assert sorted(np.r_[a, b]) == list(range(len(episodes)))


def test_noise_floor_uses_blocks_without_enough_episodes():
    n = 100
    for episodes in (None, np.repeat([1, 2, 3], [40, 30, 30]), [None] * n):
        a, b, method, _ = noise_floor_halves(n, episodes)
        assert method == "blocks"
        blocks = block_ids(n)
        assert len(set(blocks)) == 16 and np.all(np.diff(blocks) >= 0)  # contiguous, in order
        assert set(blocks[a]) == set(range(0, 16, 2)) and set(blocks[b]) == set(range(1, 16, 2))
        assert abs(len(a) - len(b)) <= 1


def test_noise_floor_is_the_centroid_distance_of_the_halves():
    _, real = gaussians(10, 160, 8, seed=6)
    episodes = np.repeat(np.arange(16), 10)
    floor = noise_floor(real, episodes=episodes, n_components=5)
    a, b, _, _ = noise_floor_halves(160, episodes)
    assert floor.method == "episodes" and floor.n_groups == 16 and floor.n_a == 80 == floor.n_b
    assert floor.value == pytest.approx(centroid_distance(real[a], real[b], n_components=5).value, abs=1e-12)
    assert noise_floor(real, n_components=5).method == "blocks"


def test_noise_floor_is_small_next_to_a_real_shift():
    sim, real = gaussians(400, 400, 16, shift=1.5, seed=7)
    floor = noise_floor(real, n_components=8)
    gap = centroid_distance(sim, real, n_components=8)
    assert floor.value_norm < 0.5 * gap.value_norm


def test_noise_floor_needs_four_frames():
    with pytest.raises(InsufficientData, match="at least 4 real frames for the noise floor, got 3"):
        noise_floor(np.ones((3, 4)))


# -- paired cosine --------------------------------------------------------------------------------

def test_paired_cosine_matches_sklearn():
    sim, real = gaussians(50, 40, 9, seed=8)
    rng = np.random.default_rng(0)
    pairs = np.c_[rng.integers(50, size=70), rng.integers(40, size=70)]
    res = paired_cosine(sim, real, pairs)
    ref = paired_cosine_distances(sim[pairs[:, 0]], real[pairs[:, 1]])
    assert res.n_pairs == 70
    assert res.mean == pytest.approx(ref.mean(), abs=1e-12)
    assert res.median == pytest.approx(np.median(ref), abs=1e-12)
    assert res.p90 == pytest.approx(np.percentile(ref, 90), abs=1e-12)
    # The shuffled reference is the mean over all mismatched (i != j) pairs.
    full = cosine_distances(sim[pairs[:, 0]], real[pairs[:, 1]])
    off = full[~np.eye(70, dtype=bool)]
    assert res.shuffled_mean == pytest.approx(off.mean(), abs=1e-12)


def test_paired_cosine_known_answers():
    sim, _ = gaussians(30, 2, 6, seed=9)
    pairs = np.c_[np.arange(30), np.arange(30)]
    same = paired_cosine(sim, sim * 3.0, pairs)  # cosine ignores scale
    assert same.mean == pytest.approx(0.0, abs=1e-12) and same.p90 == pytest.approx(0.0, abs=1e-12)
    rng = np.random.default_rng(1)
    near = paired_cosine(sim, sim + 0.3 * rng.normal(size=sim.shape), pairs)
    assert near.shuffled_mean > near.mean + 0.5


def test_paired_cosine_counts_zero_vectors_and_rejects_bad_pairs():
    sim, real = gaussians(5, 5, 3, seed=10)
    sim[0] = 0.0
    res = paired_cosine(sim, real, [[0, 0], [1, 1], [2, 2]])
    assert res.n_zero_norm == 1 and math.isfinite(res.mean)
    with pytest.raises(InputError, match=r"real indices of `pairs` in \[0, 4\]"):
        paired_cosine(sim, real, [[0, 0], [1, 5]])
    with pytest.raises(InsufficientData, match="at least 2 matched pairs"):
        paired_cosine(sim, real, [[0, 0]])
    with pytest.raises(InputError, match="shape"):
        paired_cosine(sim, real, [0, 1, 2])


# -- domain AUC -----------------------------------------------------------------------------------

def test_grouped_folds_never_split_a_group():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(23), rng.integers(1, 9, size=23))
    labels = (groups % 3 == 0).astype(int)
    folds = grouped_folds(groups, labels, n_splits=5, random_state=0)
    assert len(folds) == 5
    seen = np.concatenate([test for _, test in folds])
    assert sorted(seen) == list(range(len(groups)))
    for train, test in folds:
        assert not set(groups[train]) & set(groups[test])
        assert set(labels[train]) == {0, 1}


def test_grouped_folds_need_two_groups():
    with pytest.raises(InsufficientData, match="at least 2 episodes"):
        grouped_folds(np.zeros(10), np.r_[np.zeros(5), np.ones(5)], n_splits=5)


def test_domain_auc_identical_distributions_near_half():
    aucs = []
    for seed in range(5):
        sim, real = gaussians(200, 200, 16, seed=100 + seed)
        eps = np.repeat(np.arange(20), 10)
        res = domain_auc(sim, real, episodes_sim=eps, episodes_real=eps, random_state=seed)
        assert 0.35 < res.value < 0.65
        aucs.append(res.value)
    assert abs(np.mean(aucs) - 0.5) < 0.07


def test_domain_auc_large_shift_near_one():
    sim, real = gaussians(150, 120, 16, shift=4.0, seed=11)
    res = domain_auc(sim, real)
    assert res.value > 0.99
    assert res.grouping == "blocks" and res.n_groups == 32 and res.n_splits == 5


def test_domain_auc_few_frames_many_dimensions():
    # 48 scenes seen in sim and in real (twins share a group), 600-D, real dimmer: a clear gap
    # with far fewer frames than dimensions (the case of a pixel baseline on a small set).
    rng = np.random.default_rng(26)
    scenes = 3.0 * rng.normal(size=(48, 600))
    sim = scenes + rng.normal(size=scenes.shape)
    real = 0.7 * scenes + 0.5 + rng.normal(size=scenes.shape)
    pair = [("pair", i) for i in range(48)]
    assert domain_auc(sim, real, episodes_sim=pair, episodes_real=pair).value > 0.95


def test_domain_auc_groups_shared_episode_ids_and_caps_samples():
    sim, real = gaussians(150, 120, 8, shift=4.0, seed=12)
    res = domain_auc(sim, real, episodes_sim=np.arange(150) // 15, episodes_real=np.arange(120) // 12, max_samples=60)
    assert res.n_sim == 60 and res.n_real == 60 and res.grouping == "episodes"
    assert res.n_groups <= 10  # ids 0..9 on both sides are one group each


def _domain_auc_reference(sim, real, eps, seed):
    """The classifier stage as it ran before the BLAS thread limit: same rng draws, same folds,
    standardize + exact PCA(256), sklearn L-BFGS logistic regression per fold, all BLAS threads."""
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import StandardScaler

    from perception_gap.metrics.resampling import factorize, subsample
    from perception_gap.metrics.validation import make_rng

    rng = make_rng(seed)
    i_s, i_r = subsample(len(sim), 5000, rng), subsample(len(real), 5000, rng)
    groups = factorize(list(eps) + list(eps))
    groups = np.concatenate([groups[:len(sim)][i_s], groups[len(sim):][i_r]])
    y = np.r_[np.zeros(len(i_s), dtype=np.int64), np.ones(len(i_r), dtype=np.int64)]
    folds = grouped_folds(groups, y, n_splits=5, random_state=rng)
    x = StandardScaler().fit_transform(np.r_[sim[i_s], real[i_r]].astype(np.float64))
    feats = PCA(n_components=min(256, x.shape[1], len(x) - 1), svd_solver="covariance_eigh").fit_transform(x)
    oof = np.empty(len(y))
    for train, test in folds:
        oof[test] = LogisticRegression(C=1.0, max_iter=1000).fit(feats[train], y[train]).decision_function(feats[test])
    return roc_auc_score(y, oof)


@pytest.mark.parametrize("case", ["null", "small_shift", "correlated_scale", "large_shift"])
def test_domain_auc_matches_the_unthrottled_classifier(case):
    # correlated 96-D features (a 12-D latent mixed in, as embeddings are), 400 frames per side
    rng = np.random.default_rng({"null": 1, "small_shift": 2, "correlated_scale": 3, "large_shift": 4}[case])
    mix = rng.normal(size=(12, 96))
    sim = rng.normal(size=(400, 12)) @ mix + 0.5 * rng.normal(size=(400, 96))
    lat = rng.normal(size=(400, 12))
    if case == "small_shift":
        lat[:, 0] += 0.4
    elif case == "correlated_scale":
        lat[:, :3] *= 1.3
    elif case == "large_shift":
        lat[:, 1] += 3.0
    real = lat @ mix + 0.5 * rng.normal(size=(400, 96))
    eps = np.arange(400) // 20
    got = domain_auc(sim, real, episodes_sim=eps, episodes_real=eps, random_state=3).value
    assert abs(got - _domain_auc_reference(sim, real, eps, 3)) < 0.01


def test_domain_auc_needs_frames_and_episodes():
    sim, real = gaussians(2, 10, 4)
    with pytest.raises(InsufficientData, match="Expected at least 4 frames per side for the domain AUC, got 2 sim and 10 real."):
        domain_auc(sim, real)
    assert 0.0 <= domain_auc(*gaussians(4, 4, 3)).value <= 1.0  # the minimum runs (4 folds)
    sim, real = gaussians(10, 10, 4)
    # one episode on a side is cut into contiguous blocks within it (few episodes), not refused
    one = domain_auc(sim, real, episodes_sim=["a"] * 10)
    assert one.grouping == "episode blocks" and one.n_groups >= 4
    with pytest.raises(InputError, match=r"Expected `episodes_real` of length 10"):
        domain_auc(sim, real, episodes_real=[1, 2])


# -- MMD ------------------------------------------------------------------------------------------

def ref_mmd2(x, y, sigma):
    def k(a, b):
        return np.exp(-cdist(a, b, "sqeuclidean") / (2 * sigma**2))
    n, m = len(x), len(y)
    kxx, kyy = k(x, x), k(y, y)
    return ((kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
            - 2 * k(x, y).mean())


def test_mmd_matches_direct_computation():
    sim, real = gaussians(60, 45, 7, shift=0.8, seed=13)
    res = mmd(sim, real, n_permutations=20)
    sigma = np.median(pdist(np.vstack([sim, real])))
    assert res.bandwidth == pytest.approx(sigma, rel=1e-10)
    assert res.value == pytest.approx(ref_mmd2(sim, real, sigma), abs=1e-10)
    assert res.n_sim == 60 and res.n_real == 45 and res.permutation == "frames"


def test_mmd_batch_formula_matches_direct_for_any_relabelling():
    sim, real = gaussians(20, 15, 4, seed=14)
    x = np.vstack([sim, real])
    sigma = 1.7
    kern = np.exp(-cdist(x, x, "sqeuclidean") / (2 * sigma**2))
    rng = np.random.default_rng(0)
    z = (rng.random((35, 6)) < 0.4).astype(float)
    got = twosample._mmd2_batch(kern @ z, z, kern.sum(axis=1), kern.sum(), np.diag(kern).copy(), np.trace(kern))
    for j in range(6):
        m = z[:, j] == 1
        assert got[j] == pytest.approx(ref_mmd2(x[m], x[~m], sigma), abs=1e-12)


def test_mmd_p_values():
    sim, real = gaussians(150, 150, 8, seed=15)
    assert mmd(sim, real).p_value > 0.05
    sim, real = gaussians(150, 150, 8, shift=1.0, seed=15)
    res = mmd(sim, real)
    assert res.p_value <= 0.01 and res.p_value == pytest.approx(1 / 201)


def test_mmd_is_symmetric():
    sim, real = gaussians(40, 55, 5, shift=0.5, seed=16)
    a, b = mmd(sim, real, n_permutations=10), mmd(real, sim, n_permutations=10)
    assert a.value == pytest.approx(b.value, abs=1e-12) and a.bandwidth == pytest.approx(b.bandwidth)


def test_mmd_relabels_whole_episodes_when_known():
    # Each episode has its own offset; sim and real draw episodes from the same distribution.
    # Relabelling frames treats 20 near-copies as 20 observations and cries wolf; relabelling
    # episodes does not.
    rng = np.random.default_rng(17)

    def episodes_set(n_ep):
        centres = rng.normal(size=(n_ep, 6)) * 3.0
        return np.repeat(centres, 20, axis=0) + 0.1 * rng.normal(size=(n_ep * 20, 6)), np.repeat(np.arange(n_ep), 20)

    sim, ep_s = episodes_set(8)
    real, ep_r = episodes_set(8)
    by_frames = mmd(sim, real, max_samples=200)
    by_episodes = mmd(sim, real, episodes_sim=ep_s, episodes_real=ep_r, max_samples=200)
    assert by_frames.permutation == "frames" and by_frames.p_value < 0.01
    assert by_episodes.permutation == "episodes" and by_episodes.p_value > 0.05
    assert by_episodes.value == pytest.approx(by_frames.value)


def test_mmd_caps_and_errors():
    sim, real = gaussians(300, 250, 4, seed=18)
    res = mmd(sim, real, max_samples=100, n_permutations=5)
    assert res.n_sim == 100 and res.n_real == 100 and res.n_permutations == 5
    with pytest.raises(InsufficientData, match="at least 4 frames per side for the MMD, got 3 sim"):
        mmd(sim[:3], real)
    with pytest.raises(InputError, match=r"Expected `n_permutations` in \[1, 100000\], got 0\."):
        mmd(sim, real, n_permutations=0)


def test_identical_constant_sets_give_finite_results():
    x = np.ones((10, 3))
    res = mmd(x, x.copy(), n_permutations=10)
    assert res.value == 0.0 and res.p_value == 1.0 and res.bandwidth == 1.0
    assert centroid_distance(x, x.copy()).to_dict()["value"] == 0.0


# -- bootstrap ------------------------------------------------------------------------------------

def test_resample_clusters_keeps_whole_clusters():
    labels = np.repeat([4, 9, 2, 7, 1], [3, 5, 1, 4, 2])
    for seed in range(20):
        idx = resample_clusters(labels, random_state=seed)
        times = np.bincount(idx, minlength=len(labels))
        for lab in np.unique(labels):
            members = np.flatnonzero(labels == lab)
            assert len(set(times[members])) == 1  # every member drawn as often as its cluster
        assert sum(times[labels == lab][0] for lab in np.unique(labels)) == 5  # 5 clusters drawn


def test_cluster_labels_blocks_and_unknown_entries():
    assert list(cluster_labels(None, 32)) == list(np.arange(32) // 2)
    assert list(cluster_labels(["b", "a", "b", None], 4)) == [0, 1, 0, 2]


def test_centroid_ci_is_centred_on_the_estimate_with_the_bootstrap_spread():
    sim, real = gaussians(300, 300, 10, shift=1.0, seed=19)
    eps = np.repeat(np.arange(30), 10)
    res = centroid_distance_ci(sim, real, episodes_sim=eps, episodes_real=eps, n_components=5)
    assert res.value == pytest.approx(centroid_distance(sim, real, n_components=5).value, abs=1e-12)
    ci = res.ci
    assert ci is not None and ci.low < res.value_norm < ci.high <= 1.0
    assert ci.clusters == "episodes" and ci.n_clusters_sim == 30 and ci.n_boot == 1000
    assert ci.bias > 0  # resampling noise only adds distance
    json.dumps(res.to_dict(), allow_nan=False)


def test_centroid_ci_narrows_with_more_episodes_and_stays_centred_when_small():
    wide = centroid_distance_ci(*gaussians(100, 100, 6, shift=0.3, seed=23), n_components=4).ci
    narrow = centroid_distance_ci(*gaussians(1600, 1600, 6, shift=0.3, seed=23), n_components=4).ci
    assert (narrow.high - narrow.low) < 0.5 * (wide.high - wide.low)
    sim, real = gaussians(400, 400, 6, seed=24)  # no gap: a percentile interval would miss it
    res = centroid_distance_ci(sim, real, n_components=4)
    assert res.ci.low <= res.value_norm <= res.ci.high


def test_bootstrap_ci_width_matches_the_standard_error():
    # Mean difference of iid unit Gaussians: SE = sqrt(1/n_sim + 1/n_real), so a 95% interval
    # is about 2 * 1.96 * SE wide.
    sim, real = gaussians(400, 300, 1, shift=0.5, seed=25)
    eps_s, eps_r = np.arange(400) // 10, np.arange(300) // 10

    def diff(s, r):
        return float(r[:, 0].mean() - s[:, 0].mean())

    ci = bootstrap_ci(diff, sim, real, episodes_sim=eps_s, episodes_real=eps_r, n_boot=400)
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * math.sqrt(1 / 400 + 1 / 300), rel=0.2)
    assert ci.contains(diff(sim, real)) and abs(ci.bias) < 0.02
    # Episodes with their own offsets: resampling whole episodes widens the interval, as it must.
    offsets = np.random.default_rng(0).normal(size=40)
    clustered = sim + offsets[eps_s][:, None]
    iid_blocks = bootstrap_ci(diff, clustered, real, episodes_sim=np.arange(400), episodes_real=eps_r, n_boot=400)
    by_episode = bootstrap_ci(diff, clustered, real, episodes_sim=eps_s, episodes_real=eps_r, n_boot=400)
    assert by_episode.high - by_episode.low > 1.5 * (iid_blocks.high - iid_blocks.low)  # ~1.9 expected


def test_generic_bootstrap_resamples_whole_episodes():
    rng = np.random.default_rng(20)
    # Column 0: episode id, column 1: frame id, so the statistic can see what it was given.
    sizes = rng.integers(2, 7, size=12)
    ep = np.repeat(np.arange(12), sizes)
    sim = np.c_[ep, np.arange(len(ep)), rng.normal(size=len(ep))].astype(float)
    real = sim.copy()
    real[:, 2] += 1.0
    broken = []

    def stat(s, r):
        for arr in (s, r):
            for e in np.unique(arr[:, 0]):
                frames, counts = np.unique(arr[arr[:, 0] == e, 1], return_counts=True)
                if len(frames) != sizes[int(e)] or len(set(counts)) != 1:
                    broken.append(e)
        return float(r[:, 2].mean() - s[:, 2].mean())

    ci = bootstrap_ci(stat, sim, real, episodes_sim=ep, episodes_real=ep, n_boot=50)
    assert not broken
    assert ci.contains(stat(sim, real)) and ci.n_clusters_sim == 12 and not ci.capped


def test_generic_bootstrap_caps_and_fails_clearly():
    sim, real = gaussians(200, 200, 3, shift=1.0, seed=21)

    def diff(s, r):
        return float(r[:, 0].mean() - s[:, 0].mean())

    ci = bootstrap_ci(diff, sim, real, max_samples=50, n_boot=40)
    assert ci.capped and ci.contains(diff(sim, real)) and isinstance(ci, CI)

    def never(s, r):
        raise InsufficientData("no")

    with pytest.raises(InsufficientData, match="bootstrap replicates"):
        bootstrap_ci(never, sim, real, n_boot=10, estimate=0.0)
    # one episode: blocks within it, so the interval does not collapse to a point
    one = centroid_distance_ci(sim, real, episodes_sim=[0] * 200).ci
    assert one.clusters == "episode blocks" and one.n_clusters_sim == 16 and one.high > one.low
    with pytest.raises(InputError, match=r"Expected `ci` in \(0, 1\), got 1.5\."):
        centroid_distance_ci(sim, real, ci=1.5)


def test_pair_cosine_distances_match_sklearn():
    from sklearn.metrics.pairwise import paired_cosine_distances

    from perception_gap.metrics.paired import pair_cosine_distances, paired_cosine

    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(30, 8)), rng.normal(size=(25, 8))
    pairs = np.stack([rng.integers(0, 30, 20), rng.integers(0, 25, 20)], 1)
    d = pair_cosine_distances(a, b, pairs)
    np.testing.assert_allclose(d, paired_cosine_distances(a[pairs[:, 0]], b[pairs[:, 1]]), atol=1e-12)
    assert d.mean() == pytest.approx(paired_cosine(a, b, pairs).mean)
    assert pair_cosine_distances(a, a, np.stack([np.arange(30)] * 2, 1)) == pytest.approx(np.zeros(30), abs=1e-12)


def test_mmd_bandwidth_survives_a_large_common_offset():
    """Known answer: rows 1e-9 apart on a 1e3 offset get the same bandwidth and MMD as without the offset."""
    x = np.array([[0, 0], [0, 1e-9], [0, 2e-9], [0, 3e-9]])
    y = x + [0, 5e-9]
    far = [1e3, 0]
    assert mmd(x + far, y + far).bandwidth == pytest.approx(mmd(x, y).bandwidth, rel=1e-6)
    assert mmd(x + far, y + far).value == pytest.approx(mmd(x, y).value, rel=1e-6, abs=1e-12)
