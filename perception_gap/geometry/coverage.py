"""Training initial states and policy failures on the reprojection grid, read beside its error surface.

Each initial state (x, y, z in the robot base frame, metres) falls in the cell of its nearest grid
point (a box of one grid step around it; a state farther than half a step from every grid point
on some axis is `outside`). Per cell: the states in it, the states with an outcome, the failures
and the failure rate. A state's *coverage* is the number of states in its cell and the cells
around it (a 3 x 3 x 3 block, clipped at the grid's edge): how densely the training data covers
the neighbourhood of that start.

The decision rule (the workspace check's second half) compares the failing starts with the
succeeding ones:

- error *grows toward the failing region* when the reprojection error at failing starts exceeds
  that at succeeding starts with AUC >= AUC_MIN (Mann-Whitney: the chance that a random failure's
  error exceeds a random success's) and by at least max(ERROR_MIN_PX, ERROR_MIN_SHARE x the grid's
  mean error) on average: the camera model is wrong where the policy fails, so recalibrate
  (`extrinsics`);
- otherwise the error is *flat* toward the failures; when thinly covered starts (coverage at most
  THIN_RATIO x the median coverage of all training states) fail at least THIN_RATE_FACTOR times as
  often as the others, THIN_RATE_GAP more in absolute terms, and Fisher's exact test (one-sided)
  gives p <= THIN_P_MAX, the failures are a data or randomization problem (`thin_coverage`):
  collect or randomize more starts there.

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
THIN_RATE_FACTOR = 2.0
THIN_RATE_GAP = 0.2
THIN_P_MAX = 0.05
MIN_OUTCOMES = 5
RULE = (f"Failing starts vs succeeding starts. Error grows toward the failing region when the reprojection error at "
        f"failures exceeds that at successes with AUC >= {AUC_MIN:g} and by >= max({ERROR_MIN_PX:g} px, "
        f"{ERROR_MIN_SHARE:g} x the mean error) on average: recalibrate (extrinsics). Otherwise the error is flat "
        f"there; when thinly covered starts (coverage, the training states in the 3 x 3 x 3 cell block around a "
        f"start, <= {THIN_RATIO:g} x its median) fail >= {THIN_RATE_FACTOR:g} x as often as the others and "
        f">= {THIN_RATE_GAP:g} more, Fisher's exact test p <= {THIN_P_MAX:g}, it is a data or randomization problem "
        f"(thin_coverage). At least {MIN_OUTCOMES} failures and {MIN_OUTCOMES} successes are needed.")


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
class Coverage:
    """Initial states and failures per grid cell, and the decision beside the error surface.

    Attributes:
        n_states, n_outcomes, n_failures, n_outside: states read, with an outcome, failed, outside the grid.
        cell_states, cell_outcomes, cell_failures: (N,) counts per grid cell (aligned with the grid points).
        cell_coverage: (N,) states in each cell's 3 x 3 x 3 block.
        auc_error: AUC that a failure's reprojection error exceeds a success's (NaN if undecidable).
        error_failures_px, error_successes_px: mean error at failing / succeeding starts.
        auc_coverage: AUC that a failure's coverage is below a success's.
        coverage_failures, coverage_successes: median coverage at failing / succeeding starts.
        thin_below: the coverage at or below which a start counts as thinly covered.
        failure_rate_thin, failure_rate_covered: failure rates of thinly covered and other starts.
        thin_p_value: Fisher's exact test (one-sided: thin starts fail more).
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
    auc_coverage: float
    coverage_failures: float
    coverage_successes: float
    thin_below: float
    failure_rate_thin: float
    failure_rate_covered: float
    thin_p_value: float
    verdict: str
    higher_is_gap: bool = True

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        rate = [None if n == 0 else float(f / n) for f, n in zip(self.cell_failures, self.cell_outcomes)]
        return {"n_states": self.n_states, "n_outcomes": self.n_outcomes, "n_failures": self.n_failures,
                "n_outside": self.n_outside, "verdict": self.verdict, "rule": RULE,
                "auc_error": num(self.auc_error), "error_failures_px": num(self.error_failures_px),
                "error_successes_px": num(self.error_successes_px), "auc_coverage": num(self.auc_coverage),
                "coverage_failures": num(self.coverage_failures), "coverage_successes": num(self.coverage_successes),
                "thin_below": num(self.thin_below), "failure_rate_thin": num(self.failure_rate_thin),
                "failure_rate_covered": num(self.failure_rate_covered), "thin_p_value": num(self.thin_p_value),
                "cells": {"n_states": self.cell_states.astype(int).tolist(),
                          "n_outcomes": self.cell_outcomes.astype(int).tolist(),
                          "n_failures": self.cell_failures.astype(int).tolist(), "failure_rate": rate,
                          "coverage": self.cell_coverage.astype(int).tolist()}}


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
    cov = block_sum(cell_states, shape)
    ok = has & np.isfinite(np.where(inside, error_px[np.maximum(cell, 0)], np.nan))
    f_i, s_i = cell[ok & fail], cell[ok & ~fail]
    nan = math.nan
    auc_e = ef = es = auc_c = cf = cs = rt = rc = p = nan
    thin_below = THIN_RATIO * float(np.median(cov[cell[inside]])) if inside.any() else nan
    verdict = "insufficient"
    if len(f_i) >= MIN_OUTCOMES and len(s_i) >= MIN_OUTCOMES:
        from scipy.stats import fisher_exact

        auc_e = mann_whitney_auc(error_px[f_i], error_px[s_i])
        ef, es = float(error_px[f_i].mean()), float(error_px[s_i].mean())
        auc_c = mann_whitney_auc(-cov[f_i], -cov[s_i])
        cf, cs = float(np.median(cov[f_i])), float(np.median(cov[s_i]))
        thin_f, thin_s = int((cov[f_i] <= thin_below).sum()), int((cov[s_i] <= thin_below).sum())
        table = [[thin_f, thin_s], [len(f_i) - thin_f, len(s_i) - thin_s]]
        rt = thin_f / (thin_f + thin_s) if thin_f + thin_s else nan
        rc = table[1][0] / sum(table[1]) if sum(table[1]) else nan
        p = float(fisher_exact(table, alternative="greater")[1])
        grows = auc_e >= AUC_MIN and ef - es >= max(ERROR_MIN_PX, ERROR_MIN_SHARE * mean_error_px)
        thin = (thin_f + thin_s > 0 and sum(table[1]) > 0 and rt >= THIN_RATE_FACTOR * rc and rt - rc >= THIN_RATE_GAP
                and p <= THIN_P_MAX)
        verdict = "recalibrate" if grows else "thin_coverage" if thin else "none"
    return Coverage(len(states), int(has.sum()), int(fail.sum()), int((~inside).sum()), cell_states, cell_outcomes,
                    cell_failures, cov, auc_e, ef, es, auc_c, cf, cs, thin_below, rt, rc, p, verdict)


