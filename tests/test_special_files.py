"""Only regular files are read: devices, FIFOs (as frames or as the manifest) and symlinks are
recorded skips or one-line errors, and symlinks in a folder follow one rule on their resolved
paths. Through the real CLI, with a timeout, so a read that would hang fails instead."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.cli_process import clean, cli, frames_dir, one_line_error, query, write_manifest

T = 120  # seconds: every command here finishes in a few


def test_devices_and_fifos_are_skipped_never_read(tmp_path):
    """Symlinks to /dev/zero and /dev/urandom and a FIFO named x.png: recorded skips, fast."""
    m = tmp_path / "m"
    frames_dir(m / "a", 2)
    (m / "a" / "zero.png").symlink_to("/dev/zero")
    (m / "a" / "urandom.npy").symlink_to("/dev/urandom")
    os.mkfifo(m / "a" / "x.png")
    rows = [{"set": "s", "domain": "sim", "rgb": f"a/{n}", "pair_key": str(i)}
            for i, n in enumerate(["f0.png", "f1.png", "zero.png", "urandom.npy", "x.png"])]
    db = tmp_path / "c.duckdb"
    t0 = time.perf_counter()
    p = cli("index", "--manifest", write_manifest(m / "m.jsonl", rows), "--db", db, timeout=T)
    clean(p)
    assert p.returncode == 0 and "2 usable, 3 skipped" in p.stdout, p.stdout
    got = dict(query(db, "SELECT pair_key, error FROM frames WHERE status <> 'ok'"))
    assert got == {"2": "is a character device, not a regular file", "3": "is a character device, not a regular file",
                   "4": "is a FIFO (named pipe), not a regular file"}, got
    # the same through a folder scan: the FIFO is read by nothing; the device links leave the folder
    p = cli("index", m / "a", "--set", "f", "--domain", "sim", "--db", db, timeout=T)
    clean(p)
    assert p.returncode == 0 and "2 usable, 3 skipped" in p.stdout, p.stdout
    got = {Path(k).name: v for k, v in query(db, "SELECT rgb_path, error FROM frames WHERE set_name = 'f' AND status <> 'ok'")}
    assert got["x.png"] == "is a FIFO (named pipe), not a regular file"
    assert got["zero.png"] == "symbolic link resolves outside the folder (to /dev/zero)"
    assert time.perf_counter() - t0 < 60


def test_a_fifo_as_the_manifest_is_a_one_line_error(tmp_path):
    os.mkfifo(tmp_path / "m.csv")
    one_line_error(cli("index", "--manifest", tmp_path / "m.csv", "--db", tmp_path / "c.duckdb", timeout=T),
                    "regular file", "FIFO")


def test_symlinks_in_a_folder_follow_one_rule_on_resolved_paths(tmp_path):
    frames_dir(tmp_path / "outside", 1)
    root = tmp_path / "frames"
    frames_dir(root, 2)
    (root / "out.png").symlink_to(tmp_path / "outside" / "f0.png")
    (root / "in.png").symlink_to(root / "f1.png")  # resolves inside: read like any frame
    (root / "sub").mkdir()
    (root / "sub" / "up.png").symlink_to("../../outside/f0.png")
    db = tmp_path / "c.duckdb"
    p = cli("index", root, "--set", "s", "--domain", "sim", "--db", db, timeout=T)
    clean(p)
    assert p.returncode == 0 and "3 usable, 2 skipped" in p.stdout, p.stdout
    got = {Path(k).name: (st, e) for k, st, e in query(db, "SELECT rgb_path, status, error FROM frames")}
    target = str((tmp_path / "outside" / "f0.png").resolve())
    assert got["out.png"] == got["up.png"] == ("skipped", f"symbolic link resolves outside the folder (to {target})")
    assert got["in.png"][0] == "ok"
