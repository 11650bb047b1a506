"""The DuckDB catalog: the only module that imports duckdb.

One file holds frame sets, frames, cached per-content statistics, annotations, embeddings,
runs and results. Everything computed per frame is keyed by content hash, so a renamed or
re-indexed file is never recomputed. All writes are bulk (Arrow tables), one transaction per
batch, so an interrupted run keeps every finished batch and the rerun does the rest.
"""

from __future__ import annotations

import errno
import functools
import logging
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import duckdb

from perception_gap.catalog import host
from perception_gap.catalog.annotations import AnnotationsMixin
from perception_gap.catalog.baselines import BaselinesMixin
from perception_gap.catalog.embeddings import EmbeddingsMixin
from perception_gap.catalog.frames import FramesMixin
from perception_gap.catalog.locking import WriterLock, check_db_path
from perception_gap.catalog.runs import RunsMixin
from perception_gap.catalog.schema import (
    DEFAULT_DB,
    FRAME_MIGRATIONS,
    SCHEMA,
    SCHEMA_VERSION,
    STATS_COLUMNS,
    STATS_REVISION,
    TABLES,
)
from perception_gap.catalog.sets import SetsMixin
from perception_gap.catalog.shards import ShardsMixin
from perception_gap.catalog.stats_cache import StatsCacheMixin
from perception_gap.errors import CatalogBusy, CatalogError, InputError

# the package's name, not this module's: log lines keep reading `perception_gap.catalog`
log = logging.getLogger(__package__)

