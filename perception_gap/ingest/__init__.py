"""Ingest: the sources of frames, listed, read and catalogued incrementally.

ingest/ owns the sources: folders (`folders`), manifests (`manifests`, read by `tables`, the one
reader of CSV, JSONL and Parquet tables that the evaluation and geometry checks use too), and the robot-data
readers (plain video `video`, LeRobot datasets `lerobot`, robomimic HDF5 `hdf5`, ROS 1/2 bags
`rosbag` with their image messages decoded by `rosmsg`), each a module that lists `FrameEntry`s and
hands them to `index_entries` (`entries`: content hashing, name validation, incremental cataloguing). It also owns reading frames from disk
(`frames`: header probes for the catalog, RGB and depth decoding for statistics; `containers`:
frames inside videos, Parquet, HDF5 and bags, decoded in one pass per container, with the
threads `threads` gives each decoder) and, moved in later, the ingest of annotation boxes
(ground truth and detector output).
"""

from perception_gap.ingest.entries import (
    BATCH,
    DOMAINS,
    FrameEntry,
    IndexReport,
    Progress,
    content_hash,
    index_entries,
    is_utf8,
    utf8_safe,
    validate_domain,
    validate_set_name,
)
from perception_gap.ingest.folders import index_folder, scan_folder
from perception_gap.ingest.frames import (
    ARRAY_EXTS,
    DEPTH_EXTS,
    EXR_EXTS,
    IMAGE_EXTS,
    MAX_PIXELS,
    RGB_EXTS,
    Header,
    array_layout,
    decode_depth,
    decode_rgb,
    probe,
    probe_exr,
    probe_image,
    probe_npy,
    read_bytes,
)
from perception_gap.ingest.manifests import MANIFEST_OPTIONAL, MANIFEST_REQUIRED, index_manifest, read_manifest

__all__ = [
    # sources
    "index_folder", "scan_folder", "index_manifest", "read_manifest", "MANIFEST_REQUIRED", "MANIFEST_OPTIONAL",
    # cataloguing
    "FrameEntry", "IndexReport", "Progress", "index_entries", "content_hash", "validate_set_name",
    "validate_domain", "is_utf8", "utf8_safe", "DOMAINS", "BATCH",
    # frame files
    "Header", "probe", "probe_image", "probe_npy", "probe_exr", "read_bytes", "decode_rgb", "decode_depth",
    "array_layout", "IMAGE_EXTS", "ARRAY_EXTS", "EXR_EXTS", "RGB_EXTS", "DEPTH_EXTS", "MAX_PIXELS",
]
