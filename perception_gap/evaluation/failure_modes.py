"""Do sim and real fail in different ways? An exact test on the failure-category contingency table.

Two categories: Fisher's exact test on the 2x2 table (scipy). More: a Monte-Carlo permutation
test of Pearson's chi-square statistic with both margins fixed (the domain labels of the failed
episodes are shuffled), p = (1 + b) / (1 + B) for b of B shuffles at least as extreme: an
unbiased estimate of the exact conditional (Freeman-Halton-type) p-value, whatever the cell counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import fisher_exact

N_PERMUTATIONS = 9999


@dataclass(frozen=True)
class FailureModeTest:
    """Failure categories of one policy x task, sim vs real.

    Attributes:
        categories: category names, in order of first appearance.
        sim: failed sim episodes per category, shape (n_categories,).
        real: failed real episodes per category, shape (n_categories,).
        test: `fisher` (2x2) or `permutation_chi2` (more categories).
        p_value: probability of a table at least this different under "same failure modes".
    """

    categories: tuple[str, ...]
    sim: tuple[int, ...]
    real: tuple[int, ...]
    test: str
    p_value: float

    def to_dict(self) -> dict:
        return {"categories": list(self.categories), "sim": list(self.sim), "real": list(self.real),
                "test": self.test, "p_value": self.p_value}


def _chi2(counts: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Pearson's chi-square of tables (..., 2, C) against their expected counts (2, C)."""
    return (((counts - expected) ** 2) / expected).sum(axis=(-2, -1))


def permutation_chi2_p(sim_labels: np.ndarray, real_labels: np.ndarray, *, n_permutations: int = N_PERMUTATIONS,
                       random_state: int = 0) -> float:
    """Monte-Carlo p-value of the chi-square statistic with both margins fixed.

    Args:
        sim_labels: category index of each failed sim episode, shape (n_sim,).
        real_labels: category index of each failed real episode, shape (n_real,).
    """
    labels = np.concatenate([sim_labels, real_labels]).astype(np.int64)
    n_cat = int(labels.max()) + 1
    n_sim = len(sim_labels)
    col = np.bincount(labels, minlength=n_cat).astype(float)
    rows = np.array([n_sim, len(real_labels)], dtype=float)
    expected = np.outer(rows, col) / len(labels)
    observed = np.stack([np.bincount(sim_labels, minlength=n_cat), np.bincount(real_labels, minlength=n_cat)])
    stat = _chi2(observed.astype(float), expected)
    rng = np.random.default_rng(random_state)
    chunk = max(1, 2_000_000 // len(labels))  # bounded memory: at most ~2e6 shuffled labels at a time
    b = 0
    for start in range(0, n_permutations, chunk):
        m = min(chunk, n_permutations - start)
        # each shuffle: which failed episodes are called "sim"; the real row is the column total minus it
        picked = np.argsort(rng.random((m, len(labels))), axis=1)[:, :n_sim]
        sim_counts = np.zeros((m, n_cat))
        np.add.at(sim_counts, (np.repeat(np.arange(m), n_sim), labels[picked].ravel()), 1)
        tables = np.stack([sim_counts, col - sim_counts], axis=1)
        b += int((_chi2(tables, expected) >= stat - 1e-9).sum())
    return (1 + b) / (1 + n_permutations)


def failure_mode_test(sim_modes: list[str], real_modes: list[str], *, random_state: int = 0) -> FailureModeTest | str:
    """Compare the failure categories of failed sim and failed real episodes.

    Returns:
        The test, or a reason it cannot be run (no failures on a side, a single category).
    """
    if not sim_modes or not real_modes:
        return "no labelled failures on " + ("either side" if not sim_modes and not real_modes
                                             else "the sim side" if not sim_modes else "the real side")
    cats = tuple(dict.fromkeys(sim_modes + real_modes))
    if len(cats) < 2:
        return f"a single failure category ({cats[0]!r}) on both sides"
    index = {c: i for i, c in enumerate(cats)}
    s = np.array([index[m] for m in sim_modes])
    r = np.array([index[m] for m in real_modes])
    sim_counts = tuple(int(x) for x in np.bincount(s, minlength=len(cats)))
    real_counts = tuple(int(x) for x in np.bincount(r, minlength=len(cats)))
    if len(cats) == 2:
        p = float(fisher_exact([list(sim_counts), list(real_counts)]).pvalue)
        return FailureModeTest(cats, sim_counts, real_counts, "fisher", p)
    p = permutation_chi2_p(s, r, random_state=random_state)
    return FailureModeTest(cats, sim_counts, real_counts, "permutation_chi2", p)
