"""policy-check, replay and reprojection through the command line: outputs, gates, one-line errors."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from perception_gap.cli import main
from perception_gap.wording import sig
from tests.figures import capture, cell, html_tables, legend, lines, only, points
from tests.test_geometry import _cam, _look_down, _rot

REPO_CLI = str(__import__("pathlib").Path(__file__).resolve().parents[1] / "cli.py")


def _cams(tmp_path, real_T=None, **extra):
    T = _look_down(1.0)
    spec = {"sim": _cam(T), "real": _cam(T if real_T is None else real_T),
            "grid": {"min": [-0.2, -0.2, 0], "max": [0.2, 0.2, 0.0], "step": 0.05}, **extra}
    path = tmp_path / "cams.json"
    path.write_text(json.dumps(spec))
    return path


def _check_reprojection_plots(drawn, rep):
    """Each heatmap layer holds that z's grid points coloured by their own error (shared scale
    0..max, px); the second plot holds error against distance from the centre and the fitted line."""
    heat, line = only(drawn, "reprojection_plots")
    pts, err = np.asarray(rep["grid"]["points"]), np.asarray(rep["grid"]["error_px"], float)
    layers = heat.axes
    assert len(layers) == len(np.unique(pts[:, 2])) == 1
    for ax in layers:
        z = float(ax.get_title().split("=")[1].split()[0])
        (off, _, _), = points(ax)
        coll = ax.collections[0]
        mine = np.isclose(pts[:, 2], z)
        np.testing.assert_allclose(off, pts[mine, :2])
        np.testing.assert_allclose(coll.get_array(), err[mine])
        assert coll.get_clim() == pytest.approx((0, err.max()))
        assert ax.get_xlabel() == "x (m)" and ax.get_title().endswith(" m")
    assert [a.get_ylabel() for a in heat.figure.axes if a.get_label() == "<colorbar>"] == ["error (px)"]
    (ax,) = line.axes
    (off, _, _), = points(ax)
    dist = np.linalg.norm(pts - np.asarray(rep["centre"]), axis=1)
    np.testing.assert_allclose(off, np.c_[dist, err])
    (x, y, _, label, _), = lines(ax)
    np.testing.assert_allclose(y, rep["intercept_px"] + rep["slope_px_per_m"] * x)
    assert x[0] == 0 and x[1] == pytest.approx(dist.max())
    assert label == f"{sig(rep['slope_px_per_m'])} px/m" and list(legend(ax)) == [label]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("distance from the grid centre (m)", "error (px)")


def test_reprojection_writes_its_section_report_and_gates(tmp_path, capsys, monkeypatch):
    drawn = capture(monkeypatch)
    T = _look_down(1.0)
    T[:3, :3] = T[:3, :3] @ _rot("z", 2.0)
    T[0, 3] += 0.01  # and a shift, so that the error surface is not symmetric about the centre
    f = _cams(tmp_path, T)
    out, js = tmp_path / "out", tmp_path / "r.json"
    assert main(["reprojection", str(f), "--out", str(out), "--json", str(js), "--max-mean-px", "100"]) == 0
    res = json.loads(js.read_text())
    rep = res["reprojection"]
    assert {"mean", "max", "slope_px_per_m", "grid"} <= set(rep) and rep["gate"]["passed"]
    assert len(rep["grid"]["points"]) == len(rep["grid"]["error_px"]) == 9 * 9
    assert [x["code"] for x in res["findings"]] == ["extrinsics"]
    html = (out / "report.html").read_text()
    assert "Reprojection" in html and html.count("data:image/png;base64") == 2
    assert np.ptp(rep["grid"]["error_px"]) > 1  # a rotation about the optical axis: error grows outwards
    _check_reprojection_plots(drawn, rep)
    summary = dict(html_tables(html)["reprojection-summary"][1:])
    for key in ("mean", "max", "slope_px_per_m"):
        assert cell(summary[key]) == pytest.approx(rep[key], rel=5e-3), key
    assert json.loads((out / "results.json").read_text()) == res
    capsys.readouterr()
    assert main(["reprojection", str(f), "--max-mean-px", "1", "-q"]) == 1
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("patch, needle", [
    ({"real": {**_cam(_look_down()), "K": [[0, 0, 320], [0, 600, 240], [0, 0, 1]]}}, "singular camera"),
    ({"real": {**_cam(_look_down()), "T_base_cam": np.diag([2.0, 1, 1, 1]).tolist()}}, "rotation"),
    ({"grid": {"min": [0, 0, 0], "max": [1, 1, 1]}}, "grid"),
    ({"points": [{"xyz": [0, 0]}]}, "points"),
])
def test_reprojection_bad_input_is_one_line_exit_2(tmp_path, capsys, patch, needle):
    f = _cams(tmp_path)
    f.write_text(json.dumps({**json.loads(f.read_text()), **patch}))
    assert main(["reprojection", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_reprojection_non_json_file_through_a_real_process(tmp_path):
    f = tmp_path / "cams.json"
    f.write_text("{not json")
    p = subprocess.run([sys.executable, REPO_CLI, "reprojection", str(f)], capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "JSON" in p.stderr


def _replay_log(tmp_path, offset: float, ext: str = "csv"):
    rows = []
    for ep in ("a", "b"):
        for step in range(30):
            for dom in ("sim", "real"):
                x = 0.01 * step + (offset if dom == "real" else 0.0)
                rows.append({"episode": ep, "step": step, "domain": dom, "x": x, "y": 0.0, "z": 0.3,
                             "qw": 1.0, "qx": 0.0, "qy": 0.0, "qz": 0.0, "contact": int(step >= 12)})
    path = tmp_path / f"log.{ext}"
    if ext == "csv":
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    else:
        path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def _check_replay_plot(drawn, rp):
    """One figure for every listed episode: its translation error in mm per step, in its own colour
    and legend entry; its divergence onset (dashed) and first contact (dotted) in that colour, both
    styles named in the legend. These logs hold no rotation (identity quaternions), so no rotation
    panel: the title says so rather than drawing a flat line at 0."""
    (fig,) = only(drawn, "replay_plot")
    (ax,) = fig.axes
    eps = rp["episodes"]
    assert len(eps) == 2 and all(e["rotation_error_deg"] == [0.0] * 30 for e in eps)
    assert "rotation error 0 at every step" in ax.get_title() and "2 episodes" in ax.get_title()
    drawn_lines = lines(ax)
    entries = legend(ax)
    assert list(entries) == [f"episode {e['episode']}" for e in eps] + ["divergence onset", "first contact"]
    for e in eps:
        label = f"episode {e['episode']}"
        ((x, y, colour, _, _),) = [ln for ln in drawn_lines if ln[3] == label]
        np.testing.assert_allclose(x, e["steps"])
        np.testing.assert_allclose(y, np.asarray(e["translation_error"]) * 1000)
        assert entries[label] == colour
        verticals = {float(vx[0]) for vx, _, c, lab, _ in drawn_lines
                     if c == colour and lab.startswith("_") and len(vx) == 2 and vx[0] == vx[1]}
        assert verticals == {float(e["divergence_step"]), float(e["first_contact_step"])}
        assert e["first_contact_step"] == 12
    assert ax.get_ylabel() == "translation error (mm)" and ax.get_xlabel() == "step"


@pytest.mark.parametrize("ext", ["csv", "jsonl"])
def test_replay_gives_back_a_known_offset_and_gates(tmp_path, ext, monkeypatch):
    drawn = capture(monkeypatch)
    f = _replay_log(tmp_path, 0.02, ext)
    js = tmp_path / "r.json"
    assert main(["replay", str(f), "--json", str(js), "--max-translation-m", "0.05", "-q"]) == 0
    rp = json.loads(js.read_text())["replay"]
    assert rp["translation_error"]["mean"] == pytest.approx(0.02)
    assert rp["translation_error"]["per_step"] == pytest.approx([0.02] * 30)
    assert rp["divergence_step"] == 0 and rp["gate"]["passed"]
    out = ["--out", str(tmp_path / "o")] if ext == "csv" else []  # the report once: plotting is slow
    assert main(["replay", str(f), "--max-translation-m", "0.01", "-q", *out]) == 1
    if out:
        assert "Replay" in (tmp_path / "o" / "report.html").read_text()
        rp_o = json.loads((tmp_path / "o" / "results.json").read_text())["replay"]
        _check_replay_plot(drawn, rp_o)
        table = html_tables((tmp_path / "o" / "report.html").read_text())["replay-episodes"]
        for row, ep in zip(table[1:], rp_o["episodes"], strict=True):
            assert row[0] == ep["episode"] and cell(row[1]) == pytest.approx(ep["translation_mean"], rel=5e-3)
            assert cell(row[3]) == ep["divergence_step"] and cell(row[4]) == ep["first_contact_step"]


def test_replay_bad_input_is_one_line_exit_2(tmp_path, capsys):
    f = _replay_log(tmp_path, 0.0)
    text = f.read_text()
    for bad, needle in ((text.replace(",real,", ",robot,", 1), "domain"), (text.replace("qw", "w", 1), "missing required column(s) qw"),
                        ("episode,step\na,1\n", "missing"), (text.replace(",1.0,0.0,0.0,0.0,", ",0,0,0,0,", 1), "non-zero")):
        f.write_text(bad)
        assert main(["replay", str(f)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err
