"""Error types of the encoder package.

`encoders` must not import `perception_gap` (imports run one way: cli -> perception_gap ->
encoders), so it has its own small hierarchy; the engine wraps `EncoderError` into its own.
"""

from __future__ import annotations


class EncoderError(Exception):
    """Base class of every error this package raises on purpose (unknown name, bad input...)."""


class WeightsUnavailableError(EncoderError):
    """The weights of an encoder are not available here (offline, not cached, not installed)."""


class UnsafeCheckpointError(EncoderError):
    """A checkpoint would run code when unpickled (not a plain weights file): refused."""


class ArchiveLimitError(EncoderError):
    """A file declares more data than it may unpack to (see `archives.declared_limit`): refused unloaded."""
