"""Old path (shim): removed by the house move."""
from perception_gap.statistics.workers import (log, _MMAP_THRESHOLD, _TRIM_THRESHOLD, worker_init, rgb_stats_job, depth_stats_job)  # noqa: F401
