"""Diagnoses: what the raw statistics and the embedding comparison name as the sim/real gap.

The plumbing diagnoses run first (`diagnose`, registry `CHECKS` in `checks`), one module per
family: `geometry` (resolution), `values` (value range, normalization, over the value-encoding
inference in `encoding`), `colour` (channel swap, brightness, white balance), `depth` (scale,
dropout), `texture` (sensor noise, compression), `sharpness` (resize filter, optical sharpness)
and `joints` (deg vs rad); `common`, `context` and `highfreq` (the shared high-frequency
comparison) hold what the families share. `perception` turns the encoder comparison into findings
once the plumbing is settled.
"""

from perception_gap.diagnoses.checks import CHECKS, diagnose
from perception_gap.diagnoses.colour import chroma_log2, exposure_stops, swap_costs
from perception_gap.diagnoses.common import srgb_to_linear
from perception_gap.diagnoses.depth import name_depth_ratio, nearest_depth_unit
from perception_gap.diagnoses.encoding import (
    HALF,
    IMAGENET,
    NORMALIZATIONS,
    OPENAI_CLIP,
    ChannelMoments,
    Encoding,
    EncodingInference,
    infer_encodings,
    moment_distance,
)
from perception_gap.diagnoses.highfreq import HighFreq, analyse
from perception_gap.diagnoses.joints import joint_scale_ratios
from perception_gap.diagnoses.perception import insufficient_findings, perception_findings

__all__ = [
    "CHECKS", "ChannelMoments", "Encoding", "EncodingInference", "HALF", "HighFreq", "IMAGENET",
    "NORMALIZATIONS", "OPENAI_CLIP", "analyse", "chroma_log2", "diagnose", "exposure_stops",
    "infer_encodings", "insufficient_findings", "joint_scale_ratios", "moment_distance",
    "name_depth_ratio", "nearest_depth_unit", "perception_findings",
    "srgb_to_linear", "swap_costs",
]
