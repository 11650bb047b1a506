"""Statistics with few episodes: paired permutations and blocks within episodes (metrics.resampling and
the metrics that take `pairs=`), against known answers and an exact enumeration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from perception_gap.metrics.bootstrap import bootstrap_ci
from perception_gap.metrics.centroid import centroid_distance_ci
from perception_gap.metrics.resampling import MIN_EPISODES, episode_blocks, resampling_labels, resampling_units
from perception_gap.metrics.twosample import domain_auc, mmd
from perception_gap.workflows import drift_gates


def episodes_of(n_pairs: int, n_episodes: int, d: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Matched sim/real frames along smooth trajectories (one per episode): consecutive frames are
    near-duplicates, a pair shares its scene, and sim is offset by `shift` in every dimension."""
    rng = np.random.default_rng(seed)
    walk = np.concatenate([np.cumsum(rng.normal(0, 0.3, (n_pairs // n_episodes, d)), axis=0) + rng.normal(0, 2, d)
                           for _ in range(n_episodes)])
    return (walk + rng.normal(0, 0.5, walk.shape) + shift, walk + rng.normal(0, 0.5, walk.shape))


def test_two_episodes_clear_gap_mmd_p_below_001():
    """The issue's known answer: >= 500 pairs, domain AUC >= 0.99, 2 episodes a side -> MMD p < 0.01.
    Whole-episode relabelling (2 + 2 episodes: 6 labellings) cannot go below 1/6."""
    sim, real = episodes_of(600, 2, 32, 1.0, seed=0)
    eps = np.repeat(["e0", "e1"], 300)
    pairs = np.c_[np.arange(600), np.arange(600)]
    auc = domain_auc(sim, real, episodes_sim=eps, episodes_real=eps, pairs=pairs)
    assert auc.value >= 0.99 and auc.grouping == "paired blocks"
    m = mmd(sim, real, episodes_sim=eps, episodes_real=eps, pairs=pairs)
    assert m.permutation == "pairs" and m.n_sim == m.n_real == 600
    assert m.p_value < 0.01


def _naive_mmd2(x: np.ndarray, y: np.ndarray, sigma: float) -> float:
    def k(a, b):
        return np.exp(-((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / (2 * sigma * sigma))
    kxx, kyy, kxy = k(x, x), k(y, y), k(x, y)
    n, m = len(x), len(y)
    return ((kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
            - 2 * kxy.mean())


def test_paired_permutation_p_matches_exact_enumeration():
    """8 pairs: all 2^8 within-pair swaps enumerated by a naive MMD^2 give the exact p-value;
    the Monte Carlo paired permutation must agree within its resolution."""
    sim, real = episodes_of(8, 1, 3, 0.4, seed=3)
    eps = ["e"] * 8
    m = mmd(sim, real, episodes_sim=eps, episodes_real=eps, pairs=np.c_[np.arange(8), np.arange(8)],
            n_permutations=20_000, random_state=1)
    assert m.permutation == "pairs"
    observed = _naive_mmd2(sim, real, m.bandwidth)
    assert m.value == pytest.approx(observed, rel=1e-9, abs=1e-12)
    stats = []
    for swap in itertools.product([0, 1], repeat=8):
        s = np.asarray(swap, dtype=bool)
        stats.append(_naive_mmd2(np.where(s[:, None], real, sim), np.where(s[:, None], sim, real), m.bandwidth))
    exact = np.mean(np.asarray(stats) >= observed - 1e-12)
    assert m.p_value == pytest.approx(exact, abs=0.01)


def test_paired_permutation_false_positive_rate_is_alpha():
    """Null data (a pair's two frames exchangeable, strongly correlated frames, 2 episodes): p < 0.05
    in about 5% of 100 data sets (binomial 95% range 1-10%), and a real shift is found."""
    rejections = 0
    for k in range(100):
        sim, real = episodes_of(60, 2, 8, 0.0, seed=100 + k)
        eps = np.repeat(["e0", "e1"], 30)
        p = mmd(sim, real, episodes_sim=eps, episodes_real=eps, pairs=np.c_[np.arange(60), np.arange(60)],
                n_permutations=100, random_state=k).p_value
        rejections += p < 0.05
    assert 1 <= rejections <= 10
    sim, real = episodes_of(60, 2, 8, 0.5, seed=7)
    eps = np.repeat(["e0", "e1"], 30)
    assert mmd(sim, real, episodes_sim=eps, episodes_real=eps, pairs=np.c_[np.arange(60), np.arange(60)]).p_value < 0.01


def test_units_pairs_share_blocks_and_many_episodes_unchanged():
    eps = ["a"] * 40 + ["b"] * 40
    pairs = np.c_[np.arange(80), np.arange(80)[::-1]]  # real frame 79 - i is sim frame i's twin
    u = resampling_units(eps, eps, 80, 80, pairs)
    assert u.paired and u.how == "paired blocks" and u.n_units == 16
    assert all(u.sim[i] == u.real[79 - i] for i in range(80))
    assert len(set(u.sim[:40]) & set(u.sim[40:])) == 0  # a block never spans two episodes
    u = resampling_units(eps, eps, 80, 80)
    assert not u.paired and u.how == "episode blocks" and len(set(u.sim)) == len(set(u.real)) == 16
    many = [i // 10 for i in range(80)]  # 8 episodes: whole episodes, each side its own
    u = resampling_units(many, many, 80, 80, pairs)
    assert not u.paired and u.how == "episodes" and u.n_units == 16
    assert len(set(episode_blocks(["x"] * 3))) == 3 and MIN_EPISODES == 5


def test_one_episode_intervals_do_not_collapse():
    """One episode a side: the cluster bootstrap resamples blocks within it, so replicates differ (not a point)."""
    sim, real = episodes_of(200, 1, 6, 0.3, seed=4)
    one = ["e"] * 200
    ci = centroid_distance_ci(sim, real, episodes_sim=one, episodes_real=one).ci
    assert ci.clusters == "episode blocks" and ci.high - ci.low > 1e-3
    paired = centroid_distance_ci(sim, real, episodes_sim=one, episodes_real=one,
                                  pairs=np.c_[np.arange(200), np.arange(200)]).ci
    assert paired.clusters == "paired blocks" and paired.high - paired.low > 1e-4

    def gap(a, b):
        return float(np.linalg.norm(a.mean(0) - b.mean(0)))

    g = bootstrap_ci(gap, sim, real, episodes_sim=one, episodes_real=one)
    assert g.high - g.low > 1e-3 and g.n_clusters_sim == 16
    # drift's shift gate on one-episode sets: an interval, not a point
    gate = drift_gates.shift_gate("x", sim[:, :1], real[:, :1], one, one, 10.0)
    assert gate.ci["high"] - gate.ci["low"] > 1e-3
    assert len(set(resampling_labels(one, 200))) == 16


def _materialized_median_reps(values, labels, n_boot, seed, paired=None):
    """The bootstrap as written first: rows repeated per drawn cluster, then `np.median`."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    f = lambda a: np.median(a, axis=0)  # noqa: E731
    if paired is None:
        groups = [np.flatnonzero(labels == g) for g in range(int(labels.max()) + 1)]
        out = []
        for _ in range(n_boot):
            pick = rng.integers(len(groups), size=len(groups))
            out.append(f(values[np.concatenate([groups[i] for i in pick])]))
        return np.asarray(out)
    cur, cur_labels, g = paired
    out_b, out_c = [], []
    for _ in range(n_boot):
        w = np.bincount(rng.integers(g, size=g), minlength=g)
        rb, rc = np.repeat(np.arange(len(values)), w[labels]), np.repeat(np.arange(len(cur)), w[cur_labels])
        if len(rb) and len(rc):
            out_b.append(f(values[rb]))
            out_c.append(f(cur[rc]))
    return np.asarray(out_b), np.asarray(out_c)


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
@pytest.mark.parametrize("n,clusters,levels", [(7, 3, 4), (40, 6, 5), (301, 17, 1000), (1000, 40, 3)])
def test_weighted_median_bootstrap_is_the_materialized_one_bit_for_bit(n, clusters, levels):
    """Medians of resampled clusters read off sorted columns and cumulative counts equal np.median
    of the repeated rows exactly: odd and even totals, heavy ties (few levels), empty clusters."""
    rng = np.random.default_rng(n)
    values = rng.integers(0, levels, size=(n, 3)) / 7.0 + (rng.random((n, 3)) if levels > 100 else 0)
    labels = np.sort(rng.integers(0, clusters, size=n))
    labels[labels == 1] = 0  # cluster 1 empty: a draw of it adds no row
    got = drift_gates._cluster_resample_stat(values, labels, None, 200, np.random.default_rng(5), median=True)
    want = _materialized_median_reps(values, labels, 200, 5)
    assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True)
    cur = values[::-1][: max(2, n // 2)] + 0.5 / 7
    p = np.stack([np.arange(len(cur)) // 2, np.arange(len(cur))], axis=1)[::2]  # half the current frames paired
    g_b = int(labels.max()) + 1
    cur_labels = np.full(len(cur), -1)
    cur_labels[p[:, 1]] = labels[p[:, 0]]
    lone = cur_labels < 0
    cur_labels[lone] = g_b + np.arange(int(lone.sum()))
    gb, gc = drift_gates._paired_resample_stat(values, cur, labels, p, None, 200, np.random.default_rng(6), median=True)
    wb, wc = _materialized_median_reps(values, labels, 200, 6, paired=(cur, cur_labels, g_b + int(lone.sum())))
    assert np.array_equal(gb, wb, equal_nan=True) and np.array_equal(gc, wc, equal_nan=True)


def test_shift_gate_median_fast_path_keeps_the_gate():
    """The gate's numbers equal those of the materialized bootstrap written above: episodes as
    clusters (10 a side, so no blocks), the baseline's 1,000 replicates drawn first and then the
    current side's from one generator seeded with `random_state`, the interval centred on the
    estimate (the replicates' 2.5/50/97.5 percentiles, shifted so that their median is it)."""
    rng = np.random.default_rng(3)
    base, cur = rng.normal(0, 1, (300, 3)), rng.normal(0.4, 1, (200, 3))
    eb, ec = [i // 30 for i in range(300)], [i // 20 for i in range(200)]
    fast = drift_gates.shift_gate("x", base, cur, eb, ec, 0.2, n_boot=1000, random_state=4)
    draws = np.random.default_rng(4)
    slow_b = _materialized_median_reps(base, np.asarray(eb), 1000, draws)
    slow_c = _materialized_median_reps(cur, np.asarray(ec), 1000, draws)
    reps = slow_c - slow_b
    est = np.median(cur, axis=0) - np.median(base, axis=0)
    worst = int(np.argmax(np.abs(est)))
    assert fast.value == est[worst] and fast.detail["column"] == str(worst)
    a = (1 - 0.95) / 2  # (not 0.025 exactly: 1 - 0.95 rounds up, and the bits are compared)
    lo, med, hi = np.quantile(reps[:, worst], [a, 0.5, 1 - a])
    assert (fast.ci["low"], fast.ci["high"]) == (est[worst] - (med - lo), est[worst] + (hi - med))
    # the gate fails only when the whole interval lies beyond the threshold
    assert fast.passed == (not any(fast.detail["per_channel"][c]["low"] > 0.2 or fast.detail["per_channel"][c]["high"]
                                   < -0.2 for c in "012"))
