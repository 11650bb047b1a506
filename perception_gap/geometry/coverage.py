"""Training initial states and policy failures on the reprojection grid, read beside its error surface.

Each initial state (x, y, z in the robot base frame, metres) falls in the cell of its nearest grid
point (a box of one grid step around it; a state farther than half a step from every grid point
on some axis is `outside`). Per cell: the states in it, the states with an outcome, the failures
and the failure rate. A state's *coverage* is the mean number of training states per cell over
its cell and the cells around it (a 3 x 3 x 3 block, the cells inside the grid only, so a start
at the workspace's edge is not thin for being at the edge): how densely the training data covers
the neighbourhood of that start.

The decision rule (the workspace check's second half) compares the failing starts with the
succeeding ones. A *contrast* of a group of starts holds when they fail at least RATE_FACTOR
times as often as the other starts, RATE_GAP more in absolute terms, with Fisher's exact test
(one-sided) p <= P_MAX.

- error *grows toward the failing region* when either the error ranks failures above successes
  with AUC >= AUC_MIN (Mann-Whitney) and their mean error exceeds the successes' by at least
  max(ERROR_MIN_PX, ERROR_MIN_SHARE x the grid's mean error), or the starts whose error is above
  one of HIGH_ERROR_QUANTILES of the starts' errors show a contrast (its p Bonferroni-corrected:
  p x the number of quantiles <= P_MAX; the strongest is reported) and their mean error exceeds
  the other starts' by that much: the camera model is wrong where the policy fails, so
  recalibrate (`extrinsics`);
- otherwise the error is *flat* toward the failures; when thinly covered starts (coverage at most
  THIN_RATIO x the median coverage of all training states) show a contrast, the failures are a
  data or randomization problem (`thin_coverage`): collect or randomize more starts there.

Nothing is decided with fewer than MIN_OUTCOMES failures or successes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.findings import Finding

AUC_MIN = 0.7
ERROR_MIN_PX = 0.5
ERROR_MIN_SHARE = 0.2
THIN_RATIO = 0.5
RATE_FACTOR = 2.0
RATE_GAP = 0.2
P_MAX = 0.05
MIN_OUTCOMES = 5
HIGH_ERROR_QUANTILES = (0.5, 0.7, 0.8, 0.9)
RULE = (f"Failing starts vs succeeding starts; a group of starts shows a contrast when it fails >= {RATE_FACTOR:g} x "
        f"as often as the other starts and >= {RATE_GAP:g} more, Fisher's exact test p <= {P_MAX:g}. Error grows "
        f"toward the failing region when the reprojection error ranks failures above successes with AUC >= "
        f"{AUC_MIN:g}, or the starts above the {', '.join(f'{q:.0%}' for q in HIGH_ERROR_QUANTILES)} quantile of the "
        f"error show a contrast (Bonferroni over the {len(HIGH_ERROR_QUANTILES)}), in either case with a mean error "
        f">= max({ERROR_MIN_PX:g} px, {ERROR_MIN_SHARE:g} x the mean error) above the other group's: recalibrate "
        f"(extrinsics). "
        f"Otherwise the error is flat there; when thinly covered starts (coverage, the mean training states per cell "
        f"over the 3 x 3 x 3 block around a start, <= {THIN_RATIO:g} x its median) show a contrast, it is a data or "
        f"randomization problem (thin_coverage). At least {MIN_OUTCOMES} failures and {MIN_OUTCOMES} successes are "
        f"needed.")


def mann_whitney_auc(high: np.ndarray, low: np.ndarray) -> float:
    """P(a random value of `high` > a random value of `low`) + P(equal) / 2; NaN if either is empty.

    Args:
        high: (n,) values expected to be larger.
        low: (m,) values expected to be smaller.
    """
    from scipy.stats import rankdata

    if not len(high) or not len(low):
        return math.nan
    ranks = rankdata(np.concatenate([high, low]))  # ties share their mean rank
    u = ranks[: len(high)].sum() - len(high) * (len(high) + 1) / 2
    return float(u / (len(high) * len(low)))


def grid_cells(points: np.ndarray, step: float, states: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int]]:
    """The grid cell of each state.

    Args:
        points: (N, 3) grid points as `grid_points` lays them out (x slowest, z fastest), metres.
        step: the grid step, metres.
        states: (M, 3) initial states, metres.

    Returns:
        (M,) flat index into `points` (-1 for a state outside every cell) and the grid's shape.
    """
    lo = points.min(axis=0)
    shape = tuple(int(round((points[:, k].max() - lo[k]) / step)) + 1 for k in range(3))
    rel = (states - lo) / step
    idx = np.rint(rel).astype(np.int64)
    inside = np.all((idx >= 0) & (idx < np.array(shape)) & (np.abs(rel - idx) <= 0.5 + 1e-9), axis=1)
    flat = np.ravel_multi_index(tuple(np.clip(idx, 0, np.array(shape) - 1).T), shape)
    return np.where(inside, flat, -1), shape  # type: ignore[return-value]


def block_sum(counts: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """(N,) sum of `counts` (N,) over each cell's 3 x 3 x 3 block of neighbours, clipped at the edges."""
    c = np.pad(counts.reshape(shape).astype(np.float64), 1)
    out = np.zeros(shape)
    for dx in range(3):
        for dy in range(3):
            for dz in range(3):
                out += c[dx:dx + shape[0], dy:dy + shape[1], dz:dz + shape[2]]
    return out.ravel()


