"""The results.json sections of `screen`, `drift` and the evaluation and geometry checks, typed as in
`schema.sections` (same conventions: declared keys typed, others kept in `extra`, None where a number
could not be written).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from perception_gap.schema.base import FROZEN as _FROZEN
from perception_gap.schema.base import Section, optional
from perception_gap.schema.sections import GateEntry, Interval


@dataclasses.dataclass(**_FROZEN)
class ScreenRank(Section):
    """One sim set of `screen.ranking`: its distance to real and the interval."""

    set: str
    distance: float | None
    ci: Interval | None
    rank: int | None = optional()
    per_view: dict[str, Any] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Screen(Section):
    """`screen`: the sim renderings ranked, closest to real first, and the one that is closest."""

    ranking: list[ScreenRank]
    closest: str | None
    significant: bool | None = optional()
    pairwise: list[dict[str, Any]] | None = optional()
    views: list[Any] | None = optional()
    gate: GateEntry | None = optional()
    n_pairs: int | None = optional()
    resampling_units: dict[str, int] | None = optional()
    baseline: str | None = optional()
    worse_than_baseline: list[str] | None = optional()
    passed: bool | None = optional()
    ci_level: float | None = optional()
    n_scenes: int | None = optional()
    skipped_views: dict[str, Any] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Drift(Section):
    """`drift`: the gates of the current set against the baseline, and whether all passed."""

    baseline: str
    current: str
    gates: list[GateEntry]
    passed: bool
    baseline_sample: dict[str, Any] | None = optional()
    history: list[dict[str, Any]] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class RolloutGroup(Section):
    """One policy x task x domain of `rollouts.groups`: success rate and its interval."""

    policy: str
    task: str
    domain: str
    n: int
    successes: int
    rate: float | None
    ci_low: float | None
    ci_high: float | None


@dataclasses.dataclass(**_FROZEN)
class Rollouts(Section):
    """`rollouts`: success rates per group, sim-vs-real comparisons, the gates."""

    groups: list[RolloutGroup]
    comparisons: list[dict[str, Any]]
    gates: list[GateEntry]
    passed: bool
    confidence: float | None = optional()
    ci_method: str | None = optional()
    skipped: list[dict[str, Any]] | None = optional()
    failure_modes: dict[str, dict[str, Any]] | None = optional()
    episode_lengths: dict[str, dict[str, Any]] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class RankFidelity(Section):
    """`rank_fidelity`: MMRV and Pearson between sim and real success across policies, per task and mean."""

    tasks: dict[str, dict[str, Any]]
    mean: dict[str, float | None]
    gates: list[GateEntry]
    passed: bool
    pearson_undefined: list[Any] | None = optional()
    skipped: list[dict[str, Any]] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Latency(Section):
    """`latency`: per-stage and end-to-end percentiles (ms) against the control tick."""

    stages: dict[str, dict[str, Any]]
    end_to_end: dict[str, Any]
    tick_ms: float | None
    overrun_fraction: float | None
    gates: list[GateEntry]
    passed: bool
    n_ticks: int | None = optional()
    stage_order: list[str] | None = optional()
    staleness_ticks: dict[str, Any] | None = optional()
    jitter_ms: float | None = optional()
    e2e_jitter_ms: float | None = optional()
    skipped: list[dict[str, Any]] | None = optional()
    end_to_end_sample: list[float | None] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class PolicyCheck(Section):
    """`policy_check`: matched observations through a frozen policy, actions compared per dimension."""

    per_dim: list[dict[str, Any]]
    n_pairs: int
    gate: GateEntry | None = optional()
    skipped: list[Any] | None = optional()
    policy: str | None = optional()


@dataclasses.dataclass(**_FROZEN)
class ReplayEpisode(Section):
    """One episode of `replay.episodes`: its errors per step, their means, divergence onset and cause."""

    episode: Any = optional()
    steps: list[Any] | None = optional()
    translation_error: list[float | None] | None = optional()
    rotation_error_deg: list[float | None] | None = optional()
    translation_mean: float | None = optional()
    rotation_mean_deg: float | None = optional()
    divergence_step: int | None = optional()
    first_contact_step: int | None = optional()
    cause: str | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Replay(Section):
    """`replay`: logged real vs open-loop sim end-effector trajectories, errors per step."""

    translation_error: dict[str, Any]
    rotation_error_deg: dict[str, Any]
    divergence_step: int | None
    gate: GateEntry | None = optional()
    steps: list[Any] | None = optional()
    n_unmatched: int | None = optional()
    episodes: list[ReplayEpisode] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class ReprojectionGrid(Section):
    """`reprojection.grid`: the workspace grid's points (m, robot base frame) and the error at each (px)."""

    points: list[list[float]] | None = optional()
    error_px: list[float | None] | None = optional()
    min: list[float] | None = optional()
    max: list[float] | None = optional()
    step: float | None = optional()


@dataclasses.dataclass(**_FROZEN)
class KnownPoints(Section):
    """`reprojection.points`: the known 3D points with their real pixels, and each camera model's RMS error."""

    n: int | None = optional()
    real_rms_px: float | None = optional()
    sim_rms_px: float | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Reprojection(Section):
    """`reprojection`: the sim vs real reprojection error over a workspace grid (px)."""

    mean: float | None
    max: float | None
    slope_px_per_m: float | None
    grid: ReprojectionGrid
    camera_fit: dict[str, Any] | None = optional()
    coverage: dict[str, Any] | None = optional()
    points: KnownPoints | None = optional()
    gate: GateEntry | None = optional()
    median: float | None = optional()
    structured: bool | None = optional()
    n_points: int | None = optional()
    n_valid: int | None = optional()
    n_behind: int | None = optional()
    n_outside: int | None = optional()
    centre: list[float] | None = optional()
    intercept_px: float | None = optional()
    growth_px: float | None = optional()
