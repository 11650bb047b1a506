"""One writer at a time on a catalog: a second writer is refused naming the holder (or waits with
`--wait`), readers keep working during a write, and a writer that dies (SIGKILL, SIGTERM, its
holder gone) leaves neither a stale lock nor a pool worker behind.

The writers raced or killed run as subprocesses of `python cli.py` with a timeout, so a regression
that hangs fails instead of stalling the suite; the commands that meet them run in-process
(`cli_main`: a refused writer returns at once, a reader reads in between the writer's batches).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import duckdb
import numpy as np
import pytest
from PIL import Image

from perception_gap import cli as pg_cli
from tests.cli_process import (
    CLI,
    ENV,
    N_CRASH,
    REPO,
    clean,
    cli,
    cli_main,
    count,
    frames_dir,
    one_line_error,
    paired_catalog,
)

T = 120  # seconds: every command here but the first finishes in a few


@pytest.fixture(scope="module")
def crash_world(tmp_path_factory):
    """The paired frames (`m.jsonl`) and a template catalog with them indexed."""
    return paired_catalog(tmp_path_factory)


def _plain_read(db: Path) -> int:
    """Embeddings counted by a plain DuckDB reader, in between the writer's batches."""
    for _ in range(200):
        try:
            con = duckdb.connect(str(db), read_only=True)
        except duckdb.IOException:
            time.sleep(0.02)
            continue
        try:
            return con.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        finally:
            con.close()
    raise AssertionError("no read got in between the writer's batches in 4 s")


def test_two_writers_and_readers_on_one_catalog(crash_world, tmp_path, capfd, caplog):
    main = partial(cli_main, capfd, caplog)
    tmp, template = crash_world
    db = tmp_path / "c.duckdb"
    db.write_bytes(template.read_bytes())
    writer = subprocess.Popen(CLI + ["embed", "--encoder", "pixel", "--db", str(db), "-q", "--batch-size", "8",
                                     "--device", "cpu"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    lock = db.with_name(db.name + ".lock")
    deadline = time.time() + 60
    while time.time() < deadline and not (lock.exists() and lock.read_text().strip()):
        time.sleep(0.02)
    assert writer.poll() is None, "the writer finished before the test could race it"
    # a second writer fails at once, naming the holder
    second = main("index", "--manifest", tmp / "m.jsonl", "--db", db)
    one_line_error(second, "being written by", f"pid {writer.pid}", "embed", "--wait")
    # a second writer that may wait starts now and finishes after the first
    waiting = subprocess.Popen(CLI + ["index", "--manifest", str(tmp / "m.jsonl"), "--db", str(db), "--wait", "300"],
                               env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # readers keep working while the writer writes, and see what it wrote
    seen = []
    while writer.poll() is None and len(seen) < 40:
        r = main("drift", "--history", "--db", db)
        clean(r)
        assert r.returncode == 0, r.stderr
        seen.append(_plain_read(db))
        time.sleep(0.25)
    out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err
    seen.append(_plain_read(db))
    assert len(seen) >= 3 and seen[-1] > seen[0], seen  # read twice during the write, and the count grew
    out, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0 and "Traceback" not in err, err
    assert out.count(f"{N_CRASH} listed, 0 new, 0 changed, {N_CRASH} unchanged") == 2, out  # it ran, after the writer
    n = count(db, "SELECT count(DISTINCT content_hash) FROM frames WHERE status = 'ok'")
    assert count(db, "SELECT count(*) FROM embeddings") == n == 2 * N_CRASH
    assert count(db, "SELECT count(*) FROM frames") == 2 * N_CRASH
    assert not lock.exists()  # released: the lock file removed with the last writer


def test_lock_is_released_when_the_holder_is_killed(tmp_path, capfd, caplog):
    """flock dies with its process: a kill -9'd writer never leaves a stale lock."""
    main = partial(cli_main, capfd, caplog)
    frames_dir(tmp_path / "a", 3)
    db = tmp_path / "c.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from perception_gap.catalog import Catalog\n"
        "c = Catalog(%r); print('held', flush=True); time.sleep(600)") % (str(REPO), str(db))],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    one_line_error(main("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db), f"pid {holder.pid}")
    t0 = time.perf_counter()
    one_line_error(main("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db, "--wait", "1"),
                    "after waiting 1 s")
    assert time.perf_counter() - t0 >= 1.0
    holder.kill()
    holder.wait()
    p = main("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr


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
        assert pg_cli.main(["index", str(tmp / name), "--set", name, "--domain", name, "--db", str(db), "-q"]) == 0
    return tmp, db


@pytest.mark.parametrize("command,sig", [("stats", signal.SIGKILL), ("stats", signal.SIGTERM), ("run", signal.SIGKILL)])
def test_killed_writer_leaves_no_worker_and_no_stale_lock(many_frames, tmp_path, capfd, caplog, command, sig):
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
    p = cli_main(capfd, caplog, "index", tmp / "sim", "--set", "sim", "--domain", "sim", "--db", db)  # next writer
    clean(p)
    assert p.returncode == 0 and "400 unchanged" in p.stdout, p.stderr


def test_a_lock_held_although_its_holder_is_gone_is_taken_over(tmp_path):
    """The state orphaned workers of older versions left: the lock file locked by some process,
    naming a pid that no longer exists. The next writer takes over; a live holder still refuses."""
    frames_dir(tmp_path / "a", 2)
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
