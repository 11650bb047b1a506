"""Old path of `perception_gap.ingest.frames` (compatibility shim, removed by the lead)."""

from perception_gap.ingest.frames import decode_depth, decode_rgb  # noqa: F401
