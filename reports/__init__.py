"""HTML rendering of perception-gap results (reads results only, never computes a statistic)."""

from perception_gap.reports.html import render_report, write_report

__all__ = ["render_report", "write_report"]
