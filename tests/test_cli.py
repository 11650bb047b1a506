"""The command line: exit codes, one-line errors, the stats summary and its JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap import cli

REPO = Path(__file__).resolve().parents[1]


def scene(seed: int, h: int = 96, w: int = 128) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([80 + 100 * np.sin(x / 9 + seed), 90 + 60 * np.cos(y / 7), 60 + (x + y) % 50 * 2], -1)
    return np.clip(a + rng.normal(0, 3, (h, w, 3)), 0, 255).astype(np.uint8)


@pytest.fixture()
def sets(tmp_path):
    sim, real = tmp_path / "sim", tmp_path / "real"
    sim.mkdir()
    real.mkdir()
    rng = np.random.default_rng(0)
    for i in range(8):
        a = scene(i)
        Image.fromarray(a).save(sim / f"f{i:02d}.png")
        noisy = np.clip(a + rng.normal(0, 2, a.shape), 0, 255).astype(np.uint8)
        Image.fromarray(noisy).save(real / f"f{i:02d}.png")
    return tmp_path


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_index_and_stats_clean_pair(sets, capsys):
    db = str(sets / "c.duckdb")
    assert run(["index", str(sets / "sim"), "--set", "sim", "--domain", "sim", "--db", db], capsys)[0] == 0
    code, out, _ = run(["index", str(sets / "real"), "--set", "real", "--domain", "real", "--db", db], capsys)
    assert code == 0 and "8 usable, 0 skipped" in out
    js = sets / "out" / "stats.json"
    code, out, err = run(["stats", "--sim", "sim", "--real", "real", "--db", db, "--json", str(js)], capsys)
    assert code == 0, err
    assert "pairs: 8 matched" in out
    res = json.loads(js.read_text())
    assert set(res) >= {"sets", "findings", "stats", "pairs", "config", "version"}
    assert res["sets"]["sim"]["domain"] == "sim" and res["sets"]["real"]["n_usable"] == 8
    assert not [f for f in res["findings"] if f["severity"] == "bug"]
    # the summary's numbers are the frames' own: the median over frames of each frame's
    # channel means and luma mean, recomputed with numpy from the files on disk
    for side in ("sim", "real"):
        frames = [np.asarray(Image.open(p), dtype=float) for p in sorted((sets / side).glob("*.png"))]
        assert res["stats"][side]["n_frames"] == len(frames) == 8
        expected = np.median([f.reshape(-1, 3).mean(0) for f in frames], axis=0)
        np.testing.assert_allclose(res["stats"][side]["channel_mean"], expected, atol=0.01)
        # Rec. 601 luma (PIL's "L" rounds to integers, hence the 0.6 tolerance)
        lum = np.median([(f @ [0.299, 0.587, 0.114]).mean() for f in frames])
        assert abs(res["stats"][side]["lum_mean"] - lum) < 0.6


def test_stats_names_an_injected_channel_swap(sets, capsys):
    for p in (sets / "real").glob("*.png"):
        Image.fromarray(np.asarray(Image.open(p))[..., ::-1].copy()).save(p)
    db = str(sets / "c.duckdb")
    run(["index", str(sets / "sim"), "--set", "sim", "--domain", "sim", "--db", db], capsys)
    run(["index", str(sets / "real"), "--set", "real", "--domain", "real", "--db", db], capsys)
    code, out, _ = run(["stats", "--sim", "sim", "--real", "real", "--db", db], capsys)
    assert code == 0
    assert "1. [bug] channel_swap" in out


def test_errors_are_one_line_exit_2(sets, capsys):
    db = str(sets / "c.duckdb")
    empty = sets / "empty"
    empty.mkdir()
    code, _, err = run(["index", str(empty), "--set", "e", "--domain", "sim", "--db", db], capsys)
    assert code == 2 and "no usable frame" in err and err.count("\n") == 1
    code, _, err = run(["index", str(sets / "nope"), "--set", "e", "--domain", "sim", "--db", db], capsys)
    assert code == 2 and "not found" in err and err.count("\n") == 1
    man = sets / "m.csv"
    man.write_text("set,domain,rgb\nx,sim,sim/f00.png\n")
    code, _, err = run(["index", "--manifest", str(man), "--db", db], capsys)
    assert code == 2 and "pair_key" in err and err.count("\n") == 1
    man.write_text("set,domain,rgb,pair_key\nx,sim,sim/f00.png,a\nx,real,real/f00.png,a\n")
    code, _, err = run(["index", "--manifest", str(man), "--db", db], capsys)
    assert code == 2 and "both domains" in err and err.count("\n") == 1
    code, _, err = run(["stats", "--sim", "a", "--real", "b", "--db", db], capsys)
    assert code == 2 and "Unknown set" in err and err.count("\n") == 1
    code, _, err = run(["index", str(sets / "sim"), "--set", "s", "--db", db], capsys)
    assert code == 2 and "--domain" in err and err.count("\n") == 1
    code, _, err = run(["stats", "--sim", "a"], capsys)
    assert code == 2 and err.count("\n") == 1
    code, _, err = run(["index", str(sets / "sim"), "--set", "s", "--domain", "sim", "--depth-unit", "furlong", "--db", db], capsys)
    assert code == 2 and "--depth-unit" in err


def test_set_with_only_bad_frames_exits_2(sets, capsys):
    bad = sets / "bad"
    bad.mkdir()
    (bad / "a.png").write_bytes(b"")
    (bad / "b.jpg").write_text("nope")
    code, out, err = run(["index", str(bad), "--set", "bad", "--domain", "real", "--db", str(sets / "c.duckdb")], capsys)
    assert code == 2 and "no usable frame" in err
    assert "skipped" in out and "zero-byte" in out


def _subcommands() -> list[str]:
    """The subcommand names as the parser registers them (not a hand list)."""
    import argparse

    actions = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(actions) == 1
    return sorted(actions[0].choices)


def test_help_for_every_subcommand(capsys):
    subs = _subcommands()
    # the contract's table names these; the parser may add more, never lose one
    assert set(subs) >= {"index", "stats", "embed", "encoders", "run", "demo", "screen", "drift", "sets",
                         "drop", "rename", "rollouts", "rank-fidelity", "latency", "policy-check",
                         "replay", "reprojection"}
    for sub in subs:
        assert cli.main([sub, "--help"]) == 0, sub
        out, err = capsys.readouterr()
        assert out.startswith("usage:"), (sub, out[:80])
        assert f" {sub} " in out.splitlines()[0] + " ", (sub, out.splitlines()[0])
        assert "--db" in out and "--quiet" in out, sub
        assert err == "", (sub, err)


def test_console_script_and_python_cli_agree(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "cli.py"), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("perception-gap ")
    exe = shutil.which("perception-gap", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("console script not installed (pip install -e . installs it)")
    out2 = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert out2.stdout == out.stdout
