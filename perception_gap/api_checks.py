"""The Python API of the checks before and after the gap hunt (part of `perception_gap.api`).

Before: is there a gap at all (`rollouts`, `rank_fidelity`, `latency`, each reading a CSV, JSONL or
Parquet table). After: the policy and the geometry (`policy_check` on two indexed sets, `replay`
on a pose log, `reprojection` on two camera models). Each returns its command's results.json
(docs/contract.md) as `perception_gap.schema.Results`: typed sections (`res.latency.end_to_end`),
`res.to_dict()` the JSON form, and a read-only mapping of it (`res["latency"]`); given `out`, it
writes `results.json` and `report.html` there. A gate asked for (`max_drop=`, ...) is in the
section (`gates` and `passed`, or `gate`); the caller decides what a failed gate means, as the
command line's exit code 1 does.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from perception_gap.catalog import Catalog

if TYPE_CHECKING:
    from perception_gap.schema import Results

PathLike = str | os.PathLike[str]


def _written(raw: dict[str, Any], out: PathLike | None, kind: str) -> Results:
    """The job's results typed as their results.json reads back, written into `out` when given."""
    from perception_gap.outputs import as_results, render_check, render_evaluation, write_outputs

    res = as_results(raw)
    if out is not None:
        write_outputs(res, out, None, render_evaluation if kind == "evaluation" else render_check)
    return res


def rollouts(path: PathLike, *, method: str = "exact", confidence: float = 0.95, max_drop: float | None = None,
             out: PathLike | None = None) -> Results:
    """Success rates per policy x task x domain with intervals, the sim-vs-real drop, rollouts still needed.

    Args:
        path: the rollouts log: CSV, JSONL or Parquet rows of `policy`, `task`, `domain` (sim|real),
            `success` (0/1), optional `episode_length`, `failure_mode`.
        method: per-group interval, `exact` (Clopper-Pearson) or `wilson`.
        confidence: interval level in (0, 1).
        max_drop: gate: fails when a sim-minus-real success drop exceeds it.
        out: when given, write `results.json` and `report.html` into this folder.

    Returns:
        `Results` with `rollouts` (`groups`, `comparisons`, `failure_modes`, `episode_lengths`, `gates`,
        `passed`), `findings`, `config`, `version`.

    Raises:
        InputError: a missing or unreadable file, a missing column, a bad cell (naming its row).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()
        >>> res = pg.rollouts(files.rollouts, max_drop=0.2)
        >>> c = res.rollouts.comparisons[0]
        >>> round(c["drop"], 2), c["significant"], res.rollouts.passed
        (0.45, True, False)
    """
    from perception_gap.evaluation.jobs import rollouts_job

    return _written(rollouts_job(path, method=method, confidence=confidence, max_drop=max_drop), out, "evaluation")


def rank_fidelity(path: PathLike, *, n_boot: int = 2000, min_pearson: float | None = None,
                  out: PathLike | None = None) -> Results:
    """Does sim rank policies (or checkpoints) as real does: MMRV and Pearson per task and on average.

    Args:
        path: rows of `policy`, `task`, `sim`, `real` success rates (optional `n_sim`, `n_real` counts
            for bootstrap intervals), or a rollouts log; CSV, JSONL or Parquet.
        n_boot: bootstrap replicates when counts are known.
        min_pearson: gate: fails when the mean Pearson over tasks is below it.
        out: when given, write `results.json` and `report.html` into this folder.

    Returns:
        `Results` with `rank_fidelity` (`tasks`, `mean` MMRV and Pearson, `gates`, `passed`), `findings`,
        `config`, `version`.

    Raises:
        InputError: a missing or unreadable file, a missing column, a rate outside [0, 1].

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()
        >>> mean = pg.rank_fidelity(files.rates).rank_fidelity.mean
        >>> mean["mmrv"], round(mean["pearson"], 3)
        (0.0, 0.99)
    """
    from perception_gap.evaluation.jobs import rank_fidelity_job

    return _written(rank_fidelity_job(path, n_boot=n_boot, min_pearson=min_pearson), out, "evaluation")


def latency(path: PathLike, fps: float, *, stages: list[str] | None = None, unit: str = "s",
            max_p95_ms: float | None = None, out: PathLike | None = None) -> Results:
    """Per-stage and end-to-end latency of a per-tick timestamp log against the control tick.

    Args:
        path: one row per tick, one timestamp column per stage in pipeline order (CSV, JSONL or Parquet).
        fps: control frequency in Hz (the tick is 1000 / fps ms).
        stages: the stage columns in pipeline order; None: every column but tick counters.
        unit: the timestamps' unit: `s`, `ms`, `us` or `ns` (ISO date-times count in seconds).
        max_p95_ms: gate: fails when the end-to-end p95 exceeds it.
        out: when given, write `results.json` and `report.html` into this folder.

    Returns:
        `Results` with `latency` (`stages`, `end_to_end` p50/p95/p99 in ms, `overrun_fraction`,
        `staleness_ticks`, `gates`, `passed`), `findings`, `config`, `version`.

    Raises:
        InputError: a missing or unreadable file, fewer than two stages, a timestamp that is not one.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()
        >>> lat = pg.latency(files.ticks, fps=20).latency
        >>> lat.stage_order, lat.end_to_end["p95"]
        (['capture', 'inferred', 'actuated'], 34.0)
    """
    from perception_gap.evaluation.jobs import latency_job

    return _written(latency_job(path, fps, stages=stages, unit=unit, max_p95_ms=max_p95_ms), out, "evaluation")


