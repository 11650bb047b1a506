"""Initial states and failures on the reprojection grid: counts against numpy, the decision rule on
constructed cases (`thin_coverage`, `extrinsics`, neither), and `reprojection --initial-states`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from perception_gap.cli import main
from perception_gap.geometry.camera import parse_camera
from perception_gap.geometry.coverage import (
    block_sum,
    coverage_findings,
    coverage_on_grid,
    grid_cells,
    mann_whitney_auc,
)
from perception_gap.geometry.reprojection import grid_points, reprojection_error, reprojection_findings
from tests.figures import capture, only, points
from tests.test_geometry import _cam, _look_down, _rot

GRID = {"min": [-0.3, -0.2, 0.0], "max": [0.3, 0.2, 0.0], "step": 0.05}  # the table top, 13 x 9 cells


def _pts():
    return grid_points(GRID["min"], GRID["max"], GRID["step"])


def _flat_error():
    """A 3 px principal-point shift: the same error everywhere."""
    return reprojection_error(parse_camera(_cam(_look_down(1.0)), "sim"),
                              parse_camera(_cam(_look_down(1.0), cx=323.0), "real"), _pts())


def _growing_error():
    """The real camera rolled 2 degrees about its optical axis: error proportional to the distance from the centre."""
    T = _look_down(1.0)
    T[:3, :3] = T[:3, :3] @ _rot("z", 2.0)
    return reprojection_error(parse_camera(_cam(_look_down(1.0)), "sim"), parse_camera(_cam(T), "real"), _pts())


def _thin_corner_states(rng):
    """400 training states over x < 0.1 (about 90% succeed), 24 over x > 0.2 (about 75% fail)."""
    dense = np.c_[rng.uniform(-0.3, 0.1, 400), rng.uniform(-0.2, 0.2, 400), np.zeros(400)]
    thin = np.c_[rng.uniform(0.2, 0.3, 24), rng.uniform(-0.2, 0.2, 24), np.zeros(24)]
    success = np.r_[(rng.random(400) > 0.1), (rng.random(24) > 0.75)].astype(float)
    return np.r_[dense, thin], success


def test_mann_whitney_auc_matches_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 6, 40).astype(float), rng.integers(1, 7, 30).astype(float)  # many ties
    u = mannwhitneyu(a, b, alternative="greater").statistic
    assert mann_whitney_auc(a, b) == pytest.approx(u / (40 * 30))
    assert mann_whitney_auc(np.array([2.0]), np.array([1.0])) == 1 and np.isnan(mann_whitney_auc(a, b[:0]))


def test_cells_and_blocks_match_numpy_histograms():
    rng = np.random.default_rng(1)
    pts = grid_points([-0.3, -0.2, 0.0], [0.3, 0.2, 0.1], 0.05)
    states = np.c_[rng.uniform(-0.4, 0.4, 500), rng.uniform(-0.3, 0.3, 500), rng.uniform(-0.05, 0.15, 500)]
    cell, shape = grid_cells(pts, 0.05, states)
    assert shape == (13, 9, 3)
    edges = [np.arange(lo - 0.025, hi + 0.05, 0.05)[: n + 1] for lo, hi, n in zip([-0.3, -0.2, 0.0], [0.3, 0.2, 0.1], shape)]
    ref, _ = np.histogramdd(states, bins=edges)
    np.testing.assert_array_equal(np.bincount(cell[cell >= 0], minlength=len(pts)).reshape(shape), ref)
    assert (cell < 0).sum() == len(states) - ref.sum()
    inside = cell >= 0  # a state lies in the cell of its nearest grid point
    nearest = np.argmin(((states[inside, None, :] - pts[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(cell[inside], nearest)
    # the 3x3x3 block sum against an explicit loop
    counts = ref.ravel()
    blocks = block_sum(counts, shape).reshape(shape)
    for i, j, k in [(0, 0, 0), (6, 4, 1), (12, 8, 2)]:
        assert blocks[i, j, k] == ref[max(i - 1, 0):i + 2, max(j - 1, 0):j + 2, max(k - 1, 0):k + 2].sum()


def test_failures_where_coverage_is_thin_and_error_flat_are_thin_coverage():
    r = _flat_error()
    states, success = _thin_corner_states(np.random.default_rng(2))
    cov = coverage_on_grid(_pts(), 0.05, r.error_px, states, success, r.mean)
    assert cov.verdict == "thin_coverage" and cov.n_outside == 0 and cov.n_states == 424
    assert cov.thin.holds and cov.thin.rate_in >= 2 * cov.thin.rate_out and cov.thin.p_value < 1e-4
    assert cov.coverage_failures < cov.coverage_successes and cov.auc_coverage > 0.5
    assert cov.error_failures_px == pytest.approx(cov.error_successes_px, abs=1e-6)  # flat: 3 px everywhere
    codes = [f.code for f in coverage_findings(reprojection_findings(r), cov)]
    assert "thin_coverage" in codes and "extrinsics" not in codes


def test_error_growing_toward_the_failures_is_extrinsics():
    r = _growing_error()
    rng = np.random.default_rng(3)
    states = np.c_[rng.uniform(-0.3, 0.3, 600), rng.uniform(-0.2, 0.2, 600), np.zeros(600)]  # even coverage
    far = np.hypot(states[:, 0], states[:, 1]) > 0.25
    success = np.where(far, rng.random(600) > 0.8, rng.random(600) > 0.05).astype(float)
    cov = coverage_on_grid(_pts(), 0.05, r.error_px, states, success, r.mean)
    assert cov.verdict == "recalibrate" and cov.auc_error >= 0.7
    found = coverage_findings(reprojection_findings(r), cov)
    assert [f.code for f in found] == ["extrinsics"]  # joined to the camera fit's own extrinsics finding
    assert found[0].evidence["toward_failures"]["verdict"] == "recalibrate" and "rotation_deg" in found[0].evidence
    # without the camera fit's finding the decision stands on its own
    assert [f.code for f in coverage_findings([], cov)] == ["extrinsics"]


def test_an_error_gradient_toward_failures_over_a_base_failure_rate_is_extrinsics():
    """Error rising from 0 px at x = -0.3 to 6 px at x = 0.3 (focal +10 px, cx +3 px); 20% of all starts
    fail, 60% beyond x = 0.2: the AUC is diluted by the base failures, the high-error
    contrast is not. The same failures over a flat error, evenly covered, decide nothing."""
    sim = parse_camera(_cam(_look_down(1.0)), "sim")
    r = reprojection_error(sim, parse_camera(_cam(_look_down(1.0), fx=610, cx=323), "real"), _pts())
    rng = np.random.default_rng(0)
    states = np.c_[rng.uniform(-0.3, 0.3, 600), rng.uniform(-0.2, 0.2, 600), np.zeros(600)]
    success = np.where(states[:, 0] > 0.2, rng.random(600) > 0.6, rng.random(600) > 0.2).astype(float)
    cov = coverage_on_grid(_pts(), 0.05, r.error_px, states, success, r.mean)
    assert cov.verdict == "recalibrate" and cov.auc_error < 0.7 and cov.high_error.holds
    assert cov.high_error.rate_in >= 2 * cov.high_error.rate_out and cov.high_error.p_value * 4 <= 0.05
    assert cov.high_error.gap >= 0.6  # the high-error starts' mean error, px above the others' (0.2 x 3 px mean)
    assert [f.code for f in coverage_findings([], cov)] == ["extrinsics"]
    flat = _flat_error()
    even = coverage_on_grid(_pts(), 0.05, flat.error_px, states, success, flat.mean)
    assert even.verdict == "none" and not even.high_error.holds and not even.thin.holds


def test_random_failures_and_too_few_outcomes_decide_nothing():
    r = _growing_error()
    rng = np.random.default_rng(4)
    states = np.c_[rng.uniform(-0.3, 0.3, 600), rng.uniform(-0.2, 0.2, 600), np.zeros(600)]
    cov = coverage_on_grid(_pts(), 0.05, r.error_px, states, (rng.random(600) > 0.2).astype(float), r.mean)
    assert cov.verdict == "none" and coverage_findings([], cov) == []
    few = np.full(600, np.nan)
    few[:3] = 0
    few[3:20] = 1
    cov = coverage_on_grid(_pts(), 0.05, r.error_px, states, few, r.mean)
    assert cov.verdict == "insufficient" and cov.n_outcomes == 20 and cov.n_failures == 3


def test_reprojection_initial_states_through_the_cli(tmp_path, monkeypatch):
    drawn = capture(monkeypatch)
    cams = tmp_path / "cams.json"
    cams.write_text(json.dumps({"sim": _cam(_look_down(1.0)), "real": _cam(_look_down(1.0), cx=323.0), "grid": GRID}))
    states, success = _thin_corner_states(np.random.default_rng(2))
    lines = ["x,y,z,success"] + [f"{x:.6f},{y:.6f},{z:.6f},{int(s)}" for (x, y, z), s in zip(states, success)]
    lines += ["0.0,0.0,0.0,", "2.0,0.0,0.0,1"]  # a training state without an outcome; one off the grid
    csv = tmp_path / "states.csv"
    csv.write_text("\n".join(lines) + "\n")
    out, js = tmp_path / "out", tmp_path / "r.json"
    assert main(["reprojection", str(cams), "--initial-states", str(csv), "--out", str(out), "--json", str(js), "-q"]) == 0
    res = json.loads(js.read_text())
    cov = res["reprojection"]["coverage"]
    cells = cov["cells"]
    n = len(res["reprojection"]["grid"]["points"])
    assert all(len(v) == n for v in cells.values())
    assert (cov["n_states"], cov["n_outside"], cov["n_outcomes"]) == (426, 1, 424)
    assert sum(cells["n_states"]) == 425 and sum(cells["n_failures"]) == cov["n_failures"] == int((success == 0).sum())
    rate = [r for r in cells["failure_rate"] if r is not None]
    assert all(0 <= r <= 1 for r in rate) and cells["failure_rate"].count(None) == cells["n_outcomes"].count(0)
    assert cov["verdict"] == "thin_coverage" and "thin_coverage" in {f["code"] for f in res["findings"]}
    html = (out / "report.html").read_text()
    assert "Decision rule:" in html and "recalibrate (extrinsics)" in html and html.count("data:image/png;base64") == 3
    (fig,) = only(drawn, "coverage_plot")
    (ax,) = fig.axes
    (off, _, _), (fail_off, _, _) = points(ax)
    pts = np.asarray(res["reprojection"]["grid"]["points"])
    np.testing.assert_allclose(off, pts[:, :2])
    np.testing.assert_array_equal(ax.collections[0].get_array(), cells["n_states"])
    failed = np.asarray(cells["n_failures"]) > 0
    np.testing.assert_allclose(fail_off, pts[failed, :2])


@pytest.mark.parametrize("body, needle", [
    ("a,b,c\n1,2,3\n", "missing required column(s) x, y, z"),
    ("x,y,z\n0,0,abc\n", "Row 1: expected `z` to be a finite number"),
    ("x,y,z,success\n0,0,0,maybe\n", "success"),
    ("x,y,z\n", "has no rows"),
])
def test_bad_initial_states_are_one_line_exit_2(tmp_path, capsys, body, needle):
    cams = tmp_path / "cams.json"
    cams.write_text(json.dumps({"sim": _cam(_look_down(1.0)), "real": _cam(_look_down(1.0)), "grid": GRID}))
    (tmp_path / "s.csv").write_text(body)
    assert main(["reprojection", str(cams), "--initial-states", str(tmp_path / "s.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_past_four_layers_the_figures_draw_the_layers_that_hold_the_starts(monkeypatch):
    """Nine grid layers, starts and failures in layers 2 and 7 only: both the error heatmap and the
    coverage figure draw the same four layers, 2 and 7 among them, and the coverage figure says how
    many starts lie in the layers it leaves out (here none)."""
    from perception_gap.reports.geometry import coverage_plot, reprojection_plots

    drawn = capture(monkeypatch)
    zs = [round(0.05 * k, 2) for k in range(9)]
    pts = [[x, y, z] for z in zs for x in (0.0, 0.1) for y in (0.0, 0.1)]
    states = [5 if p[2] in (zs[2], zs[7]) else 0 for p in pts]
    fails = [1 if p[2] == zs[7] else 0 for p in pts]
    rep = {"grid": {"points": pts, "error_px": [1.0] * len(pts)},
           "coverage": {"cells": {"n_states": states, "n_failures": fails}}}
    assert coverage_plot(rep) is not None and reprojection_plots(rep)
    heat, cov = only(drawn, "reprojection_plots")[0], only(drawn, "coverage_plot")[0]
    titles = [[ax.get_title() for ax in d.axes] for d in (heat, cov)]
    assert titles[0] == titles[1] and len(titles[0]) == 4
    assert {"z = 0.1 m", "z = 0.35 m"} <= set(titles[1])
    assert cov.figure.get_suptitle() == ""
    # the four layers drawn cannot hold starts in five layers: the figure counts the rest
    states = [5 if p[2] in zs[:5] else 0 for p in pts]
    rep["coverage"]["cells"]["n_states"] = states
    drawn.clear()
    coverage_plot(rep)
    assert only(drawn, "coverage_plot")[0].figure.get_suptitle() == "24 starts and failures lie in the 5 layers not drawn"
