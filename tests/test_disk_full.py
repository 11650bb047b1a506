"""A full disk during every writing command is one line naming it, loses nothing committed, and the
rerun completes with the numbers of a catalog that never saw a full disk; a full disk while the
report is written leaves the previous outputs whole. Needs a tmpfs (root); skips where mounting
is refused.

The commands whose catalog meets the full disk run as `python cli.py` subprocesses; the steps before
them, the reruns after the disk is freed (a fresh open of the catalog either way) and the report test
(its catalog on the ordinary disk) run in-process (`cli_main`)."""

from __future__ import annotations

import json
from functools import partial

import pytest

from tests.cli_process import N_PAIR as N
from tests.cli_process import cli, cli_main, copy_catalog, indexed_pair, ok, one_line_error, query
from tests.filesystems import disk_full, tmpfs


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two indexed sets (sim, real) in a catalog on the ordinary disk, and their reference statistics."""
    return indexed_pair(tmp_path_factory)


def test_disk_full_during_index_stats_embed_run_is_one_line_and_the_rerun_completes(world, tmp_path, capfd, caplog):
    tmp, _ = world
    main = partial(cli_main, capfd, caplog)
    with tmpfs(tmp_path / "fs") as fs:
        db = fs / "c.duckdb"
        ok(main("index", tmp / "sim", "--set", "sim", "--domain", "sim", "--db", db, "-q"))
        committed = query(db, "SELECT count(*) FROM frames WHERE set_name = 'sim' AND status = 'ok'")
        assert committed == [(N,)]
        for leave, where in ((0, "(No space"), (4096, "c.duckdb.wal")):  # the lock's holder line, then DuckDB's log
            with disk_full(fs, leave):
                one_line_error(cli("index", tmp / "real", "--set", "real", "--domain", "real", "--db", db, "-q"),
                                "disk full", "No space left on device", "rerun", where)
            assert query(db, "SELECT count(*) FROM frames WHERE set_name = 'sim' AND status = 'ok'") == committed
        ok(main("index", tmp / "real", "--set", "real", "--domain", "real", "--db", db, "-q"))
        # the full disk stops `run` at its first write, long before the camera stage (the next test keeps
        # that stage: its camera_model.json meets the full disk there)
        steps = {"stats": ("stats", "--sim", "sim", "--real", "real"),
                 "embed": ("embed", "--encoder", "pixel"),
                 "run": ("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--no-attribution",
                         "--out", tmp_path / "out")}
        with disk_full(fs):
            for args in steps.values():
                one_line_error(cli(*args, "--db", db, "-q"), "disk full", "No space left on device")
        assert not (tmp_path / "out" / "results.json").exists()
        assert query(db, "SELECT count(*) FROM frames WHERE status = 'ok'") == [(2 * N,)]
        # the reruns complete, with the numbers of a catalog that never saw a full disk
        ok(main("stats", "--sim", "sim", "--real", "real", "--db", db, "--json", tmp_path / "s.json", "-q"))
        ref = json.loads((tmp / "ref_stats.json").read_text())
        got = json.loads((tmp_path / "s.json").read_text())
        for name in ("sim", "real"):
            assert got["stats"][name]["channel_mean"] == ref["stats"][name]["channel_mean"]
            assert got["sets"][name]["n_usable"] == N
        ok(main(*steps["embed"], "--db", db, "-q"))
        ok(main(*steps["run"], "--db", db, "-q"))
        assert query(db, "SELECT count(*) FROM embeddings WHERE encoder = 'pixel'") == [(2 * N,)]
        assert json.loads((tmp_path / "out" / "results.json").read_text())["sets"]["sim"]["n_usable"] == N


def test_disk_full_while_writing_the_report_keeps_the_previous_outputs_whole(world, tmp_path, capfd, caplog):
    main = partial(cli_main, capfd, caplog)
    db = copy_catalog(world, tmp_path / "c.duckdb")
    with tmpfs(tmp_path / "fs", size="4m") as fs:
        out, js = fs / "out", fs / "copy.json"
        run = ("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--db", db, "--out", out, "--json", js,
               "-q")
        ok(main(*run))
        before = {p.name: p.read_bytes() for p in (out / "results.json", out / "report.html", js)}
        with disk_full(fs, leave=0):
            one_line_error(main(*run), "No space left on device", "nothing was written")
            after = {p.name: p.read_bytes() for p in (out / "results.json", out / "report.html", js)}
            assert after == before  # both or neither: the old pair is left whole
            # no temp file left; the measured camera is written beside the results, all or none
            assert sorted(p.name for p in out.iterdir()) == ["camera_model.json", "report.html", "results.json"]
        ok(main(*run))
        assert json.loads((out / "results.json").read_text())["run_id"] > json.loads(before["results.json"])["run_id"]
