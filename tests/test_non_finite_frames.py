"""Frames holding NaN or infinite values: named (`non_finite`, a bug) through the CLI, never a
crash and never a silent "findings: none"."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perception_gap import cli


def _sets(tmp_path, sim_frames, real_frames):
    for name, frames in (("sim", sim_frames), ("real", real_frames)):
        (tmp_path / name).mkdir()
        for i, a in enumerate(frames):
            np.save(tmp_path / name / f"f{i:02d}.npy", a)
    db = str(tmp_path / "c.duckdb")
    for name in ("sim", "real"):
        assert cli.main(["index", str(tmp_path / name), "--set", name, "--domain", name, "--db", db, "--quiet"]) == 0
    return db


def _stats(tmp_path, db, capsys):
    out = tmp_path / "s.json"
    code = cli.main(["stats", "--sim", "sim", "--real", "real", "--db", db, "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return json.loads(out.read_text()), printed.out


@pytest.mark.parametrize("shape", [(24, 32), (24, 32, 3)], ids=["grey", "rgb"])
def test_all_nan_frames_are_named_not_passed(tmp_path, capsys, shape):
    rng = np.random.default_rng(0)
    db = _sets(tmp_path, [np.full(shape, np.nan, np.float32) for _ in range(6)],
               [rng.random(shape).astype(np.float32) for _ in range(6)])
    res, out = _stats(tmp_path, db, capsys)
    first = res["findings"][0]
    assert (first["code"], first["severity"]) == ("non_finite", "bug"), res["findings"]
    ev = first["evidence"]["non_finite"]
    assert ev == {"sim": {"frames": 6, "of": 6, "all_non_finite": 6, "mean_pixel_share": 1.0}}
    assert "non_finite" in out and "Traceback" not in out


def test_partly_infinite_frames_count_their_share(tmp_path, capsys):
    rng = np.random.default_rng(1)
    real = [rng.random((24, 32, 3)).astype(np.float32) for _ in range(6)]
    sim = [a.copy() for a in real]
    for a in sim[:2]:
        a[:6] = np.inf  # a quarter of the rows
    db = _sets(tmp_path, sim, real)
    res, _ = _stats(tmp_path, db, capsys)
    f = next(f for f in res["findings"] if f["code"] == "non_finite")
    row = f["evidence"]["non_finite"]["sim"]
    assert (row["frames"], row["all_non_finite"]) == (2, 0)
    assert row["mean_pixel_share"] == pytest.approx(0.25, abs=0.05)
    assert "real" not in f["evidence"]["non_finite"]


def test_finite_frames_name_no_non_finite(tmp_path, capsys):
    rng = np.random.default_rng(2)
    frames = [rng.random((24, 32, 3)).astype(np.float32) for _ in range(6)]
    res, _ = _stats(tmp_path, _sets(tmp_path, frames, [a.copy() for a in frames]), capsys)
    assert "non_finite" not in {f["code"] for f in res["findings"]}
