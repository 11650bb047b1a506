"""Gates: a measured value held against a threshold, with one rule for a value that is missing.

Every command's gate is a `Gate` built here: drift's (`workflows.drift_gates`), the evaluation
commands' (`rollouts --max-drop`, `rank-fidelity --min-pearson`, `latency --max-p95-ms`) and the
geometry and policy checks' (`--max-...`). A gate ends in one of four statuses:

- `passed` / `failed`: the value was computed and the gate's rule decided it. The plain rule is
  the value against the threshold in the gate's `direction` (`max`: passes at most the
  threshold; `min`: passes at least it); drift's interval gates decide on their bootstrap
  interval instead and say so in `rule`.
- `not computed`: the gate applies, but its value is missing or not finite (too few frames,
  no embeddings on one side, AP undefined without ground truth, a log with nothing to
  compare). Nothing measured is nothing shown to be within the threshold, so the gate does
  not pass: `passed` is False, the verdict of the run fails (exit code 1) and `reason` says
  what was missing. A gate over several parts (policy-check's action dimensions, rank-fidelity's
  tasks) covers every part it names: one part that cannot be measured leaves the whole gate
  `not computed`, never a value taken over the others.
- `skipped`: the gate does not apply to these inputs at all (drift's depth gate when neither
  set has depth maps). It has no value, is listed with its `reason`, and does not hold the
  verdict back (`passed` is True).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

PASSED, FAILED, NOT_COMPUTED, SKIPPED = "passed", "failed", "not computed", "skipped"
DIRECTIONS = ("max", "min")


@dataclass(frozen=True)
class Gate:
    """One gate's outcome (`gates[]` / `gate` in results.json).

    Attributes:
        name: `max_drop`, `channel_shift`, `embedding:efficientnet-lite0`, ...
        value: the measured value, in the gate's own units; None when not computed or skipped.
        threshold: the limit it is held against, in the same units.
        direction: `max` (higher is worse: passes at most the threshold) or `min` (passes at
            least the threshold).
        passed: False when the gate failed or was not computed; True when it passed or was skipped.
        status: `passed`, `failed`, `not computed` or `skipped` (see the module docstring).
        rule: the deciding rule in words (`passes when value <= 0.25`).
        ci: the value's interval (`low`, `high`, `level`) where the rule reads one.
        detail: the numbers behind the value.
        reason: why it was not computed or skipped.
        description: what the gate measures, for reports.
    """

    name: str
    value: float | None
    threshold: float
    direction: str
    passed: bool
    status: str
    rule: str
    ci: dict[str, Any] | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "threshold": self.threshold, "direction": self.direction,
                "passed": self.passed, "status": self.status, "rule": self.rule, "ci": self.ci,
                "detail": self.detail, "reason": self.reason, "description": self.description}


def plain_rule(direction: str, threshold: float) -> str:
    """`passes when value <= T` (`max`) or `passes when value >= T` (`min`)."""
    return f"passes when value {'<=' if direction == 'max' else '>='} {threshold:g}"


def computed(value: Any) -> bool:
    """Whether `value` is a finite number a gate can decide on (numpy scalars included)."""
    if value is None or isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def make_gate(name: str, value: Any, threshold: float, *, direction: str = "max", failed: bool | None = None,
              rule: str | None = None, ci: dict[str, Any] | None = None, detail: dict[str, Any] | None = None,
              reason: str | None = None, description: str = "") -> Gate:
    """A gate on `value`: `not computed` (not passed) when the value is missing or not finite,
    else decided by `failed` when the caller's rule gives it, else by the threshold in `direction`.

    Args:
        name: the gate's name.
        value: the measured value; None or a non-finite number means not computed.
        threshold: the limit.
        direction: `max` or `min` (see `Gate`).
        failed: the outcome of a rule other than the plain comparison (a drift interval); None
            compares `value` with `threshold`.
        rule: that rule in words; None writes the plain rule.
        ci: as in `Gate`.
        detail: as in `Gate`.
        description: as in `Gate`.
        reason: why the value is missing (used when it is).

    Raises:
        ValueError: an unknown direction.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"Expected `direction` in {DIRECTIONS}, got {direction!r}.")
    rule = rule or plain_rule(direction, threshold)
    if not computed(value):
        return not_computed(name, threshold, reason or f"the value is {'missing' if value is None else value}",
                            direction=direction, rule=rule, detail=detail, description=description)
    v = float(value)
    if failed is None:
        failed = v > threshold if direction == "max" else v < threshold
    return Gate(name=name, value=v, threshold=threshold, direction=direction, passed=not failed,
                status=FAILED if failed else PASSED, rule=rule, ci=ci, detail=detail or {}, description=description)


def not_computed(name: str, threshold: float, reason: str, *, direction: str = "max", rule: str | None = None,
                 detail: dict[str, Any] | None = None, description: str = "") -> Gate:
    """A gate that applies but whose value could not be measured: it does not pass."""
    return Gate(name=name, value=None, threshold=threshold, direction=direction, passed=False, status=NOT_COMPUTED,
                rule=rule or plain_rule(direction, threshold), detail=detail or {}, reason=reason,
                description=description)


def skipped(name: str, threshold: float, reason: str, *, direction: str = "max", rule: str | None = None,
            description: str = "") -> Gate:
    """A gate that does not apply to these inputs (nothing of its kind on either side)."""
    return Gate(name=name, value=None, threshold=threshold, direction=direction, passed=True, status=SKIPPED,
                rule=rule or plain_rule(direction, threshold), reason=reason, description=description)


def threshold_gate(name: str, value: Any, threshold: float | None, *, direction: str = "max",
                   reason: str | None = None) -> dict[str, Any] | None:
    """A command's `--max-...` / `--min-...` gate as its results.json entry; None when no threshold
    was asked for."""
    if threshold is None:
        return None
    return make_gate(name, value, threshold, direction=direction, reason=reason).to_dict()
