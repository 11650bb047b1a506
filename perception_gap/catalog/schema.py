"""The catalog's schema and the Arrow helpers its bulk writes use.

One file holds frame sets, frames, cached per-content statistics, annotations, embeddings,
runs and results (the DDL below). Everything computed per frame is keyed by content hash, so a
renamed or re-indexed file is never recomputed.
"""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any, Iterable

from perception_gap.statistics.depth import DepthStats
from perception_gap.statistics.image import ImageStats

SCHEMA_VERSION = 3
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

SCHEMA = """
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
CREATE TABLE IF NOT EXISTS frame_stats (
    content_hash VARCHAR PRIMARY KEY,
    error VARCHAR,
    width INTEGER, height INTEGER, channels INTEGER, dtype VARCHAR, mode VARCHAR,
    nominal_max DOUBLE, stride INTEGER,
    mean DOUBLE[], std DOUBLE[], min DOUBLE[], max DOUBLE[],
    lum_percentiles DOUBLE[], lum_mean DOUBLE, lin_mean DOUBLE[],
    sharpness DOUBLE, hf_ratio DOUBLE, grad_ratio DOUBLE, dup_frac DOUBLE, dup_parity DOUBLE,
    blockiness DOUBLE, nonfinite_frac DOUBLE, hist DOUBLE[],
    noise_sigma DOUBLE, spectrum DOUBLE[], chroma_hf DOUBLE, jpeg_quality DOUBLE,
    thumb BLOB, grad_xy DOUBLE[], edges DOUBLE[]
);
CREATE TABLE IF NOT EXISTS depth_stats (
    content_hash VARCHAR PRIMARY KEY,
    error VARCHAR,
    width INTEGER, height INTEGER, dtype VARCHAR, stride INTEGER,
    percentiles DOUBLE[], mean DOUBLE, dropout DOUBLE, inferred_unit VARCHAR, log_hist DOUBLE[],
    invalid DOUBLE[], edges DOUBLE[]
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

IMAGE_FIELDS = tuple(f.name for f in fields(ImageStats))
DEPTH_FIELDS = tuple(f.name for f in fields(DepthStats))


def arrow_table(rows: list[dict[str, Any]], columns: Iterable[str], types: dict[str, pa.DataType]) -> pa.Table:
    cols = list(columns)
    arrays = []
    for c in cols:
        values = [r.get(c) for r in rows]
        arrays.append(pa.array(values, type=types.get(c, None if any(v is not None for v in values) else pa.string())))
    return pa.table(dict(zip(cols, arrays)))


def _table_columns(ddl: str, table: str) -> list[tuple[str, str, str]]:
    """(table, column, type) of one CREATE TABLE statement in `ddl` (constraints and keys left out)."""
    body = ddl.split(f"CREATE TABLE IF NOT EXISTS {table} (", 1)[1].split(");", 1)[0]
    out = []
    for part in body.replace("\n", " ").split(","):
        words = part.split()
        if len(words) >= 2 and words[0].upper() not in ("PRIMARY", "UNIQUE", "FOREIGN") and words[1][0].isupper():
            out.append((table, words[0], words[1]))
    return out


# every statistics column of the schema: an older catalog that lacks one gets it added (and its cache dropped)
STATS_COLUMNS = tuple(_table_columns(SCHEMA, "frame_stats") + _table_columns(SCHEMA, "depth_stats"))
