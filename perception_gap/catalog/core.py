"""The DuckDB catalog: the only module that imports duckdb.

One file holds frame sets, frames, cached per-content statistics, annotations, embeddings,
runs and results. Everything computed per frame is keyed by content hash, so a renamed or
re-indexed file is never recomputed. All writes are bulk (Arrow tables), one transaction per
batch, so an interrupted run keeps every finished batch and the rerun does the rest.
"""

from __future__ import annotations

import functools
import logging
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb

from perception_gap.catalog.annotations import AnnotationsMixin
from perception_gap.catalog.embeddings import EmbeddingsMixin
from perception_gap.catalog.frames import FramesMixin
from perception_gap.catalog.locking import WriterLock
from perception_gap.catalog.runs import RunsMixin
from perception_gap.catalog.schema import DEFAULT_DB, SCHEMA, SCHEMA_VERSION, STATS_COLUMNS
from perception_gap.catalog.stats_cache import StatsCacheMixin
from perception_gap.errors import CatalogBusy, CatalogError, InputError

# the package's name, not this module's: log lines keep reading `perception_gap.catalog`
log = logging.getLogger(__package__)

CONNECT_WAIT_S = 30.0  # how long one operation waits for another process's brief hold of the file


class Catalog(FramesMixin, StatsCacheMixin, AnnotationsMixin, EmbeddingsMixin, RunsMixin):
    """An open catalog file. Use as a context manager; every method is one transaction.

    This class holds the connection, session and schema migration; the operations come from one
    mixin per concern (frames, statistics cache, annotations, embeddings, runs).

    Args:
        path: DuckDB file (created when absent).
        read_only: open without taking the write lock.
        wait: seconds to wait for another writer (see `locking`); 0 raises `CatalogBusy` at once,
            naming it. Each operation also waits up to `CONNECT_WAIT_S` for a reader's brief hold.
    """

    def __init__(self, path: str | Path = DEFAULT_DB, *, read_only: bool = False, wait: float = 0.0) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._con: duckdb.DuckDBPyConnection | None = None
        self._depth = 0
        self._connect_wait = max(float(wait), CONNECT_WAIT_S)
        if read_only and not self.path.exists():
            raise InputError(f"Expected a catalog at `--db` {str(self.path)!r}, but the file does not exist; run `index` first.")
        self._lock = None if read_only else WriterLock(self.path, wait=wait).acquire()
        try:
            with self.session():
                if not read_only:
                    self._migrate()
                else:
                    self._check_version()
        except BaseException:
            self.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------
    # DuckDB admits no other process, not even a reader, while a file is open for writing: the
    # connection is opened for each public method (or `session`) and closed after it, so readers
    # and the next writer get in between batches. The writer lock keeps writers one at a time.
    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = self._connect()
        return self._con

    def _connect(self) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + self._connect_wait
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=self.read_only)
            except duckdb.IOException as e:
                msg = str(e).splitlines()[0]
                if "lock" not in msg.lower():
                    raise CatalogError(f"Cannot open catalog {str(self.path)!r}: {msg}") from None
                if time.monotonic() >= deadline:  # another process has it open (a reader, or a writer's batch)
                    raise CatalogBusy(f"Cannot open catalog {str(self.path)!r} within {self._connect_wait:g} s: {msg}") from None
                time.sleep(0.05)
            except duckdb.Error as e:
                raise CatalogError(f"Cannot open catalog {str(self.path)!r}: {str(e).splitlines()[0]}") from None

    @contextmanager
    def session(self) -> Iterator["Catalog"]:
        """Keep the file open across several calls (one open instead of one per call)."""
        self._depth += 1
        try:
            yield self
        finally:
            self._depth -= 1
            if self._depth == 0 and self._con is not None:
                con, self._con = self._con, None
                con.close()

    def close(self) -> None:
        if self._con is not None:
            con, self._con = self._con, None
            con.close()
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_version(self) -> None:
        try:
            row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except duckdb.CatalogException:
            raise CatalogError(f"{str(self.path)!r} is not a perception-gap catalog (no `meta` table).") from None
        if row is None or int(row[0]) != SCHEMA_VERSION:
            found = None if row is None else row[0]
            raise CatalogError(
                f"Catalog {str(self.path)!r} has schema version {found}, this perception-gap reads "
                f"version {SCHEMA_VERSION}; re-index into a new `--db`."
            )

    def _migrate(self) -> None:
        tables = {r[0] for r in self.con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        if tables and "meta" not in tables:
            raise CatalogError(f"{str(self.path)!r} is a DuckDB file but not a perception-gap catalog.")
        if "meta" in tables:
            self._check_version()
            if not {"embedding_skips", "annotated_frames"} <= tables:
                self.con.execute(SCHEMA)  # additive tables of the same schema version (all IF NOT EXISTS)
            self._add_histogram_columns()
            return
        self.con.execute("BEGIN")
        self.con.execute(SCHEMA)
        self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        self.con.execute("COMMIT")

    def _add_histogram_columns(self) -> None:
        """Add the statistics columns an older catalog lacks, and drop its statistics cache.

        Statistics are a pure function of content, so the cache is recomputed on the next
        `stats` or `run`; nothing else is touched. The columns come from the schema itself
        (`STATS_COLUMNS`), so a new statistic needs no migration code of its own.
        """
        cols = {(t, c) for t, c in self.con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_name IN ('frame_stats', 'depth_stats')").fetchall()}
        missing = [(t, c, ty) for t, c, ty in STATS_COLUMNS if (t, c) not in cols]
        if not missing:
            return
        self.con.execute("BEGIN")
        for table, col, typ in missing:
            self.con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {col} {typ}")
        self.con.execute("DELETE FROM frame_stats")
        self.con.execute("DELETE FROM depth_stats")
        self.con.execute("COMMIT")
        log.info("catalog: added statistics columns %s; cached statistics will be recomputed",
                 ", ".join(c for _t, c, _ty in missing))


def _in_session(method):
    @functools.wraps(method)
    def wrapper(self: Catalog, *args: Any, **kwargs: Any) -> Any:
        with self.session():
            return method(self, *args, **kwargs)
    return wrapper


# every public operation opens the file for its own duration (see `Catalog.con`); the operations
# are defined in the mixins, so the members are taken as the class resolves them
_members = {n: m for klass in reversed(Catalog.__mro__) for n, m in vars(klass).items()}
for _name, _member in _members.items():
    if callable(_member) and not _name.startswith("_") and _name not in ("session", "close"):
        setattr(Catalog, _name, _in_session(_member))
del _name, _member, _members
