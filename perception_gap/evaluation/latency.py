"""Latency budget from per-tick timestamp logs: per-stage and end-to-end percentiles against the
control tick, overruns, staleness of the acted-on observation, jitter.

Input: one row per control tick, one column per logged stage timestamp, stages in pipeline
order (`capture`, `received`, `preprocessed`, `inferred`, `sent`, `actuated`, any subset).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from perception_gap.errors import InputError

UNITS_TO_MS = {"s": 1e3, "ms": 1.0, "us": 1e-3, "ns": 1e-6}
# Control rates accepted (Hz): a 1000 s tick to a 1 us one; outside, 1000 / fps is no control tick
# (and 1e-308 Hz makes it infinite).
FPS_RANGE = (1e-3, 1e6)
# The median interval between ticks and the declared tick may differ this many times before the
# declared unit (or --fps) is called into question: logging every other tick, or a loop running
# late, stays well within.
UNIT_MISMATCH_RATIO = 10.0
NOT_STAGES = ("tick", "index", "frame", "step", "episode", "seq")  # counters logged beside the stamps


def _pct(v: np.ndarray) -> dict[str, float]:
    p = np.percentile(v, [50, 95, 99])
    return {"p50": float(p[0]), "p95": float(p[1]), "p99": float(p[2]), "mean": float(v.mean())}


@dataclass(frozen=True)
class LatencyResult:
    """`to_dict()` is the `latency` section of results.json; every duration is in ms.

    Attributes:
        stages: stage -> percentiles of the interval from the previous stage (the first stage,
            the reference, has none and is left out).
        end_to_end: percentiles of last stage - first stage.
        tick_ms: the control period, 1000 / fps.
        overrun_fraction: share of ticks whose end-to-end latency exceeds the tick.
        staleness_ticks: whole ticks elapsed between capture and the last stage (p50, p95, max):
            how many ticks old the acted-on observation is.
        period: percentiles of the interval between consecutive ticks' first stamps.
        jitter_ms: standard deviation of that interval (how unevenly ticks start).
        e2e_jitter_ms: standard deviation of the end-to-end latency.
        dominant_stage: the stage with the largest p95 interval.
        n_ticks: ticks measured; `skipped`: ticks left out (a stage not logged), with reasons.
        stamp_unit: the unit the first stage's stamps were read in (`--unit`; `s` for date-times).
    """

    stage_order: tuple[str, ...]
    stages: dict[str, dict[str, float]]
    end_to_end: dict[str, float]
    tick_ms: float
    overrun_fraction: float
    staleness_ticks: dict[str, float]
    period: dict[str, float] | None
    jitter_ms: float | None
    e2e_jitter_ms: float
    dominant_stage: str
    n_ticks: int
    skipped: tuple[dict[str, Any], ...] = ()
    e2e_values: tuple[float, ...] = ()
    stamp_unit: str = "s"

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("stages", "end_to_end", "tick_ms", "overrun_fraction", "staleness_ticks",
                                           "period", "jitter_ms", "e2e_jitter_ms", "dominant_stage", "n_ticks")}
        d["stage_order"] = list(self.stage_order)
        d["unit"] = self.stamp_unit
        d["skipped"] = list(self.skipped)
        # the histogram's input: at most 2,000 values (evenly spaced in sorted order) keep the file small
        v = np.sort(np.asarray(self.e2e_values))
        d["end_to_end_sample"] = v[np.linspace(0, len(v) - 1, min(len(v), 2000)).astype(int)].tolist()
        return d


def stage_columns(columns: dict[str, list[Any]], stages: list[str] | None) -> list[str]:
    """The stage columns in pipeline order: `stages` as given, else every column but tick counters."""
    if stages:
        missing = [s for s in stages if s not in columns]
        if missing:
            raise InputError(f"Stage column(s) {', '.join(missing)} not in the log (has: {', '.join(columns)}).")
        if len(set(stages)) != len(stages):
            raise InputError(f"Expected `--stages` to name each stage once, got {','.join(stages)}.")
        if len(stages) < 2:  # a latency is the interval between two stamps
            raise InputError(f"Expected `--stages` to name at least two stage columns, got {','.join(stages)}.")
        return list(stages)
    found = [c for c in columns if c.lower() not in NOT_STAGES]
    if len(found) < 2:
        raise InputError(f"Expected at least two stage timestamp columns, got {found or 'none'} "
                         f"(columns: {', '.join(columns)}); name them with --stages.")
    return found


def _seconds_or_number(v: Any) -> float:
    """A cell as a number: None -> NaN; a date-time -> POSIX seconds."""
    if v is None:
        return math.nan
    return v.timestamp() if hasattr(v, "timestamp") else float(v)


def _dated(v: Any) -> Any:
    """A text cell holding an ISO 8601 date-time (CSV and JSONL cells are text) as a datetime; others as they are."""
    if isinstance(v, str):
        try:
            float(v)
        except ValueError:
            try:
                return datetime.fromisoformat(v.strip())
            except ValueError:
                return v
    return v


def _matrix(columns: dict[str, list[Any]], stages: list[str], unit: str) -> np.ndarray:
    """Stage timestamps in ms, shape (n_ticks, n_stages); date-time cells count in seconds whatever `unit`."""
    cols = []
    columns = {s: [_dated(v) for v in columns[s]] for s in stages}
    for s in stages:
        dated = any(hasattr(v, "timestamp") for v in columns[s])
        scale = 1e3 if dated else UNITS_TO_MS[unit]
        try:
            raw = np.array([_seconds_or_number(v) for v in columns[s]], dtype=float)
        except (TypeError, ValueError, OverflowError):
            bad = next(v for v in columns[s] if not _floatable(v))
            raise InputError(f"Stage `{s}` holds a value that is not a timestamp: {bad!r}.") from None
        bad_rows = np.flatnonzero(np.isinf(raw) | (np.abs(raw) > MAX_STAMP_MS / scale))
        if len(bad_rows):
            i = int(bad_rows[0])
            raise InputError(f"Row {i + 1}: expected stage `{s}` to be a finite timestamp within "
                             f"{MAX_STAMP_MS / scale:g} {'s' if dated else unit} of 0, got {columns[s][i]!r}.")
        cols.append(raw * scale)
    return np.stack(cols, axis=1)


# Timestamps beyond 1e15 ms (31,000 years) from the epoch are no clock reading; differences of
# such values would overflow to infinity.
MAX_STAMP_MS = 1e15


def _floatable(v: Any) -> bool:
    try:
        _seconds_or_number(v)
        return True
    except (TypeError, ValueError, OverflowError):
        return False


def analyze_latency(columns: dict[str, list[Any]], fps: float, *, stages: list[str] | None = None,
                    unit: str = "s") -> LatencyResult:
    """Latency of each logged stage and end to end against the control tick.

    Args:
        columns: the tick table (`perception_gap.ingest.tables.read_columns`).
        fps: control frequency in Hz; the tick is 1000 / fps ms.
        stages: stage columns in pipeline order (default: the columns as they appear).
        unit: unit of the timestamps: s, ms, us or ns.

    Raises:
        InputError: a named stage is absent, a timestamp is not a number, timestamps run
            backwards (within a tick, or the first stage from one tick to the next), no tick has
            every stage.
    """
    if not (isinstance(fps, (int, float)) and math.isfinite(fps) and FPS_RANGE[0] <= fps <= FPS_RANGE[1]):
        raise InputError(f"Expected `--fps` in [{FPS_RANGE[0]:g}, {FPS_RANGE[1]:g}] Hz, got {fps}.")
    if unit not in UNITS_TO_MS:
        raise InputError(f"Expected `--unit` in {tuple(UNITS_TO_MS)}, got {unit!r}.")
    names = stage_columns(columns, stages)
    t = _matrix(columns, names, unit)
    complete = np.isfinite(t).all(axis=1)
    skipped = []
    for i in np.flatnonzero(~complete)[:50]:
        gone = [names[j] for j in np.flatnonzero(~np.isfinite(t[i]))]
        skipped.append({"tick": int(i) + 1, "reason": f"stage(s) not logged: {', '.join(gone)}"})
    if (~complete).sum() > 50:
        skipped.append({"tick": None, "reason": f"{int((~complete).sum()) - 50} more incomplete ticks"})
    t = t[complete]
    rows = np.flatnonzero(complete) + 1
    if len(t) == 0:
        raise InputError(f"No tick has a timestamp for every stage ({', '.join(names)}).")
    steps = np.diff(t, axis=1)
    back = np.argwhere(steps < 0)
    if len(back):
        i, j = back[0]
        raise InputError(f"Row {rows[i]}: timestamps run backwards: `{names[j + 1]}` ({t[i, j + 1]:g} ms) before "
                         f"`{names[j]}` ({t[i, j]:g} ms); are the stages in pipeline order (--stages)?")
    period = np.diff(t[:, 0])
    if (period < 0).any():
        i = int(np.flatnonzero(period < 0)[0])
        raise InputError(f"Row {rows[i + 1]}: `{names[0]}` goes back in time from the tick before "
                         f"({t[i, 0]:g} -> {t[i + 1, 0]:g} ms); ticks must be in time order.")
    tick = 1000.0 / fps
    e2e = t[:, -1] - t[:, 0]
    per_stage = {names[j + 1]: _pct(steps[:, j]) for j in range(len(names) - 1)}
    stale = np.floor(e2e / tick)
    return LatencyResult(
        tuple(names), per_stage, _pct(e2e), tick, float((e2e > tick).mean()),
        {"p50": float(np.percentile(stale, 50)), "p95": float(np.percentile(stale, 95)), "max": float(stale.max())},
        _pct(period) if len(period) else None, float(period.std()) if len(period) > 1 else None,
        float(e2e.std()), max(per_stage, key=lambda s: per_stage[s]["p95"]), len(t), tuple(skipped),
        tuple(float(x) for x in e2e),
        "s" if any(hasattr(v, "timestamp") for v in columns[names[0]]) else unit)


def _unit_finding(res: LatencyResult) -> list:
    """`latency_unit` (a bug) when the median tick interval contradicts the declared tick tenfold."""
    from perception_gap.findings import Finding

    unit = res.stamp_unit
    if res.period is None or not res.period["p50"] > 0:
        return []
    ratio = res.period["p50"] / res.tick_ms
    if 1 / UNIT_MISMATCH_RATIO < ratio < UNIT_MISMATCH_RATIO:
        return []
    raw_period = res.period["p50"] / UNITS_TO_MS[unit]  # in the log's own numbers
    fits = min(UNITS_TO_MS, key=lambda u: abs(math.log(raw_period * UNITS_TO_MS[u] / res.tick_ms)))
    fps = 1000.0 / res.tick_ms
    return [Finding(
        "latency_unit", "bug",
        f"Ticks are {res.period['p50']:.4g} ms apart in the log read as `{unit}`, but {fps:g} fps means a "
        f"{res.tick_ms:.4g} ms tick ({ratio:.3g}x): every latency here is off by that factor",
        {"unit": unit, "fps": fps, "tick_ms": res.tick_ms, "median_period_ms": res.period["p50"],
         "period_over_tick": ratio, "unit_that_fits": fits},
        f"Declare the timestamps' unit (`--unit {fits}` fits {fps:g} fps) or correct `--fps`; if the log "
        "holds only every Nth tick, the ratio is N and the numbers stand.",
        score=abs(math.log10(ratio)))]


def latency_findings(res: LatencyResult) -> list:
    """`latency_unit` when the log's tick interval contradicts the declared unit and fps tenfold
    or more; `latency_budget` when end-to-end p95 exceeds the tick, naming the dominant stage."""
    from perception_gap.findings import Finding

    unit_findings = _unit_finding(res)
    p95 = res.end_to_end["p95"]
    if p95 <= res.tick_ms:
        return unit_findings
    dom = res.dominant_stage
    share = res.stages[dom]["p95"] / p95 if p95 > 0 else math.nan
    return unit_findings + [Finding(
        "latency_budget", "gap",
        f"End-to-end p95 latency {p95:.1f} ms exceeds the {res.tick_ms:.1f} ms control tick "
        f"({res.overrun_fraction:.0%} of ticks overrun); `{dom}` dominates (p95 {res.stages[dom]['p95']:.1f} ms)",
        {"end_to_end_p95_ms": p95, "tick_ms": res.tick_ms, "overrun_fraction": res.overrun_fraction,
         "dominant_stage": dom, "dominant_p95_ms": res.stages[dom]["p95"], "dominant_share_of_p95": share,
         "staleness_ticks": res.staleness_ticks},
        f"Shorten `{dom}` first, or lower the control rate; a policy acting on observations "
        f"{res.staleness_ticks['p95']:.0f} tick(s) old behaves differently on the robot than in sim, whatever "
        "the camera frames look like.", score=p95 / res.tick_ms)]
