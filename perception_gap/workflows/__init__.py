"""Workflows: the jobs a user runs, each combining the catalog with the pure math below it.

This folder owns the stages that read and write the catalog and return their part of
results.json (see docs/contract.md), storing every figure in the `runs`/`results` tables:
`stats` (statistics of a sim and a real set, then the plumbing diagnoses), `run` (the whole
analysis: statistics, embeddings, gap metrics, probes, ranking, detection and findings),
`screen` (which of several renderings is closest to real), `drift` (new frames gated
against a baseline), `policy_check` (paired frames through a frozen policy) and `checks` (the
`replay` and `reprojection` jobs, their input files read by `check_inputs`). The pure math that only these jobs use lives beside them: `screening`
(shared-projection distances with a paired bootstrap) and `drift_gates` (the gates).
Nothing below this folder imports it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perception_gap.workflows.detection import detection_results
    from perception_gap.workflows.drift import drift_history, drift_job
    from perception_gap.workflows.run import run_job
    from perception_gap.workflows.screen import screen_job
    from perception_gap.workflows.stats import compute_stats, load_set_records, stats_job

# each job loads on first use: `stats` never pays for the run's scikit-learn or the detection's scipy
_HOME = {"detection_results": "detection", "drift_history": "drift", "drift_job": "drift", "run_job": "run",
         "screen_job": "screen", "compute_stats": "stats", "load_set_records": "stats", "stats_job": "stats"}

__all__ = ["compute_stats", "detection_results", "drift_history", "drift_job", "load_set_records", "run_job",
           "screen_job", "stats_job"]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