@dataclass(frozen=True)
class Contrast:
    """Failure rates of a group of starts against the others.

    Attributes:
        threshold: what puts a start in the group (an error above it, px; a coverage at or below it).
        gap: mean of that quantity in the group minus the other starts' (NaN when either is empty).
        rate_in, rate_out: failure rates inside and outside the group (NaN when empty).
        p_value: Fisher's exact test, one-sided (the group fails more).
        holds: the contrast of the decision rule (module docstring).
    """

    threshold: float
    gap: float
    rate_in: float
    rate_out: float
    p_value: float
    holds: bool

    def to_dict(self) -> dict[str, Any]:
        return {k: (v if isinstance(v, bool) or math.isfinite(v) else None) for k, v in
                (("threshold", self.threshold), ("gap", self.gap), ("failure_rate_in", self.rate_in), ("failure_rate_out", self.rate_out), ("p_value", self.p_value),
                 ("holds", self.holds))}


def failure_contrast(in_fail: np.ndarray, in_success: np.ndarray, values: np.ndarray, threshold: float, *,
                     n_tests: int = 1) -> Contrast:
    """The contrast of the starts in a group.

    Args:
        in_fail: (F,) bool, which failing starts are in the group.
        in_success: (S,) bool, which succeeding starts are in the group.
        values: (F + S,) the quantity that defines the group, failures first (for `gap`).
        threshold: the group's cut, reported as it is.
        n_tests: groups tried for the same question (Bonferroni: p x n_tests <= P_MAX).
    """
    from scipy.stats import fisher_exact

    a, b = int(in_fail.sum()), int(in_success.sum())
    c, d = len(in_fail) - a, len(in_success) - b
    rate_in = a / (a + b) if a + b else math.nan
    rate_out = c / (c + d) if c + d else math.nan
    p = float(fisher_exact([[a, b], [c, d]], alternative="greater")[1])
    inside = np.r_[in_fail, in_success]
    gap = float(values[inside].mean() - values[~inside].mean()) if a + b and c + d else math.nan
    holds = bool(a + b and c + d and rate_in >= RATE_FACTOR * rate_out and rate_in - rate_out >= RATE_GAP
                 and p * n_tests <= P_MAX)
    return Contrast(threshold, gap, rate_in, rate_out, p, holds)


_NO_CONTRAST = Contrast(math.nan, math.nan, math.nan, math.nan, math.nan, False)


