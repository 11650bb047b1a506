"""The real CLI as a user runs it, for the tests that feed it bad or hostile input.

`cli(...)` runs `python cli.py ...` as a subprocess, so a traceback anywhere shows on stderr;
`clean` and `one_line_error` check that none does and that an error is one line. The small
inputs these tests share (frames, manifests, an indexed sim/real pair, catalog queries) are here
too, so each subject file builds its case the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
from PIL import Image

from tests.scenes import render, scenes

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, str(REPO / "cli.py")]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def cli(*args: object, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=ENV)


def cli_main(capfd, caplog, *args: object) -> subprocess.CompletedProcess:
    """`cli(...)` in this process: `perception_gap.cli.main(args)`, its exit code, what it wrote to stdout
    and stderr (read at the file descriptor) and, appended to stderr, the warnings it logged, which the
    command line prints there but which pytest's log capture takes in-process. Takes pytest's `capfd`
    and `caplog`; the result goes to `clean`, `ok` and `one_line_error` as `cli`'s does."""
    import logging

    from perception_gap import cli as pg_cli

    argv = [str(a) for a in args]
    capfd.readouterr()
    caplog.clear()
    code = pg_cli.main(argv)
    out, err = capfd.readouterr()
    logged = [f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    err += "".join(f"{line}\n" for line in logged if line not in err)
    return subprocess.CompletedProcess(argv, code, out, err)


def clean(p: subprocess.CompletedProcess) -> None:
    """No traceback, and an error is exactly one line."""
    assert "Traceback" not in p.stderr, p.stderr
    if p.returncode == 2:
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, p.stderr


def one_line_error(p: subprocess.CompletedProcess, *fragments: str) -> str:
    """Exit 2 with one line on stderr holding every fragment (case-insensitive); returns that line."""
    clean(p)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    for f in fragments:
        assert f.lower() in p.stderr.lower(), p.stderr
    return p.stderr


def ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    clean(p)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p


def one_line(capsys, *needles: str) -> str:
    """The in-process twin of `one_line_error`: what `cli.main` wrote to stderr is one line with every needle."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def good_frame(i: int, h: int = 48, w: int = 64) -> np.ndarray:
    return render(scenes(1, h=h, w=w, seed=100 + i)[0], 1.0, 0.01, np.random.default_rng(i))


def frames_dir(root: Path, n: int, seed: int = 0) -> list[str]:
    """n good frames `f0.png`... in root; returns their names."""
    root.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        Image.fromarray(good_frame(seed + i)).save(root / f"f{i}.png")
        names.append(f"f{i}.png")
    return names


def frame_folder(root: Path, seed: int, n: int) -> Path:
    """n good frames `frame_000.png`... in root."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        Image.fromarray(good_frame(seed + i)).save(root / f"frame_{i:03d}.png")
    return root


def flat_frames(folder: Path, n: int) -> list[str]:
    """n 4x4 frames of constant grey `f0.png`... in folder; returns their names."""
    folder.mkdir(exist_ok=True)
    names = []
    for i in range(n):
        Image.fromarray(np.full((4, 4, 3), 40 * i, np.uint8)).save(folder / f"f{i}.png")
        names.append(f"f{i}.png")
    return names


def write_manifest(path: Path, rows: list[dict]) -> Path:
    """A JSONL manifest, one row a line."""
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def query(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def count(db: Path, sql: str) -> int:
    return int(query(db, sql)[0][0])


N_PAIR = 8  # frames a side of `indexed_pair`


def indexed_pair(tmp_path_factory) -> tuple[Path, Path]:
    """Two indexed sets (sim, real) of `N_PAIR` frames in a catalog on the ordinary disk, and their reference
    statistics (`ref_stats.json`): built once per test process (in-process: the world, not the subject),
    shared read-only (copy the catalog to write)."""
    from perception_gap import cli as pg_cli

    tmp = tmp_path_factory.getbasetemp() / "indexed_pair"
    db = tmp / "c.duckdb"
    if (tmp / "ref_stats.json").exists():
        return tmp, db
    for name, seed in (("sim", 0), ("real", 300)):
        frame_folder(tmp / name, seed, N_PAIR)
    for argv in (["index", tmp / "sim", "--set", "sim", "--domain", "sim"],
                 ["index", tmp / "real", "--set", "real", "--domain", "real"],
                 ["stats", "--sim", "sim", "--real", "real", "--json", tmp / "ref_stats.json"]):
        assert pg_cli.main([str(a) for a in argv] + ["--db", str(db), "-q"]) == 0, argv
    return tmp, db


def copy_catalog(world: tuple[Path, Path], dest: Path) -> Path:
    """A writable copy of `indexed_pair`'s catalog."""
    shutil.copy(world[1], dest)
    return dest


def proprio_catalog(root: Path) -> str:
    """Six sim/real pairs of 6x8 frames with 2-d proprio, indexed in-process from a manifest; returns the catalog."""
    from perception_gap import cli as pg_cli

    rng = np.random.default_rng(0)
    lines = ["set,domain,rgb,pair_key,proprio"]
    for i in range(6):
        img = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        for dom in ("sim", "real"):
            Image.fromarray(img).save(root / f"{dom}{i}.png")
            lines.append(f'{dom},{dom},{dom}{i}.png,p{i},"[{i * 0.1}, 0.5]"')
    (root / "m.csv").write_text("\n".join(lines) + "\n")
    db = str(root / "c.duckdb")
    assert pg_cli.main(["index", "--manifest", str(root / "m.csv"), "--db", db, "-q"]) == 0
    return db


# frames a side of `paired_catalog`: three 20-frame episodes, which `run` resamples by and its camera
# stage samples pairs from; a command's own start (imports, model load) outlasts their work either way
N_CRASH = 60


def paired_catalog(tmp_path_factory) -> tuple[Path, Path]:
    """`N_CRASH` rendered frames a side (sets csim, creal; 20-frame episodes, 2-d actions) listed in
    `m.jsonl`, and a template catalog with them indexed: built once per test process (in-process: the
    world, not the subject)."""
    from perception_gap import cli as pg_cli

    tmp = tmp_path_factory.getbasetemp() / "paired_catalog"
    template = tmp / "template.duckdb"
    if (tmp / "built").exists():
        return tmp, template
    tmp.mkdir(parents=True, exist_ok=True)
    rows = []
    rng = np.random.default_rng(0)
    for side, dom in (("csim", "sim"), ("creal", "real")):
        (tmp / side).mkdir(exist_ok=True)
        for i, s in enumerate(scenes(N_CRASH, h=48, w=64, seed=7 if dom == "sim" else 8)):
            Image.fromarray(render(s, 1.0 if dom == "sim" else 0.9, 0.01, rng)).save(tmp / side / f"k{i:04d}.png",
                                                                                      compress_level=1)
            rows.append({"set": side, "domain": dom, "rgb": f"{side}/k{i:04d}.png", "pair_key": f"k{i:04d}",
                         "episode": f"e{i // 20}", "action": [float(i % 7), float(i % 3)]})
    write_manifest(tmp / "m.jsonl", rows)
    template.unlink(missing_ok=True)
    assert pg_cli.main(["index", "--manifest", str(tmp / "m.jsonl"), "--db", str(template), "-q"]) == 0
    (tmp / "built").touch()
    return tmp, template
