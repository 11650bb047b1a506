"""bench/bench_false_alarms.py and bench/moving_cameras.py: the false-alarm bench's own parts do what they say.

The split drawing and the virtual camera's geometry against closed forms; the report's tables and
listings against hand-made outcomes; one small end-to-end run on real frames (skipped when
../shared/data is absent).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "tests", ROOT / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import bench_false_alarms as B
import moving_cameras as M


def test_neighbour_frames_are_spaced_so_no_pair_is_an_off_by_one():
    for seed in range(20):
        for n_frames, n in ((96, 32), (96, 8), (11, 4), (40, 5)):
            idx = B.spaced_indices(n_frames, n, seed)
            assert len(idx) == n and idx == sorted(idx)
            assert min(np.diff(idx)) >= 3 and idx[0] >= 0 and idx[-1] + 1 <= n_frames - 1
    assert B.spaced_indices(96, 8, 1) == B.spaced_indices(96, 8, 1) != B.spaced_indices(96, 8, 2)


def test_virtual_camera_sees_the_photo_through_its_crop():
    # a photo whose pixel value encodes its column: a crop's mean column is read back from the frame
    w, h = 800, 450
    cols = np.tile((np.arange(w) * 255 // (w - 1)).astype(np.uint8)[None, :, None], (h, 1, 3))
    photo = Image.fromarray(cols)
    traj = M.Trajectory(zoom=np.array([1.0, 0.5, 0.5]), u_x=np.array([0.5, 0.0, 1.0]), u_y=np.array([0.5, 0.5, 0.5]))
    frames = M.render(photo, traj, (160, 120))
    assert all(f.shape == (120, 160, 3) for f in frames)
    w_max = h * 4 / 3  # the widest 4:3 crop of a 16:9 photo
    for f, z, u in zip(frames, traj.zoom, traj.u_x):
        x0 = u * (w - z * w_max)
        centre = x0 + z * w_max / 2
        assert f[..., 0].mean() == pytest.approx(centre * 255 / (w - 1), abs=2.0)


def test_trajectories_are_smooth_inside_the_photo_and_fixed_by_the_seed():
    for make in (M.pan_trajectory, M.corridor_trajectory):
        t = make(M.trajectory_seed(0, "cam"), 96)
        again = make(M.trajectory_seed(0, "cam"), 96)
        assert np.array_equal(t.zoom, again.zoom) and np.array_equal(t.u_x, again.u_x)
        for v in (t.zoom, t.u_x, t.u_y):
            assert v.shape == (96,) and v.min() >= 0.0 and v.max() <= 1.0
            # slow: a monotone cubic's slope stays within 3x the steepest secant between knots
            assert np.abs(np.diff(v)).max() <= 3 * 0.8 / M.KNOT_FRAMES
    corridor = M.corridor_trajectory(M.trajectory_seed(3, "c"), 96)
    assert np.all(np.diff(corridor.zoom) < 0) and corridor.zoom[-1] == pytest.approx(0.5)


def test_kinds_and_parts_follow_the_documented_rules():
    assert B.kind_of("rgbd_640x480") == B.kind_of("moving_voc_x_pan0") == "moving"
    assert B.kind_of("simpler_320x256") == "fixed"
    assert B.kind_of("voc100_500x375") == B.kind_of("cleargrasp_1280x720") == "photos"
    import zlib
    for name in ("cleargrasp000000123", "voc1002007_000039"):
        assert B.moving_part(name) == ("holdout" if zlib.crc32(name.encode()) % 3 == 0 else "tune")


def _split(camera: str, kind: str, mode: str, findings: list[dict]) -> B.SplitResult:
    return B.SplitResult(f"{camera}/s8/clean/{mode}/n8/x", camera, kind, "tune", mode, 8, 8, 8, 8, findings, 0.1)


def test_tables_count_splits_per_kind_and_code_and_list_every_bug():
    bug = {"code": "field_of_view", "severity": "bug", "title": "the real view is 0.86x as large"}
    gap = {"code": "brightness", "severity": "gap", "title": "real is darker"}
    info = {"code": "insufficient_data", "severity": "info", "title": "few frames"}
    rows = ([_split("moving_a_pan0", "moving", "unpaired", [bug, gap])] * 2
            + [_split("simpler_320x256", "fixed", "reencode", [info])] * 3)
    lines = B.tables(rows)
    row = {ln.split()[0] + " " + ln.split()[1]: ln for ln in lines if ln.startswith("kind ")}
    assert "2/2 100.0%" in row["kind moving"] and "0/3  0.0%" in row["kind fixed"]
    fov = next(ln for ln in lines if ln.startswith("field_of_view"))
    assert fov.split()[1:4] == ["2", "/", "0"] and fov.rstrip().endswith("40.0%")  # moving 2 bugs; 2 of 5 splits
    assert not any(ln.startswith("insufficient_data") for ln in lines)  # info is not a false alarm
    head = B.headline(rows)
    assert head.startswith("false alarms: 5 clean splits, 2 bug findings in 2 splits, 2 gap findings") and "FAIL" in head
    assert "PASS" in B.headline(rows[2:])


def test_small_run_on_real_frames(shared_data, tmp_path, capsys):
    out = tmp_path / "fa.json"
    argv = ["--quick", "--camera", "rgbd", "--camera", "moving_voc1002007_000039_pan0", "--sides", "4",
            "--real-seeds", "1", "--json", str(out)]
    assert B.main(argv) == 0
    text = capsys.readouterr().out
    res = json.loads(out.read_text())
    splits = res["splits"]
    # rgbd: 5 frames, re-encoded at 4 a side (too few for an unpaired or spaced neighbour split);
    # the virtual camera: unpaired, re-encoded and neighbour at 4 a side
    assert sorted((s["camera"], s["mode"]) for s in splits) == [
        ("moving_voc1002007_000039_pan0", "neighbour"), ("moving_voc1002007_000039_pan0", "reencode"),
        ("moving_voc1002007_000039_pan0", "unpaired"), ("rgbd_640x480", "reencode")]
    assert all(s["kind"] == "moving" and s["n"] == 4 and (s["n_sim"], s["n_real"]) == (4, 4) for s in splits)
    cams = {c["name"]: c for c in res["cameras"]}
    assert cams["moving_voc1002007_000039_pan0"]["frames"] == B.MOVING_FRAMES and cams["rgbd_640x480"]["depth"]
    assert "PER CHECK" in text and "kind moving" in text and "BUG FINDINGS:" in text
    n_bugs = sum(f["severity"] == "bug" for s in splits for f in s["findings"])
    assert f"BUG FINDINGS: {n_bugs}" in text
    assert text.strip().splitlines()[-1] == res["headline"] and res["headline"].startswith("false alarms: 4 clean splits")