CONNECT_WAIT_S = 30.0  # how long one operation waits for another process's brief hold of the file
# no connection may load or download an extension: a SQLite file given as the catalog would
# otherwise make DuckDB fetch its sqlite_scanner from the network
_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
_DUCKDB_MAGIC = (8, b"DUCK")  # offset and bytes of the DuckDB file header
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class Catalog(FramesMixin, SetsMixin, StatsCacheMixin, AnnotationsMixin, EmbeddingsMixin, RunsMixin, BaselinesMixin,
              ShardsMixin):
    """An open catalog file. Use as a context manager; every method is one transaction.

    This class holds the connection, session and schema migration; the operations come from one
    mixin per concern (frames, sets, statistics cache, annotations, embeddings, runs).

    Args:
        path: DuckDB file (created when absent).
        read_only: open without taking the write lock.
        create: create the file when absent; False (commands that read an indexed catalog) raises
            InputError instead, before anything (not even the lock file) is written.
        wait: seconds to wait for another writer (see `locking`); 0 raises `CatalogBusy` at once,
            naming it. Each operation also waits up to `CONNECT_WAIT_S` for a reader's brief hold.
    """

    def __init__(self, path: str | Path = DEFAULT_DB, *, read_only: bool = False, wait: float = 0.0,
                 create: bool = True) -> None:
        if not str(path).strip():
            raise InputError("Expected `--db` to name a catalog file, got an empty path.")
        self.path = Path(path)
        self.read_only = read_only
        self._con: duckdb.DuckDBPyConnection | None = None
        self._key = ""  # the file's key in `host` while it is attached
        self._depth = 0
        self._connect_wait = max(float(wait), CONNECT_WAIT_S)
        check_db_path(self.path)  # before anything opens it or writes a lock file beside it
        if (read_only or not create) and not self.path.exists():
            raise InputError(f"Expected a catalog at `--db` {str(self.path)!r}, but the file does not exist; run `index` first.")
        _check_header(self.path)
        with catalog_faults(self.path):
            self._lock = None if read_only else WriterLock(self.path, wait=wait).acquire()
        try:
            with catalog_faults(self.path), self.session():
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
                con, self._key = host.attach(str(self.path), self.read_only, _CONFIG)
                return con
            except duckdb.IOException as e:
                msg = str(e).splitlines()[0]
                if "lock" not in msg.lower():
                    raise _as_catalog_error(self.path, e) or CatalogError(
                        f"Cannot open catalog {str(self.path)!r}: {msg}") from None
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
                host.release(con, self._key)

    def __del__(self) -> None:
        # a catalog dropped while its file is attached (its `con` read outside a session, and never
        # closed) lets the file go, as a connection of its own closed when collected
        con = getattr(self, "_con", None)
        if con is not None:
            self._con = None
            try:
                host.release(con, self._key)
            except Exception:  # noqa: BLE001 (collection, maybe at exit: nothing to report to)
                pass

    def close(self) -> None:
        try:
            if self._con is not None:
                con, self._con = self._con, None
                with catalog_faults(self.path):
                    host.release(con, self._key)
        finally:
            if self._lock is not None:
                self._lock.release()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN ... COMMIT; on failure roll back what can be and raise the failure itself.

        A failed COMMIT (a full disk) has already ended the transaction, so ROLLBACK then fails
        too ("no transaction is active"): that second error must not hide the first.
        """
        self.con.execute("BEGIN")
        try:
            yield
            self.con.execute("COMMIT")
        except BaseException:
            try:
                self.con.execute("ROLLBACK")
            except duckdb.Error:
                pass
            raise

    def __enter__(self) -> "Catalog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_version(self, *, upgradable: bool = False) -> int:
        """The file's schema version; raises unless it is this one (or, when `upgradable`, an older
        one that `_upgrade` knows how to bring forward)."""
        try:
            row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except duckdb.CatalogException:
            raise CatalogError(f"{str(self.path)!r} is not a perception-gap catalog (no `meta` table).") from None
        missing = sorted(set(TABLES) - _ADDITIVE_TABLES - self._tables())
        if missing:
            raise CatalogError(f"Catalog {str(self.path)!r} lacks table(s) {', '.join(missing)}: it is not a complete "
                               f"perception-gap catalog; re-index into a new `--db`.")
        try:
            found = None if row is None else int(row[0])
        except (TypeError, ValueError):  # a damaged version value: reported as it is
            found = None
        if found == SCHEMA_VERSION or (upgradable and found is not None and 1 <= found < SCHEMA_VERSION):
            return found
        if found is None and row is not None:
            found = row[0]
        elif found is not None and found < SCHEMA_VERSION:
            raise CatalogError(
                f"Catalog {str(self.path)!r} has schema version {found}, this perception-gap reads version "
                f"{SCHEMA_VERSION}; run any writing command on it once (e.g. `index`) to upgrade it in place.")
        raise CatalogError(
            f"Catalog {str(self.path)!r} has schema version {found}, this perception-gap reads "
            f"version {SCHEMA_VERSION}; re-index into a new `--db`."
        )

    def _upgrade(self, found: int) -> None:
        """Bring an older catalog forward in one transaction: add each later version's columns
        (existing rows keep their values; the new columns are NULL, as for plain files). New
        tables (`listing_repeats`) were already created by `_migrate` (SCHEMA, IF NOT EXISTS)."""
        with self._transaction():
            for version in range(found + 1, SCHEMA_VERSION + 1):
                for name, sql_type in FRAME_MIGRATIONS.get(version, ()):
                    self.con.execute(f"ALTER TABLE frames ADD COLUMN IF NOT EXISTS {name} {sql_type}")
            self.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
        log.info("catalog: upgraded schema version %d -> %d", found, SCHEMA_VERSION)

    def _tables(self) -> set[str]:
        return {r[0] for r in self.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database()").fetchall()}

    def _migrate(self) -> None:
        tables = self._tables()
        if tables and "meta" not in tables:
            raise CatalogError(f"{str(self.path)!r} is a DuckDB file but not a perception-gap catalog.")
        if "meta" in tables:
            found = self._check_version(upgradable=True)
            if not _ADDITIVE_TABLES <= tables:
                self.con.execute(SCHEMA)  # additive tables of the same schema version (all IF NOT EXISTS)
            self._add_histogram_columns()
            if found < SCHEMA_VERSION:
                self._upgrade(found)
            return
        with self._transaction():
            self.con.execute(SCHEMA)
            self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
            self.con.execute("INSERT INTO meta VALUES ('stats_revision', ?)", [str(STATS_REVISION)])

    def _add_histogram_columns(self) -> None:
        """Add the statistics columns an older catalog lacks, and drop its statistics cache.

        Statistics are a pure function of content, so the cache is recomputed on the next
        `stats` or `run`; nothing else is touched. The columns come from the schema itself
        (`STATS_COLUMNS`), so a new statistic needs no migration code of its own. A catalog whose
        statistics were computed by an older definition (`STATS_REVISION`) drops its cache too.
        """
        cols = {(t, c) for t, c in self.con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_catalog = current_database() AND table_name IN ('frame_stats', 'depth_stats')").fetchall()}
        missing = [(t, c, ty) for t, c, ty in STATS_COLUMNS if (t, c) not in cols]
        row = self.con.execute("SELECT value FROM meta WHERE key = 'stats_revision'").fetchone()
        stale = row is None or row[0] != str(STATS_REVISION)
        if not missing and not stale:
            return
        with self._transaction():
            for table, col, typ in missing:
                self.con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {col} {typ}")
            self.con.execute("DELETE FROM frame_stats")
            self.con.execute("DELETE FROM depth_stats")
            self.con.execute("DELETE FROM meta WHERE key = 'stats_revision'")
            self.con.execute("INSERT INTO meta VALUES ('stats_revision', ?)", [str(STATS_REVISION)])
        if missing:
            log.info("catalog: added statistics columns %s; cached statistics will be recomputed",
                     ", ".join(c for _t, c, _ty in missing))
        else:
            log.info("catalog: statistics of an older definition (revision %s); they will be recomputed",
                     row[0] if row else "1")


# added after a catalog's first version: created when absent (`listing_repeats`: a v1 catalog upgrading)
_ADDITIVE_TABLES = {"embedding_skips", "annotated_frames", "listing_repeats", "baseline_samples",
                    "counterfactual_embeddings"}


def _check_header(path: Path) -> None:
    """Refuse, before DuckDB sees it, a file that is not a DuckDB database (DuckDB would hand a
    SQLite file to its sqlite extension)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except FileNotFoundError:
        return  # a new catalog
    except IsADirectoryError:
        raise InputError(f"Expected `--db` to name a catalog file, got the directory {str(path)!r}.") from None
    except OSError as e:
        raise CatalogError(f"Cannot read catalog {str(path)!r}: {e.strerror}.") from None
    offset, magic = _DUCKDB_MAGIC
    if head and head[offset:offset + len(magic)] != magic:
        kind = "a SQLite database" if head.startswith(b"SQLite format 3") else "not a DuckDB file"
        raise CatalogError(f"{str(path)!r} is not a perception-gap catalog ({kind}); give another `--db`.")


