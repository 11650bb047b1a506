"""The writer lock's sidecar files (`<catalog>.lock`, `<catalog>.lock.guard`) are gone once the
writer is done, and removing them never lets two writers in at once."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

from perception_gap import cli

REPO = Path(__file__).resolve().parents[1]


def _frames(folder: Path, n: int = 2) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(folder / f"f{i}.png")
    return folder


def _beside(db: Path) -> list[str]:
    return sorted(p.name for p in db.parent.iterdir() if p.name.startswith(db.name))


def test_a_finished_writer_leaves_only_the_catalog(tmp_path, capsys):
    db = tmp_path / "gap.duckdb"
    frames = _frames(tmp_path / "frames")
    assert cli.main(["index", str(frames), "--set", "s", "--domain", "sim", "--db", str(db), "--quiet"]) == 0
    assert _beside(db) == ["gap.duckdb"]
    assert cli.main(["rename", "s", "t", "--db", str(db), "--quiet"]) == 0
    assert cli.main(["stats", "--sim", "t", "--real", "nope", "--db", str(db), "--quiet"]) == 2  # a refusal, too
    capsys.readouterr()
    assert _beside(db) == ["gap.duckdb"]


_HOLD = """
import sys, time
from pathlib import Path
from perception_gap.catalog import WriterLock
lock = WriterLock(Path(sys.argv[1])).acquire()
print("held", flush=True)
sys.stdin.readline()
lock.release()
"""


def test_a_refused_writer_leaves_the_live_holders_lock_in_place(tmp_path, capsys):
    db = tmp_path / "gap.duckdb"
    frames = _frames(tmp_path / "frames")
    assert cli.main(["index", str(frames), "--set", "s", "--domain", "sim", "--db", str(db), "--quiet"]) == 0
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert cli.main(["index", str(frames), "--set", "s2", "--domain", "sim", "--db", str(db)]) == 2
        assert f"pid {holder.pid}" in capsys.readouterr().err
        assert "gap.duckdb.lock" in _beside(db)  # the holder's: not removed by the refused writer
        assert cli.main(["index", str(frames), "--set", "s2", "--domain", "sim", "--db", str(db)]) == 2  # still held
        capsys.readouterr()
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert _beside(db) == ["gap.duckdb"]
    assert cli.main(["index", str(frames), "--set", "s2", "--domain", "sim", "--db", str(db), "--quiet"]) == 0


_CYCLE = """
import os, sys, time
from pathlib import Path
from perception_gap.catalog import WriterLock
db, log, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(n):
    lock = WriterLock(db, wait=120).acquire()
    with open(log, "a") as f:
        f.write(f"in {os.getpid()}\\n")
    time.sleep(0.002)
    with open(log, "a") as f:
        f.write(f"out {os.getpid()}\\n")
    lock.release()
"""


def test_writers_that_remove_the_lock_files_still_take_turns(tmp_path):
    """Three processes take and release the lock 40 times each, removing its files every time: the
    log written inside the lock never shows two holders at once, and nothing is left afterwards."""
    db, log = tmp_path / "gap.duckdb", tmp_path / "turns.log"
    procs = [subprocess.Popen([sys.executable, "-c", _CYCLE, str(db), str(log), "40"]) for _ in range(3)]
    deadline = time.monotonic() + 300
    for p in procs:
        assert p.wait(timeout=max(1.0, deadline - time.monotonic())) == 0
    events = log.read_text().splitlines()
    assert len(events) == 240
    for enter, leave in zip(events[0::2], events[1::2]):
        assert enter.startswith("in ") and leave == "out " + enter[3:], (enter, leave)
    assert _beside(db) == []
