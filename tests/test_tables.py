"""One table reader for every command: the same rows as CSV, JSONL or Parquet give the same results,
and the same fault gives the same one-line error whichever command reads the table."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perception_gap import cli
from perception_gap.errors import InputError
from perception_gap.examples import write_examples
from perception_gap.ingest.tables import read_table

FORMATS = ("csv", "jsonl", "parquet")
# command -> (the example table it reads, argv around that table's path)
COMMANDS = {
    "rollouts": ("rollouts", lambda f, ex: ["rollouts", f]),
    "rank-fidelity": ("rates", lambda f, ex: ["rank-fidelity", f]),
    "latency": ("ticks", lambda f, ex: ["latency", f, "--fps", "20"]),
    "replay": ("poses", lambda f, ex: ["replay", f]),
    "reprojection": ("states", lambda f, ex: ["reprojection", str(ex.cameras), "--initial-states", f]),
}


def _typed(v: str | None) -> object:
    """A CSV cell as JSONL and Parquet would hold it: a number where it reads as one."""
    if v is None:
        return None
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def _write(rows: list[dict], path: Path) -> Path:
    if path.suffix == ".csv":
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps({k: _typed(v) for k, v in r.items()}) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist([{k: _typed(v) for k, v in r.items()} for r in rows]), path)
    return path


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    return write_examples(tmp_path_factory.mktemp("examples"))


def _rows(examples, table: str) -> list[dict]:
    return read_table(getattr(examples, table)).rows()


def _section(path: Path, command: str) -> dict:
    res = json.loads(path.read_text())
    key = command.replace("-", "_")
    return {"findings": res["findings"], key: res[key]}


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_reads_csv_jsonl_and_parquet_alike(examples, tmp_path, command):
    table, argv = COMMANDS[command]
    got = {}
    for fmt in FORMATS:
        f = _write(_rows(examples, table), tmp_path / f"{table}.{fmt}")
        out = tmp_path / f"{fmt}.json"
        assert cli.main([*argv(str(f), examples), "--json", str(out), "-q"]) == 0, fmt
        got[fmt] = _section(out, command)
    assert got["jsonl"] == got["csv"] and got["parquet"] == got["csv"]


def test_manifests_read_csv_jsonl_and_parquet_alike(examples, tmp_path):
    sets = {}
    for fmt in FORMATS:
        m = _write(_rows(examples, "manifest"), examples.root / f"m_{fmt}.{fmt}")
        db, js = tmp_path / f"{fmt}.duckdb", tmp_path / f"{fmt}.json"
        assert cli.main(["index", "--manifest", str(m), "--db", str(db), "--workers", "1", "-q"]) == 0
        assert cli.main(["sets", "--db", str(db), "--json", str(js), "-q"]) == 0
        sets[fmt] = [(s["name"], s["domain"], s["usable"]) for s in json.loads(js.read_text())["sets"]]
    assert sets["csv"] == [("real", "real", 8), ("sim", "sim", 8)]
    assert sets["jsonl"] == sets["csv"] and sets["parquet"] == sets["csv"]


def test_csv_cells_stay_text_and_empty_cells_are_none(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("pair_key,x\n001,1.5\n002,\n")
    jl = _write([{"pair_key": "001", "x": "1.5"}, {"pair_key": "002", "x": None}], tmp_path / "t.jsonl")
    assert read_table(f).columns == {"pair_key": ["001", "002"], "x": ["1.5", None]}
    assert read_table(jl).columns == {"pair_key": [1, 2], "x": [1.5, None]}


def _argv(command: str, path: str, examples, tmp_path) -> list[str]:
    if command == "index":
        return ["index", "--manifest", path, "--db", str(tmp_path / "c.duckdb")]
    return COMMANDS[command][1](path, examples)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("command", [*COMMANDS, "index"])
def test_a_missing_file_a_bad_suffix_and_no_rows_read_the_same_everywhere(examples, tmp_path, capsys, command):
    what = "--initial-states" if command == "reprojection" else "--manifest" if command == "index" else "FILE"
    assert cli.main(_argv(command, str(tmp_path / "none.csv"), examples, tmp_path)) == 2
    assert f"Expected `{what}` to be an existing file, got " in _one_line(capsys)
    assert cli.main(_argv(command, str(tmp_path / "log.txt"), examples, tmp_path)) == 2
    assert f"Expected `{what}` to end in .csv, .jsonl or .parquet" in _one_line(capsys)
    (tmp_path / "empty.csv").write_text("a,b\n")
    assert cli.main(_argv(command, str(tmp_path / "empty.csv"), examples, tmp_path)) == 2
    assert re.search(rf"{re.escape(what)} '.*empty.csv' has no rows\.", _one_line(capsys))


@pytest.mark.parametrize("command,table,column", [
    ("rollouts", "rollouts", "success"), ("rank-fidelity", "rates", "real"), ("replay", "poses", "qz"),
    ("reprojection", "states", "z"), ("index", "manifest", "rgb"),
])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_missing_column_reads_the_same_everywhere(examples, tmp_path, capsys, command, table, column, fmt):
    rows = [{k: v for k, v in r.items() if k != column} for r in _rows(examples, table)]
    f = _write(rows, tmp_path / f"t.{fmt}")
    assert cli.main(_argv(command, str(f), examples, tmp_path)) == 2
    assert f"is missing required column(s) {column} (has: " in _one_line(capsys)


@pytest.mark.parametrize("command,table,column", [
    ("rollouts", "rollouts", "episode_length"), ("rank-fidelity", "rates", "sim"), ("replay", "poses", "x"),
    ("reprojection", "states", "x"), ("latency", "ticks", "inferred"),
])
@pytest.mark.parametrize("fmt", ("csv", "jsonl"))
def test_a_non_finite_value_reads_the_same_everywhere(examples, tmp_path, capsys, command, table, column, fmt):
    rows = _rows(examples, table)
    for r in rows:
        r.setdefault(column, "1")
    rows[2][column] = "inf"
    f = tmp_path / f"t.{fmt}"
    if fmt == "csv":
        _write(rows, f)
    else:  # JSON has no infinity literal; Python's reader takes `Infinity`
        f.write_text("".join(json.dumps({k: float("inf") if v == "inf" else _typed(v) for k, v in r.items()}) + "\n"
                             for r in rows))
    assert cli.main(_argv(command, str(f), examples, tmp_path)) == 2
    assert re.search(rf"Row 3: expected (stage )?`{column}` to be a finite", _one_line(capsys))


def test_a_fifo_or_a_folder_is_refused_by_name(tmp_path):
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(InputError, match=r"Expected `FILE` to be a regular file, got .*d\.csv"):
        read_table(tmp_path / "d.csv")
