"""Old path of `perception_gap.annotations` (to move into `perception_gap.ingest`); a shim removed by the lead."""

from perception_gap.annotations import GT, MASK_EXTS, AnnotationReport, attach_coco, attach_masks  # noqa: F401
from perception_gap.annotations import load_mask_categories, validate_source  # noqa: F401
