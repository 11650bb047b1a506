"""Shared ground of the plumbing diagnoses: the basis thresholds and small pure numeric helpers.

`MIN_PAIRS` decides between the pairs and the distribution basis, `DIST_Z` is the bar a gap
clears on the distribution basis; the helpers round evidence, measure a difference of medians in
standard errors, and decode sRGB. Each family's own thresholds live in its module.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

# ---------------------------------------------------------------------------------------------
# Thresholds, set between what clean cases read (real frames vs the same frames with sigma 2/255
# Gaussian noise and JPEG q90 re-encoding; two halves of one real set) and what injected faults
# read, on synthetic scenes and real photos (tests/test_plumbing.py). The figures behind each:
# bench/README.md, "Where the diagnoses' thresholds come from".
# ---------------------------------------------------------------------------------------------

# Pairs needed before per-pair medians are trusted; below this, set distributions are compared.
MIN_PAIRS = 3
# Distribution basis: a gap must exceed this many standard errors of the difference of the two
# set medians (scene-to-scene spread / sqrt(n)); z = 3 keeps two halves of one real set quiet.
DIST_Z = 3.0
# ... and the two sets must also differ by rank: a two-sided Mann-Whitney test at DIST_ALPHA
# (exact for small sets). The z bar alone assumes a normal sampling distribution of the median,
# which small sets of different scenes do not have: disjoint halves of one real camera would raise
# gaps that the rank test keeps quiet. Sets too small for the test to reach DIST_ALPHA at all
# (4 v 4: the smallest two-sided p is 2/70) need complete separation (every frame of one side beyond
# every frame of the other) by at least SMALL_SET_MARGIN x the check's own practical bar between the
# nearest frames of the two sides (the `margin` of `dist_clear`; checks without one, the
# high-frequency signatures, are never clear there): complete separation alone is not enough, since
# many statistics each get their 2/70, and 2 x the bar is the smallest margin that keeps clean small
# controls quiet. Such sets also get an `insufficient_data` info.
DIST_ALPHA = 0.01
SMALL_SET_MARGIN = 2.0
# The smallest equal set size at which the rank test can reach DIST_ALPHA at all (the most
# extreme of the C(2n, n) orderings has two-sided p = 2 / C(2n, n)): 5 for 0.01.
DIST_MIN_FRAMES = next(n for n in range(2, 64) if 2 / math.comb(2 * n, n) <= DIST_ALPHA)
# Unpaired, the high-frequency signatures of a resize filter or a blur (per-frame spectral shape and
# slope) vary from scene to scene, and at 5-7 frames a side the rank test needs (nearly) every frame
# of one side beyond every frame of the other, so a resize filter or a blur at its magnitude limit
# is often missed (silently); from 8 a side it is named. Below this many frames a side, unpaired
# sets that name neither get an `insufficient_data` info saying so.
HF_MIN_FRAMES = 8


# ---------------------------------------------------------------------------------------------
# Small numeric helpers (pure)
# ---------------------------------------------------------------------------------------------

def num(x: float, nd: int = 4) -> float | None:
    """A plain Python float rounded for evidence; None for NaN/inf (JSON has neither)."""
    x = float(x)
    return float(round(x, nd)) if math.isfinite(x) else None


def nums(xs: Sequence[float], nd: int = 4) -> list[float]:
    return [num(x, nd) for x in xs]


def median(x: np.ndarray) -> float:
    """`np.median` of a 1-d array as a float (NaN when empty or holding a NaN), without its generic
    machinery: the checks take thousands of medians of a few dozen values per resampled run."""
    v = np.sort(np.asarray(x, dtype=np.float64).ravel())
    n = v.size
    if n == 0 or math.isnan(v[-1]):
        return math.nan
    return float(v[n // 2]) if n % 2 else float(0.5 * (v[n // 2 - 1] + v[n // 2]))


def _median_se(x: np.ndarray) -> float:
    """Standard error of a sample median (normal approximation, MAD-based spread)."""
    if x.size < 2:
        return math.inf
    mad = 1.4826 * median(np.abs(x - median(x)))
    sd = max(mad, float(np.std(x, ddof=1)) * 0.5)  # MAD is 0 on tied data; keep some spread
    return 1.2533 * sd / math.sqrt(x.size)


def dist_z(a: np.ndarray, b: np.ndarray) -> float:
    """|median(a) - median(b)| in standard errors of that difference."""
    se = math.hypot(_median_se(a), _median_se(b))
    diff = abs(median(a) - median(b))
    if se == 0:
        return math.inf if diff > 0 else 0.0
    return diff / se


def dist_clear(a: np.ndarray, b: np.ndarray, margin: float = math.inf) -> bool:
    """The distribution-basis bar: the difference of medians clears DIST_Z standard errors and a
    two-sided Mann-Whitney test rejects equal distributions at DIST_ALPHA; where the sets are too
    small for the test to reach DIST_ALPHA, complete separation by SMALL_SET_MARGIN x `margin` instead.

    Args:
        a, b: per-frame values of the two sets (finite).
        margin: the check's practical bar, in the values' unit: the nearest frames of two sets too
            small for the rank test must lie SMALL_SET_MARGIN x this apart (inf: never clear).
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size < 2 or b.size < 2 or dist_z(a, b) < DIST_Z:
        return False
    if 2 / math.comb(a.size + b.size, a.size) > DIST_ALPHA:  # too few frames for the rank test
        return bool(max(a.min() - b.max(), b.min() - a.max()) >= SMALL_SET_MARGIN * margin)
    return rank_p(a, b) <= DIST_ALPHA


