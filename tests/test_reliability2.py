"""Reliability of the catalog against its inputs: cache poisoning by files changed after `index`,
special files that would hang a reader, duplicate manifest columns, unlabelled mask ids,
repeated manifest listings, symlinks leaving a folder, and pool workers outliving a killed
writer (with the stale lock they held).

Every command runs as a subprocess of the real CLI (helpers from `test_reliability`), with a
timeout, so a regression that hangs fails instead of stalling the suite.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_reliability import CLI, ENV, _frames_dir, _manifest, _one_line_error, clean, cli

T = 120  # seconds: every command here finishes in a few


def _query(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def _blake(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


# -- cache poisoning ---------------------------------------------------------------------------------------

def _noise_frames(root: Path, n: int, mean: float, seed: int) -> None:
    root.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(np.clip(rng.normal(mean, 6, (48, 64, 3)), 0, 255).astype(np.uint8)).save(root / f"f{i}.png")


def _embeddings(db: Path) -> dict[str, np.ndarray]:
    """Pixel-encoder vectors of every frame, by path."""
    rows = _query(db, "SELECT f.rgb_path, e.vector FROM frames f JOIN embeddings e ON e.content_hash = f.content_hash "
                      "WHERE f.status = 'ok' AND e.encoder = 'pixel'")
    return {p: np.asarray(v) for p, v in rows}


def _index(db: Path, sets: dict[str, Path]) -> None:
    for name, root in sets.items():
        p = cli("index", root, "--set", name, "--domain", "sim" if name == "a" else "real", "--db", db, "-q", timeout=T)
        clean(p)
        assert p.returncode == 0, p.stderr


def test_a_file_changed_after_index_never_poisons_the_cache_of_its_old_content(tmp_path):
    """Sets a and b share content; a/f0.png is rewritten after `index`, then again before `embed`.
    Set b must be measured as it is (about 49, not 250), a/f0 as it is now, and every number
    and embedding must be exactly what a fresh catalog of the same files gives."""
    a, b = tmp_path / "a", tmp_path / "b"
    _noise_frames(a, 4, 49, seed=0)
    shutil.copytree(a, b)  # identical content: one content hash per pair, shared by both sets
    db = tmp_path / "c.duckdb"
    _index(db, {"a": a, "b": b})
    old_hash = _blake(a / "f0.png")
    Image.fromarray(np.full((48, 64, 3), 250, np.uint8)).save(a / "f0.png")  # changed after index
    p = cli("stats", "--sim", "a", "--real", "b", "--db", db, "--json", tmp_path / "s.json", timeout=T)
    clean(p)
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "s.json").read_text())
    assert res["sets"]["a"]["reindexed"] == [str(a / "f0.png")] and "re-indexed 1 frame" in p.stdout
    assert res["sets"]["b"]["reindexed"] == []
    # the catalog knows a/f0.png by its new content; the old hash keeps the old content's numbers
    assert _query(db, "SELECT content_hash FROM frames WHERE rgb_path = ?", [str(a / "f0.png")])[0][0] == _blake(a / "f0.png")
    means = dict(_query(db, "SELECT content_hash, mean FROM frame_stats"))
    truth = np.asarray(Image.open(b / "f0.png"), np.float64).reshape(-1, 3).mean(axis=0)  # independent reference
    np.testing.assert_allclose(means[old_hash], truth, atol=1.0)
    np.testing.assert_allclose(means[_blake(a / "f0.png")], [250, 250, 250])
    assert max(res["stats"]["b"]["channel_max"]) < 120  # nothing of the 250-frame reached set b
    np.testing.assert_allclose(res["stats"]["b"]["channel_mean"], 49, atol=2)

    # changed again before `embed`: embeddings are checked the same way
    Image.fromarray(np.full((48, 64, 3), 200, np.uint8)).save(a / "f0.png")
    p = cli("embed", "--encoder", "pixel", "--db", db, "-q", timeout=T)
    clean(p)
    assert p.returncode == 0, p.stderr
    p = cli("stats", "--sim", "a", "--real", "b", "--db", db, "--json", tmp_path / "s.json", "-q", timeout=T)
    res = json.loads((tmp_path / "s.json").read_text())

    # a fresh catalog of the same files is the reference for every number, embeddings included
    fresh = tmp_path / "fresh.duckdb"
    _index(fresh, {"a": a, "b": b})
    for args in (("embed", "--encoder", "pixel"), ("stats", "--sim", "a", "--real", "b", "--json", tmp_path / "f.json")):
        p = cli(*args, "--db", fresh, "-q", timeout=T)
        assert p.returncode == 0, p.stderr
    ref = json.loads((tmp_path / "f.json").read_text())
    assert res["stats"] == ref["stats"] and res["findings"] == ref["findings"]
    got, want = _embeddings(db), _embeddings(fresh)
    assert sorted(got) == sorted(want) and len(got) == 8
    for path in want:
        np.testing.assert_array_equal(got[path], want[path], err_msg=path)
    assert not np.array_equal(got[str(a / "f0.png")], got[str(b / "f0.png")])

    # indexing again finds nothing to do: the catalog already holds the new content
    p = cli("index", a, "--set", "a", "--domain", "sim", "--db", db, timeout=T)
    assert p.returncode == 0 and "0 changed, 4 unchanged" in p.stdout, p.stdout


def test_a_file_replaced_by_a_fifo_after_index_is_a_skip_not_a_hang(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _noise_frames(a, 3, 49, seed=1)
    _noise_frames(b, 3, 60, seed=2)
    db = tmp_path / "c.duckdb"
    _index(db, {"a": a, "b": b})
    (a / "f1.png").unlink()
    os.mkfifo(a / "f1.png")
    p = cli("stats", "--sim", "a", "--real", "b", "--db", db, "--json", tmp_path / "s.json", timeout=T)
    clean(p)
    assert p.returncode == 0, p.stderr
    skipped = json.loads((tmp_path / "s.json").read_text())["sets"]["a"]["skipped"]
    assert [(Path(s["path"]).name, s["reason"]) for s in skipped] == [("f1.png", "is a FIFO (named pipe), not a regular file")]


# -- special files: only regular files are read ------------------------------------------------------------

def test_devices_and_fifos_are_skipped_never_read(tmp_path):
    """Symlinks to /dev/zero and /dev/urandom and a FIFO named x.png: recorded skips, fast."""
    m = tmp_path / "m"
    _frames_dir(m / "a", 2)
    (m / "a" / "zero.png").symlink_to("/dev/zero")
    (m / "a" / "urandom.npy").symlink_to("/dev/urandom")
    os.mkfifo(m / "a" / "x.png")
    rows = [{"set": "s", "domain": "sim", "rgb": f"a/{n}", "pair_key": str(i)}
            for i, n in enumerate(["f0.png", "f1.png", "zero.png", "urandom.npy", "x.png"])]
    db = tmp_path / "c.duckdb"
    t0 = time.perf_counter()
    p = cli("index", "--manifest", _manifest(m / "m.jsonl", rows), "--db", db, timeout=T)
    clean(p)
    assert p.returncode == 0 and "2 usable, 3 skipped" in p.stdout, p.stdout
    got = dict(_query(db, "SELECT pair_key, error FROM frames WHERE status <> 'ok'"))
    assert got == {"2": "is a character device, not a regular file", "3": "is a character device, not a regular file",
                   "4": "is a FIFO (named pipe), not a regular file"}, got
    # the same through a folder scan: the FIFO is read by nothing; the device links leave the folder
    p = cli("index", m / "a", "--set", "f", "--domain", "sim", "--db", db, timeout=T)
    clean(p)
    assert p.returncode == 0 and "2 usable, 3 skipped" in p.stdout, p.stdout
    got = {Path(k).name: v for k, v in _query(db, "SELECT rgb_path, error FROM frames WHERE set_name = 'f' AND status <> 'ok'")}
    assert got["x.png"] == "is a FIFO (named pipe), not a regular file"
    assert got["zero.png"] == "symbolic link resolves outside the folder (to /dev/zero)"
    assert time.perf_counter() - t0 < 60


def test_a_fifo_as_the_manifest_is_a_one_line_error(tmp_path):
    os.mkfifo(tmp_path / "m.csv")
    _one_line_error(cli("index", "--manifest", tmp_path / "m.csv", "--db", tmp_path / "c.duckdb", timeout=T),
                    "regular file", "FIFO")


# -- manifests and masks -------------------------------------------------------------------------------------

def test_duplicate_manifest_columns_are_an_error_naming_the_column(tmp_path):
    _frames_dir(tmp_path / "a", 2)
    (tmp_path / "m.csv").write_text("set,domain,rgb,pair_key,rgb\ns,sim,a/f0.png,0,a/f1.png\n")
    _one_line_error(cli("index", "--manifest", tmp_path / "m.csv", "--db", tmp_path / "c.duckdb", timeout=T),
                    "two columns named 'rgb'")
    (tmp_path / "m.jsonl").write_text('{"set": "s", "domain": "sim", "rgb": "a/f0.png", "pair_key": "0", "rgb": "a/f1.png"}\n')
    _one_line_error(cli("index", "--manifest", tmp_path / "m.jsonl", "--db", tmp_path / "c.duckdb", timeout=T),
                    "line 1", "key 'rgb' appears twice")
    assert not (tmp_path / "c.duckdb").exists() or not _query(tmp_path / "c.duckdb", "SELECT * FROM frames")


def test_mask_ids_missing_from_the_categories_are_counted_as_dropped(tmp_path):
    _frames_dir(tmp_path / "a", 2)
    db = tmp_path / "c.duckdb"
    assert cli("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db, "-q", timeout=T).returncode == 0
    (tmp_path / "masks").mkdir()
    for i in range(2):
        mask = np.zeros((48, 64), np.uint8)
        mask[5:15, 5:20] = 1   # a cube
        mask[30:40, 30:50] = 2  # not in the mapping
        Image.fromarray(mask).save(tmp_path / "masks" / f"f{i}.png")
    (tmp_path / "cats.json").write_text('{"1": "cube"}')
    p = cli("index", "--masks", tmp_path / "masks", "--mask-categories", tmp_path / "cats.json", "--set", "s",
            "--db", db, timeout=T)
    clean(p)
    assert p.returncode == 0, p.stderr
    assert "2 boxes on 2 frames" in p.stdout and "2 dropped (id 2 not in --mask-categories)" in p.stdout, p.stdout
    assert _query(db, "SELECT category, bbox FROM annotations") == [("cube", (5.0, 5.0, 15.0, 10.0))] * 2


def test_a_file_listed_100000_times_is_one_summary_line_and_counted_by_stats(tmp_path):
    _frames_dir(tmp_path / "a", 3)
    rows = [{"set": "s", "domain": "sim", "rgb": "a/f0.png", "pair_key": str(i)} for i in range(100_000)]
    rows += [{"set": "s", "domain": "sim", "rgb": "a/f1.png", "pair_key": "x"},
             {"set": "r", "domain": "real", "rgb": "a/f2.png", "pair_key": "0"}]
    db = tmp_path / "c.duckdb"
    p = cli("index", "--manifest", _manifest(tmp_path / "m.jsonl", rows), "--db", db, timeout=T)
    clean(p)
    assert p.returncode == 0, p.stderr
    assert "s (sim): 100001 listed" in p.stdout and "2 usable, 99999 skipped" in p.stdout, p.stdout
    again = [ln for ln in p.stdout.splitlines() if "listed again" in ln]
    # one line for the reason, grouped with its count and the file named (skips grouped by reason)
    want = ("  skipped 1 frame: the same file is listed again 99,999 more times (pair keys '1', '2', '3', ...); "
            f"its first listing (pair key '0') is kept: f0.png (in {tmp_path / 'a'})")
    assert again == [want], again
    p = cli("stats", "--sim", "s", "--real", "r", "--db", db, "--json", tmp_path / "s.json", timeout=T)
    clean(p)
    assert p.returncode == 0 and "2 usable of 100001 frames, 99999 skipped" in p.stdout, p.stdout
    info = json.loads((tmp_path / "s.json").read_text())["sets"]["s"]
    assert (info["n_frames"], info["n_usable"], info["n_skipped"]) == (100_001, 2, 99_999)
    assert [(s["path"], s["repeats"]) for s in info["skipped"]] == [(str(tmp_path / "a" / "f0.png"), 99_999)]
    # a listing without repeats clears them
    p = cli("index", "--manifest", _manifest(tmp_path / "m.jsonl", rows[:1] + rows[-2:]), "--db", db, "-q", timeout=T)
    assert p.returncode == 0
    p = cli("stats", "--sim", "s", "--real", "r", "--db", db, "--json", tmp_path / "s.json", "-q", timeout=T)
    assert json.loads((tmp_path / "s.json").read_text())["sets"]["s"]["n_skipped"] == 0


def test_symlinks_in_a_folder_follow_one_rule_on_resolved_paths(tmp_path):
    _frames_dir(tmp_path / "outside", 1)
    root = tmp_path / "frames"
    _frames_dir(root, 2)
    (root / "out.png").symlink_to(tmp_path / "outside" / "f0.png")
    (root / "in.png").symlink_to(root / "f1.png")  # resolves inside: read like any frame
    (root / "sub").mkdir()
    (root / "sub" / "up.png").symlink_to("../../outside/f0.png")
    db = tmp_path / "c.duckdb"
    p = cli("index", root, "--set", "s", "--domain", "sim", "--db", db, timeout=T)
    clean(p)
    assert p.returncode == 0 and "3 usable, 2 skipped" in p.stdout, p.stdout
    got = {Path(k).name: (st, e) for k, st, e in _query(db, "SELECT rgb_path, status, error FROM frames")}
    target = str((tmp_path / "outside" / "f0.png").resolve())
    assert got["out.png"] == got["up.png"] == ("skipped", f"symbolic link resolves outside the folder (to {target})")
    assert got["in.png"][0] == "ok"


# -- pool workers die with their parent; a lock whose holder is gone is taken over ---------------------------

def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(b")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


@pytest.fixture(scope="module")
def many_frames(tmp_path_factory):
    """800 textured 320x240 JPEGs in two sets, indexed: statistics take a second or two on 2 workers."""
    tmp = tmp_path_factory.mktemp("kill")
    rng = np.random.default_rng(0)
    base = np.clip(rng.normal(120, 40, (240, 320, 3)), 0, 255).astype(np.uint8)
    for name in ("sim", "real"):
        (tmp / name).mkdir()
        for i in range(400):
            Image.fromarray(np.roll(base, i, axis=1)).save(tmp / name / f"f{i:04d}.jpg", quality=90)
    db = tmp / "c.duckdb"
    for name in ("sim", "real"):
        assert cli("index", tmp / name, "--set", name, "--domain", name, "--db", db, "-q", timeout=300).returncode == 0
    return tmp, db


@pytest.mark.parametrize("command,sig", [("stats", signal.SIGKILL), ("stats", signal.SIGTERM), ("run", signal.SIGKILL)])
def test_killed_writer_leaves_no_worker_and_no_stale_lock(many_frames, tmp_path, command, sig):
    tmp, base_db = many_frames
    db = tmp_path / "c.duckdb"
    shutil.copy(base_db, db)  # no statistics cached yet
    args = ["--sim", "sim", "--real", "real", "--db", db, "--workers", "2", "-q"]
    if command == "run":
        args += ["--encoders", "pixel", "--out", tmp_path / "out"]
    proc = subprocess.Popen(CLI + [command] + [str(a) for a in args], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
            workers = _children(proc.pid)
            time.sleep(0.01)
        assert len(workers) >= 2, "the statistics pool never started"
        time.sleep(0.3)  # mid-statistics
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(_gone(w) for w in workers):
        time.sleep(0.05)
    assert all(_gone(w) for w in workers), [w for w in workers if not _gone(w)]
    p = cli("index", tmp / "sim", "--set", "sim", "--domain", "sim", "--db", db, timeout=T)  # the next writer
    clean(p)
    assert p.returncode == 0 and "400 unchanged" in p.stdout, p.stderr


def test_a_lock_held_although_its_holder_is_gone_is_taken_over(tmp_path):
    """The state orphaned workers of older versions left: the lock file locked by some process,
    naming a pid that no longer exists. The next writer takes over; a live holder still refuses."""
    _frames_dir(tmp_path / "a", 2)
    db = tmp_path / "c.duckdb"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = os.uname().nodename
    orphan = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        "f = open(sys.argv[1], 'a+b'); fcntl.flock(f.fileno(), fcntl.LOCK_EX)\n"
        "f.seek(0); f.truncate(); f.write(sys.argv[2].encode()); f.flush(); print('held', flush=True); time.sleep(600)"),
        str(db) + ".lock", f"pid {dead.pid} (cli.py stats --sim a --real b) since 2026-01-01T00:00:00+00:00 on {host}\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert orphan.stdout.readline().strip() == "held"
        p = cli("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db, timeout=T)
        clean(p)
        assert p.returncode == 0, p.stderr
        assert f"took over from pid {dead.pid}" in p.stderr
        # the orphan still holds the old file, but a new lock file is in place and free again
        with open(str(db) + ".lock", "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        orphan.kill()
        orphan.wait()
