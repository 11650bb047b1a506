"""perception-gap: measure the gap between simulated and real camera frames, offline."""

__version__ = "0.1.0"
