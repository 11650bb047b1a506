"""Old path of the plumbing diagnoses, now `perception_gap.diagnoses` (shim; removed by the lead)."""

from perception_gap.diagnoses.checks import CHECKS, diagnose  # noqa: F401
from perception_gap.diagnoses.colour import BRIGHTNESS_STOPS, chroma_log2, exposure_stops, swap_costs  # noqa: F401
from perception_gap.diagnoses.common import srgb_to_linear  # noqa: F401
from perception_gap.diagnoses.depth import name_depth_ratio, nearest_depth_unit  # noqa: F401
from perception_gap.diagnoses.encoding import HALF, IMAGENET, NORMALIZATIONS, OPENAI_CLIP  # noqa: F401
from perception_gap.diagnoses.encoding import ChannelMoments, Encoding, EncodingInference  # noqa: F401
from perception_gap.diagnoses.encoding import infer_encodings, moment_distance  # noqa: F401
from perception_gap.diagnoses.joints import DEG_PER_RAD, joint_scale_ratios  # noqa: F401
from perception_gap.diagnoses.sharpness import HFFeatures, hf_differences, noise_equivalent_levels  # noqa: F401
