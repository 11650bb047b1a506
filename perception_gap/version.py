"""The engine's version, recorded with every run (imported by the workflows, so it sits below them)."""

__version__ = "0.1.0"