@dataclass(frozen=True)
class Coverage:
    """Initial states and failures per grid cell, and the decision beside the error surface.

    Attributes:
        n_states, n_outcomes, n_failures, n_outside: states read, with an outcome, failed, outside the grid.
        cell_states, cell_outcomes, cell_failures: (N,) counts per grid cell (aligned with the grid points).
        cell_coverage: (N,) mean training states per cell over each cell's 3 x 3 x 3 block.
        auc_error: AUC that a failure's reprojection error exceeds a success's (NaN if undecidable).
        error_failures_px, error_successes_px: mean error at failing / succeeding starts.
        high_error: the strongest contrast of the starts whose error is above a quantile (HIGH_ERROR_QUANTILES).
        auc_coverage: AUC that a failure's coverage is below a success's.
        coverage_failures, coverage_successes: median coverage at failing / succeeding starts.
        thin_below: the coverage at or below which a start counts as thinly covered.
        thin: the contrast of the thinly covered starts.
        verdict: `recalibrate` (error grows toward the failures), `thin_coverage`, `none` or
            `insufficient` (too few failures or successes).
    """

    n_states: int
    n_outcomes: int
    n_failures: int
    n_outside: int
    cell_states: np.ndarray
    cell_outcomes: np.ndarray
    cell_failures: np.ndarray
    cell_coverage: np.ndarray
    auc_error: float
    error_failures_px: float
    error_successes_px: float
    high_error: Contrast
    auc_coverage: float
    coverage_failures: float
    coverage_successes: float
    thin_below: float
    thin: Contrast
    verdict: str
    higher_is_gap: bool = True

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        rate = [None if n == 0 else float(f / n) for f, n in zip(self.cell_failures, self.cell_outcomes)]
        return {"n_states": self.n_states, "n_outcomes": self.n_outcomes, "n_failures": self.n_failures,
                "n_outside": self.n_outside, "verdict": self.verdict, "rule": RULE,
                "auc_error": num(self.auc_error), "error_failures_px": num(self.error_failures_px),
                "error_successes_px": num(self.error_successes_px), "high_error": self.high_error.to_dict(),
                "auc_coverage": num(self.auc_coverage), "coverage_failures": num(self.coverage_failures),
                "coverage_successes": num(self.coverage_successes), "thin_below": num(self.thin_below),
                "thin": self.thin.to_dict(),
                "cells": {"n_states": self.cell_states.astype(int).tolist(),
                          "n_outcomes": self.cell_outcomes.astype(int).tolist(),
                          "n_failures": self.cell_failures.astype(int).tolist(), "failure_rate": rate,
                          "coverage": [round(float(c), 4) for c in self.cell_coverage]}}


def coverage_on_grid(points: np.ndarray, step: float, error_px: np.ndarray, states: np.ndarray,
                     success: np.ndarray, mean_error_px: float) -> Coverage:
    """Bin initial states onto the grid and apply the decision rule (module docstring).

    Args:
        points: (N, 3) grid points, metres. step: grid step, metres.
        error_px: (N,) reprojection error per grid point, NaN where excluded.
        states: (M, 3) initial states, metres.
        success: (M,) 1 success, 0 failure, NaN no outcome.
        mean_error_px: the grid's mean error (the scale of a meaningful growth).
    """
    cell, shape = grid_cells(points, step, states)
    inside = cell >= 0
    n = len(points)
    has = inside & np.isfinite(success)
    fail = has & (success < 0.5)
    cell_states = np.bincount(cell[inside], minlength=n)
    cell_outcomes = np.bincount(cell[has], minlength=n)
    cell_failures = np.bincount(cell[fail], minlength=n)
    cov = block_sum(cell_states, shape) / block_sum(np.ones(n), shape)
    ok = has & np.isfinite(np.where(inside, error_px[np.maximum(cell, 0)], np.nan))
    f_i, s_i = cell[ok & fail], cell[ok & ~fail]
    nan = math.nan
    auc_e = ef = es = auc_c = cf = cs = nan
    high = thin = _NO_CONTRAST
    thin_below = THIN_RATIO * float(np.median(cov[cell[inside]])) if inside.any() else nan
    verdict = "insufficient"
    if len(f_i) >= MIN_OUTCOMES and len(s_i) >= MIN_OUTCOMES:
        auc_e = mann_whitney_auc(error_px[f_i], error_px[s_i])
        ef, es = float(error_px[f_i].mean()), float(error_px[s_i].mean())
        errors = error_px[np.r_[f_i, s_i]]
        for q in HIGH_ERROR_QUANTILES:  # a strict cut: a flat error puts no start above it
            cut = float(np.quantile(errors, q))
            c = failure_contrast(error_px[f_i] > cut, error_px[s_i] > cut, errors, cut,
                                 n_tests=len(HIGH_ERROR_QUANTILES))
            if high is _NO_CONTRAST or (c.holds, -c.p_value) > (high.holds, -high.p_value):
                high = c
        auc_c = mann_whitney_auc(-cov[f_i], -cov[s_i])
        cf, cs = float(np.median(cov[f_i])), float(np.median(cov[s_i]))
        thin = failure_contrast(cov[f_i] <= thin_below, cov[s_i] <= thin_below, cov[np.r_[f_i, s_i]], thin_below)
        meaningful = max(ERROR_MIN_PX, ERROR_MIN_SHARE * mean_error_px)
        grows = (auc_e >= AUC_MIN and ef - es >= meaningful) or (high.holds and high.gap >= meaningful)
        verdict = "recalibrate" if grows else "thin_coverage" if thin.holds else "none"
    return Coverage(len(states), int(has.sum()), int(fail.sum()), int((~inside).sum()), cell_states, cell_outcomes,
                    cell_failures, cov, auc_e, ef, es, high, auc_c, cf, cs, thin_below, thin, verdict)