def _as_catalog_error(path: Path, e: BaseException) -> CatalogError | None:
    """The one-line error for a storage fault, or None for anything else (a bug keeps its trace)."""
    detail = str(e).splitlines()[0] if str(e) else type(e).__name__
    where = str(path)
    if isinstance(e, OSError):
        if e.errno not in _DISK_FULL:
            return None
        detail = e.strerror or detail
    if isinstance(e, OSError) or "no space left" in detail.lower() or "quota exceeded" in detail.lower():
        return CatalogError(f"Disk full writing catalog {where!r} ({detail}); every batch committed before is "
                            f"kept: free some space, then rerun.")
    if isinstance(e, duckdb.FatalException):
        return CatalogError(f"Catalog {where!r} stopped after a failed write ({detail}); every batch committed "
                            f"before is kept: rerun.")
    if isinstance(e, duckdb.CatalogException):
        return CatalogError(f"Catalog {where!r} is not a complete perception-gap catalog ({detail}); re-index "
                            f"into a new `--db`.")
    if isinstance(e, (duckdb.IOException, duckdb.SerializationException, duckdb.PermissionException)):
        return CatalogError(f"Catalog {where!r} cannot be read or written, it may be damaged or truncated "
                            f"({detail}); restore a copy or re-index into a new `--db`.")
    if isinstance(e, duckdb.TransactionException) and "could not" in detail.lower():
        return CatalogError(f"Catalog {where!r} could not be written ({detail}).")
    return None


@contextmanager
def catalog_faults(path: Path) -> Iterator[None]:
    """Turn storage faults (a full disk, a damaged file, a missing table) into one `CatalogError`."""
    try:
        yield
    except (duckdb.Error, OSError) as e:
        err = _as_catalog_error(path, e)
        if err is None:
            raise
        raise err from e


def _in_session(method):
    @functools.wraps(method)
    def wrapper(self: Catalog, *args: Any, **kwargs: Any) -> Any:
        with catalog_faults(self.path), self.session():
            return method(self, *args, **kwargs)
    return wrapper


# every public operation opens the file for its own duration (see `Catalog.con`); the operations
# are defined in the mixins, so the members are taken as the class resolves them
_members = {n: m for klass in reversed(Catalog.__mro__) for n, m in vars(klass).items()}
for _name, _member in _members.items():
    if callable(_member) and not _name.startswith("_") and _name not in ("session", "close"):
        setattr(Catalog, _name, _in_session(_member))
del _name, _member, _members
