"""Verdicts a new user met that were wrong or silent, each through the command line.

Value ranges named with the wrong factor, encoder refusals read as too few frames, mixed frame
sizes passing, sets given in the wrong roles, steps that repeat within an episode, a negligible
detector AP difference raised as a gap, and a screen whose views disagree called "not
significant".
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perception_gap import cli


def scene(seed: int, h: int = 96, w: int = 128) -> np.ndarray:
    """A float scene in [0, 255] that reaches both ends of the range (clipped highlights)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([80 + 140 * np.sin(x / 9 + seed), 90 + 90 * np.cos(y / 7), 60 + (x + y) % 50 * 4], -1)
    return np.clip(a + rng.normal(0, 3, (h, w, 3)), 0, 255)


def cli_run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def index(capsys, db: Path, folder: Path, name: str, domain: str, *extra: str) -> str:
    code, out, err = cli_run(["index", str(folder), "--set", name, "--domain", domain, "--db", str(db), *extra], capsys)
    assert code == 0, err
    return out + err


def findings_of(path: Path) -> list[dict]:
    return json.loads(path.read_text())["findings"]


# -- value ranges and encoder refusals -------------------------------------------------------------

@pytest.fixture()
def float_sets(tmp_path):
    """sim: float32 arrays in [0, 255]; real: the same scenes as float32 in [0, 1], 2% darker
    (a real camera's exposure differs a little): the ratio is 255, not 257."""
    for side in ("sim", "real"):
        (tmp_path / side).mkdir()
    rng = np.random.default_rng(0)
    for i in range(8):
        a = scene(i)
        np.save(tmp_path / "sim" / f"f{i:02d}.npy", a.astype(np.float32))
        b = np.clip(a + rng.normal(0, 2, a.shape), 0, 255) * 0.98 / 255
        np.save(tmp_path / "real" / f"f{i:02d}.npy", b.astype(np.float32))
    db = tmp_path / "c.duckdb"
    return tmp_path, db


def test_value_range_names_the_observed_ranges_and_x255(float_sets, capsys):
    root, db = float_sets
    index(capsys, db, root / "sim", "sim", "sim")
    index(capsys, db, root / "real", "real", "real")
    js = root / "stats.json"
    code, out, err = cli_run(["stats", "--sim", "sim", "--real", "real", "--db", str(db), "--json", str(js)], capsys)
    assert code == 0, err
    f = next(f for f in findings_of(js) if f["code"] == "value_range")
    assert f["evidence"]["sim_range"] == "float32 [0, 255]" and f["evidence"]["real_range"] == "float32 [0, 1]"
    assert "x255" in f["title"] and "x257" not in f["title"] and "65535" not in f["title"]
    assert "values 0 to 255" in f["title"] and "values 0 to 0.98" in f["title"]
    assert "divide sim by 255" in f["action"]
    assert "x255" in out


def test_encoder_refusal_names_the_dtype_not_more_frames(float_sets, capsys):
    root, db = float_sets
    index(capsys, db, root / "sim", "sim", "sim")
    index(capsys, db, root / "real", "real", "real")
    code, out, err = cli_run(["run", "--sim", "sim", "--real", "real", "--db", str(db), "--encoders", "pixel",
                              "--out", str(root / "out"), "--quiet"], capsys)
    assert code == 0, err
    infos = [f for f in findings_of(root / "out" / "results.json") if f["code"] == "insufficient_data"]
    assert not [f for f in infos if "Index more frames" in f["action"]], infos
    refusals = {f["evidence"]["side"]: f for f in infos if f["evidence"].get("metric") == "all metrics"}
    assert set(refusals) == {"sim", "real"}
    for f in refusals.values():
        assert "float32" in f["title"] and "8- or 16-bit" in f["title"]
        assert f["evidence"]["dtypes"] == {"float32": 8}
        assert "round(x * 255)" in f["action"]
