"""Faults that must end in one line, never a traceback.

A full disk during every writing command, broken catalogs, a SQLite file given as the catalog,
bad manifest values, bad output paths, a closed pipe, unusable masks and ground truth with no
box on one side. Every command runs as a subprocess of the real CLI (as in
`test_reliability.py`): each fault must give one line and exit 2, or a recorded skip, and never
lose what was committed.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb
import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from test_reliability import CLI, ENV, clean, cli, good_frame  # noqa: E402

N = 8  # frames per set


def _one_line_error(p: subprocess.CompletedProcess, *fragments: str) -> str:
    clean(p)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    for f in fragments:
        assert f.lower() in p.stderr.lower(), p.stderr
    return p.stderr


def _ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    clean(p)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p


def _folder(root: Path, seed: int, n: int = N) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        Image.fromarray(good_frame(seed + i)).save(root / f"frame_{i:03d}.png")
    return root


def _query(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


@contextmanager
def _tmpfs(where: Path, size: str = "16m", read_only: bool = False) -> Iterator[Path]:
    """A small filesystem of its own at `where` (root only); the test is skipped where mounting is refused."""
    where.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()[:200]}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@contextmanager
def _disk_full(fs: Path, leave: int = 4096) -> Iterator[None]:
    """Fill filesystem `fs` up to `leave` bytes (0: completely), then free it again."""
    filler = fs / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    try:
        yield
    finally:
        filler.unlink()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two indexed sets (sim, real) in a catalog on the ordinary disk, and their reference statistics."""
    tmp = tmp_path_factory.mktemp("errors")
    _folder(tmp / "sim", 0)
    _folder(tmp / "real", 300)
    db = tmp / "c.duckdb"
    _ok(cli("index", tmp / "sim", "--set", "sim", "--domain", "sim", "--db", db, "-q"))
    _ok(cli("index", tmp / "real", "--set", "real", "--domain", "real", "--db", db, "-q"))
    _ok(cli("stats", "--sim", "sim", "--real", "real", "--db", db, "--json", tmp / "ref_stats.json", "-q"))
    return tmp, db


def _copy_db(world, dest: Path) -> Path:
    _, db = world
    shutil.copy(db, dest)
    return dest


# -- a full disk -----------------------------------------------------------------------------------------------

def test_disk_full_during_index_stats_embed_run_is_one_line_and_the_rerun_completes(world, tmp_path):
    tmp, _ = world
    with _tmpfs(tmp_path / "fs") as fs:
        db = fs / "c.duckdb"
        _ok(cli("index", tmp / "sim", "--set", "sim", "--domain", "sim", "--db", db, "-q"))
        committed = _query(db, "SELECT count(*) FROM frames WHERE set_name = 'sim' AND status = 'ok'")
        assert committed == [(N,)]
        for leave, where in ((0, "(No space"), (4096, "c.duckdb.wal")):  # the lock's holder line, then DuckDB's log
            with _disk_full(fs, leave):
                _one_line_error(cli("index", tmp / "real", "--set", "real", "--domain", "real", "--db", db, "-q"),
                                "disk full", "No space left on device", "rerun", where)
            assert _query(db, "SELECT count(*) FROM frames WHERE set_name = 'sim' AND status = 'ok'") == committed
        _ok(cli("index", tmp / "real", "--set", "real", "--domain", "real", "--db", db, "-q"))
        steps = {"stats": ("stats", "--sim", "sim", "--real", "real"),
                 "embed": ("embed", "--encoder", "pixel"),
                 "run": ("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--out", tmp_path / "out")}
        with _disk_full(fs):
            for args in steps.values():
                _one_line_error(cli(*args, "--db", db, "-q"), "disk full", "No space left on device")
        assert not (tmp_path / "out" / "results.json").exists()
        assert _query(db, "SELECT count(*) FROM frames WHERE status = 'ok'") == [(2 * N,)]
        # the reruns complete, with the numbers of a catalog that never saw a full disk
        _ok(cli("stats", "--sim", "sim", "--real", "real", "--db", db, "--json", tmp_path / "s.json", "-q"))
        ref = json.loads((tmp / "ref_stats.json").read_text())
        got = json.loads((tmp_path / "s.json").read_text())
        for name in ("sim", "real"):
            assert got["stats"][name]["channel_mean"] == ref["stats"][name]["channel_mean"]
            assert got["sets"][name]["n_usable"] == N
        _ok(cli(*steps["embed"], "--db", db, "-q"))
        _ok(cli(*steps["run"], "--db", db, "-q"))
        assert _query(db, "SELECT count(*) FROM embeddings WHERE encoder = 'pixel'") == [(2 * N,)]
        assert json.loads((tmp_path / "out" / "results.json").read_text())["sets"]["sim"]["n_usable"] == N


