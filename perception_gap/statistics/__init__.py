"""Raw statistics: what each frame looks like, before any model sees it.

This folder owns the per-frame numbers (pure functions on decoded pixels: `image` for RGB
frames, `depth` for depth maps and their units, `sampling` for the pixel grid that bounds their
cost), the worker-process jobs that decode and measure frames at decode speed (`workers`), and the
per-set view the diagnoses read (`records`, `summary`). It never opens the catalog (the stage
that does is `perception_gap.workflows.stats`) and never names a cause (that is
`perception_gap.diagnoses`).
"""

from perception_gap.statistics.depth import DepthStats, depth_stats, infer_depth_unit, parse_depth_unit
from perception_gap.statistics.image import ImageStats, image_stats_array, image_stats_pil
from perception_gap.statistics.records import FrameRecord, SetRecords, paired
from perception_gap.statistics.summary import SetSummary, summarize_set

__all__ = [
    "DepthStats", "FrameRecord", "ImageStats", "SetRecords", "SetSummary", "depth_stats",
    "image_stats_array", "image_stats_pil", "infer_depth_unit", "paired",
    "parse_depth_unit", "summarize_set",
]
