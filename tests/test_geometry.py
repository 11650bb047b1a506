"""Camera projection and the reprojection surface against independent references and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perception_gap.errors import InputError
from perception_gap.geometry.camera import parse_camera, project
from perception_gap.geometry.reprojection import grid_points, reprojection_error, reprojection_findings


def _rot(axis: str, deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]), "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def _look_down(height: float = 1.0) -> np.ndarray:
    """A camera above the origin at `height` m looking straight down (-z of the base)."""
    T = np.eye(4)
    T[:3, :3] = _rot("x", 180)  # camera z -> base -z
    T[2, 3] = height
    return T


def _cam(T: np.ndarray, fx: float = 600.0, fy: float = 600.0, cx: float = 320.0, cy: float = 240.0,
         dist=(0, 0, 0, 0, 0)) -> dict:
    return {"width": 640, "height": 480, "K": [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], "dist": list(dist),
            "T_base_cam": T.tolist()}


def _reference_projection(cam: dict, p_base: np.ndarray) -> tuple[float, float]:
    """Textbook pinhole + Brown-Conrady, one point at a time, via the inverse of the 4x4 pose."""
    ext = np.linalg.inv(np.asarray(cam["T_base_cam"]))  # base -> camera
    X, Y, Z, _ = ext @ np.append(p_base, 1.0)
    x, y = X / Z, Y / Z
    k1, k2, p1, p2, k3 = cam["dist"]
    r2 = x ** 2 + y ** 2
    rad = 1 + k1 * r2 + k2 * r2 ** 2 + k3 * r2 ** 3
    xd = x * rad + 2 * p1 * x * y + p2 * (r2 + 2 * x ** 2)
    yd = y * rad + p1 * (r2 + 2 * y ** 2) + 2 * p2 * x * y
    u, v, w = np.asarray(cam["K"]) @ np.array([xd, yd, 1.0])
    return u / w, v / w


def test_projection_matches_textbook_reference_on_random_cameras():
    rng = np.random.default_rng(7)
    for _ in range(20):
        q, r = np.linalg.qr(rng.normal(size=(3, 3)))
        R = q * np.sign(np.diag(r))
        if np.linalg.det(R) < 0:
            R[:, 0] *= -1
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, rng.normal(size=3)
        cam = _cam(T, *rng.uniform([300, 300, 200, 150], [900, 900, 440, 330]),
                   dist=rng.uniform(-0.05, 0.05, 5) * [2, 1, 0.2, 0.2, 0.5])
        cam["K"][0][1] = float(rng.uniform(-1, 1))  # a little skew
        # points in front of the camera: camera-frame points mapped to the base frame
        pc = np.column_stack([rng.uniform(-0.4, 0.4, 50), rng.uniform(-0.3, 0.3, 50), rng.uniform(0.5, 3, 50)])
        pb = pc @ R.T + T[:3, 3]
        uv, front, _ = project(parse_camera(cam, "c"), pb)
        assert front.all()
        ref = np.array([_reference_projection(cam, p) for p in pb])
        np.testing.assert_allclose(uv, ref, rtol=0, atol=1e-7)


def test_points_behind_and_outside_are_excluded_and_counted():
    cam = parse_camera(_cam(_look_down(1.0)), "sim")
    pts = np.array([[0, 0, 0.0], [0, 0, 2.0], [5.0, 0, 0]])  # seen; above the camera; far off to the side
    uv, front, inside = project(cam, pts)
    assert np.allclose(uv[0], [320, 240]) and front.tolist() == [True, False, True]
    assert inside.tolist() == [True, False, False]
    r = reprojection_error(cam, cam, pts)
    assert (r.n_behind, r.n_outside) == (1, 1) and r.mean == 0 and np.isnan(r.error_px[1:]).all()


def test_barrel_distortion_does_not_fold_far_points_into_the_image():
    # k1 = -0.5: r(1 + k1 r²) peaks at r² = 1/1.5; a point at r² = 4 would land back near the centre
    cam = parse_camera(_cam(_look_down(1.0), dist=(-0.5, 0, 0, 0, 0)), "sim")
    assert cam.max_r2 == pytest.approx(1 / 1.5)
    _, front, inside = project(cam, np.array([[2.0, 0, 0]]))
    assert not front[0] and not inside[0]


def test_known_translation_gives_the_predicted_error_field():
    """Real camera moved by dx along its own x axis: each point's error is exactly fx * dx / Z."""
    fx, dx = 600.0, 0.01
    T_sim = _look_down(1.0)
    T_real = T_sim.copy()
    T_real[:3, 3] += T_sim[:3, :3] @ np.array([dx, 0, 0])
    pts = grid_points([-0.2, -0.2, 0.0], [0.2, 0.2, 0.3], 0.05)
    r = reprojection_error(parse_camera(_cam(T_sim, fx), "sim"), parse_camera(_cam(T_real, fx), "real"), pts)
    depth = 1.0 - pts[:, 2]
    ok = np.isfinite(r.error_px)
    assert ok.sum() == len(pts)
    np.testing.assert_allclose(r.error_px, fx * dx / depth, rtol=1e-9)
    assert r.max == pytest.approx(fx * dx / 0.7) and r.mean == pytest.approx(np.mean(fx * dx / depth))


