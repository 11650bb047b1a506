"""Crash safety: a command killed with SIGKILL at a random point of its work leaves a catalog that the
rerun completes exactly (nothing lost, nothing doubled), and a killed `run` leaves the previous
results.json and report.html whole.

The command killed is a subprocess, `python cli.py ...` in its own session, and SIGKILL goes to its
whole process group: the process boundary is the point. Its kill is timed from the moment it takes its
catalog writer lock (`<db>.lock` appears, polled every `POLL_S`), not from its start: most of a
process's start is importing Python, and a kill timed from the start often landed before the command
had even opened its catalog. From the lock it waits a random fraction (0.15-0.9) of the command's work,
measured once in-process from the same lock to the command's return (a full run in this process, which
also writes the previous run's outputs). A command imports some libraries only once it holds the lock
(pyarrow for its first batch, torch to embed, the report's for `run`); the killed process imports
those first (`WARM`), as this process has, so that the fraction falls on the same work in both and
not on an import. The rerun runs in-process (`cli_main`), the catalog's first open in that process.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap.catalog import lock_path
from perception_gap.ingest import BATCH
from tests.cli_process import CLI, ENV, N_CRASH, clean, cli_main, count, paired_catalog

N_TINY = 2 * BATCH + 200  # 8x8 frames for `index`: two whole catalog batches and a third, short one
POLL_S = 0.005  # how often the lock file is looked for: well under the shortest work (`embed`'s, ~0.2 s)

# The libraries each command imports only once it holds its lock; `perception_gap.cli` first, which sets
# torch's thread policy before torch loads, as the command line does.
WARM = {"index": ("pyarrow",), "embed": ("torch", "torchvision", "pyarrow"),
        "run": ("torch", "torchvision", "pyarrow", "perception_gap.reports")}


def _crash_cmd(kind: str, tmp: Path, db: Path, out: Path) -> list[str]:
    if kind == "index":
        return ["index", str(tmp / "tiny"), "--set", "tiny", "--domain", "sim", "--db", str(db), "-q"]
    if kind == "embed":
        return ["embed", "--encoder", "pixel", "--db", str(db), "-q", "--batch-size", "16", "--device", "cpu"]
    return ["run", "--sim", "csim", "--real", "creal", "--encoders", "pixel", "--db", str(db), "--out", str(out), "-q"]


def _cli_warm(kind: str) -> list[str]:
    """`python cli.py` with `WARM[kind]` imported before the command starts."""
    warm = "".join(f"import {m}; " for m in ("perception_gap.cli",) + WARM[kind])
    return [CLI[0], "-c", f"{warm}import runpy, sys; del sys.argv[0]; runpy.run_path(sys.argv[0], run_name='__main__')",
            *CLI[1:]]


def _fresh(kind: str, template: Path, db: Path) -> None:
    """The catalog the command starts from: the indexed pair for `embed` and `run`, none for `index`."""
    lock_path(db).unlink(missing_ok=True)
    if kind == "index":
        db.unlink(missing_ok=True)
    else:
        db.write_bytes(template.read_bytes())


def _work_in_process(kind: str, tmp: Path, template: Path) -> float:
    """Seconds from the command taking its writer lock to its return, run to completion in this process."""
    from perception_gap import cli as pg_cli

    for m in ("perception_gap.cli",) + WARM[kind]:
        importlib.import_module(m)
    db = tmp / f"full_{kind}.duckdb"
    _fresh(kind, template, db)
    locked: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set() and not lock_path(db).exists():
            time.sleep(POLL_S)
        locked.append(time.perf_counter())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        code = pg_cli.main(_crash_cmd(kind, tmp, db, tmp / "full_out"))
        end = time.perf_counter()
    finally:
        done.set()
        watcher.join()
    assert code == 0, kind
    assert locked[0] < end, f"{kind}: its lock file was never seen"
    return end - locked[0]


@pytest.fixture(scope="module")
def crash_world(tmp_path_factory):
    """The paired frames and their template catalog, and `work(kind)`: the seconds of work of each command,
    measured when a test first asks (`index` writes its `N_TINY` frames first; `run` leaves `full_out`)."""
    tmp, template = paired_catalog(tmp_path_factory)
    durations: dict[str, float] = {}

    def work(kind: str) -> float:
        if kind not in durations:
            if kind == "index":
                rng = np.random.default_rng(0)
                (tmp / "tiny").mkdir(exist_ok=True)
                for i in range(N_TINY):
                    Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(
                        tmp / "tiny" / f"t{i:05d}.png", compress_level=0)
            durations[kind] = _work_in_process(kind, tmp, template)
        return durations[kind]

    return tmp, template, work


def _kill_after_lock(kind: str, argv: list[str], db: Path, delay: float) -> tuple[subprocess.Popen, float | None]:
    """Run the command; `delay` s after its lock file appears, SIGKILL its process group. Returns the ended
    process and how long after the lock the kill landed (None: it ended first)."""
    proc = subprocess.Popen(_cli_warm(kind) + argv, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        while not lock_path(db).exists():
            if proc.poll() is not None:
                return proc, None
            time.sleep(POLL_S)
        locked = time.perf_counter()
        try:
            proc.wait(timeout=delay)
            return proc, None
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the command and any worker processes it started
            return proc, time.perf_counter() - locked
    finally:
        if proc.poll() is None:  # not left running whatever happened here
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# Random kill points, seed s of a command's n in the s-th n-th of 0.15-0.9 of its work. Two for `index`,
# whose three batches make the early and late points different catalogs; one for `embed`, which writes its
# 120 vectors in one transaction at the very end (any earlier point leaves the same catalog, no vectors);
# one for `run` (its rerun is the longest; its writers are those of `index` and `embed`).
SEEDS = {"index": 2, "embed": 1, "run": 1}


@pytest.mark.parametrize("kind, seed", [(k, s) for k, n in SEEDS.items() for s in range(n)])
def test_kill_9_at_a_random_point_then_rerun_completes_exactly(crash_world, tmp_path, capfd, caplog, kind, seed):
    tmp, template, work = crash_world
    work_s = work(kind)
    db = tmp_path / "c.duckdb"
    out = tmp_path / "out"
    if kind == "run":  # a previous run's outputs exist: a killed run must leave them whole
        out.mkdir()
        for name in ("results.json", "report.html"):
            (out / name).write_bytes((tmp / "full_out" / name).read_bytes())
    fraction = 0.15 + 0.75 * (seed + float(np.random.default_rng(seed * 10 + len(kind)).uniform())) / SEEDS[kind]
    for attempt in range(4):  # the machine's load varies: if it finished before the kill, kill earlier
        _fresh(kind, template, db)
        delay = fraction * work_s / 2 ** attempt
        proc, after = _kill_after_lock(kind, _crash_cmd(kind, tmp, db, out), db, delay)
        if proc.returncode != 0:
            break
    landed = "ended before the kill" if after is None else f"killed {after:.3f} s after taking the lock"
    where = (f"{kind} seed {seed}: {landed} (aimed at {delay:.3f} s of {work_s:.3f} s of work, attempt {attempt}), "
             f"exit {proc.returncode}")
    assert proc.returncode == -signal.SIGKILL, (where, proc.stderr.read().decode())
    if kind == "run":
        json.loads((out / "results.json").read_text())  # the old file or the new one, never a partial one
        assert (out / "report.html").read_text().rstrip().endswith("</html>")
    p = cli_main(capfd, caplog, *_crash_cmd(kind, tmp, db, out))
    print(where)  # shown with a failure below
    clean(p)
    assert p.returncode == 0, (where, p.stderr)
    if kind == "index":
        assert count(db, "SELECT count(*) FROM frames WHERE set_name = 'tiny' AND status = 'ok'") == N_TINY
        assert count(db, "SELECT count(DISTINCT rgb_path) FROM frames") == N_TINY
        return
    for side in ("csim", "creal"):
        assert count(db, f"SELECT count(*) FROM frames WHERE set_name = '{side}' AND status = 'ok'") == N_CRASH
    assert count(db, "SELECT count(*) - count(DISTINCT (set_name, rgb_path)) FROM frames") == 0
    assert count(db, "SELECT count(*) FROM embeddings") == count(
        db, "SELECT count(DISTINCT content_hash) FROM frames WHERE status = 'ok'")
    assert count(db, "SELECT count(*) - count(DISTINCT (content_hash, fingerprint)) FROM embeddings") == 0
    if kind == "run":
        assert count(db, "SELECT count(*) FROM frame_stats") == count(
            db, "SELECT count(DISTINCT content_hash) FROM frames WHERE status = 'ok'")
        res = json.loads((out / "results.json").read_text())
        assert res["sets"]["csim"]["n_usable"] == N_CRASH
        # a killed run stored nothing half-way: every stored run has its figures
        assert count(db, "SELECT count(*) FROM runs r WHERE NOT EXISTS "
                          "(SELECT 1 FROM results s WHERE s.run_id = r.run_id)") == 0
