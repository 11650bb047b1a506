"""The `replay` and `reprojection` jobs: an input file read and checked, the geometry measured, the results.

Each job returns the results.json structure its command writes (docs/contract.md): its section
with an optional `gate`, the `findings` most urgent first, `config` and `version`. The command
line and the Python API both call them; neither adds anything to the numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perception_gap.gates import threshold_gate
from perception_gap.version import __version__


def replay_job(path: str | Path, *, max_translation_m: float | None = None) -> dict[str, Any]:
    """Logged real vs open-loop sim end-effector trajectories, per step and per episode.

    Args:
        path: the pose log (CSV, JSONL or Parquet rows: episode, step, domain, x, y, z, qw, qx, qy,
            qz, optional contact).
        max_translation_m: gate on the mean translation error (m); None: no gate.

    Returns:
        `replay` (errors per step and episode, `divergence_step`, `gate`), `findings`, `config`, `version`.

    Raises:
        InputError: an unreadable file or a bad row (naming it).
    """
    from perception_gap.findings import order_findings
    from perception_gap.geometry.replay import replay_episode, replay_findings, summarize_replay
    from perception_gap.workflows.check_inputs import read_replay_log

    episodes, unmatched = read_replay_log(path)
    r = summarize_replay([replay_episode(e.episode, e.steps, e.p_sim, e.q_sim, e.p_real, e.q_real, e.contact)
                          for e in episodes], unmatched)
    section = r.to_dict()
    section["gate"] = threshold_gate("translation_mean_m", r.translation_mean, max_translation_m)
    return {"replay": section, "findings": [f.to_dict() for f in order_findings(replay_findings(r))],
            "config": {"file": str(path)}, "version": __version__}


def reprojection_job(path: str | Path, *, initial_states: str | Path | None = None,
                     max_mean_px: float | None = None) -> dict[str, Any]:
    """The sim vs real reprojection error over a workspace grid, and the training states on that grid.

    Args:
        path: the JSON input `{"sim": CAM, "real": CAM, "grid": {"min", "max", "step"}, "points": [...]}`.
        initial_states: optional table of training initial states (x, y, z in m, optional success).
        max_mean_px: gate on the mean reprojection error (px); None: no gate.

    Returns:
        `reprojection` (error surface, camera fit, `coverage` with states, `gate`), `findings`,
        `config`, `version`.

    Raises:
        InputError: an unreadable file, a bad camera, grid, point or state.
    """
    from perception_gap.findings import order_findings
    from perception_gap.geometry.coverage import coverage_findings, coverage_on_grid
    from perception_gap.geometry.reprojection import reprojection_error, reprojection_findings
    from perception_gap.workflows.check_inputs import read_cameras, read_initial_states

    spec = read_cameras(path)
    states = read_initial_states(initial_states) if initial_states is not None else None
    r = reprojection_error(spec.sim, spec.real, spec.points, known_xyz=spec.known_xyz, known_px=spec.known_px)
    section = r.to_dict()
    grid = spec.grid
    section["grid"].update(min=grid["min"], max=grid["max"], step=grid["step"])
    section["gate"] = threshold_gate("mean_px", section["mean"], max_mean_px)
    found = reprojection_findings(r)
    if states is not None:
        cov = coverage_on_grid(spec.points, float(grid["step"]), r.error_px, states[0], states[1], r.mean)
        section["coverage"] = cov.to_dict()
        found = coverage_findings(found, cov)
    return {"reprojection": section, "findings": [f.to_dict() for f in order_findings(found)],
            "config": {"file": str(path), "initial_states": None if initial_states is None else str(initial_states)},
            "version": __version__}
