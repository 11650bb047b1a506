"""What the diagnoses read: per-frame statistics joined with the frame's catalog metadata."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perception_gap.pairing import pair_by_key
from perception_gap.statistics.depth import DepthStats
from perception_gap.statistics.image import ImageStats


@dataclass(frozen=True)
class FrameRecord:
    """One usable frame of a set.

    Attributes:
        pair_key: matches the frame of the other domain showing the same scene/pose/state.
        episode: episode id, or None when unknown.
        step: the frame's step within its episode, or None when unknown.
        timestamp: capture time in seconds (ROS bags, LeRobot), or None when unknown.
        image: statistics of the RGB frame (None if only depth was usable).
        depth: statistics of the depth map, None when the frame has no depth.
        depth_units_per_m: declared depth unit (units per metre), None when undeclared.
        action: demonstrated action vector, shape (A,), or None.
        proprio: proprioception vector, shape (P,), or None.
        is_jpeg: the RGB file is JPEG-compressed.
    """

    pair_key: str
    episode: str | None = None
    step: int | None = None
    timestamp: float | None = None
    image: ImageStats | None = None
    depth: DepthStats | None = None
    depth_units_per_m: float | None = None
    action: tuple[float, ...] | None = None
    proprio: tuple[float, ...] | None = None
    is_jpeg: bool = False


@dataclass(frozen=True)
class SetRecords:
    """All usable frames of one frame set, in catalog order.

    Attributes:
        name: set name.
        domain: `sim` or `real`.
        frames: the set's usable frames.
    """

    name: str
    domain: str
    frames: tuple[FrameRecord, ...]


def paired_frames(sim: Sequence[FrameRecord], real: Sequence[FrameRecord]) -> list[tuple[FrameRecord, FrameRecord]]:
    """(sim frame, real frame) for every pair key present on both sides, in sim order; a repeated key
    pairs its first frame only and is logged (`perception_gap.pairing`)."""
    p = pair_by_key([f.pair_key for f in sim], [f.pair_key for f in real])
    p.log_duplicates("pairing frames")
    return [(sim[i], real[j]) for i, j in p.pairs]


def paired(sim: SetRecords, real: SetRecords) -> list[tuple[FrameRecord, FrameRecord]]:
    """(sim frame, real frame) for every pair key present in both sets, in sim order (`paired_frames`)."""
    return paired_frames(sim.frames, real.frames)
