"""The distribution-basis bar: a difference of medians in standard errors AND a rank test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu
from test_plumbing import image_set, run

from perception_gap.diagnoses.common import (
    DIST_ALPHA,
    DIST_MIN_FRAMES,
    DIST_Z,
    HF_MIN_FRAMES,
    SMALL_SET_MARGIN,
    dist_clear,
    dist_z,
    median,
    rank_p,
)


def test_min_frames_is_where_the_exact_test_can_first_reach_alpha():
    # 4 v 4: the most extreme of C(8, 4) = 70 orderings has two-sided p = 2/70 > 0.01; 5 v 5: 2/252
    assert DIST_ALPHA == 0.01 and DIST_MIN_FRAMES == 5
    assert rank_p(np.arange(4.0), np.arange(4.0) + 10) == pytest.approx(2 / 70)
    assert rank_p(np.arange(5.0), np.arange(5.0) + 10) == pytest.approx(2 / math.comb(10, 5))


@pytest.mark.parametrize("seed", range(5))
def test_rank_p_is_scipys_two_sided_mann_whitney(seed):
    """rank_p is written out (numpy ranks, the exact null by a Gaussian binomial): scipy's `method="auto"`
    is the reference on every branch: exact (a side of at most 8, no ties), ties, large sets, separation."""
    rng = np.random.default_rng(seed)
    cases = [(rng.normal(0, 1, 9), rng.normal(0.8, 1, 12))]
    for _ in range(200):
        n1, n2 = int(rng.integers(1, 9)), int(rng.integers(1, 40))
        shift = float(rng.choice([0.0, 0.7, 4.0]))
        a, b = rng.normal(0, 1, n1), rng.normal(shift, 1, n2)
        cases += [(a, b), (b, a), (np.round(a), np.round(b)), (rng.normal(0, 1, n2 + 8), rng.normal(shift, 1, 30))]
    for a, b in cases:
        want = 1.0 if np.ptp(np.concatenate([a, b])) == 0 else mannwhitneyu(a, b, alternative="two-sided").pvalue
        assert rank_p(a, b) == pytest.approx(want, rel=1e-9, abs=1e-300), (a, b)
    assert rank_p(np.ones(4), np.ones(5)) == 1.0  # all tied: no evidence


def test_median_is_numpys():
    rng = np.random.default_rng(0)
    for n in range(1, 40):
        for x in (rng.normal(0, 1, n), np.round(rng.normal(0, 2, n)), rng.normal(0, 1, (n, 2))):
            assert median(x) == float(np.median(x))
    assert math.isnan(median(np.array([]))) and math.isnan(median(np.array([1.0, np.nan, 2.0])))


def test_a_clear_median_shift_without_rank_separation_is_not_clear():
    # 8 v 8: medians 1 apart with tight cores (z >= 3), but two outliers on each side interleave the ranks
    a = np.array([0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 1.5, 1.6])
    b = np.array([1.0, 1.01, 1.02, 1.03, 1.04, 1.05, -0.5, -0.6])
    assert dist_z(a, b) >= 3
    assert rank_p(a, b) > DIST_ALPHA
    assert not dist_clear(a, b)
    assert dist_clear(a[:6], b[:6])  # 6 v 6 fully separated: p = 2/924


def test_sets_too_small_for_the_rank_test_need_separation_by_the_practical_bar():
    a = np.array([0.0, 0.1, 0.2, 0.3])
    assert dist_clear(a, a + 5, margin=1.0)  # 4 v 4 fully separated, nearest frames 4.7 apart
    near = a + 0.6  # fully separated (z 4.6), but the nearest frames are only 0.3 apart
    assert dist_z(a, near) >= DIST_Z and dist_clear(a, near, margin=0.3 / SMALL_SET_MARGIN)
    assert not dist_clear(a, near, margin=0.31 / SMALL_SET_MARGIN)
    assert not dist_clear(a, a + 5)  # no practical bar given: never clear below the rank test's reach
    b = np.array([0.25, 5.0, 5.1, 5.2])  # one real frame below a sim frame: not separated
    assert dist_z(a, b) >= 3 and not dist_clear(a, b, margin=0.0)
    five = np.array([0.0, 0.1, 0.2, 0.3, 0.4])
    assert dist_clear(five, five + 0.6)  # 5 v 5: the rank test decides (p = 2/252), no margin asked


def test_tiny_unpaired_sets_say_what_they_cannot_tell():
    rng = np.random.default_rng(3)
    imgs = [rng.integers(30, 220, (48, 64, 3), dtype=np.uint8) for _ in range(7)]
    sim = image_set("sim", "sim", imgs[:3], keys=[f"s{i}" for i in range(3)])
    real = image_set("real", "real", imgs[3:], keys=[f"r{i}" for i in range(4)])
    info = [f for f in run(sim, real) if f.code == "insufficient_data"]
    assert len(info) == 1 and info[0].severity == "info"
    assert info[0].evidence["sim_frames"] == 3 and info[0].evidence["real_frames"] == 4
    big_sim = image_set("sim", "sim", imgs * 2, keys=[f"s{i}" for i in range(14)])
    big_real = image_set("real", "real", imgs + imgs[:1], keys=[f"r{i}" for i in range(8)])
    assert not [f for f in run(big_sim, big_real) if f.code == "insufficient_data"]


def test_unpaired_sets_under_eight_frames_say_the_high_frequency_signatures_may_go_unnamed():
    rng = np.random.default_rng(5)
    imgs = [rng.integers(30, 220, (48, 64, 3), dtype=np.uint8) for _ in range(16)]

    def info(n):
        sim = image_set("sim", "sim", imgs[:n], keys=[f"s{i}" for i in range(n)])
        real = image_set("real", "real", imgs[8:8 + n], keys=[f"r{i}" for i in range(n)])
        return [f for f in run(sim, real) if f.code == "insufficient_data"]

    six = info(6)
    assert len(six) == 1 and six[0].severity == "info" and six[0].evidence["codes"] == ["resize_filter", "sharpness"]
    assert six[0].evidence["min_frames_a_side"] == HF_MIN_FRAMES == 8
    assert "resize-filter or sharpness" in six[0].title
    assert info(HF_MIN_FRAMES) == []