def rank_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann-Whitney p-value (exact without ties when a set has at most 8 values, else the
    normal approximation with tie and continuity corrections: scipy's `method="auto"`); 1.0 when
    every value is tied. Written out because each resample of each check calls it: scipy's
    validation costs 30x the arithmetic on a few dozen values."""
    x = np.concatenate([np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)])
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0 or np.ptp(x) == 0:
        return 1.0
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    counts = np.diff(np.r_[starts, x.size])
    ranks = np.empty(x.size)
    ranks[order] = np.repeat(starts + (counts + 1) / 2.0, counts)  # 1-based, ties at their mean rank
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2.0
    u = max(u1, n1 * n2 - u1)
    if min(n1, n2) <= 8 and counts.max() == 1:
        p = 2.0 * float(_u_survival(min(n1, n2), max(n1, n2))[int(round(u))])
    else:
        n = n1 + n2
        tie = float((counts.astype(np.float64) ** 3 - counts).sum())
        sd = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie / (n * (n - 1))))
        p = math.erfc((u - n1 * n2 / 2.0 - 0.5) / sd / math.sqrt(2.0)) if sd > 0 else 1.0
    return min(max(p, 0.0), 1.0)


@lru_cache(maxsize=64)
def _u_survival(m: int, n: int) -> np.ndarray:
    """P(U >= u), u = 0..m*n, of the Mann-Whitney U of sets of m and n untied values under the null.

    The counts of U are the coefficients of the Gaussian binomial [m+n choose m](q) =
    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), multiplied out one factor at a time (float64: the
    counts reach C(m+n, m); their ratios are what is read)."""
    size = m * n + 1
    c = np.zeros(size)
    c[0] = 1.0
    for i in range(1, m + 1):
        k = n + i
        if k < size:
            c[k:] = c[k:] - c[:-k].copy()  # times (1 - q^k)
        for j in range(i, size):  # divided by (1 - q^i): the running sum with stride i
            c[j] += c[j - i]
    pmf = c / c.sum()
    return np.cumsum(pmf[::-1])[::-1]


def srgb_to_linear(v: np.ndarray) -> np.ndarray:
    """sRGB-encoded values in [0, 1] -> linear light (IEC 61966-2-1); clips to [0, 1] first."""
    v = np.clip(np.asarray(v, dtype=np.float64), 0.0, 1.0)
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def median_ci(x: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of a median from order statistics.

    The interval [x_(k), x_(n+1-k)] covers the median with probability 1 - 2 P(B < k),
    B ~ Binomial(n, 1/2); k is the largest rank keeping that at least `level`. Below 6 values
    no such k exists at 95% and the interval is [min, max] (all values on one side of zero is
    then the test). NaN for an empty sample.
    """
    v = np.sort(np.asarray(x, dtype=np.float64)[np.isfinite(x)])
    n = v.size
    if n == 0:
        return math.nan, math.nan
    alpha = (1.0 - level) / 2.0
    k, cdf, c, two_n = 0, 0.0, 1, 1 << n  # c = C(n, k), updated exactly (math.comb afresh is O(k n) a step)
    while k < n // 2:
        cdf += c / two_n  # P(B <= k); int / int: correctly rounded, no overflow past n = 1023
        if cdf > alpha:
            break
        c = c * (n - k) // (k + 1)
        k += 1
    k = max(k, 1)  # rank k (1-based): k = 1 is [min, max]
    return float(v[k - 1]), float(v[n - k])


def excludes_zero(ci: tuple[float, float]) -> bool:
    """Whether an interval lies entirely on one side of zero."""
    lo, hi = ci
    return (lo > 0 and hi > 0) or (lo < 0 and hi < 0)
