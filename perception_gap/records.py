"""Old path (shim): removed by the house move."""
from perception_gap.statistics.records import (FrameRecord, SetRecords, paired)  # noqa: F401
