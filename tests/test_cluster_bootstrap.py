"""The one cluster bootstrap (`resampling.cluster_counts`, `bootstrap.cluster_replicates`) and its
interval (`bootstrap.centred_ci`) against an exact enumeration and against scipy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from perception_gap.metrics.bootstrap import centred_ci, cluster_replicates, on_rows
from perception_gap.metrics.resampling import WeightedMedian, cluster_counts, frame_rows
from perception_gap.workflows import drift_gates, screening

# three clusters of 1, 2 and 3 frames: a replicate keeps every frame of a drawn cluster
LABELS = np.array([0, 1, 1, 2, 2, 2])
VALUES = np.array([0.0, 1.0, 3.0, 4.0, 6.0, 11.0])


def _exact() -> tuple[np.ndarray, np.ndarray]:
    """Every value of the replicate mean with its probability, from the 27 equally likely ordered draws."""
    probs: dict[float, float] = {}
    for draw in itertools.product(range(3), repeat=3):
        rows = frame_rows(LABELS, np.bincount(draw, minlength=3))
        v = float(VALUES[rows].mean())
        probs[v] = probs.get(v, 0.0) + 1 / 27
    support = np.array(sorted(probs))
    return support, np.array([probs[v] for v in support])


def test_counts_draw_every_unit_uniformly_and_in_one_stream():
    counts = cluster_counts(3, 60_000, np.random.default_rng(0))
    assert counts.shape == (60_000, 3) and (counts.sum(axis=1) == 3).all()
    # the count vectors of 3 draws from 3 units: multinomial(3, 1/3 each)
    freq = {tuple(c): n / len(counts) for c, n in zip(*np.unique(counts, axis=0, return_counts=True))}
    for c in itertools.product(range(4), repeat=3):
        if sum(c) == 3:
            p = 6 / np.prod([math.factorial(k) for k in c]) / 27
            assert freq[c] == pytest.approx(p, abs=0.01)
    rng = np.random.default_rng(3)
    one_by_one = np.stack([cluster_counts(7, 1, rng)[0] for _ in range(50)])
    assert np.array_equal(one_by_one, cluster_counts(7, 50, np.random.default_rng(3)))


def test_replicates_follow_the_exact_cluster_distribution():
    support, p = _exact()
    reps = np.array(cluster_replicates(on_rows(lambda v: float(v.mean()), VALUES), LABELS,
                                       cluster_counts(3, 40_000, np.random.default_rng(1))))
    emp = np.array([(reps <= v).mean() for v in support])
    assert np.abs(emp - np.cumsum(p)).max() < 0.01
    # a frame-level bootstrap would reach values the cluster one cannot (e.g. the mean of frame 1 alone)
    assert set(np.round(reps, 12)) <= set(np.round(support, 12))


def test_centred_interval_is_the_exact_quantiles_moved_onto_the_estimate():
    support, p = _exact()
    cdf = np.cumsum(p)
    # no exact CDF value lies near 0.025, 0.5 or 0.975, so the sampled quantiles are support points
    q_lo, med, q_hi = (support[np.searchsorted(cdf, q)] for q in (0.025, 0.5, 0.975))
    estimate = float(VALUES.mean())
    reps = np.array(cluster_replicates(on_rows(lambda v: float(v.mean()), VALUES), LABELS,
                                       cluster_counts(3, 40_000, np.random.default_rng(2))))
    low, high, bias = centred_ci(reps, estimate, 0.95)
    assert (low, high, bias) == pytest.approx((estimate - (med - q_lo), estimate + (q_hi - med), med - estimate))


def test_percentile_interval_matches_scipy_on_one_frame_clusters():
    """With every frame its own cluster the bootstrap is scipy's; low + bias and high + bias (the
    uncentred percentile interval) match scipy's percentile interval within Monte Carlo error."""
    x = np.random.default_rng(4).lognormal(size=80)
    reps = np.array(cluster_replicates(on_rows(np.mean, x), np.arange(len(x)),
                                       cluster_counts(len(x), 20_000, np.random.default_rng(5))))
    low, high, bias = centred_ci(reps, float(x.mean()), 0.9)
    ref = stats.bootstrap((x,), np.mean, n_resamples=20_000, confidence_level=0.9, method="percentile",
                          random_state=np.random.default_rng(6)).confidence_interval
    width = ref.high - ref.low
    assert low + bias == pytest.approx(ref.low, abs=0.03 * width)
    assert high + bias == pytest.approx(ref.high, abs=0.03 * width)


def test_a_replicate_that_draws_no_frame_of_a_side_is_none():
    counts = np.array([[2, 0], [1, 1]])
    reps = cluster_replicates(lambda w: int(w.sum()), np.array([1, 1]), counts)
    assert reps == [None, 2]


def test_drift_and_screen_draw_through_the_one_bootstrap():
    """The drift gate's replicates and the screen's shared draws are `cluster_counts` of their seed."""
    labels = np.repeat(np.arange(6), 4)
    values = np.random.default_rng(7).normal(size=(24, 2))
    got = drift_gates._cluster_resample_stat(values, labels, lambda a: np.median(a, axis=0), 50,
                                             np.random.default_rng(8), median=True)
    counts = cluster_counts(6, 50, np.random.default_rng(8))
    want = [np.median(values[frame_rows(labels, c)], axis=0) for c in counts]
    assert np.array_equal(got, np.asarray(want))
    draws, index = screening.shared_draws({"sim": list("abcde"), "real": list("abcdf")}, n_boot=40, random_state=9)
    assert len(index) == 6 and np.array_equal(draws, cluster_counts(6, 40, np.random.default_rng(9)))


def test_weighted_median_is_numpys_median_of_the_drawn_rows_one_replicate_or_all_at_once():
    """`WeightedMedian` reads the median of each column from draw counts: bit for bit np.median of
    the rows repeated as drawn, per replicate and for every replicate at once (ties, odd and even
    totals, replicates that draw nothing, blocks of rows)."""
    rng = np.random.default_rng(3)
    values = np.round(rng.normal(0, 2, (23, 3)), 1)  # rounded: tied values within a column
    counts = rng.integers(0, 3, (300, 23))
    counts[::37] = 0  # replicates that draw no frame
    wm = WeightedMedian(values)
    want = np.full((len(counts), 3), np.nan)
    for i, c in enumerate(counts):
        if c.any():
            want[i] = np.median(values[np.repeat(np.arange(23), c)], axis=0)
            assert np.array_equal(wm(c), want[i])
        else:
            assert wm(c) is None
    assert np.array_equal(wm.replicates(counts), want, equal_nan=True)
    assert np.array_equal(wm.replicates(counts, max_cells=50), want, equal_nan=True)  # two rows per block
