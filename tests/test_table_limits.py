"""Tables read exactly as written and within a row cap checked before the rows are held.

A Parquet file of a few hundred KB can hold tens of millions of rows (a constant column is a few bytes per row
group): its row count is read from the footer and refused past the cap before a row is decoded.
The memory cases run the CLI in a child process capped at 1.5 GiB of address space beyond its
imports. Then the cells: `1_0` is not 10, `true` is not 1 m, `x` and `X ` are one column twice,
and an empty `--initial-states` is an error, not an absent option.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perception_gap import cli
from perception_gap.errors import InputError
from perception_gap.examples import write_examples
from perception_gap.ingest.manifests import MAX_MANIFEST_ROWS
from perception_gap.ingest.tables import read_table
from perception_gap.workflows.check_inputs import MAX_STATES
from tests.bounded_run import run_bounded

BATCH = 2**20


def _constant_parquet(path: Path, columns: dict[str, object], n_batches: int) -> int:
    """`n_batches` row groups of BATCH rows, each column one constant value (the writer's dictionary
    encoding keeps the file small whatever the row count); returns the row count."""
    batch = pa.table({k: pa.repeat(v, BATCH) for k, v in columns.items()})
    with pq.ParquetWriter(path, batch.schema) as w:
        for _ in range(n_batches):
            w.write_table(batch, row_group_size=BATCH)
    return BATCH * n_batches


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    return write_examples(tmp_path_factory.mktemp("examples"))


def test_a_10_million_row_parquet_manifest_is_refused_from_its_footer_under_a_memory_cap(tmp_path):
    path = tmp_path / "m.parquet"
    n = _constant_parquet(path, {"set": "s", "domain": "sim", "rgb": "a.png", "pair_key": "k"}, 10)
    assert path.stat().st_size < 2**20
    code, err = run_bounded(["index", "--manifest", str(path), "--db", str(tmp_path / "c.duckdb"), "-q"])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-2000:]
    assert f"Expected at most {MAX_MANIFEST_ROWS:,} rows in --manifest" in lines[0] and f"got {n:,}" in lines[0]


def test_14_million_initial_states_are_refused_before_loading_under_a_memory_cap(examples, tmp_path):
    path = tmp_path / "states.parquet"
    n = _constant_parquet(path, {"x": 0.3, "y": 0.0, "z": 0.05}, 14)
    code, err = run_bounded(["reprojection", str(examples.cameras), "--initial-states", str(path), "-q"])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err[-2000:]
    assert f"Expected at most {MAX_STATES:,} rows in --initial-states" in lines[0] and f"got {n:,}" in lines[0]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_csv_and_jsonl_rows_are_counted_as_they_stream(tmp_path, fmt):
    path = tmp_path / f"t.{fmt}"
    rows = [{"a": i} for i in range(5)]
    path.write_text("a\n" + "".join(f"{i}\n" for i in range(5)) if fmt == "csv"
                    else "".join(json.dumps(r) + "\n" for r in rows))
    assert read_table(path, max_rows=5).n_rows == 5
    with pytest.raises(InputError, match=r"Expected at most 4 rows in FILE '.*', got more \(reading stopped there\)"):
        read_table(path, max_rows=4)


def _states(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _refused(examples, states, capsys) -> str:
    capsys.readouterr()
    code = cli.main(["reprojection", str(examples.cameras), "--initial-states", states, "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("header", ["x,y,z,X", 'x,y,z,"X "', "X,y,z,x"])
def test_columns_that_differ_only_in_case_or_spaces_are_refused(examples, tmp_path, capsys, header):
    """`x` and `X` used to collapse onto the later one: every state then sat at that column's value."""
    f = _states(tmp_path, "s.csv", header + "\n0.3,0.0,0.05,0.9\n0.35,0.05,0.05,0.1\n")
    err = _refused(examples, f, capsys)
    assert "which both read as `x`" in err


def test_duplicate_columns_in_jsonl_keys_are_refused(examples, tmp_path, capsys):
    f = _states(tmp_path, "s.jsonl", json.dumps({"x": 0.3, "y": 0.0, "z": 0.05, " X": 0.9}) + "\n")
    assert "which both read as `x`" in _refused(examples, f, capsys)


@pytest.mark.parametrize("cell", ["1_0", "0_.3", "١"])
def test_a_number_python_float_reads_but_a_table_should_not_is_refused(examples, tmp_path, capsys, cell):
    """float('1_0') is 10.0 and float('١') is 1.0 (an Arabic-Indic digit): neither is a table number."""
    f = _states(tmp_path, "s.csv", f"x,y,z\n0.3,0.0,0.05\n{cell},0.0,0.05\n")
    err = _refused(examples, f, capsys)
    assert "Row 2: expected `x` to be a finite number" in err and repr(cell) in err


def test_digit_separators_in_a_manifest_action_are_a_bad_value(tmp_path):
    from perception_gap.ingest.manifests import read_manifest

    m = tmp_path / "m.csv"
    m.write_text('set,domain,rgb,pair_key,action,step\ns,sim,a.png,k,"[1, ""2_5""]",1\ns,sim,b.png,j,,1_2\n')
    entries = read_manifest(m)[("s", "sim")]
    assert [e.error for e in entries] == ["bad value: action[1] is '2_5', expected a number",
                                          "bad value: column 'step' is '1_2', expected a whole number"]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_boolean_coordinate_is_refused(examples, tmp_path, capsys, fmt):
    rows = [{"x": 0.3, "y": 0.0, "z": 0.05}, {"x": True, "y": 0.0, "z": 0.05}]
    path = tmp_path / f"s.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.table({"x": pa.array([False, True]), "y": [0.0, 0.0], "z": [0.05, 0.05]}), path)
    err = _refused(examples, str(path), capsys)
    row, value = ("Row 2", "True") if fmt == "jsonl" else ("Row 1", "False")
    assert f"{row}: expected `x` to be a finite number in [-1e+06, 1e+06], got {value} (a boolean)." in err


def test_an_empty_initial_states_path_is_refused(examples, capsys):
    err = _refused(examples, "", capsys)
    assert "Expected `--initial-states` to name a CSV, JSONL or Parquet file, got ''" in err
