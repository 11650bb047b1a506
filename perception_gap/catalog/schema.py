"""The catalog's schema and the Arrow helpers its bulk writes use.

One file holds frame sets, frames, cached per-content statistics, annotations, embeddings,
runs and results (the DDL below). Everything computed per frame is keyed by content hash, so a
renamed or re-indexed file is never recomputed.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from perception_gap.statistics.columns import stat_columns
from perception_gap.statistics.depth import DepthStats
from perception_gap.statistics.image import ImageStats

SCHEMA_VERSION = 3
# How the cached statistics are computed: raised whenever a statistic's definition changes (not
# its columns, which migrate by themselves), so that a catalog holding statistics of an older
# definition drops its cache and measures again. What each revision changed: CHANGELOG.md.
STATS_REVISION = 3
# Columns each schema version added to `frames`, applied in order by `Catalog._migrate`
# (version 2: frames inside containers, see `perception_gap.ingest.containers`; version 3: depth
# maps inside containers and frame timestamps, see `perception_gap.ingest.rosbag`).
FRAME_MIGRATIONS: dict[int, tuple[tuple[str, str], ...]] = {
    2: (("container_path", "VARCHAR"), ("container_hash", "VARCHAR"), ("member", "VARCHAR"),
        ("frame_index", "BIGINT")),
    3: (("depth_member", "VARCHAR"), ("depth_index", "BIGINT"), ("depth_container_hash", "VARCHAR"),
        ("timestamp", "DOUBLE")),
}
DEFAULT_DB = "perception_gap.duckdb"

_FRAME_TABLES = """
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
    container_path VARCHAR,  -- a frame inside a video or Parquet file: that file (rgb_path names the frame)
    container_hash VARCHAR,
    member VARCHAR,          -- `video`, or `parquet:<column>` for an image column
    frame_index BIGINT,      -- presentation-order frame number, or row number
    depth_member VARCHAR,    -- a depth map inside a container (depth_path): its member and index there
    depth_index BIGINT,
    depth_container_hash VARCHAR,
    timestamp DOUBLE,        -- seconds, where the source records a time per frame (ROS header stamps)
    PRIMARY KEY (set_name, rgb_path)
);
CREATE TABLE IF NOT EXISTS listing_repeats (
    set_name VARCHAR NOT NULL,
    rgb_path VARCHAR NOT NULL,
    repeats BIGINT NOT NULL,
    reason VARCHAR,
    PRIMARY KEY (set_name, rgb_path)
);
"""
_OTHER_TABLES = """
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
CREATE TABLE IF NOT EXISTS counterfactual_embeddings (
    key VARCHAR NOT NULL,          -- a sim frame's content hash through one variant of a camera model
    encoder VARCHAR NOT NULL,
    fingerprint VARCHAR NOT NULL,
    dim INTEGER NOT NULL,
    vector FLOAT[] NOT NULL,
    created_at TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (key, fingerprint)
);
CREATE TABLE IF NOT EXISTS embedding_skips (
    content_hash VARCHAR NOT NULL,
    fingerprint VARCHAR NOT NULL,
    reason VARCHAR NOT NULL,
    PRIMARY KEY (content_hash, fingerprint)
);
CREATE TABLE IF NOT EXISTS baseline_samples (
    set_name VARCHAR NOT NULL,
    size BIGINT NOT NULL,        -- frames kept
    seed BIGINT NOT NULL,
    digest UBIGINT NOT NULL,     -- content key of the set's usable frames when the sample was drawn
    n_frames BIGINT NOT NULL,
    paths VARCHAR[] NOT NULL,    -- rgb_path of the frames kept
    created_at TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (set_name, size, seed)
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

# The statistics cache tables and the dataclass a row of each holds: the dataclass is the one
# definition of the columns (`perception_gap.statistics.columns`), from which the DDL below, the
# migration of an older catalog and the Arrow schema of bulk writes and shards are all derived.
STATS_TABLES: dict[str, type] = {"frame_stats": ImageStats, "depth_stats": DepthStats}
# every statistics row begins with its key and, for content that could not be read, the error
_STATS_KEY = (("content_hash", "str"), ("error", "str"))
_SQL_TYPES = {"int": "INTEGER", "float": "DOUBLE", "str": "VARCHAR", "bytes": "BLOB", "floats": "DOUBLE[]"}


def stats_columns(table: str) -> tuple[tuple[str, str], ...]:
    """(column, kind) of statistics table `table`, in order: the key, the error, then the fields."""
    return _STATS_KEY + stat_columns(STATS_TABLES[table])


def stats_ddl(table: str) -> str:
    """The CREATE TABLE statement of statistics table `table`."""
    cols = [f"{name} {_SQL_TYPES[kind]}" + (" PRIMARY KEY" if name == "content_hash" else "")
            for name, kind in stats_columns(table)]
    return f"CREATE TABLE IF NOT EXISTS {table} (\n    " + ",\n    ".join(cols) + "\n);\n"


SCHEMA = _FRAME_TABLES + "".join(stats_ddl(t) for t in STATS_TABLES) + _OTHER_TABLES

# every table the schema creates, in order
TABLES = tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))