def _evidence(cov: Coverage) -> dict[str, Any]:
    d = cov.to_dict()
    return {k: d[k] for k in ("verdict", "auc_error", "error_failures_px", "error_successes_px", "high_error",
                              "auc_coverage", "coverage_failures", "coverage_successes", "thin_below", "thin",
                              "n_failures", "n_outcomes", "n_states")}


def coverage_findings(findings: list[Finding], cov: Coverage) -> list[Finding]:
    """The reprojection findings with the decision added: `extrinsics` when the error grows toward
    the failing starts (joined to an `extrinsics` finding of the camera fit when there is one),
    `thin_coverage` when the failures sit where coverage is thin and the error is flat."""
    if cov.verdict == "thin_coverage":
        return findings + [Finding(
            "thin_coverage", "gap",
            f"Policy failures start where the training data is thin: starts with at most {cov.thin_below:.3g} training "
            f"states per cell around them fail {cov.thin.rate_in:.0%} of the time against {cov.thin.rate_out:.0%} "
            f"elsewhere (Fisher p = {cov.thin.p_value:.2g}), while the reprojection error there is flat "
            f"({cov.error_failures_px:.3g} px at failures vs {cov.error_successes_px:.3g} px at successes): a "
            f"distribution-shift problem, not a camera one.",
            _evidence(cov),
            "Collect demonstrations or widen the initial-state randomization over the thinly covered cells "
            "(see the coverage plot); recalibrating the camera will not fix these failures.",
            score=cov.thin.rate_in - cov.thin.rate_out)]
    if cov.verdict != "recalibrate":
        return findings
    sentence = (f"The reprojection error grows toward the failing starts ({cov.error_failures_px:.3g} px at failures "
                f"vs {cov.error_successes_px:.3g} px at successes, AUC {cov.auc_error:.2f}; starts above the median "
                f"error fail {cov.high_error.rate_in:.0%} vs {cov.high_error.rate_out:.0%}): recalibrate the camera.")
    for i, f in enumerate(findings):
        if f.code == "extrinsics":
            joined = Finding(f.code, f.severity, f"{f.title} {sentence}", {**f.evidence, "toward_failures": _evidence(cov)},
                             f.action, score=f.score)
            return findings[:i] + [joined] + findings[i + 1:]
    return findings + [Finding(
        "extrinsics", "bug", sentence, {"toward_failures": _evidence(cov)},
        "Recalibrate the camera (hand-eye and intrinsics) and copy the result into the sim camera; the failures "
        "track where sim and real projections disagree.", score=cov.auc_error)]