def _evidence(cov: Coverage) -> dict[str, Any]:
    d = cov.to_dict()
    return {k: d[k] for k in ("verdict", "auc_error", "error_failures_px", "error_successes_px", "auc_coverage",
                              "coverage_failures", "coverage_successes", "thin_below", "failure_rate_thin",
                              "failure_rate_covered", "thin_p_value", "n_failures", "n_outcomes", "n_states")}


def coverage_findings(findings: list[Finding], cov: Coverage) -> list[Finding]:
    """The reprojection findings with the decision added: `extrinsics` when the error grows toward
    the failing starts (joined to an `extrinsics` finding of the camera fit when there is one),
    `thin_coverage` when the failures sit where coverage is thin and the error is flat."""
    if cov.verdict == "thin_coverage":
        return findings + [Finding(
            "thin_coverage", "gap",
            f"Policy failures start where the training data is thin: starts with at most {cov.thin_below:.3g} training "
            f"states around them fail {cov.failure_rate_thin:.0%} of the time against {cov.failure_rate_covered:.0%} "
            f"elsewhere (Fisher p = {cov.thin_p_value:.2g}), while the reprojection error there is flat "
            f"({cov.error_failures_px:.3g} px at failures vs {cov.error_successes_px:.3g} px at successes): a "
            f"distribution-shift problem, not a camera one.",
            _evidence(cov),
            "Collect demonstrations or widen the initial-state randomization over the thinly covered cells "
            "(see the coverage plot); recalibrating the camera will not fix these failures.",
            score=cov.failure_rate_thin - cov.failure_rate_covered)]
    if cov.verdict != "recalibrate":
        return findings
    sentence = (f"The reprojection error grows toward the failing starts ({cov.error_failures_px:.3g} px at failures "
                f"vs {cov.error_successes_px:.3g} px at successes, AUC {cov.auc_error:.2f}): recalibrate the camera.")
    for i, f in enumerate(findings):
        if f.code == "extrinsics":
            joined = Finding(f.code, f.severity, f"{f.title} {sentence}", {**f.evidence, "toward_failures": _evidence(cov)},
                             f.action, score=f.score)
            return findings[:i] + [joined] + findings[i + 1:]
    return findings + [Finding(
        "extrinsics", "bug", sentence, {"toward_failures": _evidence(cov)},
        "Recalibrate the camera (hand-eye and intrinsics) and copy the result into the sim camera; the failures "
        "track where sim and real projections disagree.", score=cov.auc_error)]
