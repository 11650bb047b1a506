"""One severity order: findings, the evaluation commands' merge and the report read it from one place."""

from __future__ import annotations

from perception_gap.findings import Finding, order_findings
from perception_gap.wording import SEVERITIES, severity_rank


def _f(code: str, severity: str) -> Finding:
    return Finding(code, severity, code, {}, "act", 1.0)


def test_the_order_is_bug_gap_info_and_an_unknown_word_sorts_last():
    assert SEVERITIES == ("bug", "gap", "info")
    assert sorted(["info", "warning", "bug", "gap"], key=severity_rank) == ["bug", "gap", "info", "warning"]
    assert [f.severity for f in order_findings([_f("a", "info"), _f("b", "gap"), _f("c", "bug")])] == \
        ["bug", "gap", "info"]
