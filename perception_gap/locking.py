"""Moved to `perception_gap.catalog.locking`; this shim keeps the old import path working."""

from perception_gap.catalog.locking import POLL_S, WriterLock, lock_path  # noqa: F401
