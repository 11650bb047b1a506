"""Old path of the perception findings, now `perception_gap.diagnoses.perception` (shim; removed by the lead)."""

from perception_gap.diagnoses.perception import insufficient_findings, perception_findings  # noqa: F401