def test_disk_full_while_writing_the_report_keeps_the_previous_outputs_whole(world, tmp_path):
    db = _copy_db(world, tmp_path / "c.duckdb")
    with _tmpfs(tmp_path / "fs", size="4m") as fs:
        out, js = fs / "out", fs / "copy.json"
        run = ("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--db", db, "--out", out, "--json", js,
               "-q")
        _ok(cli(*run))
        before = {p.name: p.read_bytes() for p in (out / "results.json", out / "report.html", js)}
        with _disk_full(fs, leave=0):
            _one_line_error(cli(*run), "No space left on device", "nothing was written")
            after = {p.name: p.read_bytes() for p in (out / "results.json", out / "report.html", js)}
            assert after == before  # both or neither: the old pair is left whole
            # no temp file left; the measured camera is written beside the results, all or none
            assert sorted(p.name for p in out.iterdir()) == ["camera_model.json", "report.html", "results.json"]
        _ok(cli(*run))
        assert json.loads((out / "results.json").read_text())["run_id"] > json.loads(before["results.json"])["run_id"]


# -- broken catalogs -------------------------------------------------------------------------------------------

def test_broken_catalogs_are_one_line(world, tmp_path):
    tmp, db = world
    half = tmp_path / "half.duckdb"
    data = db.read_bytes()
    half.write_bytes(data[: len(data) // 2])
    _one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", half), "damaged or truncated",
                    "Could not read enough bytes")
    _one_line_error(cli("index", tmp / "sim", "--set", "s2", "--domain", "sim", "--db", half), "damaged or truncated")
    notab = _copy_db(world, tmp_path / "notab.duckdb")
    con = duckdb.connect(str(notab))
    con.execute("DROP TABLE frame_stats")
    con.close()
    _one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", notab), "lacks table(s) frame_stats")
    _one_line_error(cli("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--out", tmp_path / "o",
                        "--db", notab), "frame_stats")
    _one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", ""), "`--db`", "empty path")
    _one_line_error(cli("index", tmp / "sim", "--set", "s", "--domain", "sim", "--db", ""), "empty path")
    _one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", tmp / "sim"), "directory")


def test_a_sqlite_file_as_the_catalog_is_refused_without_any_network_attempt(tmp_path):
    import sqlite3

    lite = tmp_path / "frames.db"
    con = sqlite3.connect(lite)
    con.execute("CREATE TABLE frames (a)")
    con.commit()
    con.close()
    _folder(tmp_path / "f", 0, 1)
    err = _one_line_error(cli("index", tmp_path / "f", "--set", "s", "--domain", "sim", "--db", lite),
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
    _one_line_error(p, "not a perception-gap catalog")
    calls = [ln for ln in trace.read_text().splitlines() if "AF_INET" in ln]
    assert calls == [], calls[:5]


def test_every_catalog_connection_has_extension_loading_off(tmp_path):
    from perception_gap.catalog import Catalog

    with Catalog(tmp_path / "c.duckdb") as cat:
        got = cat.con.execute("SELECT current_setting('autoinstall_known_extensions'), "
                              "current_setting('autoload_known_extensions')").fetchone()
    assert got == (False, False)


# -- manifest values -------------------------------------------------------------------------------------------

def test_bad_manifest_values_are_recorded_skips_with_their_reason(tmp_path):
    _folder(tmp_path / "a", 0, 10)
    rows = [{"set": "m", "domain": "sim", "rgb": f"a/frame_{i:03d}.png", "pair_key": str(i)} for i in range(10)]
    rows[0].update(step=3, action=[0.5, 1])
    rows[1]["action"] = [1, None]
    rows[2]["action"] = [[1, 2], 3]
    rows[3]["step"] = float("inf")  # json.dumps writes Infinity, which json.loads reads back
    rows[4]["step"] = "1e400"
    rows[5]["step"] = 1e30
    rows[6]["step"] = [1, 2]
    rows[7]["step"] = "2024-01-01T00:00:00"
    rows[8]["proprio"] = "[1, [2]]"
    rows[9]["step"] = 2.5
    expected = {"1": "action[1] is null", "2": "action[0] is [1, 2]", "3": "'step' is 'inf'",
                "4": "'step' is '1e400'", "5": "outside the 64-bit range", "6": "(list)",
                "7": "expected a whole number", "8": "proprio[1] is [2]", "9": "'step' is '2.5'"}
    m = tmp_path / "m.jsonl"
    m.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    db = tmp_path / "c.duckdb"
    p = _ok(cli("index", "--manifest", m, "--db", db))
    assert "1 usable, 9 skipped" in p.stdout, p.stdout
    got = dict(_query(db, "SELECT pair_key, error FROM frames WHERE status <> 'ok'"))
    assert set(got) == set(expected)
    for key, fragment in expected.items():
        assert got[key].startswith("bad value:") and fragment in got[key], (key, got[key])
    assert _query(db, "SELECT step, action FROM frames WHERE pair_key = '0'") == [(3, [0.5, 1.0])]
    # Parquet keeps types: a timestamp column as `step`
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"set": ["t", "t"], "domain": ["sim", "sim"], "pair_key": ["0", "1"],
                             "rgb": ["a/frame_000.png", "a/frame_001.png"],
                             "step": pa.array([datetime.datetime(2024, 1, 1)] * 2, pa.timestamp("us"))}),
                   tmp_path / "m.parquet")
    _one_line_error(cli("index", "--manifest", tmp_path / "m.parquet", "--db", db), "no usable frame", "2 skipped")
    assert {e for (e,) in _query(db, "SELECT error FROM frames WHERE set_name = 't'")} == {
        "bad value: column 'step' is '2024-01-01 00:00:00' (datetime), expected a whole number"}


