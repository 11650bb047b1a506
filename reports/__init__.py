"""HTML rendering of perception-gap results (reads results only, never computes a statistic)."""
