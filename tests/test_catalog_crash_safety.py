"""Crash safety: a command killed with SIGKILL at a random point leaves a catalog that the rerun
completes exactly (nothing lost, nothing doubled), and a killed `run` leaves the previous
results.json and report.html whole.

The command killed, and the full runs that time it, are subprocesses of `python cli.py`, exactly as a
user runs them; the rerun runs in-process (`cli_main`), the catalog's first open in that process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap.ingest import BATCH
from tests.cli_process import CLI, ENV, N_CRASH, clean, cli, cli_main, count, paired_catalog

N_TINY = 2 * BATCH + 200  # 8x8 frames for `index`: two whole catalog batches and a third, short one


def _crash_cmd(kind: str, tmp: Path, db: Path, out: Path) -> list[str]:
    if kind == "index":
        return ["index", str(tmp / "tiny"), "--set", "tiny", "--domain", "sim", "--db", str(db), "-q"]
    if kind == "embed":
        return ["embed", "--encoder", "pixel", "--db", str(db), "-q", "--batch-size", "16", "--device", "cpu"]
    return ["run", "--sim", "csim", "--real", "creal", "--encoders", "pixel", "--db", str(db), "--out", str(out), "-q"]


@pytest.fixture(scope="module")
def crash_world(tmp_path_factory):
    """The paired frames and their template catalog, `N_TINY` tiny frames for `index`, a finished run's
    outputs, and how long each command takes when left alone."""
    tmp, template = paired_catalog(tmp_path_factory)
    rng = np.random.default_rng(0)
    (tmp / "tiny").mkdir(exist_ok=True)
    for i in range(N_TINY):
        Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(tmp / "tiny" / f"t{i:05d}.png",
                                                                           compress_level=0)
    durations = {}
    for kind in ("index", "embed", "run"):
        db = tmp / f"full_{kind}.duckdb"
        db.unlink(missing_ok=True)
        if kind != "index":
            db.write_bytes(template.read_bytes())
        t0 = time.perf_counter()
        p = cli(*_crash_cmd(kind, tmp, db, tmp / "full_out"))
        durations[kind] = time.perf_counter() - t0
        assert p.returncode == 0, p.stderr
    return tmp, template, durations


# random kill points: two for `index` and `embed`, one for `run` (its rerun is the longest; the
# catalog writers it shares with `index` and `embed` are killed at their own points there)
@pytest.mark.parametrize("kind, seed", [(k, s) for k, n in (("index", 2), ("embed", 2), ("run", 1)) for s in range(n)])
def test_kill_9_at_a_random_point_then_rerun_completes_exactly(crash_world, tmp_path, capfd, caplog, kind, seed):
    tmp, template, durations = crash_world
    db = tmp_path / "c.duckdb"
    out = tmp_path / "out"
    if kind == "run":  # a previous run's outputs exist: a killed run must leave them whole
        out.mkdir()
        for name in ("results.json", "report.html"):
            (out / name).write_bytes((tmp / "full_out" / name).read_bytes())
    fraction = float(np.random.default_rng(seed * 10 + len(kind)).uniform(0.15, 0.9))
    for attempt in range(4):  # the machine's load varies: if it finished before the kill, kill earlier
        if kind != "index":
            db.write_bytes(template.read_bytes())
        else:
            db.unlink(missing_ok=True)
        delay = fraction * durations[kind] / 2 ** attempt
        proc = subprocess.Popen(CLI + _crash_cmd(kind, tmp, db, out), env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the command and any worker processes it started
        proc.wait()
        if proc.returncode != 0:
            break
    where = f"{kind} seed {seed}: killed at {delay:.2f} s of {durations[kind]:.2f} s, exit {proc.returncode}"
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
