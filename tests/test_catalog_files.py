"""What `--db` may name: a damaged, truncated or incomplete catalog, a SQLite file, an empty path,
a directory, a FIFO or a device are each one line (exit 2) before any lock or network attempt,
and every catalog connection has DuckDB's extension loading off.

The refusals run in-process (`cli_main`: `cli.main`, stderr read at the file descriptor); the check
that no socket is opened traces a real `python cli.py` process."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import partial

import duckdb
import pytest

from perception_gap import cli as pg_cli
from tests.cli_process import (
    CLI,
    ENV,
    cli_main,
    copy_catalog,
    flat_frames,
    frame_folder,
    indexed_pair,
    one_line,
    one_line_error,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two indexed sets (sim, real) in a catalog on the ordinary disk, and their reference statistics."""
    return indexed_pair(tmp_path_factory)


def test_broken_catalogs_are_one_line(world, tmp_path, capfd, caplog):
    cli = partial(cli_main, capfd, caplog)
    tmp, db = world
    half = tmp_path / "half.duckdb"
    data = db.read_bytes()
    half.write_bytes(data[: len(data) // 2])
    one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", half), "damaged or truncated",
                    "Could not read enough bytes")
    one_line_error(cli("index", tmp / "sim", "--set", "s2", "--domain", "sim", "--db", half), "damaged or truncated")
    notab = copy_catalog(world, tmp_path / "notab.duckdb")
    con = duckdb.connect(str(notab))
    con.execute("DROP TABLE frame_stats")
    con.close()
    one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", notab), "lacks table(s) frame_stats")
    one_line_error(cli("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--out", tmp_path / "o",
                        "--db", notab), "frame_stats")
    one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", ""), "`--db`", "empty path")
    one_line_error(cli("index", tmp / "sim", "--set", "s", "--domain", "sim", "--db", ""), "empty path")
    one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", tmp / "sim"), "directory")


def test_a_sqlite_file_as_the_catalog_is_refused_without_any_network_attempt(tmp_path, capfd, caplog):
    import sqlite3

    cli = partial(cli_main, capfd, caplog)

    lite = tmp_path / "frames.db"
    con = sqlite3.connect(lite)
    con.execute("CREATE TABLE frames (a)")
    con.commit()
    con.close()
    frame_folder(tmp_path / "f", 0, 1)
    err = one_line_error(cli("index", tmp_path / "f", "--set", "s", "--domain", "sim", "--db", lite),
                          "not a perception-gap catalog", "SQLite")
    assert "download" not in err and "extension" not in err.lower()
    assert lite.read_bytes().startswith(b"SQLite format 3")  # left untouched
    if shutil.which("strace") is None:
        return
    trace = tmp_path / "trace"
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect,socket", "-o", str(trace), *CLI, "stats",
                        "--sim", "s", "--real", "r", "--db", str(lite)], capture_output=True, text=True, env=ENV)
    if not trace.exists() or "Operation not permitted" in p.stderr:
        return  # ptrace refused here: the message above is what can be checked
    one_line_error(p, "not a perception-gap catalog")
    calls = [ln for ln in trace.read_text().splitlines() if "AF_INET" in ln]
    assert calls == [], calls[:5]


def test_every_catalog_connection_has_extension_loading_off(tmp_path):
    from perception_gap.catalog import Catalog

    with Catalog(tmp_path / "c.duckdb") as cat:
        got = cat.con.execute("SELECT current_setting('autoinstall_known_extensions'), "
                              "current_setting('autoload_known_extensions')").fetchone()
    assert got == (False, False)


def test_a_db_that_is_not_a_regular_file_is_refused_before_any_lock(tmp_path, capsys):
    fifo = tmp_path / "fifo.duckdb"
    os.mkfifo(fifo)
    flat_frames(tmp_path / "frames", 1)
    for db in (str(fifo), os.devnull):
        had_lock = os.path.exists(db + ".lock")
        assert pg_cli.main(["index", str(tmp_path / "frames"), "--set", "s", "--domain", "sim", "--db", db]) == 2
        one_line(capsys, "`--db`", repr(db), "FIFO" if db == str(fifo) else "character device")
        assert os.path.exists(db + ".lock") == had_lock
    assert pg_cli.main(["sets", "--db", str(fifo)]) == 2
    one_line(capsys, "FIFO")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.duckdb", "frames"]
