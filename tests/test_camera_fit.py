"""The camera fit behind `intrinsics` / `extrinsics`: known offsets recovered, the issue's case named.

Tolerances: the fit is noise free (both cameras are models), so a change the eleven offsets can
express is recovered to solver precision; the bounds below leave room for the ridge's pull
(REGULARIZATION_PX) only: 0.05 mm, 0.005 deg, 0.02 px, 2e-4 in k1.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from perception_gap.cli import main
from perception_gap.geometry.camera import parse_camera, project
from perception_gap.geometry.camera_fit import explain_differences, rotation_matrix
from perception_gap.geometry.reprojection import grid_points, reprojection_error, reprojection_findings
from tests.test_geometry import _cam, _look_down

GRID = {"min": [-0.25, -0.2, 0.0], "max": [0.25, 0.2, 0.3], "step": 0.05}  # a table and 30 cm above it
MM, DEG, PX, K1 = 0.05, 0.005, 0.02, 2e-4


def _pts() -> np.ndarray:
    return grid_points(GRID["min"], GRID["max"], GRID["step"])


def _seen(sim, real, pts):
    _, _, a = project(sim, pts)
    _, _, b = project(real, pts)
    return pts[a & b]


def _issue_case() -> dict:
    """The issue's report: the real camera 5 mm off in x and 3 mm in z, other intrinsics and k1."""
    T = _look_down(1.0)
    T[0, 3] += 0.005
    T[2, 3] += 0.003
    return {"sim": _cam(_look_down(1.0)), "real": _cam(T, fx=602, fy=602, cx=322, cy=241, dist=(-0.02, 0, 0, 0, 0)),
            "grid": GRID}


def test_rotation_matrix_matches_scipy():
    rng = np.random.default_rng(3)
    for v in rng.normal(scale=20, size=(10, 3)):
        np.testing.assert_allclose(rotation_matrix(v), Rotation.from_rotvec(v, degrees=True).as_matrix(), atol=1e-12)
    assert np.array_equal(rotation_matrix([0, 0, 0]), np.eye(3))


def test_fit_recovers_a_known_5_mm_1_degree_extrinsic_offset():
    sim = parse_camera(_cam(_look_down(1.0)), "sim")
    delta = np.eye(4)
    delta[:3, :3] = Rotation.from_rotvec([0.6, -0.8, 0.0], degrees=True).as_matrix()  # 1 degree
    delta[:3, 3] = [0.003, 0.004, 0.0]  # 5 mm along the camera's x and y
    T_real = _look_down(1.0) @ delta
    real = parse_camera(_cam(T_real), "real")
    e = explain_differences(sim, real, _seen(sim, real, _pts()))
    assert e.named == ("extrinsics",) and e.chosen == "extrinsics" and not e.ambiguous
    o = e.fits["extrinsics"].offsets()
    assert o["translation_norm_mm"] == pytest.approx(5.0, abs=MM)
    np.testing.assert_allclose(o["translation_mm"], (T_real[:3, 3] - _look_down(1.0)[:3, 3]) * 1000, atol=MM)
    np.testing.assert_allclose(o["rotation_deg"], [0.6, -0.8, 0.0], atol=DEG)
    assert o["rotation_angle_deg"] == pytest.approx(1.0, abs=DEG)
    assert e.fits["extrinsics"].residual_rms_px < 1e-3 < 0.05 * e.error_rms_px < e.fits["intrinsics"].residual_rms_px


def test_fit_recovers_a_known_principal_point_focal_and_k1_change():
    sim = parse_camera(_cam(_look_down(1.0)), "sim")
    real = parse_camera(_cam(_look_down(1.0), fx=606, fy=604, cx=324, cy=237, dist=(-0.05, 0, 0, 0, 0)), "real")
    e = explain_differences(sim, real, _seen(sim, real, _pts()))
    assert e.named == ("intrinsics",) and not e.ambiguous
    o = e.fits["intrinsics"].offsets()
    np.testing.assert_allclose(o["principal_point_px"], [4, -3], atol=PX)
    np.testing.assert_allclose(o["focal_px"], [6, 4], atol=PX)
    assert o["k1"] == pytest.approx(-0.05, abs=K1)
    both = e.fits["both"].offsets()  # the joint model puts nothing on the pose
    assert both["translation_norm_mm"] < MM and both["rotation_angle_deg"] < DEG


def test_identical_cameras_name_nothing():
    sim = parse_camera(_cam(_look_down(1.0)), "sim")
    e = explain_differences(sim, sim, _pts())
    assert e.error_rms_px == 0 and e.named == ()
    assert np.abs(e.fits["both"].theta).max() < 1e-6


def test_a_camera_5mm_3mm_off_with_other_intrinsics_and_k1_is_named_with_its_offsets(tmp_path):
    spec = _issue_case()
    sim, real = parse_camera(spec["sim"], "sim"), parse_camera(spec["real"], "real")
    r = reprojection_error(sim, real, _pts())
    e = r.error_px[np.isfinite(r.error_px)]
    assert 1.0 <= e.min() and e.max() <= 3.85 and not r.structured  # what the growth fit alone called flat
    assert [f.code for f in reprojection_findings(r)] == ["intrinsics", "extrinsics"]
    o = r.fit.fits["both"].offsets()
    assert r.fit.chosen == "both"
    np.testing.assert_allclose(o["translation_mm"], [5, 0, 3], atol=MM)
    np.testing.assert_allclose(o["principal_point_px"], [2, 1], atol=PX)
    np.testing.assert_allclose(o["focal_px"], [2, 2], atol=PX)
    assert o["k1"] == pytest.approx(-0.02, abs=K1) and o["rotation_angle_deg"] < DEG
    # through the command line: the findings carry the offsets in px, mm and degrees
    f = tmp_path / "cams.json"
    f.write_text(json.dumps(spec))
    js = tmp_path / "r.json"
    assert main(["reprojection", str(f), "--json", str(js), "-q"]) == 0
    res = json.loads(js.read_text())
    by_code = {x["code"]: x for x in res["findings"]}
    assert set(by_code) == {"intrinsics", "extrinsics"}
    assert by_code["extrinsics"]["evidence"]["translation_mm"] == pytest.approx([5, 0, 3], abs=MM)
    assert by_code["intrinsics"]["evidence"]["principal_point_px"] == pytest.approx([2, 1], abs=PX)
    assert "(+5.0, +0.0, +3.0 mm in the base frame) and 0.00 deg" in by_code["extrinsics"]["title"]
    assert "principal point +2.00, +1.00 px, focal +2.00, +2.00 px, k1 -0.0200" in by_code["intrinsics"]["title"]
    fit = res["reprojection"]["camera_fit"]
    assert fit["named"] == ["intrinsics", "extrinsics"] and set(fit["fits"]) == {"intrinsics", "extrinsics", "both"}
    assert len(res["reprojection"]["grid"]["error_px"]) == len(_pts())  # the error surface is kept