def test_csv_manifest_with_a_byte_order_mark(tmp_path):
    _folder(tmp_path / "a", 0, 3)
    m = tmp_path / "m.csv"
    m.write_text("set,domain,rgb,pair_key\n" + "".join(f"b,sim,a/frame_{i:03d}.png,{i}\n" for i in range(3)),
                 encoding="utf-8-sig")
    assert m.read_bytes().startswith(b"\xef\xbb\xbf")
    p = _ok(cli("index", "--manifest", m, "--db", tmp_path / "c.duckdb"))
    assert "3 usable, 0 skipped" in p.stdout


# -- output paths: checked before the analysis runs --------------------------------------------------------------

@contextmanager
def _read_only_dir(where: Path) -> Iterator[Path]:
    """A folder this process cannot write into: a read-only mount as root, mode 555 otherwise."""
    if os.geteuid() == 0:
        with _tmpfs(where, size="1m", read_only=True):
            yield where
        return
    where.mkdir()
    where.chmod(0o555)
    try:
        yield where
    finally:
        where.chmod(0o755)


def test_bad_output_paths_fail_before_the_analysis(world, tmp_path):
    db = _copy_db(world, tmp_path / "c.duckdb")
    (tmp_path / "afile").write_text("x")
    run = ("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--db", db)
    cases = [(("--out", tmp_path / "afile"), "which is a file"),
             (("--out", tmp_path / "afile" / "sub"), "lies under the file"),
             (("--out", tmp_path / "o", "--json", tmp_path), "got the directory"),
             (("--out", tmp_path / "o", "--json", tmp_path / "afile" / "r.json"), "lies under the file")]
    with _read_only_dir(tmp_path / "ro") as ro:
        cases += [(("--out", ro / "out"), "cannot write `--out`"),
                  (("--out", tmp_path / "o", "--json", ro / "r.json"), "cannot write `--json`")]
        for extra, fragment in cases:
            _one_line_error(cli(*run, *extra), fragment)
        _one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", db, "--json", ro / "s.json"),
                        "cannot write `--json`")
        _one_line_error(cli("stats", "--sim", "sim", "--real", "real", "--db", db, "--json", tmp_path), "directory")
        _one_line_error(cli("drift", "--baseline", "sim", "--current", "real", "--encoders", "none", "--db", db,
                            "--out", ro / "d"), "cannot write `--out`")
    _one_line_error(cli("drift", "--baseline", "sim", "--current", "real", "--db", db, "--out", tmp_path / "d",
                        "--config", tmp_path), "`--config`", "directory")
    # nothing was analysed: no run stored, no embedding computed, no output folder begun
    assert _query(db, "SELECT count(*) FROM runs") == [(0,)]
    assert _query(db, "SELECT count(*) FROM embeddings") == [(0,)]
    assert not (tmp_path / "o").exists() and not (tmp_path / "d").exists()


