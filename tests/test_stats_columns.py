"""The statistics cache's columns: the DDL, the Arrow schema and the stored row all follow the
`ImageStats` / `DepthStats` dataclasses (`perception_gap.statistics.columns`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from PIL import Image

from perception_gap.catalog import Catalog
from perception_gap.catalog.schema import STATS_COLUMNS, STATS_TABLES
from perception_gap.catalog.stats_cache import stats_table
from perception_gap.statistics.columns import from_row, stat_columns
from perception_gap.statistics.depth import DepthStats, depth_stats
from perception_gap.statistics.image import ImageStats, image_stats_pil

# The statistics tables as version 3 of the schema wrote them by hand: a catalog created then
# must open without a migration (no column missing, none retyped, its cache kept).
_VERSION_3_DDL = """
CREATE TABLE frame_stats (
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
CREATE TABLE depth_stats (
    content_hash VARCHAR PRIMARY KEY,
    error VARCHAR,
    width INTEGER, height INTEGER, dtype VARCHAR, stride INTEGER,
    percentiles DOUBLE[], mean DOUBLE, dropout DOUBLE, inferred_unit VARCHAR, log_hist DOUBLE[],
    invalid DOUBLE[], edges DOUBLE[]
);
"""


def _columns(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    return [tuple(r) for r in con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_name IN ('frame_stats', 'depth_stats') ORDER BY table_name DESC, ordinal_position").fetchall()]


def _stats() -> tuple[ImageStats, DepthStats]:
    rng = np.random.default_rng(0)
    img = image_stats_pil(Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)))
    depth = rng.uniform(0.3, 4.0, (48, 64)).astype(np.float32)
    depth[::7, ::5] = 0.0
    return img, depth_stats(depth)


def _arrow_kind(t: pa.DataType) -> str:
    """An Arrow type without the name of a list's item field (DuckDB names it `l`, pyarrow `item`)."""
    return f"list<{t.value_type}>" if pa.types.is_list(t) else str(t)


def _same(a: object, b: object) -> bool:
    """Field-by-field equality that counts NaN equal to NaN (a constant crop stores NaN nowhere, but
    float statistics may)."""
    def norm(v: object) -> object:
        if isinstance(v, float) and math.isnan(v):
            return "nan"
        if isinstance(v, tuple):
            return tuple(norm(x) for x in v)
        return v
    return {k: norm(v) for k, v in asdict(a).items()} == {k: norm(v) for k, v in asdict(b).items()}


def test_created_tables_follow_the_dataclasses(tmp_path):
    db = tmp_path / "c.duckdb"
    Catalog(db).close()
    con = duckdb.connect(str(db), read_only=True)
    got = _columns(con)
    con.close()
    want = [(t, c, ty) for t, c, ty in STATS_COLUMNS]
    assert got == want
    for table, cls in STATS_TABLES.items():
        assert [c for t, c, _ in got if t == table] == ["content_hash", "error"] + [f.name for f in fields(cls)]


def test_generated_tables_equal_the_version_3_tables():
    new, old = duckdb.connect(), duckdb.connect()
    new.execute("".join(f"CREATE TABLE {t} ({', '.join(f'{c} {ty}' for tt, c, ty in STATS_COLUMNS if tt == t)});"
                        for t in STATS_TABLES))
    old.execute(_VERSION_3_DDL)
    assert _columns(new) == _columns(old)


def test_a_version_3_catalog_keeps_its_statistics_cache(tmp_path):
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        cat.write_image_stats([("h", _stats()[0], None)])
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE frame_stats; DROP TABLE depth_stats;" + _VERSION_3_DDL)
    con.execute("INSERT INTO frame_stats (content_hash, error) VALUES ('old', 'unreadable')")
    con.close()
    Catalog(db).close()  # opens and migrates what it must
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT content_hash FROM frame_stats").fetchall() == [("old",)]
    con.close()


@pytest.mark.parametrize("revision", [None, "1"], ids=["no_revision", "revision_1"])
def test_statistics_of_an_older_definition_are_dropped_once(tmp_path, revision):
    """A catalog whose cached statistics were computed by an older definition of them (its
    `stats_revision` below `STATS_REVISION`, or none: written before revisions were kept) drops its
    cache on the next writing open and records the revision, so the next open keeps what is new."""
    from perception_gap.catalog.schema import STATS_REVISION

    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        cat.write_image_stats([("h", _stats()[0], None)])
        cat.write_depth_stats([("d", _stats()[1], None)])
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM meta WHERE key = 'stats_revision'")
    if revision is not None:
        con.execute("INSERT INTO meta VALUES ('stats_revision', ?)", [revision])
    con.close()
    with Catalog(db) as cat:
        cat.write_image_stats([("new", _stats()[0], None)])
    Catalog(db).close()
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT content_hash FROM frame_stats").fetchall() == [("new",)]
    assert con.execute("SELECT count(*) FROM depth_stats").fetchone() == (0,)
    assert con.execute("SELECT value FROM meta WHERE key = 'stats_revision'").fetchall() == [(str(STATS_REVISION),)]
    con.close()


@pytest.mark.parametrize("table", list(STATS_TABLES))
def test_arrow_rows_have_the_stored_types_and_round_trip(tmp_path, table):
    """What the catalog writes (and the Ray engine's shards hold) has the types DuckDB stores, and a
    stored row reads back as the dataclass it was written from."""
    st = _stats()[0 if table == "frame_stats" else 1]
    batch = stats_table(table, [("h", st, None), ("bad", None, "unreadable")])
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        (cat.write_image_stats if table == "frame_stats" else cat.write_depth_stats)(
            [("h", st, None), ("bad", None, "unreadable")])
    con = duckdb.connect(str(db), read_only=True)
    stored = con.sql(f"SELECT * FROM {table} ORDER BY content_hash DESC").to_arrow_table()
    con.close()
    assert batch.schema.names == stored.schema.names
    assert [_arrow_kind(t) for t in batch.schema.types] == [_arrow_kind(t) for t in stored.schema.types]
    good, bad = stored.to_pylist()
    assert _same(from_row(STATS_TABLES[table], good), st)
    assert bad["error"] == "unreadable" and all(v is None for k, v in bad.items() if k not in ("content_hash", "error"))


def test_a_field_the_catalog_cannot_store_is_refused():
    @dataclass(frozen=True)
    class Odd:
        width: int
        labels: list[str]

    with pytest.raises(TypeError, match=r"Odd\.labels"):
        stat_columns(Odd)


def test_prefixed_rows_convert_lists_to_tuples():
    img, _ = _stats()
    row = {f"img_{k}": list(v) if isinstance(v, tuple) else v for k, v in asdict(img).items()}
    back = from_row(ImageStats, row, "img_")
    assert isinstance(back.mean, tuple) and _same(back, img)