FRAME_COLUMNS = (
    "set_name", "rgb_path", "pair_key", "episode", "step", "depth_path", "depth_unit",
    "content_hash", "depth_hash", "file_size", "mtime_ns", "depth_size", "depth_mtime_ns",
    "width", "height", "format", "mode", "dtype", "channels", "exif_orientation",
    "action", "proprio", "status", "error", "container_path", "container_hash", "member", "frame_index",
    "depth_member", "depth_index", "depth_container_hash", "timestamp",
)


class _LazyArrow:
    """pyarrow, imported on first use: read-only commands (a warm `embed`) never pay for it."""

    def __getattr__(self, name: str) -> Any:
        import pyarrow

        return getattr(pyarrow, name)


pa = _LazyArrow()


def frame_types() -> dict[str, Any]:
    return {
        "step": pa.int64(), "file_size": pa.int64(), "mtime_ns": pa.int64(),
        "depth_size": pa.int64(), "depth_mtime_ns": pa.int64(), "width": pa.int32(),
        "height": pa.int32(), "channels": pa.int32(), "exif_orientation": pa.int32(),
        "action": pa.list_(pa.float64()), "proprio": pa.list_(pa.float64()), "frame_index": pa.int64(),
        "depth_index": pa.int64(), "timestamp": pa.float64(),
    }


# Where a content hash can be decoded from (one frame per hash, the first by path): the file, or
# the container with the member and index inside it, and the container's hash at `index` (which
# the decoding stages verify before measuring). Used with `GROUP BY f.content_hash`.
SOURCE_COLUMNS = ("f.content_hash, min(coalesce(f.container_path, f.rgb_path)), "
                  "arg_min(f.member, coalesce(f.container_path, f.rgb_path)), "
                  "arg_min(f.frame_index, coalesce(f.container_path, f.rgb_path)), "
                  "arg_min(f.container_hash, coalesce(f.container_path, f.rgb_path))")

IMAGE_FIELDS = tuple(name for name, _ in stat_columns(ImageStats))
DEPTH_FIELDS = tuple(name for name, _ in stat_columns(DepthStats))


def arrow_table(rows: list[dict[str, Any]], columns: Iterable[str], types: dict[str, pa.DataType]) -> pa.Table:
    cols = list(columns)
    arrays = []
    for c in cols:
        values = [r.get(c) for r in rows]
        arrays.append(pa.array(values, type=types.get(c, None if any(v is not None for v in values) else pa.string())))
    return pa.table(dict(zip(cols, arrays)))


def stats_arrow_types(table: str) -> dict[str, pa.DataType]:
    """Column -> Arrow type of statistics table `table`, as the catalog stores it."""
    arrow = {"int": pa.int32(), "float": pa.float64(), "str": pa.string(), "bytes": pa.binary(),
             "floats": pa.list_(pa.float64())}
    return {name: arrow[kind] for name, kind in stats_columns(table)}


# every statistics column of the schema: an older catalog that lacks one gets it added (and its cache dropped)
STATS_COLUMNS = tuple((table, name, _SQL_TYPES[kind]) for table in STATS_TABLES for name, kind in stats_columns(table))
