"""A successful run says nothing on stderr: no numpy, sklearn or torch warning leaks to the user.

Each command runs in its own process, as a user starts it, with Python's default warning filters
(a warning raised inside a library prints once per place, which an in-process test would hide
after its first run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image

REPO = Path(__file__).resolve().parents[1]


def _cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *argv, "--db", str(tmp_path / "gap.duckdb")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)


def _write(tmp_path: Path, sides: dict[str, list[np.ndarray]]) -> Path:
    """Each side's frames in a folder of its name, and a manifest listing them as sets `sim` and `real`."""
    lines = ["set,domain,rgb,pair_key"]
    for side, frames in sides.items():
        (tmp_path / side).mkdir()
        for i, a in enumerate(frames):
            Image.fromarray(a).save(tmp_path / side / f"f{i:02d}.png")
            lines.append(f"{side},{side},{side}/f{i:02d}.png,f{i:02d}")
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n")
    return tmp_path / "m.csv"


def test_blank_frames_run_and_stats_leave_stderr_empty(tmp_path):
    """Black frames on both sides (a camera with its cap on, an unlit render): every ring of the
    vignetting ratio is empty and every embedding the same. That used to print numpy's "Mean of
    empty slice" and sklearn's PCA "invalid value encountered in divide" on a run that succeeded."""
    black = [np.zeros((48, 64, 3), np.uint8)] * 4
    r = _cli(tmp_path, "index", "--manifest", str(_write(tmp_path, {"sim": black, "real": black})), "--quiet")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    for argv in (("stats", "--sim", "sim", "--real", "real"),
                 ("run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--out", str(tmp_path / "out"))):
        r = _cli(tmp_path, *argv)
        assert r.returncode == 0, r.stderr
        assert "Warning" not in r.stderr and r.stderr == "", (argv[0], r.stderr)
