"""Binomial intervals, the Newcombe difference interval and rollouts-needed, against references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from perception_gap.errors import InputError
from perception_gap.evaluation.intervals import (
    clopper_pearson,
    newcombe_difference,
    rollouts_needed,
    wilson,
)


def test_nine_of_ten_and_nine_hundred_of_a_thousand_known_intervals():
    # "Nine of ten is 55.5%-99.7%; nine hundred of a thousand is 88.0%-91.8%."
    a, b = clopper_pearson(9, 10), clopper_pearson(900, 1000)
    assert (round(a.low * 100, 1), round(a.high * 100, 1)) == (55.5, 99.7)
    assert (round(b.low * 100, 1), round(b.high * 100, 1)) == (88.0, 91.8)


@pytest.mark.parametrize("k,n", [(0, 1), (0, 7), (1, 7), (3, 20), (17, 20), (20, 20), (412, 1000), (999, 1000)])
@pytest.mark.parametrize("conf", [0.9, 0.95, 0.99])
def test_exact_matches_scipy_binomtest(k, n, conf):
    ref = binomtest(k, n).proportion_ci(confidence_level=conf, method="exact")
    got = clopper_pearson(k, n, conf)
    assert got.low == pytest.approx(ref.low, abs=1e-10) and got.high == pytest.approx(ref.high, abs=1e-10)


@pytest.mark.parametrize("k,n", [(0, 5), (2, 9), (50, 100), (1000, 1000)])
def test_wilson_matches_scipy_binomtest(k, n):
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    got = wilson(k, n)
    assert got.low == pytest.approx(ref.low, abs=1e-10) and got.high == pytest.approx(ref.high, abs=1e-10)


@pytest.mark.parametrize("n", range(1, 41))
def test_wilson_holds_the_rate_at_all_and_none_despite_rounding(n):
    """At k = n (or 0) the bound equals the rate; rounding once left 1/1's upper bound at 0.9999999999999999."""
    for k in (0, n):
        got = wilson(k, n)
        assert got.low <= k / n <= got.high


def test_newcombe_hybrid_score_matches_the_published_example():
    # Newcombe (1998), Stat. Med. 17:873, Table II example (a): 56/70 - 48/80, method 10: 0.0524 to 0.3339
    d, ci = newcombe_difference(56, 70, 48, 80)
    assert d == pytest.approx(0.2)
    assert (round(ci.low, 4), round(ci.high, 4)) == (0.0524, 0.3339)
    # the difference reversed is the same interval mirrored
    d2, ci2 = newcombe_difference(48, 80, 56, 70)
    assert d2 == pytest.approx(-0.2) and ci2.low == pytest.approx(-ci.high) and ci2.high == pytest.approx(-ci.low)


def test_newcombe_coverage_is_near_nominal():
    # a known answer by simulation: equal true rates 0.8 vs 0.8 at n = 30 each; 95% should cover 0 ~95%
    rng = np.random.default_rng(0)
    cis = {}  # one interval per distinct pair of counts
    draws = zip(rng.binomial(30, 0.8, 1000), rng.binomial(30, 0.8, 1000))
    cover = np.mean([(ci := cis.setdefault((a, b), newcombe_difference(a, 30, b, 30)[1])).low <= 0 <= ci.high
                     for a, b in draws])
    assert 0.93 <= cover <= 0.99


def test_rollouts_needed_is_the_smallest_n_whose_interval_is_narrower():
    n = rollouts_needed(0.9, 0.1)
    assert clopper_pearson(0.9 * n, n).width < 0.1 <= clopper_pearson(0.9 * (n - 1), n - 1).width
    # closed form for Wilson at p = 0.5, far from the edges: width ~ 2 z sqrt(p(1-p)/n) -> n ~ (z / w)^2
    nw = rollouts_needed(0.5, 0.1, method="wilson")
    assert abs(nw - (1.959964 / 0.1) ** 2) < 5
    assert rollouts_needed(0.5, 0.0) is None


def test_bad_counts_are_input_errors():
    with pytest.raises(InputError, match="successes"):
        clopper_pearson(11, 10)
    with pytest.raises(InputError, match="n"):
        wilson(0, 0)
