"""Old path (shim): removed by the house move."""
from perception_gap.statistics.sampling import (SAMPLE_PIXELS, sample_stride, sample_grid, floats)  # noqa: F401
from perception_gap.statistics.depth import (DEPTH_PERCENTILES, DEPTH_HIST_LOG10, DEPTH_HIST_BINS_PER_DECADE, DEPTH_HIST_BINS, DepthStats, DEPTH_UNITS, parse_depth_unit, infer_depth_unit, depth_stats)  # noqa: F401
from perception_gap.statistics.image import (LUM_PERCENTILES, HF_CROP, HIST_BINS, _LUMA, _LUMA_FIXED, _srgb_to_linear, _SRGB_LUT_8, ImageStats, _centre_crop_box, _hf_features, _percentiles_from_hist, _V, _HIST_BASIS, _channel_moments, _coarse_hist_u8, _int_hist, image_stats_pil, nominal_max_of, _luma_float, _luma_u8, image_stats_array)  # noqa: F401
