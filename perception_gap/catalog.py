"""The DuckDB catalog: the only module that imports duckdb.

One file holds frame sets, frames, cached per-content statistics, annotations, embeddings,
runs and results. Everything computed per frame is keyed by content hash, so a renamed or
re-indexed file is never recomputed. All writes are bulk (Arrow tables), one transaction per
batch, so an interrupted run keeps every finished batch and the rerun does the rest.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb

from perception_gap.errors import CatalogBusy, CatalogError, InputError
from perception_gap.locking import WriterLock
from perception_gap.stats import DepthStats, ImageStats

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
CONNECT_WAIT_S = 30.0  # how long one operation waits for another process's brief hold of the file
DEFAULT_DB = "perception_gap.duckdb"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS frame_sets (
    name VARCHAR PRIMARY KEY,
    domain VARCHAR NOT NULL CHECK (domain IN ('sim', 'real')),
    source VARCHAR,
    tags VARCHAR[],
    root VARCHAR,
    created_at TIMESTAMP DEFAULT current_timestamp,
    updated_at TIMESTAMP DEFAULT current_timestamp
);
CREATE TABLE IF NOT EXISTS frames (
    set_name VARCHAR NOT NULL,
    rgb_path VARCHAR NOT NULL,
    pair_key VARCHAR,
    episode VARCHAR,
    step BIGINT,
    depth_path VARCHAR,
    depth_unit VARCHAR,
    content_hash VARCHAR,
    depth_hash VARCHAR,
    file_size BIGINT,
    mtime_ns BIGINT,
    depth_size BIGINT,
    depth_mtime_ns BIGINT,
    width INTEGER,
    height INTEGER,
    format VARCHAR,
    mode VARCHAR,
    dtype VARCHAR,
    channels INTEGER,
    exif_orientation INTEGER,
    action DOUBLE[],
    proprio DOUBLE[],
    status VARCHAR NOT NULL,
    error VARCHAR,
    indexed_at TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (set_name, rgb_path)
);
CREATE TABLE IF NOT EXISTS frame_stats (
    content_hash VARCHAR PRIMARY KEY,
    error VARCHAR,
    width INTEGER, height INTEGER, channels INTEGER, dtype VARCHAR, mode VARCHAR,
    nominal_max DOUBLE, stride INTEGER,
    mean DOUBLE[], std DOUBLE[], min DOUBLE[], max DOUBLE[],
    lum_percentiles DOUBLE[], lum_mean DOUBLE, lin_mean DOUBLE[],
    sharpness DOUBLE, hf_ratio DOUBLE, grad_ratio DOUBLE, dup_frac DOUBLE, dup_parity DOUBLE,
    blockiness DOUBLE, nonfinite_frac DOUBLE, hist DOUBLE[]
);
CREATE TABLE IF NOT EXISTS depth_stats (
    content_hash VARCHAR PRIMARY KEY,
    error VARCHAR,
    width INTEGER, height INTEGER, dtype VARCHAR, stride INTEGER,
    percentiles DOUBLE[], mean DOUBLE, dropout DOUBLE, inferred_unit VARCHAR, log_hist DOUBLE[]
);
CREATE TABLE IF NOT EXISTS annotations (
    set_name VARCHAR NOT NULL,
    rgb_path VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    category VARCHAR NOT NULL,
    bbox DOUBLE[4],
    score DOUBLE,
    area DOUBLE,
    iscrowd BOOLEAN
);
CREATE TABLE IF NOT EXISTS annotated_frames (
    set_name VARCHAR NOT NULL,
    rgb_path VARCHAR NOT NULL,
    source VARCHAR NOT NULL,
    PRIMARY KEY (set_name, rgb_path, source)
);
CREATE TABLE IF NOT EXISTS embeddings (
    content_hash VARCHAR NOT NULL,
    encoder VARCHAR NOT NULL,
    fingerprint VARCHAR NOT NULL,
    dim INTEGER NOT NULL,
    vector FLOAT[] NOT NULL,
    created_at TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (content_hash, fingerprint)
);
CREATE TABLE IF NOT EXISTS embedding_skips (
    content_hash VARCHAR NOT NULL,
    fingerprint VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    PRIMARY KEY (content_hash, fingerprint)
);
CREATE SEQUENCE IF NOT EXISTS run_ids START 1;
CREATE TABLE IF NOT EXISTS runs (
    run_id BIGINT PRIMARY KEY DEFAULT nextval('run_ids'),
    kind VARCHAR NOT NULL,
    started_at TIMESTAMP DEFAULT current_timestamp,
    config JSON,
    version VARCHAR
);
CREATE TABLE IF NOT EXISTS results (
    run_id BIGINT NOT NULL,
    scope VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    value DOUBLE,
    ci_low DOUBLE,
    ci_high DOUBLE,
    detail JSON
);
"""