# -- a closed pipe ---------------------------------------------------------------------------------------------

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


# -- masks and detection ---------------------------------------------------------------------------------------

def test_unusable_masks_say_what_is_wrong_with_the_file(world, tmp_path):
    db = _copy_db(world, tmp_path / "c.duckdb")
    cases = {
        "small": (lambda: np.zeros((24, 32), np.uint8), ".png", "frame_000.png: 32x24 pixels, its frame is 64x48"),
        "rgb": (lambda: np.zeros((48, 64, 3), np.uint8), ".png", "frame_000.png: has 3 channels (RGB)"),
        "float": (lambda: np.full((48, 64), 1.5, np.float32), ".npy",
                  "frame_000.npy: holds float32 values that are not whole numbers (e.g. 1.5)"),
        "float_tif": (lambda: np.full((48, 64), 0.25, np.float32), ".tif", "not whole numbers (e.g. 0.25)"),
    }
    for name, (make, ext, fragment) in cases.items():
        d = tmp_path / name
        d.mkdir()
        for i in range(N):
            a = make()
            np.save(d / f"frame_{i:03d}.npy", a) if ext == ".npy" else Image.fromarray(a).save(d / f"frame_{i:03d}{ext}")
        err = _one_line_error(cli("index", "--masks", d, "--set", "sim", "--db", db), f"{N} found, none usable",
                              fragment)
        assert "'frame_000'.png" not in err
    (tmp_path / "none").mkdir()
    _one_line_error(cli("index", "--masks", tmp_path / "none", "--set", "sim", "--db", db),
                    "e.g. 'frame_000.png'")


def _coco(n: int, boxes: bool, scores: bool = False) -> dict:
    images = [{"id": i + 1, "file_name": f"frame_{i:03d}.png", "width": 64, "height": 48} for i in range(n)]
    anns = [{"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [10, 10, 20, 16],
             **({"score": 0.9} if scores else {})} for i in range(n)] if boxes else []
    return {"images": images, "categories": [{"id": 1, "name": "cube"}], "annotations": anns}


def test_ground_truth_with_no_box_on_one_side_still_writes_the_run(world, tmp_path):
    db = _copy_db(world, tmp_path / "c.duckdb")
    files = {"gt_sim": _coco(N, True), "gt_real": _coco(N, False), "det": _coco(N, True, scores=True)}
    for name, body in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(body))
    for set_name in ("sim", "real"):
        _ok(cli("index", "--coco", tmp_path / "det.json", "--set", set_name, "--source", "yolo", "--db", db, "-q"))
        _ok(cli("index", "--coco", tmp_path / f"gt_{set_name}.json", "--set", set_name, "--source", "gt", "--db", db,
                "-q"))
    out = tmp_path / "out"
    p = _ok(cli("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--out", out, "--db", db))
    res = json.loads((out / "results.json").read_text())
    assert (out / "report.html").stat().st_size > 10_000
    det = res["detection"]
    assert det["sets"]["sim"]["yolo"]["AP"] == pytest.approx(1.0)  # detections equal to the ground truth
    assert det["differences"] == {}
    assert det["not_measurable"] == {"sim-vs-real AP difference of 'yolo'":
                                     "ap_difference_ci: a side has no ground-truth objects in the pairs."}
    titles = [f["title"] for f in res["findings"] if f["code"] == "insufficient_data"]
    assert any("AP difference of 'yolo' not computed" in t for t in titles), titles
    assert "AP difference of &#39;yolo&#39; not computed" in (out / "report.html").read_text()
    assert res["encoders"][0]["name"] == "pixel" and "not computed" in p.stdout
