"""LeRobot datasets (v2.1 and v3.0) and plain videos through `index`: what each row becomes, and
bad input as one-line errors (exit 2) or recorded skips."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perception_gap import cli
from perception_gap.catalog import Catalog
from perception_gap.ingest.lerobot import scan_lerobot
from tests.robot_data import FPS, smooth_frames, write_lerobot, write_video

CAM = "observation.images.top"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def episodes():
    return [smooth_frames(4, seed=0), smooth_frames(3, seed=1)]


@pytest.mark.parametrize("version,codec", [("v2.1", "av1"), ("v3.0", "h264"), ("v3.0", "image")])
def test_rows_become_frames_with_episode_step_state_and_action(tmp_path, episodes, version, codec):
    kw = {"dtype": "image"} if codec == "image" else {"codec": codec}
    root = write_lerobot(tmp_path / "ds", episodes, version=version, **kw)
    entries = scan_lerobot(root, CAM)
    assert [(e.episode, e.step, e.pair_key) for e in entries] == (
        [("0", i, f"0/{i}") for i in range(4)] + [("1", i, f"1/{i}") for i in range(3)])
    assert all(e.error is None for e in entries)
    # the writer's values (tests/robot_data._rows): state [ep + 0.1 i, -0.05 i], action [0.2 i, ep - 0.01 i]
    e = entries[5]  # episode 1, step 1
    np.testing.assert_allclose(e.proprio, [1.1, -0.05])
    np.testing.assert_allclose(e.action, [0.2, 0.99])
    idx = [e.container.index for e in entries]
    if codec == "image":  # row numbers in the one v3.0 data file
        assert idx == list(range(7)) and {e.container.member for e in entries} == {f"parquet:{CAM}"}
    elif version == "v3.0":  # one video for both episodes: episode 1 starts at from_timestamp 0.4 s
        assert idx == list(range(7)) and len({e.container.file.path for e in entries}) == 1
    else:  # one video per episode
        assert idx == [0, 1, 2, 3, 0, 1, 2] and len({e.container.file.path for e in entries}) == 2


def test_state_and_action_cells_read_as_numpy_reads_them():
    from perception_gap.ingest.lerobot import _vector

    # the list fast path and numpy's reading agree: flat lists, ints, bools; nested cells are
    # flattened and a None inside a cell is NaN, as np.asarray(..., float64) gives them
    for cell in ([0.1, -2.5, 3], [True, 0], [[1.0, 2.0], [3.0, 4.0]], [1.0, None], [], (0.5, 1)):
        want = np.ravel(np.asarray(cell, dtype=np.float64)).tolist()
        np.testing.assert_array_equal(np.array(_vector(cell)), np.array(want))
    assert _vector(None) is None
    assert _vector([1, 2**53 + 1]) == [1.0, float(2**53)]  # the same rounding as numpy's


def test_index_lerobot_and_video_then_stats_pair_by_episode_and_step(tmp_path, episodes, capsys):
    root = write_lerobot(tmp_path / "ds", episodes, version="v3.0", codec="h264")
    vids = tmp_path / "vids"
    for ep, frames in enumerate(episodes):
        write_video(vids / f"{ep}.mp4", frames, "av1")
    db = str(tmp_path / "c.duckdb")
    code, out, _ = run(["index", "--lerobot", str(root), "--camera", CAM, "--set", "real", "--domain", "real", "--db", db], capsys)
    assert code == 0 and "7 usable, 0 skipped" in out
    code, out, _ = run(["index", "--video", str(vids), "--set", "sim", "--domain", "sim", "--db", db], capsys)
    assert code == 0 and "7 usable, 0 skipped" in out
    code, out, _ = run(["stats", "--sim", "sim", "--real", "real", "--db", db], capsys)
    assert code == 0 and "pairs: 7 matched" in out


def test_missing_info_unknown_camera_and_bad_layout_exit_2_with_one_line(tmp_path, episodes, capsys):
    root = write_lerobot(tmp_path / "ds", episodes, version="v2.1", codec="h264")
    db = str(tmp_path / "c.duckdb")
    base = ["index", "--set", "s", "--domain", "real", "--db", db]
    code, _, err = run(base + ["--lerobot", str(root), "--camera", "observation.images.wrist"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "Unknown camera key 'observation.images.wrist'" in err and CAM in err
    code, _, err = run(base + ["--lerobot", str(root)], capsys)
    assert code == 2 and "needs --camera" in err
    (root / "meta" / "info.json").rename(root / "meta" / "moved.json")
    code, _, err = run(base + ["--lerobot", str(root), "--camera", CAM], capsys)
    assert code == 2 and err.count("\n") == 1 and "meta/info.json not found" in err
    (root / "meta" / "info.json").write_text(json.dumps({"codebase_version": "v1.6"}))
    code, _, err = run(base + ["--lerobot", str(root), "--camera", CAM], capsys)
    assert code == 2 and "v1.6" in err


def test_a_row_whose_frame_is_missing_from_the_video_is_a_recorded_skip(tmp_path, episodes, capsys):
    root = write_lerobot(tmp_path / "ds", episodes, version="v2.1", codec="h264")
    path = root / "data/chunk-000/episode_000001.parquet"
    t = pq.read_table(path).to_pydict()
    for k in t:  # three more rows than the episode's video has frames, the last one's time NaN
        t[k] = t[k] + [t[k][-1]] * 3
    t["frame_index"][-3:] = [3, 4, 5]
    t["timestamp"][-3:] = [3 / FPS, 4 / FPS, float("nan")]
    pq.write_table(pa.table(t), path)
    db = str(tmp_path / "c.duckdb")
    code, out, _ = run(["index", "--lerobot", str(root), "--camera", CAM, "--set", "s", "--domain", "real", "--db", db], capsys)
    assert code == 0 and "7 usable, 3 skipped" in out
    assert out.count("is missing from episode_000001.mp4 (3 frames") == 3
    assert "frame at t=nan s is missing" in out


def test_truncated_and_corrupt_videos_are_skips_and_a_set_of_only_them_exits_2(tmp_path, episodes, capsys):
    vids = tmp_path / "vids"
    good = write_video(vids / "good.mp4", episodes[0])
    data = good.read_bytes()
    (vids / "cut.mp4").write_bytes(data[: len(data) // 2])
    db = str(tmp_path / "c.duckdb")
    code, out, _ = run(["index", "--video", str(vids), "--set", "s", "--domain", "sim", "--db", db], capsys)
    assert code == 0 and "4 usable, 1 skipped" in out, out
    skip = [ln for ln in out.splitlines() if "skipped 1 frame: not a readable video" in ln]
    assert len(skip) == 1 and "cut.mp4" in skip[0], out
    code, _, err = run(["index", "--video", str(vids / "cut.mp4"), "--set", "t", "--domain", "sim", "--db", db], capsys)
    assert code == 2 and err.count("\n") == 1 and "no usable frame" in err
    # a video whose packets are intact but whose frames are garbage: recorded when decoded, no traceback
    shutil.copy(good, vids / "bad.mp4")
    raw = bytearray(good.read_bytes())
    start = raw.find(b"mdat") + 8
    raw[start : start + 400] = bytes(400)
    (vids / "bad.mp4").write_bytes(bytes(raw))
    code, _, _ = run(["index", "--video", str(vids / "bad.mp4"), "--set", "u", "--domain", "sim", "--db", db], capsys)
    code, out, err = run(["stats", "--sim", "u", "--real", "s", "--db", db], capsys)
    assert "Traceback" not in err
    with Catalog(db, read_only=True) as cat:
        counts = cat.set_counts("u")
    assert counts["ok"] + counts["unreadable"] == 4  # each frame either decoded or recorded unreadable


def test_depth_camera_attaches_16bit_png_depth_in_the_declared_unit(tmp_path, episodes, capsys):
    from PIL import Image

    from perception_gap.statistics.depth import depth_stats
    from perception_gap.workflows.stats import compute_stats

    root = write_lerobot(tmp_path / "ds", episodes, version="v3.0", dtype="image")
    rng = np.random.default_rng(5)
    depth = [rng.integers(300, 4000, (48, 64), dtype=np.uint16) for _ in range(7)]

    def png16(a: np.ndarray) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(a).save(buf, format="PNG")
        return buf.getvalue()

    cells = [{"bytes": png16(d), "path": f"d{i}.png"} for i, d in enumerate(depth)]
    cells[5] = {"bytes": b"not a png", "path": "d5.png"}  # episode 1 step 1: no readable depth
    data = root / "data/chunk-000/file-000.parquet"
    pq.write_table(pq.read_table(data).append_column("observation.images.depth", pa.array(cells)), data)
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["observation.images.depth"] = {"dtype": "image", "shape": [48, 64, 1], "names": None}
    (root / "meta/info.json").write_text(json.dumps(info))
    db = str(tmp_path / "c.duckdb")
    code, _, err = run(["index", "--db", db, "--lerobot", str(root), "--camera", CAM, "--depth-camera",
                          "observation.images.depth", "--depth-unit", "mm", "--set", "r", "--domain", "real"], capsys)
    assert code == 0 and "1 of 7 frame(s) have no observation.images.depth frame" in err, err
    with Catalog(db) as cat, cat.session():
        assert compute_stats(cat, ["r"], workers=1).computed == 7 + 6  # colour frames, readable depth maps
        rows = cat.con.execute("SELECT f.pair_key, f.depth_unit, d.mean, d.percentiles FROM frames f LEFT JOIN depth_stats d "
                               "ON d.content_hash = f.depth_hash ORDER BY f.episode, f.step").fetchall()
    want = [depth_stats(d) for d in depth]
    assert len(rows) == 7
    for (key, unit, mean, pct), i in zip(rows, range(7)):
        if i == 5:
            assert (key, unit, mean) == ("1/1", None, None)
        else:
            assert unit == "mm" and mean == pytest.approx(want[i].mean) and pct == pytest.approx(want[i].percentiles)
    code, _, err = run(["index", "--db", db, "--lerobot", str(root), "--camera", CAM, "--depth-camera", "nope",
                        "--set", "r2", "--domain", "real"], capsys)
    assert code == 2 and "Unknown camera key 'nope'" in err and "observation.images.depth" in err