def test_rotation_about_the_axis_is_structured_and_a_principal_point_shift_is_flat_but_named():
    pts = grid_points([-0.3, -0.3, 0.0], [0.3, 0.3, 0.0], 0.02)
    sim = parse_camera(_cam(_look_down(1.0)), "sim")
    T_rot = _look_down(1.0)
    T_rot[:3, :3] = T_rot[:3, :3] @ _rot("z", 1.0)  # 1 degree about the optical axis
    rot = reprojection_error(sim, parse_camera(_cam(T_rot), "real"), pts)
    # a point at distance d on the table (depth 1 m) moves by fx * d * 2 sin(0.5°) px
    np.testing.assert_allclose(rot.slope_px_per_m, 600 * 2 * math.sin(math.radians(0.5)), rtol=1e-6)
    assert rot.intercept_px == pytest.approx(0, abs=1e-6)
    assert rot.structured and [f.code for f in reprojection_findings(rot)] == ["extrinsics"]
    shift = reprojection_error(sim, parse_camera(_cam(_look_down(1.0), cx=323.0), "real"), pts)
    assert shift.mean == pytest.approx(3.0) and abs(shift.slope_px_per_m) < 1e-9
    assert not shift.structured
    # flat, but the camera fit names it: on a one-depth grid a camera translation explains it too
    (f,) = reprojection_findings(shift)
    assert f.code == "intrinsics" and f.evidence["ambiguous"]
    assert f.evidence["principal_point_px"] == pytest.approx([3.0, 0.0], abs=1e-3)
    same = reprojection_error(sim, sim, pts)
    assert same.max == 0 and not same.structured


def test_known_points_residuals():
    cam = _cam(_look_down(1.0))
    xyz = np.array([[0.1, 0.0, 0.0], [0.0, 0.1, 0.0]])
    real = parse_camera(cam, "real")
    uv, _, _ = project(real, xyz)
    r = reprojection_error(parse_camera(_cam(_look_down(1.0), cx=322.0), "sim"), real, xyz,
                           known_xyz=xyz, known_px=uv + [0.0, 1.0])
    d = r.known.to_dict()
    assert d["real_rms_px"] == pytest.approx(1.0) and d["sim_rms_px"] == pytest.approx(math.sqrt(5))


@pytest.mark.parametrize("patch, needle", [
    ({"K": [[0, 0, 320], [0, 600, 240], [0, 0, 1]]}, "singular camera"),
    ({"K": [[600, 0, 320], [0, 600, 240], [0, 0, 0]]}, "last row"),
    ({"T_base_cam": (np.diag([1, 1, 1.2, 1])).tolist()}, "rotation"),
    ({"T_base_cam": (np.diag([1, 1, -1, 1])).tolist()}, "det = -1"),
    ({"dist": [0.1, 0.2]}, "dist"),
    ({"width": 0}, "width"),
    ({"K": [[600, 0, 320], [0, 600, float("nan")], [0, 0, 1]]}, "finite"),
])
def test_bad_cameras_are_named(patch, needle):
    cam = {**_cam(_look_down()), **patch}
    with pytest.raises(InputError, match=needle):
        parse_camera(cam, "real")


def test_grid_points_bounds_and_limits():
    g = grid_points([0, 0, 0], [0.1, 0.2, 0], 0.1)
    assert g.shape == (6, 3) and g[:, 1].max() == pytest.approx(0.2)
    with pytest.raises(InputError, match="grid points"):
        grid_points([0, 0, 0], [10, 10, 10], 0.001)
    with pytest.raises(InputError, match="step"):
        grid_points([0, 0, 0], [1, 1, 1], 0)
