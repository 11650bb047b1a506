"""Findings: a named diagnosis with its evidence and the action it calls for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from perception_gap.wording import SEVERITIES, severity_rank


@dataclass(frozen=True)
class Finding:
    """One diagnosis.

    Attributes:
        code: stable machine name (`channel_swap`, `depth_scale`, ...; docs/contract.md).
        severity: `bug` (plumbing: fix it, never randomize around it), `gap` (appearance or
            sensor difference a simulator can model), or `info`.
        title: one human sentence naming what was found, with its key number.
        evidence: the numbers behind it (JSON-serializable scalars, lists or dicts).
        action: what to do about it.
        score: how strong the evidence is (larger is more certain/severe); orders findings of
            the same severity.
    """

    code: str
    severity: str
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    action: str = ""
    score: float = 0.0

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"Expected `severity` in {SEVERITIES}, got {self.severity!r}.")

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "title": self.title,
            "evidence": self.evidence,
            "action": self.action,
            "score": self.score,
        }


def order_findings(findings: list[Finding]) -> list[Finding]:
    """Most urgent first: bugs, then gaps, then info; within each, findings read only once a borderline
    one was set aside (`read_without`: they hold only if it does not) after the rest, borderline findings
    (stability under `diagnoses.verdicts.STABLE`) after the stable ones, a plumbing code's finding (one
    that could be a bug: its evidence has `bug_basis`) before appearance gaps, then stronger evidence first."""
    return sorted(findings, key=lambda f: (severity_rank(f.severity), bool(f.evidence.get("read_without")),
                                           bool(f.evidence.get("borderline")), "bug_basis" not in f.evidence,
                                           -f.score, f.code))
