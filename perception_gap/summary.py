"""Old path (shim): removed by the house move."""
from perception_gap.statistics.summary import (_f, _med, _vector_ranges, _mean_hist, _mean_channel_hist, SetSummary, summarize_set)  # noqa: F401