FRAME_COLUMNS = (
    "set_name", "rgb_path", "pair_key", "episode", "step", "depth_path", "depth_unit",
    "content_hash", "depth_hash", "file_size", "mtime_ns", "depth_size", "depth_mtime_ns",
    "width", "height", "format", "mode", "dtype", "channels", "exif_orientation",
    "action", "proprio", "status", "error",
)


class _LazyArrow:
    """pyarrow, imported on first use: read-only commands (a warm `embed`) never pay for it."""

    def __getattr__(self, name: str) -> Any:
        import pyarrow

        return getattr(pyarrow, name)


pa = _LazyArrow()


def _frame_types() -> dict[str, Any]:
    return {
        "step": pa.int64(), "file_size": pa.int64(), "mtime_ns": pa.int64(),
        "depth_size": pa.int64(), "depth_mtime_ns": pa.int64(), "width": pa.int32(),
        "height": pa.int32(), "channels": pa.int32(), "exif_orientation": pa.int32(),
        "action": pa.list_(pa.float64()), "proprio": pa.list_(pa.float64()),
    }
_IMAGE_FIELDS = tuple(f.name for f in fields(ImageStats))
_DEPTH_FIELDS = tuple(f.name for f in fields(DepthStats))


def _arrow_table(rows: list[dict[str, Any]], columns: Iterable[str], types: dict[str, pa.DataType]) -> pa.Table:
    cols = list(columns)
    arrays = []
    for c in cols:
        values = [r.get(c) for r in rows]
        arrays.append(pa.array(values, type=types.get(c, None if any(v is not None for v in values) else pa.string())))
    return pa.table(dict(zip(cols, arrays)))


