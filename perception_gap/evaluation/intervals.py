"""Binomial confidence intervals, a difference-of-proportions interval and the sample size they need.

Pure functions over counts: no files, no logging. Rates are fractions in [0, 1].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import beta, norm

from perception_gap.errors import InputError

METHODS = ("exact", "wilson")
MAX_ROLLOUTS = 10**9  # past this, "rollouts needed" is reported as not reachable


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval for a rate (fractions in [0, 1]), and how it was made."""

    low: float
    high: float
    method: str
    confidence: float

    @property
    def width(self) -> float:
        return self.high - self.low


def _check(successes: float, n: float, confidence: float) -> None:
    if not n > 0:
        raise InputError(f"Expected `n` > 0 rollouts for an interval, got {n}.")
    if not 0 <= successes <= n:
        raise InputError(f"Expected `successes` in [0, {n}], got {successes}.")
    if not 0 < confidence < 1:
        raise InputError(f"Expected `confidence` in (0, 1), got {confidence}.")


def clopper_pearson(successes: float, n: float, confidence: float = 0.95) -> Interval:
    """Exact (Clopper-Pearson) interval from the beta quantiles; never narrower than the nominal level.

    Args:
        successes: k, successes among n (a fraction of an episode is accepted: `rollouts_needed`
            evaluates widths at a rate, not a count).
        n: rollouts.
        confidence: two-sided level (0.95 = 95%).
    """
    _check(successes, n, confidence)
    a = (1 - confidence) / 2
    low = 0.0 if successes == 0 else float(beta.ppf(a, successes, n - successes + 1))
    high = 1.0 if successes == n else float(beta.ppf(1 - a, successes + 1, n - successes))
    return Interval(low, high, "exact", confidence)


def wilson(successes: float, n: float, confidence: float = 0.95) -> Interval:
    """Wilson score interval (no continuity correction): the test-inversion of the score test."""
    _check(successes, n, confidence)
    z = float(norm.ppf(1 - (1 - confidence) / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # the interval holds p exactly (at k = 0 or k = n a bound equals it): rounding must not leave p outside
    return Interval(min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half)), "wilson", confidence)


def interval(successes: float, n: float, confidence: float = 0.95, method: str = "exact") -> Interval:
    """The interval of `method` (`exact` = Clopper-Pearson, `wilson`)."""
    if method not in METHODS:
        raise InputError(f"Expected `method` in {METHODS}, got {method!r}.")
    return (clopper_pearson if method == "exact" else wilson)(successes, n, confidence)


def newcombe_difference(k_sim: int, n_sim: int, k_real: int, n_real: int,
                        confidence: float = 0.95) -> tuple[float, Interval]:
    """The drop sim rate - real rate and its Newcombe hybrid score interval (method 10, 1998).

    The hybrid score interval combines the two Wilson intervals: with (l, u) each side's Wilson
    bounds, the difference d = p_sim - p_real has bounds d - sqrt((p_sim - l_sim)^2 + (u_real -
    p_real)^2) and d + sqrt((u_sim - p_sim)^2 + (p_real - l_real)^2). It keeps close to nominal
    coverage at small n and at rates near 0 or 1, where the Wald interval fails.

    Returns:
        (drop, interval); the drop is positive when real does worse than sim.
    """
    ws, wr = wilson(k_sim, n_sim, confidence), wilson(k_real, n_real, confidence)
    ps, pr = k_sim / n_sim, k_real / n_real
    d = ps - pr
    low = d - math.sqrt((ps - ws.low) ** 2 + (wr.high - pr) ** 2)
    high = d + math.sqrt((ws.high - ps) ** 2 + (pr - wr.low) ** 2)
    return d, Interval(max(-1.0, low), min(1.0, high), "newcombe", confidence)


def rollouts_needed(rate: float, width: float, confidence: float = 0.95, method: str = "exact") -> int | None:
    """Fewest rollouts n whose interval at the observed `rate` is narrower than `width`.

    Widths are evaluated at k = rate * n (the rate held fixed as n grows); they shrink with n, so
    an exponential search then bisection finds the smallest n. None when `width` <= 0 (no drop
    to resolve) or more than `MAX_ROLLOUTS` would be needed.
    """
    if not width > 0:
        return None

    def narrow(n: int) -> bool:
        return interval(rate * n, n, confidence, method).width < width

    hi = 1
    while not narrow(hi):
        hi *= 2
        if hi > MAX_ROLLOUTS:
            return None
    lo = hi // 2  # narrow(lo) is False (or lo == 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if narrow(mid):
            hi = mid
        else:
            lo = mid
    return hi
