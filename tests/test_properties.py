"""Property-based tests (hypothesis) of the pure statistics and metrics.

What this file proves, for every input hypothesis draws (not only the hand-picked examples of
test_compare.py, test_stats.py, test_detection.py, test_drift.py and test_probes.py):

- Frame order does not matter where it must not: the centroid distance (value and value_norm),
  the MMD value and bandwidth (episodes permuted with their frames), the paired cosine summary
  (pairs permuted), the centroid-distance CI (frames shuffled within their episodes), the
  sim->real probe R^2 (real frames permuted with their targets), and a frame's statistics
  (alone, in a batch job in any order, or as a strided view of a batch array). Units do not
  matter where the metric is defined not to see them: per-dimension scale, sign and offset
  (centroid distance), a common translation (MMD), vector length (cosine; a sign flip maps
  d to 2 - d), target units y -> c y + b (probe R^2).
- Symmetry where the definition is symmetric: centroid distance, MMD, pair cosine distance,
  IoU; the domain AUC of (sim, real) equals that of (real, sim) when both sides share episode
  ids (the folds then coincide and L2 logistic regression is label-flip equivariant, so it is
  the same AUC, not 1 - AUC); a shift gate's value changes sign when baseline and current swap.
- Bounds: value_norm, noise floor and centroid CI in [0, 1]; domain AUC in [0, 1]; cosine
  distances in [0, 2]; MMD p-value in (0, 1]; per-channel mean within [min, max]; depth dropout
  in [0, 1] with non-decreasing percentiles; IoU in [0, 1] with IoU(box, box) = 1; COCO numbers
  in [0, 1]; probe R^2 <= 1; format-gate value in [0, 1].
- Known answers: identical sets give centroid distance 0 and MMD^2 <= 0 (closed form); a
  constant image has std 0 and mean, min and max equal to the constant; image_stats_pil and
  image_stats_array agree on every field of 8-bit images, as stats.py says they do; perfect
  detections give AP = 1; IoU equals pycocotools' own.

Determinism: every test is `derandomize=True, database=None`, so CI runs the same examples each
time. The PCA inside the centroid distance and the domain AUC uses an exact solver at these sizes
(`compare._pca_solver`: covariance eigh when N >= D, full SVD otherwise; randomized only beyond
2048 rows and columns), so a permutation of the rows changes results only by rounding, except
where the spectrum is (nearly) degenerate: there the principal axes themselves are ill-defined
and per-component min-max scaling is not rotation invariant. Those inputs are excluded by
`well_separated` (every kept eigenvalue at least 1e-3 of the total variance from its
neighbours): rounding of ~1e-16 then moves the axes by ~1e-13, far inside the 1e-9 tolerance.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from PIL import Image

from perception_gap.detection import Box, coco_summary
from perception_gap.detection.boxes import pairwise_iou, xyxy
from perception_gap.errors import InsufficientData
from perception_gap.ingest.entries import content_hash
from perception_gap.metrics.centroid import centroid_distance, centroid_distance_ci, noise_floor
from perception_gap.metrics.paired import pair_cosine_distances, paired_cosine
from perception_gap.metrics.projection import RANK_TOL
from perception_gap.metrics.resampling import cluster_labels, grouped_folds
from perception_gap.metrics.twosample import domain_auc, mmd
from perception_gap.probes import probe
from perception_gap.statistics.depth import depth_stats
from perception_gap.statistics.image import image_stats_array, image_stats_pil
from perception_gap.statistics.workers import rgb_stats_job
from perception_gap.workflows import drift_gates as drift


def fast(n: int) -> settings:
    """Few, small, reproducible examples: the whole file has to run in well under a minute."""
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# Bounded finite floats: embeddings and pixel values are O(1)..O(1e3) numbers.
BOUNDED = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, allow_subnormal=False)
# Cosine needs |x|^2 not to underflow: below ~1e-154 a non-zero vector's float norm is 0 and it
# reads as the zero vector. That is IEEE arithmetic, not the metric, so cosine inputs are 0 or
# of magnitude 1e-6..1e3.
COSINE_ELEMENTS = st.one_of(st.just(0.0), st.floats(1e-6, 1e3), st.floats(-1e3, -1e-6))
SEEDS = st.integers(0, 2**32 - 1)


@st.composite
def embedding_sets(draw, min_rows: int = 20, max_rows: int = 60, min_d: int = 4, max_d: int = 16,
                   n_sim: int | None = None, n_real: int | None = None):
    """(emb_sim, emb_real): correlated Gaussian clouds with a drawn shift and per-dimension scale.

    Only the seed, sizes, shift and scales come from hypothesis; the bulk is seeded numpy
    noise, so the clouds have the full-rank, well-spread spectra of real embeddings.
    """
    d = draw(st.integers(min_d, max_d))
    n_sim = draw(st.integers(min_rows, max_rows)) if n_sim is None else n_sim
    n_real = draw(st.integers(min_rows, max_rows)) if n_real is None else n_real
    shift = draw(arrays(np.float64, d, elements=st.floats(-2, 2)))
    scale = draw(arrays(np.float64, d, elements=st.floats(0.1, 10)))
    rng = np.random.default_rng(draw(SEEDS))
    mix = rng.normal(size=(d, d))
    sim = rng.normal(size=(n_sim, d)) @ mix * scale
    real = (rng.normal(size=(n_real, d)) @ mix + shift) * scale
    return sim, real


def raw_embeddings(min_rows: int, max_rows: int = 12, max_d: int = 6):
    """Arbitrary bounded arrays (repeated values, constant columns, duplicate rows included)."""
    return st.integers(1, max_d).flatmap(lambda d: st.tuples(
        arrays(np.float64, st.tuples(st.integers(min_rows, max_rows), st.just(d)), elements=BOUNDED),
        arrays(np.float64, st.tuples(st.integers(min_rows, max_rows), st.just(d)), elements=BOUNDED)))


def well_separated(sim: np.ndarray, real: np.ndarray, k: int, gap: float = 1e-3) -> bool:
    """True when the pooled standardized spectrum pins down the k principal axes (see docstring)."""
    x = np.vstack([sim, real])
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    z = (x - x.mean(axis=0)) / sd
    lam = np.clip(np.linalg.eigvalsh(z.T @ z)[::-1], 0.0, None)
    if lam.sum() <= 0:
        return True
    ratio = lam / lam.sum()
    k = min(k, x.shape[1], len(x) - 1)
    head = ratio[:k]
    if np.any((head > RANK_TOL * 1e-3) & (head < RANK_TOL * 1e3)):
        return False  # a component near the rank cut could be kept in one order and dropped in another
    for i in np.flatnonzero(head >= RANK_TOL * 1e3):
        for j in (i - 1, i + 1):
            if 0 <= j < len(ratio) and abs(ratio[i] - ratio[j]) < gap:
                return False
    return True


# -- centroid distance ----------------------------------------------------------------------------

@fast(40)
@given(data=st.data(), sets=embedding_sets())
def test_centroid_distance_ignores_frame_order(data, sets):
    sim, real = sets
    k = data.draw(st.integers(1, sim.shape[1]), label="n_components")
    assume(well_separated(sim, real, k))
    p_sim = np.array(data.draw(st.permutations(range(len(sim))), label="perm_sim"))
    p_real = np.array(data.draw(st.permutations(range(len(real))), label="perm_real"))
    base = centroid_distance(sim, real, n_components=k, random_state=0)
    moved = centroid_distance(sim[p_sim], real[p_real], n_components=k, random_state=0)
    assert moved.n_components == base.n_components
    assert moved.value == pytest.approx(base.value, abs=1e-9)
    assert moved.value_norm == pytest.approx(base.value_norm, abs=1e-9)
    assert moved.explained_variance == pytest.approx(base.explained_variance, abs=1e-9)


@fast(40)
@given(data=st.data(), sets=embedding_sets())
def test_centroid_distance_is_symmetric(data, sets):
    sim, real = sets
    k = data.draw(st.integers(1, sim.shape[1]), label="n_components")
    assume(well_separated(sim, real, k))
    ab = centroid_distance(sim, real, n_components=k, random_state=0)
    ba = centroid_distance(real, sim, n_components=k, random_state=0)
    assert ba.n_components == ab.n_components
    assert ba.value == pytest.approx(ab.value, abs=1e-9)
    assert ba.value_norm == pytest.approx(ab.value_norm, abs=1e-9)


@fast(30)
@given(data=st.data(), sets=embedding_sets())
def test_centroid_distance_ignores_the_units_of_each_dimension(data, sets):
    # Pooled standardization removes any per-dimension scale (sign included: PCA axes and
    # min-max ranges do not care about a flip) and offset. Offsets up to 100 on spreads >= 0.1
    # cost ~1e-13 relative precision in the standardized values: 1e-7 is generous.
    sim, real = sets
    d = sim.shape[1]
    k = data.draw(st.integers(1, d), label="n_components")
    assume(well_separated(sim, real, k))
    mag = data.draw(arrays(np.float64, d, elements=st.floats(0.1, 10)), label="scale")
    sign = data.draw(arrays(np.float64, d, elements=st.sampled_from([-1.0, 1.0])), label="sign")
    offset = data.draw(arrays(np.float64, d, elements=st.floats(-100, 100)), label="offset")
    base = centroid_distance(sim, real, n_components=k)
    moved = centroid_distance(sim * mag * sign + offset, real * mag * sign + offset, n_components=k)
    assert moved.n_components == base.n_components
    assert moved.value == pytest.approx(base.value, abs=1e-7)


@fast(40)
@given(sets=raw_embeddings(min_rows=2))
def test_identical_sets_are_zero_apart_whatever_the_data(sets):
    sim, _ = sets
    res = centroid_distance(sim, sim.copy())
    assert res.value == 0.0 and res.value_norm == 0.0


@fast(40)
@given(sets=raw_embeddings(min_rows=4), k=st.integers(1, 8))
def test_noise_floor_and_centroid_ci_stay_in_the_unit_interval(sets, k):
    sim, real = sets
    res = centroid_distance_ci(sim, real, n_components=k, n_boot=20)
    assert 0.0 <= res.value_norm <= 1.0
    assert res.value == pytest.approx(centroid_distance(sim, real, n_components=k).value, abs=1e-12)
    assert 0.0 <= res.ci.low <= res.value_norm <= res.ci.high <= 1.0
    floor = noise_floor(real, n_components=k)
    assert 0.0 <= floor.value_norm <= 1.0
    assert floor.n_a + floor.n_b == len(real)


# at least MIN_EPISODES (5) episodes: below that, contiguous blocks within episodes are the units,
# and those follow the frame order (capture order) by design
EPISODE_SIZES = st.lists(st.integers(2, 8), min_size=5, max_size=8)


@fast(25)
@given(data=st.data(), sizes_sim=EPISODE_SIZES, sizes_real=EPISODE_SIZES)
def test_centroid_ci_ignores_frame_order_within_episodes(data, sizes_sim, sizes_real):
    # Episode labels are numbered by first appearance, so shuffling frames inside each episode
    # keeps the clusters and their numbering: the bootstrap draws the same clusters and every
    # per-cluster sum, minimum and maximum is the same up to rounding.
    sim, real = data.draw(embedding_sets(max_d=8, n_sim=sum(sizes_sim), n_real=sum(sizes_real)), label="sets")
    k = data.draw(st.integers(1, sim.shape[1]), label="n_components")
    assume(well_separated(sim, real, k))
    eps_sim = np.repeat(np.arange(len(sizes_sim)), sizes_sim)
    eps_real = np.repeat(np.arange(len(sizes_real)) + 100, sizes_real)

    def shuffle_within(eps):
        order = []
        for e in dict.fromkeys(eps.tolist()):
            idx = np.flatnonzero(eps == e)
            order.extend(idx[np.array(data.draw(st.permutations(range(len(idx)))))])
        return np.array(order)

    o_sim, o_real = shuffle_within(eps_sim), shuffle_within(eps_real)
    kw = dict(n_components=k, n_boot=50, random_state=3)
    base = centroid_distance_ci(sim, real, episodes_sim=eps_sim, episodes_real=eps_real, **kw)
    moved = centroid_distance_ci(sim[o_sim], real[o_real], episodes_sim=eps_sim[o_sim],
                                 episodes_real=eps_real[o_real], **kw)
    assert moved.value_norm == pytest.approx(base.value_norm, abs=1e-9)
    assert moved.ci.low == pytest.approx(base.ci.low, abs=1e-9)
    assert moved.ci.high == pytest.approx(base.ci.high, abs=1e-9)
    assert moved.ci.bias == pytest.approx(base.ci.bias, abs=1e-9)
    assert moved.ci.clusters == "episodes"


# -- MMD ----------------------------------------------------------------------------------------

@fast(30)
@given(data=st.data(), sets=raw_embeddings(min_rows=4, max_rows=16))
def test_mmd_value_is_symmetric_order_free_and_p_value_bounded(data, sets):
    sim, real = sets
    eps_sim = np.array(data.draw(st.lists(st.integers(0, 3), min_size=len(sim), max_size=len(sim))))
    eps_real = np.array(data.draw(st.lists(st.integers(0, 3), min_size=len(real), max_size=len(real))))
    p_sim = np.array(data.draw(st.permutations(range(len(sim)))))
    p_real = np.array(data.draw(st.permutations(range(len(real)))))
    base = mmd(sim, real, episodes_sim=eps_sim, episodes_real=eps_real, n_permutations=20)
    swapped = mmd(real, sim, episodes_sim=eps_real, episodes_real=eps_sim, n_permutations=20)
    moved = mmd(sim[p_sim], real[p_real], episodes_sim=eps_sim[p_sim], episodes_real=eps_real[p_real],
                n_permutations=20)
    # Kernel values lie in [0, 1] and MMD^2 is a difference of their means: 1e-10 is rounding.
    for other in (swapped, moved):
        assert other.value == pytest.approx(base.value, abs=1e-10)
        assert other.bandwidth == pytest.approx(base.bandwidth, rel=1e-12)
        assert other.permutation == base.permutation
    for res in (base, swapped, moved):
        assert 0.0 < res.p_value <= 1.0 and math.isfinite(res.value) and res.bandwidth > 0
        exceed_plus_one = res.p_value * (res.n_permutations + 1)  # p = (b + 1) / (n + 1)
        assert exceed_plus_one == pytest.approx(round(exceed_plus_one), abs=1e-9)


@fast(20)
@given(sets=embedding_sets(min_rows=8, max_rows=30, max_d=8),
       offset=arrays(np.float64, st.integers(1, 1), elements=st.floats(-100, 100)))
def test_mmd_depends_only_on_distances_so_a_common_translation_changes_nothing(sets, offset):
    # The RBF kernel and the median bandwidth see only |x - y|. The expanded |x|^2 + |y|^2 - 2 x.y
    # loses ~eps |x|^2 ~ 1e-11 to cancellation at offsets <= 100: next to squared distances
    # >= ~1e-2 that moves the kernel by < 1e-8.
    sim, real = sets
    shift = np.full(sim.shape[1], offset[0])
    base = mmd(sim, real, n_permutations=5)
    moved = mmd(sim + shift, real + shift, n_permutations=5)
    assert moved.bandwidth == pytest.approx(base.bandwidth, rel=1e-8)
    assert moved.value == pytest.approx(base.value, abs=1e-7)


@fast(30)
@given(sets=raw_embeddings(min_rows=4, max_rows=16))
def test_mmd_of_a_set_with_itself_is_never_positive(sets):
    # Closed form: with x = y and k(x, x) = 1, unbiased MMD^2 = 2 S / (n^2 (n - 1)) - 2 / n,
    # S = sum over i != j of k(x_i, x_j) <= n (n - 1), so MMD^2 <= 0 (0 iff all rows coincide).
    x, _ = sets
    n = len(x)
    res = mmd(x, x.copy(), n_permutations=5)
    assert res.value <= 1e-12
    assert res.value >= -2.0 / n - 1e-12  # S >= 0


# -- paired cosine --------------------------------------------------------------------------------

@st.composite
def paired_sets(draw):
    d = draw(st.integers(1, 8))
    sim = draw(arrays(np.float64, st.tuples(st.integers(1, 20), st.just(d)), elements=COSINE_ELEMENTS))
    real = draw(arrays(np.float64, st.tuples(st.integers(1, 20), st.just(d)), elements=COSINE_ELEMENTS))
    n_pairs = draw(st.integers(2, 30))
    i = draw(arrays(np.int64, n_pairs, elements=st.integers(0, len(sim) - 1)))
    j = draw(arrays(np.int64, n_pairs, elements=st.integers(0, len(real) - 1)))
    return sim, real, np.stack([i, j], axis=1)


@fast(60)
@given(data=st.data(), sets=paired_sets())
def test_paired_cosine_ignores_pair_order_and_is_bounded(data, sets):
    sim, real, pairs = sets
    perm = np.array(data.draw(st.permutations(range(len(pairs)))))
    base = paired_cosine(sim, real, pairs)
    moved = paired_cosine(sim, real, pairs[perm])
    assert moved.mean == pytest.approx(base.mean, abs=1e-12)
    assert moved.median == pytest.approx(base.median, abs=1e-12)
    assert moved.p90 == pytest.approx(base.p90, abs=1e-12)
    assert moved.shuffled_mean == pytest.approx(base.shuffled_mean, abs=1e-9)
    assert moved.n_zero_norm == base.n_zero_norm
    for v in (base.mean, base.median, base.p90, base.shuffled_mean):
        assert 0.0 <= v <= 2.0
    # the summary is the mean of the per-pair distances (an independent code path)
    assert base.mean == pytest.approx(float(np.mean(pair_cosine_distances(sim, real, pairs))), abs=1e-9)


@fast(60)
@given(sets=paired_sets())
def test_pair_cosine_distance_is_symmetric_and_in_0_2(sets):
    sim, real, pairs = sets
    d = pair_cosine_distances(sim, real, pairs)
    d_swapped = pair_cosine_distances(real, sim, pairs[:, ::-1])
    assert d.shape == (len(pairs),)
    assert np.all((d >= 0.0) & (d <= 2.0))
    np.testing.assert_array_equal(d, d_swapped)
    # a vector against itself is 0 apart (or 1 for the zero vector, whose cosine counts as 0)
    self_d = pair_cosine_distances(sim, sim, np.stack([np.arange(len(sim))] * 2, axis=1))
    zero = ~np.any(sim != 0, axis=1)
    np.testing.assert_allclose(self_d[~zero], 0.0, atol=1e-12)
    np.testing.assert_array_equal(self_d[zero], 1.0)


@fast(40)
@given(sets=paired_sets(), data=st.data())
def test_cosine_distance_ignores_vector_length_and_flips_with_sign(sets, data):
    sim, real, pairs = sets
    r = data.draw(arrays(np.float64, len(sim), elements=st.floats(0.01, 100)), label="sim lengths")
    q = data.draw(arrays(np.float64, len(real), elements=st.floats(0.01, 100)), label="real lengths")
    d = pair_cosine_distances(sim, real, pairs)
    np.testing.assert_allclose(pair_cosine_distances(sim * r[:, None], real * q[:, None], pairs), d, atol=1e-12)
    # cos(-u, v) = -cos(u, v): distance d -> 2 - d, except for zero vectors (cosine 0, distance 1)
    np.testing.assert_allclose(pair_cosine_distances(-sim, real, pairs), 2.0 - d, atol=1e-12)


# -- domain AUC and folds -------------------------------------------------------------------------

@fast(10)
@given(data=st.data(), sets=embedding_sets(min_rows=20, max_rows=40, max_d=8))
def test_domain_auc_is_symmetric_with_shared_episodes(data, sets):
    # Shared episode ids make every group hold as many sim as real frames, so the grouped,
    # stratified folds are the same frames whichever side is called `sim`; L2 logistic
    # regression with an intercept is label-flip equivariant (w -> -w), so the out-of-fold AUC
    # is the same number. 1e-6 leaves room for the solver's rounding only.
    sim, real = sets
    n = min(len(sim), len(real))
    sim, real = sim[:n], real[:n]
    g = data.draw(st.integers(2, 8), label="episodes")
    eps = np.sort(np.arange(n) % g)
    ab = domain_auc(sim, real, episodes_sim=eps, episodes_real=eps, random_state=0)
    ba = domain_auc(real, sim, episodes_sim=eps, episodes_real=eps, random_state=0)
    # below MIN_EPISODES (5) the groups are blocks within episodes, the same on both sides
    assert ab.n_splits == ba.n_splits and ab.grouping == ("episodes" if g >= 5 else "episode blocks")
    assert ba.value == pytest.approx(ab.value, abs=1e-6)


@fast(10)
@given(sets=raw_embeddings(min_rows=4, max_rows=16))
def test_domain_auc_is_in_the_unit_interval_on_any_data(sets):
    sim, real = sets
    res = domain_auc(sim, real, random_state=0)
    assert 0.0 <= res.value <= 1.0
    assert 2 <= res.n_splits <= 5 and res.n_sim == len(sim) and res.n_real == len(real)


@fast(60)
@given(groups=st.lists(st.integers(0, 9), min_size=2, max_size=60), data=st.data(),
       n_splits=st.integers(2, 6))
def test_grouped_folds_partition_the_frames_and_never_split_a_group(groups, data, n_splits):
    groups = np.array(groups)
    # labels constant within a group (one domain per episode), both classes present
    cls = {g: data.draw(st.integers(0, 1)) for g in dict.fromkeys(groups.tolist())}
    labels = np.array([cls[g] for g in groups])
    assume(len(set(labels.tolist())) == 2)
    try:
        folds = grouped_folds(groups, labels, n_splits=n_splits, random_state=0)
    except InsufficientData:
        return  # too few groups of a class for every training fold to hold both
    assert 2 <= len(folds) <= n_splits
    tests = np.concatenate([te for _, te in folds])
    assert sorted(tests.tolist()) == list(range(len(groups)))
    for train, test in folds:
        assert sorted(np.r_[train, test].tolist()) == list(range(len(groups)))
        assert not set(groups[train].tolist()) & set(groups[test].tolist())
        assert set(labels[train].tolist()) == {0, 1}


@fast(60)
@given(eps=st.lists(st.one_of(st.none(), st.sampled_from("abcdef")), min_size=1, max_size=50))
def test_cluster_labels_follow_episode_identity_not_names(eps):
    n = len(eps)
    labels = cluster_labels(eps, n)
    assert labels.dtype == np.int64 and labels.shape == (n,)
    first = list(dict.fromkeys(labels.tolist()))
    assert first == list(range(len(first)))  # 0..G-1 in order of first appearance
    known = [i for i, e in enumerate(eps) if e is not None]
    for i in known:
        for j in known:
            assert (labels[i] == labels[j]) == (eps[i] == eps[j])
        assert all(labels[i] != labels[u] for u in range(n) if eps[u] is None)  # unknown never joins an episode
    renamed = [None if e is None else f"episode-{'fedcba'.index(e)}" for e in eps]
    np.testing.assert_array_equal(cluster_labels(renamed, n), labels)


# -- image and depth statistics --------------------------------------------------------------------

IMAGE_DTYPES = st.sampled_from([np.uint8, np.uint16, np.float32, np.float64])


@st.composite
def any_images(draw):
    dtype = np.dtype(draw(IMAGE_DTYPES))
    shape = (draw(st.integers(1, 24)), draw(st.integers(1, 24)), draw(st.sampled_from([1, 3, 4])))
    if dtype.kind == "u":
        elements = st.integers(0, np.iinfo(dtype).max)
    else:
        width = 32 if dtype == np.float32 else 64
        elements = st.one_of(st.floats(-1e6, 1e6, width=width, allow_subnormal=False),
                             st.sampled_from([np.nan, np.inf, -np.inf]))
    return draw(arrays(dtype, shape, elements=elements))


def _within(lo: float, v: float, hi: float) -> bool:
    # numpy's pairwise sum of n equal float values can land an ulp or so off them
    tol = 1e-12 * max(abs(lo), abs(hi), 1.0)
    return lo - tol <= v <= hi + tol


@fast(80)
@given(a=any_images())
# inf - inf inside the luma of non-finite pixels (excluded afterwards, as documented)
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_image_stats_are_bounded_for_any_dtype(a):
    s = image_stats_array(a)
    c = a.shape[2]
    assert len(s.mean) == len(s.std) == len(s.min) == len(s.max) == c
    for ch in range(c):
        col = a[..., ch].astype(np.float64)
        fin = col[np.isfinite(col)]
        if fin.size == 0:
            assert math.isnan(s.mean[ch]) and math.isnan(s.std[ch])
            continue
        assert s.min[ch] == fin.min() and s.max[ch] == fin.max()
        assert _within(s.min[ch], s.mean[ch], s.max[ch])
        # Popoviciu: a population std is at most half the range (plus rounding of the mean)
        assert 0.0 <= s.std[ch] <= (s.max[ch] - s.min[ch]) / 2 + 1e-12 * max(abs(s.min[ch]), abs(s.max[ch]), 1.0)
    finite_p = [p for p in s.lum_percentiles if not math.isnan(p)]
    assert finite_p == sorted(finite_p)
    n_bad = 0 if a.dtype.kind == "u" else int((~np.isfinite(a)).sum())
    assert s.nonfinite_frac == pytest.approx(n_bad / a.size, abs=1e-15)
    assert 0.0 <= s.dup_frac <= 1.0 and 0.0 <= s.dup_parity <= 1.0 and s.sharpness >= 0.0
    if s.hist is not None:
        np.testing.assert_allclose(np.array(s.hist).reshape(c, -1).sum(axis=1), 1.0, atol=1e-12)
    if s.lin_mean is not None:
        assert all(0.0 <= v <= 1.0 for v in s.lin_mean)


@fast(60)
@given(dtype=IMAGE_DTYPES, h=st.integers(1, 200), w=st.integers(1, 200), c=st.sampled_from([1, 3, 4]),
       data=st.data())
def test_constant_image_has_zero_std_and_its_value_as_mean(dtype, h, w, c, data):
    dtype = np.dtype(dtype)
    if dtype.kind == "u":
        v = data.draw(st.integers(0, np.iinfo(dtype).max), label="value")
    else:
        v = data.draw(st.floats(-1e6, 1e6, width=32 if dtype == np.float32 else 64, allow_subnormal=False),
                      label="value")
    a = np.full((h, w, c), v, dtype=dtype)
    s = image_stats_array(a)
    v = float(dtype.type(v))
    assert s.min == s.max == (v,) * c
    if dtype.kind == "u":  # integer sums are exact
        assert s.mean == (v,) * c and s.std == (0.0,) * c
    else:  # a float sum of n copies of v can be an ulp off n * v
        assert s.mean == pytest.approx((v,) * c, rel=1e-12, abs=0)
        assert all(sd <= 1e-12 * abs(v) for sd in s.std)
    assert s.sharpness == 0.0 and s.hf_ratio is None and s.grad_ratio is None and s.blockiness is None
    if h >= 3 and w >= 3:  # below 3 x 3 the high-frequency block is not computed at all
        assert s.dup_frac == 1.0 and s.dup_parity == 0.0
    if dtype == np.uint8 and c in (1, 3):
        p = image_stats_pil(Image.fromarray(a[..., 0] if c == 1 else a))
        assert p.mean == (v,) * c and p.std == (0.0,) * c and p.lum_mean == v


def _picture(rng: np.random.Generator, h: int, w: int, c: int, kind: str) -> np.ndarray:
    shape = (h, w, c) if c == 3 else (h, w)
    if kind == "noise":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if kind == "smooth":
        y, x = np.mgrid[0:h, 0:w]
        base = 255 * (0.5 + 0.5 * np.sin(x / 7.0 + rng.uniform(0, 6)) * np.cos(y / 11.0))
        base = np.stack([base, base[::-1], base[:, ::-1]], -1) if c == 3 else base
        return np.clip(base + rng.normal(0, 3, shape), 0, 255).astype(np.uint8)
    # 8x8 blocks of flat colour, like an over-compressed JPEG
    blocks = rng.integers(0, 256, (h // 8 + 1, w // 8 + 1) + shape[2:], dtype=np.uint8)
    return np.repeat(np.repeat(blocks, 8, axis=0), 8, axis=1)[:h, :w]


SIDES = st.one_of(st.integers(1, 40), st.integers(180, 320))


@fast(40)
@given(h=SIDES, w=SIDES, c=st.sampled_from([1, 3]), kind=st.sampled_from(["noise", "smooth", "blocks"]), seed=SEEDS)
@example(h=301, w=299, c=3, kind="noise", seed=0)  # stride 3, odd sizes
@example(h=272, w=320, c=1, kind="smooth", seed=1)
def test_pil_and_array_paths_agree_on_every_field_of_8bit_images(h, w, c, kind, seed):
    # stats.py: "Two entry points compute the same numbers". Sides of 180..320 reach sampling
    # strides 1..3, where Pillow's nearest-neighbour grid must pick the pixels numpy picks.
    a = _picture(np.random.default_rng(seed), h, w, c, kind)
    p = dataclasses.asdict(image_stats_pil(Image.fromarray(a)))
    q = dataclasses.asdict(image_stats_array(a))
    assert p.pop("mode") == ("RGB" if c == 3 else "L") and q.pop("mode") == "array"
    exact = ("width", "height", "channels", "dtype", "nominal_max", "stride", "min", "max", "lum_percentiles",
             "nonfinite_frac", "dup_frac", "dup_parity")
    for key in exact:
        assert p[key] == q[key], key
    for key in ("mean", "std", "lin_mean", "hist", "lum_mean", "sharpness", "hf_ratio", "grad_ratio",
                "blockiness"):
        if p[key] is None or q[key] is None:
            assert p[key] is None and q[key] is None, key
        else:  # sums from histograms vs sums over pixels: rounding only
            np.testing.assert_allclose(p[key], q[key], rtol=1e-9, atol=1e-9, err_msg=key)


@fast(15)
@given(frames=st.lists(st.tuples(st.integers(3, 40), st.integers(3, 40), st.sampled_from([1, 3]), SEEDS),
                       min_size=2, max_size=5), data=st.data())
def test_a_frames_statistics_do_not_depend_on_the_other_frames(frames, data):
    pics = [_picture(np.random.default_rng(s), h, w, c, "noise") for h, w, c, s in frames]
    with tempfile.TemporaryDirectory() as tmp:
        items = []
        for i, a in enumerate(pics):
            path = Path(tmp) / f"f{i}.png"
            Image.fromarray(a).save(path)
            items.append((content_hash(path.read_bytes()), str(path)))
        alone = {h: image_stats_pil(Image.fromarray(pics[i])) for i, (h, _) in enumerate(items)}
        order = data.draw(st.permutations(items))
        subset = order[:data.draw(st.integers(1, len(order)))]
        for batch in (items, order, subset):
            for h, st_, err in rgb_stats_job(batch):
                assert err is None and st_ == alone[h], h
    # and a frame that is a strided view of a batch array gives its standalone numbers
    h, w = min(a.shape[0] for a in pics), min(a.shape[1] for a in pics)
    rgb = [np.atleast_3d(a)[:h, :w] for a in pics]
    batch = np.stack([x if x.shape[2] == 3 else np.repeat(x, 3, axis=2) for x in rgb], axis=1)  # (H, N, W, 3)
    for i in range(len(pics)):
        view = batch[:, i]
        assert not view.flags.c_contiguous
        assert image_stats_array(view) == image_stats_array(np.ascontiguousarray(view))


@st.composite
def depth_maps(draw):
    dtype = np.dtype(draw(st.sampled_from([np.uint16, np.float32, np.float64])))
    shape = (draw(st.integers(1, 40)), draw(st.integers(1, 40)))
    if dtype.kind == "u":
        elements = st.integers(0, 65535)
    else:
        width = 32 if dtype == np.float32 else 64
        elements = st.one_of(st.floats(-10, 1e4, width=width, allow_subnormal=False),
                             st.sampled_from([0.0, np.nan, np.inf, -np.inf]))
    return draw(arrays(dtype, shape, elements=elements))


@fast(80)
@given(d=depth_maps())
def test_depth_dropout_is_a_fraction_and_percentiles_rise(d):
    s = depth_stats(d)
    assert s.stride == 1  # at most 40 x 40: every pixel is sampled
    # an integer map's maximum (65535) marks a missing reading
    valid = (d > 0) & np.isfinite(d) if d.dtype.kind == "f" else (d > 0) & (d < np.iinfo(d.dtype).max)
    assert 0.0 <= s.dropout <= 1.0
    assert s.dropout == pytest.approx(1.0 - valid.mean(), abs=1e-15)
    if not valid.any():
        assert s.percentiles is None and s.mean is None and s.log_hist is None
        return
    v = d[valid].astype(np.float64)
    assert list(s.percentiles) == sorted(s.percentiles)
    assert v.min() <= s.percentiles[0] and s.percentiles[-1] <= v.max()
    assert _within(v.min(), s.mean, v.max())
    assert sum(s.log_hist) == pytest.approx(1.0, abs=1e-12)


# -- detection ------------------------------------------------------------------------------------

BOXES = st.lists(st.tuples(st.floats(0, 500), st.floats(0, 500), st.floats(1, 200), st.floats(1, 200)),
                 min_size=1, max_size=12)


@fast(60)
@given(a=BOXES, b=BOXES)
def test_iou_is_bounded_symmetric_one_on_itself_and_matches_pycocotools(a, b):
    from pycocotools import mask as mask_utils

    xa = xyxy([Box("x", t) for t in a])
    xb = xyxy([Box("x", t) for t in b])
    m = pairwise_iou(xa, xb)
    assert m.shape == (len(a), len(b))
    assert np.all((m >= 0.0) & (m <= 1.0))
    np.testing.assert_array_equal(pairwise_iou(xb, xa), m.T)
    np.testing.assert_array_equal(np.diag(pairwise_iou(xa, xa)), 1.0)
    ref = np.asarray(mask_utils.iou([list(t) for t in a], [list(t) for t in b], [0] * len(b)))
    np.testing.assert_allclose(m, ref.reshape(len(a), len(b)), atol=1e-9)


@st.composite
def scenes(draw):
    n_images = draw(st.integers(1, 4))
    gt = {f"img{i}.png": [Box(draw(st.sampled_from(["cup", "box"])), t) for t in draw(BOXES)]
          for i in range(n_images)}
    return gt


@fast(25)
@given(gt=scenes(), data=st.data())
def test_coco_summary_is_bounded_and_perfect_detections_score_one(gt, data):
    score = st.floats(0.01, 1.0)
    perfect = {k: [Box(b.category, b.bbox, data.draw(score)) for b in v] for k, v in gt.items()}
    s = coco_summary(gt, perfect)
    # COCOeval divides by tp + fp + np.spacing(1): a class with a single object reads 1 - 2e-16.
    one = pytest.approx(1.0, abs=1e-12)
    assert s.AP == one and s.AP50 == one and s.AP75 == one and s.AR100 == one
    assert all(v == one for v in s.per_class_ap.values())
    noisy = {k: [Box(data.draw(st.sampled_from(["cup", "box"])), t, data.draw(score)) for t in data.draw(BOXES)]
             for k in gt}
    s = coco_summary(gt, noisy)
    for v in list(s.stats().values()) + list(s.per_class_ap.values()):
        assert v is None or 0.0 <= v <= 1.0


# -- probes ---------------------------------------------------------------------------------------

@st.composite
def probe_sets(draw):
    rng = np.random.default_rng(draw(SEEDS))
    d, t = draw(st.integers(3, 8)), draw(st.integers(1, 3))
    n_sim, n_real = draw(st.integers(16, 40)), draw(st.integers(16, 40))
    w = rng.normal(size=(d, t))
    noise = draw(st.floats(0.0, 2.0))
    sim = rng.normal(size=(n_sim, d))
    real = rng.normal(size=(n_real, d)) + draw(st.floats(-1, 1))
    return sim, sim @ w + noise * rng.normal(size=(n_sim, t)), real, real @ w + noise * rng.normal(size=(n_real, t))


@fast(8)
@given(sets=probe_sets(), data=st.data())
def test_probe_r2_is_at_most_one_unit_free_and_ignores_real_frame_order(sets, data):
    sim, y_sim, real, y_real = sets
    base = probe(sim, y_sim, real, y_real, n_components=8)
    for score in (base.sim_to_sim, base.real_to_real, base.sim_to_real):
        assert score.r2 is None or score.r2 <= 1.0
        assert all(v is None or v <= 1.0 for v in score.r2_per_dim)
    # Targets in other units (y -> c y + b): ridge is equivariant, R^2 and the alpha choice are not moved.
    c = data.draw(st.sampled_from([-3.0, 0.001, 1000.0]))
    rescaled = probe(sim, c * y_sim + 5.0, real, c * y_real + 5.0, n_components=8)
    for a, b in ((base.sim_to_sim, rescaled.sim_to_sim), (base.real_to_real, rescaled.real_to_real),
                 (base.sim_to_real, rescaled.sim_to_real)):
        assert b.alphas == a.alphas
        assert b.r2 == pytest.approx(a.r2, abs=1e-8)
    # sim->real scores each real frame with the sim model that held its episode out: with episode
    # ids given, the order of the real frames (moved with their ids) cannot matter. (Without ids,
    # frames fall into contiguous time blocks, so their order is information by design.)
    ep_sim, ep_real = np.arange(len(sim)) % 4, np.arange(len(real)) % 4
    base = probe(sim, y_sim, real, y_real, n_components=8, episodes_sim=ep_sim, episodes_real=ep_real)
    perm = np.array(data.draw(st.permutations(range(len(real)))))
    moved = probe(sim, y_sim, real[perm], y_real[perm], n_components=8, episodes_sim=ep_sim,
                  episodes_real=ep_real[perm])
    assert moved.sim_to_real.r2 == pytest.approx(base.sim_to_real.r2, abs=1e-12)
    assert moved.sim_to_sim.r2 == pytest.approx(base.sim_to_sim.r2, abs=1e-12)


# -- drift gates -----------------------------------------------------------------------------------

@fast(30)
@given(base=arrays(np.float64, st.tuples(st.integers(2, 30), st.integers(1, 3)), elements=st.floats(-10, 10)),
       data=st.data(), threshold=st.floats(0.0, 1.0))
def test_shift_gate_is_antisymmetric_and_never_fails_identical_sets(base, data, threshold):
    cur = data.draw(arrays(np.float64, (data.draw(st.integers(2, 30)), base.shape[1]), elements=st.floats(-10, 10)))
    fwd = drift.shift_gate("x", base, cur, None, None, threshold, n_boot=50)
    back = drift.shift_gate("x", cur, base, None, None, threshold, n_boot=50)
    assert back.value == -fwd.value and back.detail["column"] == fwd.detail["column"]
    assert fwd.ci["low"] <= fwd.value <= fwd.ci["high"]
    same = drift.shift_gate("x", base, base.copy(), None, None, threshold, n_boot=50)
    assert same.value == 0.0 and same.passed and same.status == "passed"
    # a known shift of every frame reads as that shift
    delta = data.draw(arrays(np.float64, base.shape[1], elements=st.floats(-5, 5)))
    moved = drift.shift_gate("x", base, base + delta, None, None, threshold, n_boot=50, reducer="mean")
    col = int(moved.detail["column"])  # near-equal |delta| may tie: read the column the gate reports
    assert moved.value == pytest.approx(float(delta[col]), abs=1e-9)
    assert abs(delta[col]) == pytest.approx(float(np.max(np.abs(delta))), abs=1e-9)


_TEMPLATE = image_stats_array(np.zeros((4, 4, 3), np.uint8))
FORMATS = st.tuples(st.sampled_from([(64, 48), (32, 24)]), st.sampled_from(["uint8", "uint16"]),
                    st.sampled_from([1, 3]))


def _fmt(f) -> object:
    (w, h), dtype, c = f
    return dataclasses.replace(_TEMPLATE, width=w, height=h, dtype=dtype, channels=c)


@fast(60)
@given(usual=FORMATS, others=st.lists(FORMATS, max_size=14), cur=st.lists(FORMATS, min_size=1, max_size=30),
       data=st.data(), threshold=st.floats(0.0, 1.0))
def test_format_gate_value_is_the_off_format_share_whatever_the_order(usual, others, cur, data, threshold):
    # a strict majority of the baseline has the usual format, so "usual" is well defined
    base = data.draw(st.permutations([usual] * (len(others) + 1) + others), label="base")
    stats_base = [_fmt(f) for f in base]
    g = drift.format_gate(stats_base, [_fmt(f) for f in cur], threshold)
    fixed_size = sum(f[0] == usual[0] for f in base) >= 0.95 * len(base)  # drift.FIXED_SIZE_SHARE
    assert g.detail["size_checked"] == fixed_size
    off = [f[1:] != usual[1:] or (fixed_size and f[0] != usual[0]) for f in cur]
    base_off = [f[1:] != usual[1:] or (fixed_size and f[0] != usual[0]) for f in base]
    # the value is the current off-format share beyond the baseline's own
    assert g.detail["current_share"] == pytest.approx(sum(off) / len(cur), abs=1e-15)
    assert g.value == pytest.approx(sum(off) / len(cur) - sum(base_off) / len(base), abs=1e-12)
    assert -1.0 <= g.value <= 1.0
    assert g.passed == (g.value <= threshold or g.detail["p_value"] >= drift.FORMAT_ALPHA)
    shuffled = data.draw(st.permutations(cur), label="cur shuffled")
    reordered = [_fmt(f) for f in data.draw(st.permutations(base), label="base shuffled")]
    assert drift.format_gate(reordered, [_fmt(f) for f in shuffled], threshold).value == g.value
    # current frames in the baseline's usual format are never off-format; the baseline itself passes
    g = drift.format_gate(stats_base, [_fmt(usual)] * len(cur), threshold)
    assert g.value <= 0.0 and g.passed
    assert drift.format_gate(stats_base, stats_base, threshold).passed


@fast(8)
@given(sets=embedding_sets(min_rows=16, max_rows=40, max_d=8), threshold=st.floats(0.0, 1.0))
def test_embedding_and_auc_gates_on_a_copy_and_their_bounds(sets, threshold):
    base, cur = sets
    same = drift.embedding_gate("e", base, base.copy(), None, None, 2.0)
    assert same.status in ("passed", "not computed") and same.passed == (same.status == "passed")
    if same.status == "passed":
        assert same.value == 0.0
    g = drift.auc_gate("a", base, cur, None, None, threshold)
    assert 0.0 <= g.value <= 1.0 and g.passed == (g.value <= threshold)
    assert g.status == ("passed" if g.passed else "failed")


@fast(30)
@given(a=FORMATS, b=FORMATS, cur=st.lists(FORMATS, min_size=1, max_size=10), data=st.data())
def test_format_gate_breaks_a_tie_in_the_baseline_the_same_way_in_any_order(a, b, cur, data):
    base = [a, b] * 3  # an exact tie between two formats
    g = drift.format_gate([_fmt(f) for f in base], [_fmt(f) for f in cur], 0.5)
    shuffled = data.draw(st.permutations(base), label="base shuffled")
    assert drift.format_gate([_fmt(f) for f in shuffled], [_fmt(f) for f in cur], 0.5).value == g.value
