"""Error types. The CLI turns any `PerceptionGapError` into one line on stderr and exit code 2."""


class PerceptionGapError(Exception):
    """Base class of every error the engine raises on purpose."""


class InputError(PerceptionGapError):
    """Bad user input: a missing file, a malformed manifest, an unusable set."""


class CatalogError(PerceptionGapError):
    """The catalog cannot be opened or is of an incompatible schema version."""


class InsufficientData(PerceptionGapError):
    """Too few frames, pairs or episodes for a statistic to mean anything."""


class FrameError(PerceptionGapError):
    """One frame cannot be read; ingest records it as skipped with this message as the reason."""


class CatalogBusy(CatalogError):
    """Another process is writing the catalog (the message names it)."""


class OutputError(PerceptionGapError):
    """An output file (results.json, report.html, a `--json` file) cannot be written where asked."""


class EngineError(PerceptionGapError):
    """The execution engine failed (a Ray task raised, or its workers or cluster were lost)."""
