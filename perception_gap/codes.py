"""Finding codes: the stable machine names of every finding results.json can hold (docs/contract.md).

`Code` is a `str` enum whose values are the codes as written to results.json, so a member compares,
hashes, formats and serializes as its string: `Code.CHANNEL_SWAP == "channel_swap"`, a dict keyed by
members is found by strings and the JSON does not change. Drift's per-gate codes
(`drift_<gate>`) are built from the gate's name and are not listed.
"""

from __future__ import annotations

from enum import Enum


class Code(str, Enum):
    """Every finding code, grouped by where it is raised."""

    # plumbing diagnoses (perception_gap.diagnoses.checks), in run order
    RESOLUTION = "resolution"
    NON_FINITE = "non_finite"
    VALUE_RANGE = "value_range"
    NORMALIZATION = "normalization"
    FRAME_FORMAT = "frame_format"
    CHANNEL_SWAP = "channel_swap"
    ORIENTATION = "orientation"
    FIELD_OF_VIEW = "field_of_view"
    PAIR_SYNC = "pair_sync"
    TONE_CURVE = "tone_curve"
    DEPTH_SCALE = "depth_scale"
    DEPTH_INVALID = "depth_invalid"
    DEPTH_REGISTRATION = "depth_registration"
    DEPTH_DROPOUT = "depth_dropout"
    VIGNETTING = "vignetting"
    BRIGHTNESS = "brightness"
    WHITE_BALANCE = "white_balance"
    COMPRESSION = "compression"
    SENSOR_NOISE = "sensor_noise"
    MOTION_BLUR = "motion_blur"
    RESIZE_FILTER = "resize_filter"
    SHARPNESS = "sharpness"
    JOINT_UNITS = "joint_units"
    # raised after the registry by the diagnoses (control vectors, what no check explains, bookkeeping)
    CONTROL_DIMS = "control_dims"
    CONTROL_SCALE = "control_scale"
    CONTROL_SIGN = "control_sign"
    UNEXPLAINED_GAP = "unexplained_gap"
    MOVING_CAMERA = "moving_camera"
    INSUFFICIENT_DATA = "insufficient_data"
    # perception: the encoder comparison, the camera model, detection, the sets' notes
    APPEARANCE_GAP = "appearance_gap"
    CAMERA_MODEL = "camera_model"
    ENCODER_CHOICE = "encoder_choice"
    PERCEPTION_AFTER_PLUMBING = "perception_after_plumbing"
    CLIP_COSINE = "clip_cosine"
    DETECTOR_GAP = "detector_gap"
    SELF_INFLICTED_GAP = "self_inflicted_gap"
    SET_ROLES = "set_roles"
    REPEATED_STEPS = "repeated_steps"
    # screen
    SCREEN_CLOSER = "screen_closer"
    SCREEN_WORSE = "screen_worse"
    SCREEN_NOT_SIGNIFICANT = "screen_not_significant"
    SCREEN_VIEWS_DISAGREE = "screen_views_disagree"
    # evaluation commands
    TOO_FEW_ROLLOUTS = "too_few_rollouts"
    FAILURE_MODES_DIFFER = "failure_modes_differ"
    SIM_BASELINE = "sim_baseline"
    RANK_FIDELITY = "rank_fidelity"
    LATENCY_BUDGET = "latency_budget"
    LATENCY_UNIT = "latency_unit"
    # geometry and policy checks (after the gap hunt)
    POLICY_OBS_MISMATCH = "policy_obs_mismatch"
    ACTION_COLLAPSE = "action_collapse"
    IGNORES_INPUT = "ignores_input"
    EXTRINSICS = "extrinsics"
    THIN_COVERAGE = "thin_coverage"
    CONTACT_DIVERGENCE = "contact_divergence"
    TRACKING_OFFSET = "tracking_offset"

    # a member reads as its value wherever a string is expected (f-strings, str(), logs), as in results.json
    __str__ = str.__str__
    __format__ = str.__format__
