"""Output paths are checked before the analysis runs (a file, a path under a file, a directory, a
folder that cannot be written: one line, nothing analysed), and `stats` into a closed pipe exits
quietly as `cat` would (a subprocess: the exit status is the signal's)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.cli_process import CLI, ENV, copy_catalog, indexed_pair, one_line_error, query
from tests.filesystems import read_only_dir
from tests.in_process import here


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two indexed sets (sim, real) in a catalog on the ordinary disk, and their reference statistics."""
    return indexed_pair(tmp_path_factory)


def test_bad_output_paths_fail_before_the_analysis(world, tmp_path, capfd):
    db = copy_catalog(world, tmp_path / "c.duckdb")
    (tmp_path / "afile").write_text("x")
    run = ("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--db", db)
    cases = [(("--out", tmp_path / "afile"), "which is a file"),
             (("--out", tmp_path / "afile" / "sub"), "lies under the file"),
             (("--out", tmp_path / "o", "--json", tmp_path), "got the directory"),
             (("--out", tmp_path / "o", "--json", tmp_path / "afile" / "r.json"), "lies under the file")]
    with read_only_dir(tmp_path / "ro") as ro:
        cases += [(("--out", ro / "out"), "cannot write `--out`"),
                  (("--out", tmp_path / "o", "--json", ro / "r.json"), "cannot write `--json`")]
        for extra, fragment in cases:
            one_line_error(here(capfd, *run, *extra), fragment)
        one_line_error(here(capfd, "stats", "--sim", "sim", "--real", "real", "--db", db, "--json", ro / "s.json"),
                       "cannot write `--json`")
        one_line_error(here(capfd, "stats", "--sim", "sim", "--real", "real", "--db", db, "--json", tmp_path),
                       "directory")
        one_line_error(here(capfd, "drift", "--baseline", "sim", "--current", "real", "--encoders", "none",
                            "--db", db, "--out", ro / "d"), "cannot write `--out`")
    one_line_error(here(capfd, "drift", "--baseline", "sim", "--current", "real", "--db", db,
                        "--out", tmp_path / "d", "--config", tmp_path), "`--config`", "directory")
    # nothing was analysed: no run stored, no embedding computed, no output folder begun
    assert query(db, "SELECT count(*) FROM runs") == [(0,)]
    assert query(db, "SELECT count(*) FROM embeddings") == [(0,)]
    assert not (tmp_path / "o").exists() and not (tmp_path / "d").exists()


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_stats_into_a_closed_pipe_exits_quietly(world, unbuffered):
    _, db = world
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first line (`stats ... | head -0`)
    env = {k: v for k, v in ENV.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    try:
        p = subprocess.run(CLI + ["stats", "--sim", "sim", "--real", "real", "--db", str(db)], stdout=w,
                           stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    finally:
        os.close(w)
    assert p.stderr == "", p.stderr
    assert p.returncode == 141  # 128 + SIGPIPE, as a shell reports `cat` killed by a closed pipe
