"""`replay` and `reprojection` inputs: missing columns, poses, camera fields and grids beyond any
workspace are one line; sane inputs still measure (identical cameras reproject to zero). Through
`cli.main`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from perception_gap import cli
from tests.cli_process import one_line


def _replay_rows(n: int = 6) -> list[dict]:
    rows = []
    for s in range(n):
        for dom, dx in (("sim", 0.0), ("real", 0.001 * s)):
            rows.append({"episode": "e", "step": s, "domain": dom, "x": 0.1 * s + dx, "y": 0.0, "z": 0.2,
                         "qw": 1.0, "qx": 0.0, "qy": 0.0, "qz": 0.0})
    return rows


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_replay_row_missing_a_column_after_the_first_is_one_line(tmp_path, capsys):
    rows = _replay_rows()
    del rows[5]["qz"]
    assert cli.main(["replay", str(_jsonl(tmp_path / "r.jsonl", rows))]) == 2
    one_line(capsys, "Row 6", "missing qz")


@pytest.mark.parametrize("value", [1e308, -1e300, 1e7])
def test_replay_pose_beyond_any_workspace_is_one_line(tmp_path, capsys, value):
    rows = _replay_rows()
    rows[3]["x"] = value
    assert cli.main(["replay", str(_jsonl(tmp_path / "r.jsonl", rows)), "--json", str(tmp_path / "o.json")]) == 2
    one_line(capsys, "Row 4", "`x` to be a finite number")


def test_replay_of_sane_rows_still_measures(tmp_path):
    js = tmp_path / "o.json"
    assert cli.main(["replay", str(_jsonl(tmp_path / "r.jsonl", _replay_rows())), "--json", str(js), "-q"]) == 0
    per_step = json.loads(js.read_text())["replay"]["translation_error"]["per_step"]
    np.testing.assert_allclose(per_step, [0.001 * s for s in range(6)], atol=1e-12)


def _camera(**over) -> dict:
    cam = {"width": 640, "height": 480, "K": [[500, 0, 320], [0, 500, 240], [0, 0, 1]],
           "dist": [0, 0, 0, 0, 0], "T_base_cam": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]}
    cam.update(over)
    return cam


def _reprojection(tmp_path: Path, sim: dict, grid: dict | None = None) -> Path:
    spec = {"sim": sim, "real": _camera(), "grid": grid or {"min": [-0.1, -0.1, 0.5], "max": [0.1, 0.1, 0.7],
                                                            "step": 0.05}}
    f = tmp_path / "cams.json"
    f.write_text(json.dumps(spec, allow_nan=True))  # Infinity and NaN as Python's json writes them
    return f


@pytest.mark.parametrize("sim, needle", [
    (_camera(width=math.inf), "sim.width"),
    (_camera(height=math.nan), "sim.height"),
    (_camera(width=1e12), "sim.width"),
    (_camera(dist=[[0.1, 0.0], [0.0]]), "sim.dist"),
    (_camera(dist=[0.1, "a", 0, 0]), "sim.dist"),
    (_camera(dist=[-1e308, 1e308, 0, 0, 1e308]), "sim.dist"),  # its monotonic range needed roots of infinities
    (_camera(K=[[1e308, 0, 320], [0, 1e308, 240], [0, 0, 1]]), "sim.K"),
    (_camera(T_base_cam=[[1, 0, 0, 1e308], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]), "sim.T_base_cam"),
])
def test_bad_camera_fields_are_one_line(tmp_path, capsys, sim, needle):
    assert cli.main(["reprojection", str(_reprojection(tmp_path, sim))]) == 2
    one_line(capsys, needle)


@pytest.mark.parametrize("grid", [
    {"min": [0, 0, 0], "max": [1, 1, 1], "step": 1e-300},  # 1e300 points per axis: int64 wraps
    {"min": [0, 0, 0], "max": [1, 1, 1], "step": 5e-7},  # 2e6 per axis: the product wraps past 2**63
])
def test_a_grid_whose_point_count_overflows_is_refused(tmp_path, capsys, grid):
    assert cli.main(["reprojection", str(_reprojection(tmp_path, _camera(), grid))]) == 2
    one_line(capsys, "grid points", "grid.step")


def test_grid_bounds_and_known_points_beyond_any_workspace_are_refused(tmp_path, capsys):
    far = {"min": [-1e308, 0, 0], "max": [1e308, 1, 1], "step": 1.0}  # the span itself overflows
    assert cli.main(["reprojection", str(_reprojection(tmp_path, _camera(), far))]) == 2
    one_line(capsys, "grid.min", "1e+06 m")
    f = _reprojection(tmp_path, _camera())
    spec = json.loads(f.read_text())
    spec["points"] = [{"xyz": [0, 0, 1], "pixel": [1e308, 0]}]
    f.write_text(json.dumps(spec))
    assert cli.main(["reprojection", str(f)]) == 2
    one_line(capsys, "`points`", "1e+308 px")


def test_identical_cameras_reproject_to_zero(tmp_path):
    js = tmp_path / "r.json"
    assert cli.main(["reprojection", str(_reprojection(tmp_path, _camera())), "--json", str(js), "-q"]) == 0
    res = json.loads(js.read_text())["reprojection"]
    assert res["mean"] == 0.0 and res["n_points"] == 125 and "non_finite" not in json.loads(js.read_text())