class Catalog:
    """An open catalog file. Use as a context manager; every method is one transaction.

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
                self.con.execute(_SCHEMA)  # additive tables of the same schema version (all IF NOT EXISTS)
            self._add_histogram_columns()
            return
        self.con.execute("BEGIN")
        self.con.execute(_SCHEMA)
        self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        self.con.execute("COMMIT")

    def _add_histogram_columns(self) -> None:
        """Catalogs written before histograms were cached lack two columns: add them and drop the
        statistics cache (pure function of content, recomputed on the next `stats` or `run`)."""
        cols = {(t, c) for t, c in self.con.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_name IN ('frame_stats', 'depth_stats')").fetchall()}
        if ("frame_stats", "hist") in cols and ("depth_stats", "log_hist") in cols:
            return
        self.con.execute("BEGIN")
        self.con.execute("ALTER TABLE frame_stats ADD COLUMN IF NOT EXISTS hist DOUBLE[]")
        self.con.execute("ALTER TABLE depth_stats ADD COLUMN IF NOT EXISTS log_hist DOUBLE[]")
        self.con.execute("DELETE FROM frame_stats")
        self.con.execute("DELETE FROM depth_stats")
        self.con.execute("COMMIT")
        log.info("catalog: added histogram columns; cached statistics will be recomputed")

    # -- frame sets --------------------------------------------------------------------------
    def ensure_set(self, name: str, domain: str, *, source: str | None = None,
                   tags: list[str] | None = None, root: str | None = None) -> None:
        """Create the set, or check that an existing one has the same domain."""
        row = self.con.execute("SELECT domain FROM frame_sets WHERE name = ?", [name]).fetchone()
        if row is not None:
            if row[0] != domain:
                raise InputError(f"Set {name!r} is already indexed as domain {row[0]!r}; got --domain {domain!r}. Use another set name.")
            self.con.execute(
                "UPDATE frame_sets SET updated_at = current_timestamp, tags = coalesce(?, tags), "
                "source = coalesce(?, source), root = coalesce(?, root) WHERE name = ?",
                [tags, source, root, name])
            return
        self.con.execute("INSERT INTO frame_sets (name, domain, source, tags, root) VALUES (?, ?, ?, ?, ?)",
                         [name, domain, source, tags, root])

    def get_set(self, name: str) -> dict[str, Any] | None:
        row = self.con.execute("SELECT name, domain, source, tags, root FROM frame_sets WHERE name = ?", [name]).fetchone()
        if row is None:
            return None
        return dict(zip(("name", "domain", "source", "tags", "root"), row))

    def list_sets(self) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT name FROM frame_sets ORDER BY name").fetchall()]

    # -- frames ------------------------------------------------------------------------------
    def existing_frames(self, set_name: str) -> dict[str, dict[str, Any]]:
        """rgb_path -> catalog row (the change-detection columns) for a set."""
        cols = ("rgb_path", "file_size", "mtime_ns", "depth_path", "depth_size", "depth_mtime_ns",
                "status", "content_hash", "pair_key", "episode", "step", "depth_unit", "action", "proprio")
        rows = self.con.execute(f"SELECT {', '.join(cols)} FROM frames WHERE set_name = ?", [set_name]).fetchall()
        return {r[0]: dict(zip(cols, r)) for r in rows}

    def write_frames(self, rows: list[dict[str, Any]]) -> None:
        """Insert or replace frames (keyed by set and path) in one transaction."""
        if not rows:
            return
        batch = _arrow_table(rows, FRAME_COLUMNS, _frame_types())  # noqa: F841 (DuckDB reads it by name)
        cols = ", ".join(FRAME_COLUMNS)
        self.con.execute("BEGIN")
        try:
            self.con.execute(
                "DELETE FROM frames USING (SELECT set_name, rgb_path FROM batch) b "
                "WHERE frames.set_name = b.set_name AND frames.rgb_path = b.rgb_path")
            self.con.execute(f"INSERT INTO frames ({cols}) SELECT {cols} FROM batch")
            self.con.execute("COMMIT")
        except Exception:
            self.con.execute("ROLLBACK")
            raise

    def mark_missing(self, set_name: str, paths: list[str]) -> None:
        if not paths:
            return
        tbl = pa.table({"rgb_path": pa.array(paths, pa.string())})  # noqa: F841
        self.con.execute(
            "UPDATE frames SET status = 'missing', error = 'file vanished since last index', "
            "indexed_at = current_timestamp WHERE set_name = ? AND rgb_path IN (SELECT rgb_path FROM tbl)",
            [set_name])

    def set_counts(self, set_name: str) -> dict[str, int]:
        """Frames of a set by state: `ok` (usable), `skipped`, `missing`, and `unreadable` (indexed
        as ok, but decoding failed when statistics were computed; not counted in `ok`)."""
        rows = self.con.execute(
            "SELECT f.status, s.error IS NOT NULL AS bad, count(*) FROM frames f "
            "LEFT JOIN frame_stats s ON s.content_hash = f.content_hash "
            "WHERE f.set_name = ? GROUP BY ALL", [set_name]).fetchall()
        counts = {"total": 0, "ok": 0, "skipped": 0, "missing": 0, "unreadable": 0}
        for status, bad, n in rows:
            counts["total"] += n
            if status == "ok" and bad:
                counts["unreadable"] += n
            else:
                counts[status] = counts.get(status, 0) + n
        return counts

    def skipped_frames(self, set_name: str) -> list[dict[str, str]]:
        """Every frame of the set that is not usable, with its reason."""
        rows = self.con.execute(
            "SELECT f.rgb_path, f.status, coalesce(f.error, s.error, d.error) FROM frames f "
            "LEFT JOIN frame_stats s ON s.content_hash = f.content_hash "
            "LEFT JOIN depth_stats d ON d.content_hash = f.depth_hash "
            "WHERE f.set_name = ? AND (f.status <> 'ok' OR s.error IS NOT NULL OR d.error IS NOT NULL) "
            "ORDER BY f.rgb_path", [set_name]).fetchall()
        return [{"path": p, "status": st if st != "ok" else "skipped", "reason": r or "unknown"} for p, st, r in rows]

    # -- statistics cache ----------------------------------------------------------------------
    def hashes_needing_stats(self, set_names: list[str]) -> list[tuple[str, str]]:
        """(content_hash, a path holding it) for usable RGB frames without cached statistics."""
        return [tuple(r) for r in self.con.execute(
            "SELECT f.content_hash, min(f.rgb_path) FROM frames f "
            "WHERE f.set_name IN (SELECT unnest(?)) AND f.status = 'ok' AND f.content_hash IS NOT NULL "
            "AND f.content_hash NOT IN (SELECT content_hash FROM frame_stats) "
            "GROUP BY f.content_hash ORDER BY 2", [set_names]).fetchall()]

    def hashes_needing_depth_stats(self, set_names: list[str]) -> list[tuple[str, str]]:
        return [tuple(r) for r in self.con.execute(
            "SELECT f.depth_hash, min(f.depth_path) FROM frames f "
            "WHERE f.set_name IN (SELECT unnest(?)) AND f.status = 'ok' AND f.depth_hash IS NOT NULL "
            "AND f.depth_hash NOT IN (SELECT content_hash FROM depth_stats) "
            "GROUP BY f.depth_hash ORDER BY 2", [set_names]).fetchall()]

    def write_image_stats(self, items: list[tuple[str, ImageStats | None, str | None]]) -> None:
        """Cache (content_hash, stats, error) rows; error rows record unreadable content."""
        rows = []
        for h, st, err in items:
            row = {"content_hash": h, "error": err}
            if st is not None:
                row.update({k: getattr(st, k) for k in _IMAGE_FIELDS})
            rows.append(row)
        self._insert_stats("frame_stats", rows, ("content_hash", "error") + _IMAGE_FIELDS)

    def write_depth_stats(self, items: list[tuple[str, DepthStats | None, str | None]]) -> None:
        rows = []
        for h, st, err in items:
            row = {"content_hash": h, "error": err}
            if st is not None:
                row.update({k: getattr(st, k) for k in _DEPTH_FIELDS})
            rows.append(row)
        self._insert_stats("depth_stats", rows, ("content_hash", "error") + _DEPTH_FIELDS)

    def _insert_stats(self, name: str, rows: list[dict[str, Any]], cols: tuple[str, ...]) -> None:
        if not rows:
            return
        types = {c: pa.list_(pa.float64()) for c in
                 ("mean", "std", "min", "max", "lum_percentiles", "lin_mean", "percentiles", "hist", "log_hist")}
        types.update({c: pa.float64() for c in
                      ("nominal_max", "lum_mean", "sharpness", "hf_ratio", "grad_ratio", "dup_frac",
                       "dup_parity", "blockiness", "nonfinite_frac", "dropout")})
        types.update({c: pa.int32() for c in ("width", "height", "channels", "stride")})
        types.update({c: pa.string() for c in ("content_hash", "error", "dtype", "mode", "inferred_unit")})
        if name == "depth_stats":
            types["mean"] = pa.float64()  # one number per depth map; per channel for images
        batch = _arrow_table(rows, cols, types)  # noqa: F841 (DuckDB reads it by name)
        col_list = ", ".join(cols)
        self.con.execute("BEGIN")
        try:
            self.con.execute(f"INSERT OR REPLACE INTO {name} ({col_list}) SELECT {col_list} FROM batch")
            self.con.execute("COMMIT")
        except Exception:
            self.con.execute("ROLLBACK")
            raise

    def load_frames(self, set_name: str) -> list[dict[str, Any]]:
        """Usable frames of a set joined with their cached statistics (None where not cached)."""
        img_cols = ", ".join(f"s.{c} AS img_{c}" for c in _IMAGE_FIELDS)
        dep_cols = ", ".join(f"d.{c} AS dep_{c}" for c in _DEPTH_FIELDS)
        cur = self.con.execute(
            f"SELECT f.pair_key, f.episode, f.step, f.rgb_path, f.depth_path, f.depth_unit, f.format, "
            f"f.action, f.proprio, f.content_hash, s.error AS img_error, d.error AS dep_error, "
            f"{img_cols}, {dep_cols} FROM frames f "
            f"LEFT JOIN frame_stats s ON s.content_hash = f.content_hash "
            f"LEFT JOIN depth_stats d ON d.content_hash = f.depth_hash "
            f"WHERE f.set_name = ? AND f.status = 'ok' ORDER BY f.episode NULLS FIRST, f.step NULLS FIRST, f.rgb_path",
            [set_name])
        names = [c[0] for c in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    # -- annotations ------------------------------------------------------------------------
    def frame_sizes(self, set_name: str) -> list[tuple[str, str, int | None, int | None]]:
        """(rgb_path, pair_key, width, height) of the usable frames of a set."""
        return [tuple(r) for r in self.con.execute(
            "SELECT rgb_path, pair_key, width, height FROM frames WHERE set_name = ? AND status = 'ok' ORDER BY rgb_path",
            [set_name]).fetchall()]

    def replace_annotations(self, set_name: str, source: str, rows: list[dict[str, Any]],
                            annotated: list[str]) -> None:
        """Replace a set's boxes from one source (`gt` or a detector name) in one transaction.

        `annotated` lists every frame the source covers, boxes or not: a frame with no object is
        still evaluated (its detections are false positives).
        """
        self.con.execute("BEGIN")
        try:
            self.con.execute("DELETE FROM annotations WHERE set_name = ? AND source = ?", [set_name, source])
            self.con.execute("DELETE FROM annotated_frames WHERE set_name = ? AND source = ?", [set_name, source])
            covered = pa.table({"rgb_path": pa.array(sorted(set(annotated)), pa.string())})  # noqa: F841
            self.con.execute("INSERT INTO annotated_frames SELECT ?, rgb_path, ? FROM covered", [set_name, source])
            if rows:
                batch = pa.table({  # noqa: F841 (DuckDB reads it by name)
                    "set_name": pa.array([set_name] * len(rows), pa.string()),
                    "rgb_path": pa.array([r["rgb_path"] for r in rows], pa.string()),
                    "source": pa.array([source] * len(rows), pa.string()),
                    "category": pa.array([r["category"] for r in rows], pa.string()),
                    "bbox": pa.array([list(r["bbox"]) for r in rows], pa.list_(pa.float64())),
                    "score": pa.array([r.get("score") for r in rows], pa.float64()),
                    "area": pa.array([r.get("area") for r in rows], pa.float64()),
                    "iscrowd": pa.array([bool(r.get("iscrowd")) for r in rows], pa.bool_()),
                })
                self.con.execute("INSERT INTO annotations SELECT set_name, rgb_path, source, category, bbox, score, "
                                 "area, iscrowd FROM batch")
            self.con.execute("COMMIT")
        except Exception:
            self.con.execute("ROLLBACK")
            raise

    def load_annotations(self, set_name: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """source -> rgb_path -> boxes of the usable frames of a set; every frame the source
        covers is a key, with an empty list when it has no box."""
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for source, path in self.con.execute(
                "SELECT a.source, a.rgb_path FROM annotated_frames a JOIN frames f ON f.set_name = a.set_name "
                "AND f.rgb_path = a.rgb_path AND f.status = 'ok' WHERE a.set_name = ?", [set_name]).fetchall():
            out.setdefault(source, {}).setdefault(path, [])
        rows = self.con.execute(
            "SELECT a.source, a.rgb_path, a.category, a.bbox, a.score, a.area, a.iscrowd FROM annotations a "
            "JOIN frames f ON f.set_name = a.set_name AND f.rgb_path = a.rgb_path AND f.status = 'ok' "
            "WHERE a.set_name = ? ORDER BY a.source, a.rgb_path", [set_name]).fetchall()
        for source, path, cat, bbox, score, area, crowd in rows:
            out.setdefault(source, {}).setdefault(path, []).append(
                {"category": cat, "bbox": tuple(bbox), "score": score, "area": area, "iscrowd": bool(crowd)})
        return out

    # -- embeddings --------------------------------------------------------------------------
    def hashes_needing_embedding(self, set_names: list[str] | None, fingerprint: str) -> list[tuple[str, str, str | None, str | None]]:
        """(content_hash, path, dtype, format) of usable frames with neither an embedding nor a
        recorded skip for this encoder fingerprint; all sets when `set_names` is None."""
        where = "" if set_names is None else "AND f.set_name IN (SELECT unnest(?)) "
        params: list[Any] = [] if set_names is None else [set_names]
        return [tuple(r) for r in self.con.execute(
            "SELECT f.content_hash, min(f.rgb_path), min(f.dtype), min(f.format) FROM frames f "
            "LEFT JOIN frame_stats s ON s.content_hash = f.content_hash "
            f"WHERE f.status = 'ok' AND f.content_hash IS NOT NULL AND s.error IS NULL {where}"
            "AND f.content_hash NOT IN (SELECT content_hash FROM embeddings WHERE fingerprint = ?) "
            "AND f.content_hash NOT IN (SELECT content_hash FROM embedding_skips WHERE fingerprint = ?) "
            "GROUP BY f.content_hash ORDER BY 2", params + [fingerprint, fingerprint]).fetchall()]

    def write_embeddings(self, encoder: str, fingerprint: str, hashes: list[str], vectors: "Any",
                         skips: list[tuple[str, str]] = ()) -> None:
        """Store one batch of (N, D) float32 vectors and skip reasons in one transaction.

        Rows already present (same content and fingerprint) are left as they are, so a batch
        replayed after an interruption never duplicates.
        """
        import numpy as np

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n, dim = vectors.shape if vectors.ndim == 2 else (0, 0)
        self.con.execute("BEGIN")
        try:
            if n:
                offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
                batch = pa.table({  # noqa: F841 (DuckDB reads it by name)
                    "content_hash": pa.array(hashes, pa.string()),
                    "vector": pa.ListArray.from_arrays(offsets, pa.array(vectors.ravel())),
                })
                self.con.execute(
                    "INSERT OR IGNORE INTO embeddings (content_hash, encoder, fingerprint, dim, vector) "
                    "SELECT content_hash, ?, ?, ?, vector FROM batch", [encoder, fingerprint, dim])
            if skips:
                sk = pa.table({"content_hash": pa.array([h for h, _ in skips], pa.string()),  # noqa: F841
                               "reason": pa.array([r for _, r in skips], pa.string())})
                self.con.execute("INSERT OR IGNORE INTO embedding_skips SELECT content_hash, ?, reason FROM sk",
                                 [fingerprint])
            self.con.execute("COMMIT")
        except Exception:
            self.con.execute("ROLLBACK")
            raise

    def load_embeddings(self, set_name: str, fingerprint: str) -> tuple[list[dict[str, Any]], "Any"]:
        """Usable frames of a set that have an embedding: (frame rows, (N, D) float32 array)."""
        import numpy as np

        # a fresh cursor: `sql` refuses to run while an earlier `execute` result is unconsumed
        tbl = self.con.cursor().sql(
            "SELECT f.pair_key, f.episode, f.step, f.rgb_path, f.action, f.proprio, e.vector FROM frames f "
            "JOIN embeddings e ON e.content_hash = f.content_hash AND e.fingerprint = $fp "
            "WHERE f.set_name = $set AND f.status = 'ok' ORDER BY f.episode NULLS FIRST, f.step NULLS FIRST, f.rgb_path",
            params={"fp": fingerprint, "set": set_name}).to_arrow_table()
        n = tbl.num_rows
        if n == 0:
            return [], np.zeros((0, 0), np.float32)
        vec = tbl.column("vector").combine_chunks()
        dim = len(vec[0])
        arr = vec.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(n, dim)
        meta = tbl.drop_columns(["vector"]).to_pylist()
        return meta, arr

    def embedding_counts(self, fingerprint: str) -> dict[str, int]:
        rows = self.con.execute(
            "SELECT (SELECT count(*) FROM embeddings WHERE fingerprint = ?), "
            "(SELECT count(*) FROM embedding_skips WHERE fingerprint = ?)", [fingerprint, fingerprint]).fetchone()
        return {"embedded": int(rows[0]), "skipped": int(rows[1])}

    def embedding_skip_reasons(self, set_name: str, fingerprint: str) -> list[dict[str, str]]:
        return [{"path": p, "reason": r} for p, r in self.con.execute(
            "SELECT f.rgb_path, k.reason FROM frames f JOIN embedding_skips k ON k.content_hash = f.content_hash "
            "AND k.fingerprint = ? WHERE f.set_name = ? ORDER BY 1", [fingerprint, set_name]).fetchall()]

    # -- runs and results --------------------------------------------------------------------
    def record_run(self, kind: str, config: dict[str, Any], version: str,
                   results: list[dict[str, Any]]) -> int:
        """Store a run and its figures (scope, name, value, ci_low, ci_high, detail)."""
        self.con.execute("BEGIN")
        try:
            run_id = self.con.execute("INSERT INTO runs (kind, config, version) VALUES (?, ?, ?) RETURNING run_id",
                                      [kind, json.dumps(config), version]).fetchone()[0]
            if results:
                batch = pa.table({  # noqa: F841
                    "run_id": pa.array([run_id] * len(results), pa.int64()),
                    "scope": pa.array([r["scope"] for r in results], pa.string()),
                    "name": pa.array([r["name"] for r in results], pa.string()),
                    "value": pa.array([r.get("value") for r in results], pa.float64()),
                    "ci_low": pa.array([r.get("ci_low") for r in results], pa.float64()),
                    "ci_high": pa.array([r.get("ci_high") for r in results], pa.float64()),
                    "detail": pa.array([json.dumps(r.get("detail")) if r.get("detail") is not None else None
                                        for r in results], pa.string()),
                })
                self.con.execute("INSERT INTO results SELECT run_id, scope, name, value, ci_low, ci_high, detail::JSON FROM batch")
            self.con.execute("COMMIT")
        except Exception:
            self.con.execute("ROLLBACK")
            raise
        return int(run_id)

    def run_history(self, kind: str) -> list[dict[str, Any]]:
        """Every stored run of a kind, oldest first: run_id, started_at, config and its result rows."""
        runs = self.con.execute("SELECT run_id, started_at, config FROM runs WHERE kind = ? ORDER BY run_id",
                                [kind]).fetchall()
        if not runs:
            return []
        rows = self.con.execute(
            "SELECT s.run_id, s.scope, s.name, s.value, s.ci_low, s.ci_high, s.detail FROM results s "
            "JOIN runs r USING (run_id) WHERE r.kind = ? ORDER BY s.run_id", [kind]).fetchall()
        by_run: dict[int, list[dict[str, Any]]] = {}
        for run_id, scope, name, value, lo, hi, detail in rows:
            by_run.setdefault(int(run_id), []).append({"scope": scope, "name": name, "value": value,
                                                       "ci_low": lo, "ci_high": hi,
                                                       "detail": json.loads(detail) if detail else None})
        return [{"run_id": int(r), "started_at": str(t), "config": json.loads(c) if c else {},
                 "results": by_run.get(int(r), [])} for r, t, c in runs]


def _in_session(method):
    @functools.wraps(method)
    def wrapper(self: Catalog, *args: Any, **kwargs: Any) -> Any:
        with self.session():
            return method(self, *args, **kwargs)
    return wrapper


# every public operation opens the file for its own duration (see `Catalog.con`)
for _name, _member in list(vars(Catalog).items()):
    if callable(_member) and not _name.startswith("_") and _name not in ("session", "close"):
        setattr(Catalog, _name, _in_session(_member))
del _name, _member
