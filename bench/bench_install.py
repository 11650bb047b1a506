"""Install sizes of the plain and the `[all]` install, and what the plain one can do (a report, not a test).

    python bench/bench_install.py [--work /tmp/pg-install] [--light-only]

Creates fresh venvs under WORK (`python3 -m venv`), installs this checkout into one plainly and into
the other with `[all]` (torch 2.14.1 and torchvision 0.29.1 first, the CUDA build the environment
keeps on disk), prints `du -sm` of each site-packages, then runs in the plain one, on a few PNGs it
writes: `index` (sim and real), `stats`, `run --encoders efficientnet-lite0` (expected: exit 2 and one
line naming the `encoders` extra) and `run --encoders pixel` (expected: exit 0). Figures:
bench/README.md, "Install size".
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def make_venv(path: Path, *installs: list[str]) -> tuple[Path, float]:
    """A fresh venv at `path` with each pip install done in turn; (its python, seconds)."""
    if path.exists():
        shutil.rmtree(path)
    t0 = time.perf_counter()
    sh([sys.executable, "-m", "venv", str(path)], check=True)
    py = path / "bin" / "python"
    for args in installs:
        r = sh([str(py), "-m", "pip", "install", "-q", *args])
        if r.returncode:
            raise SystemExit(f"pip install {' '.join(args)} failed:\n{r.stderr[-3000:]}")
    return py, time.perf_counter() - t0


def site_mb(py: Path) -> int:
    site = sh([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True).stdout.strip()
    return int(sh(["du", "-sm", site], check=True).stdout.split()[0])


def light_checks(py: Path, work: Path) -> list[tuple[str, int, str]]:
    """(command, exit code, last stderr line) for each step in the plain venv."""
    import numpy as np
    from PIL import Image

    data = work / "frames"
    shutil.rmtree(data, ignore_errors=True)
    rng = np.random.default_rng(0)
    for side, shift in (("sim", 0), ("real", 25)):
        (data / side).mkdir(parents=True)
        for i in range(8):
            img = rng.integers(0, 200, (48, 64, 3), dtype=np.uint8) + shift
            Image.fromarray(img.astype(np.uint8)).save(data / side / f"f{i:02d}.png")
    exe = str(py.parent / "perception-gap")
    db = ["--db", str(work / "pg.duckdb"), "--quiet"]
    (work / "pg.duckdb").unlink(missing_ok=True)
    steps = [["index", str(data / "sim"), "--set", "sim", "--domain", "sim"],
             ["index", str(data / "real"), "--set", "real", "--domain", "real"],
             ["stats", "--sim", "sim", "--real", "real"],
             ["run", "--sim", "sim", "--real", "real", "--encoders", "efficientnet-lite0", "--out", str(work / "out-lite0")],
             ["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--out", str(work / "out-pixel")]]
    torch = sh([str(py), "-c", "import torch"]).returncode == 0
    out = [("import torch", 0 if torch else 1, "importable" if torch else "not installed")]
    for step in steps:
        r = sh([exe, *step, *db])
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        out.append((" ".join(step[:1] + [a for a in step[1:] if not a.startswith("/")]), r.returncode,
                    lines[-1] if lines else ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="/tmp/pg-install", help="folder for the venvs and the frames")
    ap.add_argument("--light-only", action="store_true", help="skip the [all] venv")
    a = ap.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    py, secs = make_venv(work / "light", [str(REPO)])
    print(f"plain install: site-packages {site_mb(py)} MB ({secs:.0f} s to create)")
    for cmd, code, line in light_checks(py, work):
        print(f"  {cmd}: exit {code}  {line}")
    if not a.light_only:
        py_all, secs = make_venv(work / "all", ["torch==2.14.1", "torchvision==0.29.1"], [f"{REPO}[all]"])
        print(f"[all] install: site-packages {site_mb(py_all)} MB ({secs:.0f} s to create)")


if __name__ == "__main__":
    main()