def policy_check(catalog: Catalog, sim: str, real: str, policy: str, *, preprocess: str | None = None,
                 batch_size: int = 32, max_rel_diff: float | None = None,
                 out: PathLike | None = None) -> Results:
    """Push the paired frames of sets `sim` and `real` (any source the catalog indexes) through a frozen policy.

    Args:
        catalog: an open catalog holding both sets.
        sim: the sim set's name.
        real: the real set's name.
        policy: a TorchScript file, a `torch.export` `.pt2` program, or `module:function`, called as
            policy(images float32 (N, 3, H, W) in [0, 1], proprio float32 (N, D)) -> (N, A) actions.
        preprocess: optional `module:function` called on each batch as fn(images, proprio).
        batch_size: frames per policy call.
        max_rel_diff: gate: fails when a dimension's |real - sim| / sim std exceeds it.
        out: when given, write `results.json` and `report.html` into this folder.

    Returns:
        `Results` with `policy_check` (`per_dim`, `n_pairs`, `skipped`, `gate`), `findings`, `config`,
        `version`.

    Raises:
        InputError: unknown sets, fewer than 2 pairs, a policy that cannot be loaded or fails.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog(), read_only=True) as cat:
        ...     res = pg.policy_check(cat, "sim", "real", "perception_gap.examples:example_policy")
        >>> pc = res.policy_check
        >>> pc.n_pairs, len(pc.per_dim)
        (8, 3)
    """
    from perception_gap.workflows.policy_check import policy_check_job

    res = policy_check_job(catalog, sim, real, policy, preprocess=preprocess, batch_size=batch_size,
                           max_rel_diff=max_rel_diff)
    return _written(res, out, "check")


def replay(path: PathLike, *, max_translation_m: float | None = None, out: PathLike | None = None) -> Results:
    """Logged real vs open-loop sim end-effector trajectories: errors per step, divergence onset and cause.

    Args:
        path: CSV, JSONL or Parquet rows of `episode`, `step`, `domain` (sim|real), `x`, `y`, `z` (m),
            `qw`, `qx`, `qy`, `qz`, optional `contact`.
        max_translation_m: gate: fails when the mean translation error exceeds it (m).
        out: when given, write `results.json` and `report.html` into this folder.

    Returns:
        `Results` with `replay` (`translation_error`, `rotation_error_deg`, `divergence_step`, `episodes`,
        `gate`), `findings`, `config`, `version`.

    Raises:
        InputError: a missing or unreadable file, a missing column, a bad row (naming it).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()
        >>> res = pg.replay(files.poses, max_translation_m=0.005)
        >>> round(res.replay.translation_error["mean"], 4), res.replay.gate.passed
        (0.008, False)
        >>> [f.code for f in res.findings]
        ['tracking_offset']
    """
    from perception_gap.workflows.checks import replay_job

    return _written(replay_job(path, max_translation_m=max_translation_m), out, "check")


def reprojection(path: PathLike, *, initial_states: PathLike | None = None, max_mean_px: float | None = None,
                 out: PathLike | None = None) -> Results:
    """Project a workspace grid through the sim and the real camera and measure where they disagree.

    Args:
        path: JSON `{"sim": CAM, "real": CAM, "grid": {"min", "max", "step"}, "points": [...]}`; a camera
            is `{"width", "height", "K", "dist", "T_base_cam"}` (OpenCV pinhole, pose in the robot base).
        initial_states: optional table of training initial states (`x`, `y`, `z` in m, optional `success`).
        max_mean_px: gate: fails when the mean error exceeds it (px).
        out: when given, write `results.json` and `report.html` into this folder.

    Returns:
        `Results` with `reprojection` (`mean`, `median`, `max` px, `camera_fit`, `coverage`, `gate`),
        `findings`, `config`, `version`.

    Raises:
        InputError: a missing or unreadable file, a bad camera, grid, point or initial state.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()
        >>> rep = pg.reprojection(files.cameras).reprojection
        >>> round(rep.mean, 3), rep.camera_fit["named"]
        (1.5, ['intrinsics'])
    """
    from perception_gap.workflows.checks import reprojection_job

    return _written(reprojection_job(path, initial_states=initial_states, max_mean_px=max_mean_px), out, "check")
