"""Container parsers on malformed or hostile input, through the CLI: a one-line exit 2 or recorded
skips, never a traceback, a hang or a silently wrong set (LeRobot, HDF5, ROS bags, videos)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import sys
from pathlib import Path

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from perception_gap import cli
from perception_gap.catalog import Catalog
from tests.robot_data import smooth_frames, write_lerobot

CAM = "observation.images.top"
KEY = "agentview_image"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_exit_2(code: int, err: str) -> None:
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (code, err)


@contextlib.contextmanager
def deadline(seconds: int):
    """Fail (not hang) when the body blocks longer than `seconds` (SIGALRM interrupts a blocking open)."""
    def expired(*_):
        raise TimeoutError(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def index_lerobot(root: Path, db: Path, capsys, camera: str = CAM, set_name: str = "s"):
    return run(["index", "--lerobot", root, "--camera", camera, "--set", set_name, "--domain", "real", "--db", db],
               capsys)


# --- LeRobot -------------------------------------------------------------------------------------


@pytest.fixture()
def v2(tmp_path) -> Path:
    return write_lerobot(tmp_path / "ds", [smooth_frames(3, seed=0), smooth_frames(2, seed=1)], version="v2.1")


@pytest.fixture()
def v3(tmp_path) -> Path:
    return write_lerobot(tmp_path / "ds3", [smooth_frames(3, seed=0), smooth_frames(2, seed=1)], version="v3.0")


def _info(root: Path, **changes) -> None:
    info = json.loads((root / "meta/info.json").read_text())
    info.update(changes)
    (root / "meta/info.json").write_text(json.dumps(info))


@pytest.mark.parametrize("change, needle", [
    ({"features": ["observation.images.top"]}, "`features`"),
    ({"fps": "abc"}, "`fps`"),
    ({"chunks_size": "abc"}, "`chunks_size`"),
    ({"data_path": "data/chunk-{episode_chunk:03d}/{mystery}.parquet"}, "`data_path`"),
    ({"data_path": "data/{episode_index:999999999d}.parquet"}, "`data_path`"),
    ({"video_path": 7}, "`video_path`"),
])
def test_lerobot_bad_info_is_one_line_exit_2(tmp_path, v2, capsys, change, needle):
    _info(v2, **change)
    code, _, err = index_lerobot(v2, tmp_path / "c.duckdb", capsys)
    one_line_exit_2(code, err)
    assert needle in err


@pytest.mark.parametrize("line", ['{"tasks": ["t"], "length": 3}', '{"episode_index": null}', '[1, 2]',
                                  '{"episode_index": "0"}'])
def test_lerobot_bad_episode_lines_are_one_line_exit_2(tmp_path, v2, capsys, line):
    (v2 / "meta/episodes.jsonl").write_text(line + "\n")
    code, _, err = index_lerobot(v2, tmp_path / "c.duckdb", capsys)
    one_line_exit_2(code, err)
    assert "episode_index" in err and "line 1" in err


def test_a_v3_episode_file_without_its_data_columns_is_one_line_exit_2(tmp_path, v3, capsys):
    path = v3 / "meta/episodes/chunk-000/file-000.parquet"
    pq.write_table(pq.read_table(path).drop(["data/chunk_index"]), path)
    code, _, err = index_lerobot(v3, tmp_path / "c.duckdb", capsys)
    one_line_exit_2(code, err)
    assert "data/chunk_index" in err


def _set_columns(path: Path, **columns) -> None:
    t = pq.read_table(path).to_pydict()
    t.update(columns)
    pq.write_table(pa.table(t), path)


def test_null_and_text_cells_are_recorded_skips(tmp_path, v2, capsys):
    _set_columns(v2 / "data/chunk-000/episode_000000.parquet", frame_index=[None, 1, 2], timestamp=[0.0, 0.1, None],
                 action=[None, "abc", None])
    code, out, err = index_lerobot(v2, tmp_path / "c.duckdb", capsys)
    assert code == 0 and "2 usable, 3 skipped" in out, out + err  # episode 1 is intact; each row of 0 says why
    assert "frame_index cell is None" in out and "action cell is text" in out and "timestamp cell is None" in out


def test_text_frame_index_and_timestamp_columns_are_recorded_skips(tmp_path, v2, capsys):
    _set_columns(v2 / "data/chunk-000/episode_000001.parquet", frame_index=["0", "1"])
    _set_columns(v2 / "data/chunk-000/episode_000000.parquet", timestamp=["0", "0.1", "0.2"])
    code, out, err = index_lerobot(v2, tmp_path / "c.duckdb", capsys)
    one_line_exit_2(code, err)  # no row has a readable frame: one line, the first reason
    assert "(5 rows skipped; the first: " in err


def test_a_camera_key_with_a_hash_is_one_line_exit_2(tmp_path, v2, capsys):
    info = json.loads((v2 / "meta/info.json").read_text())
    info["features"]["cam#2"] = dict(info["features"][CAM])
    (v2 / "meta/info.json").write_text(json.dumps(info))
    code, _, err = index_lerobot(v2, tmp_path / "c.duckdb", capsys, camera="cam#2")
    one_line_exit_2(code, err)
    assert "'#'" in err


def test_a_dataset_without_videos_is_one_summarised_line_and_leaves_no_set(tmp_path, capsys):
    root = write_lerobot(tmp_path / "ds", [smooth_frames(10, seed=0), smooth_frames(10, seed=1)], version="v2.1")
    shutil.rmtree(root / "videos")
    db = tmp_path / "c.duckdb"
    code, out, err = index_lerobot(root, db, capsys)
    one_line_exit_2(code, err)
    assert out == "" and "20 rows skipped" in err and "episode_000000.mp4 not found" in err
    with Catalog(db, read_only=True) as cat:
        assert cat.get_set("s") is None


@pytest.mark.parametrize("victim", ["videos/chunk-000/observation.images.top/episode_000001.mp4",
                                    "data/chunk-000/episode_000001.parquet", "meta/episodes.jsonl",
                                    "meta/info.json"])
def test_a_fifo_inside_a_lerobot_dataset_never_blocks(tmp_path, v2, capsys, victim):
    (v2 / victim).unlink()
    os.mkfifo(v2 / victim)
    with deadline(60):
        code, out, err = index_lerobot(v2, tmp_path / "c.duckdb", capsys)
    assert "Traceback" not in err
    if victim.startswith("videos/"):  # one episode's video: its rows are recorded skips
        assert code == 0 and "3 usable, 2 skipped" in out and "FIFO" in out.upper(), out
    else:
        one_line_exit_2(code, err)


# --- HDF5 ----------------------------------------------------------------------------------------


def test_hdf5_grey_cameras_loops_bad_groups_text_actions_and_huge_frames(tmp_path, capsys):
    h5 = tmp_path / "d.hdf5"
    rng = np.random.default_rng(0)
    with h5py.File(h5, "w") as f:
        d = f.create_group("data")
        d.create_dataset(f"demo_0/obs/{KEY}", data=rng.integers(0, 256, (3, 8, 10), dtype=np.uint8))  # grey
        d.create_dataset("demo_0/actions", data=np.zeros((3, 2)))
        d["demo_1"] = h5py.SoftLink("/data/demo_2")
        d["demo_2"] = h5py.SoftLink("/data/demo_1")
        d.create_dataset(f"demo_3/obs/{KEY}", data=np.zeros((3, 8, 10), np.uint8))
        d.create_dataset("demo_3/actions", data=np.array([b"a", b"b", b"c"]))
        d.create_dataset(f"demo_4/obs/{KEY}", shape=(2, 30000, 30000), dtype=np.uint8)  # declared, never written
        d.create_dataset("demo_5/obs", data=np.zeros(3))  # obs is not a group
        d.create_dataset(f"demo_7/obs/{KEY}", shape=(20_000_000, 1, 1), dtype=np.uint8)  # declared, never written
        g = d.create_group("demo_6/obs")
        g["link"] = h5py.SoftLink("/data/demo_0/obs")
        g[KEY] = h5py.SoftLink(f"/data/demo_6/obs/link/{KEY}")  # soft links inside the file are followed
    db = tmp_path / "c.duckdb"
    args = ["--camera", KEY, "--domain", "sim", "--db", db]
    with deadline(60):
        code, out, err = run(["index", "--hdf5", h5, "--set", "a", *args], capsys)
    assert code == 0, err
    assert "6 usable, 6 skipped" in out, out
    assert "soft links loop" in out and "not numbers" in out and "too large" in out and "not a group" in out
    assert "declares 20000000 frames" in out
    assert run(["index", "--hdf5", h5, "--set", "b", *args], capsys)[0] == 0
    code, out, err = run(["stats", "--sim", "a", "--real", "b", "--db", db], capsys)
    assert code in (0, 1) and "Traceback" not in err and "pairs: 6 matched" in out, out + err


# --- ROS bags ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ros2_bag(tmp_path_factory) -> Path:
    from tests.test_rosbag import write_bag

    return write_bag(tmp_path_factory.mktemp("ros") / "run_sqlite3", "SQLITE3")


def _copy(bag: Path, tmp_path: Path) -> Path:
    dst = tmp_path / bag.name
    shutil.copytree(bag, dst)
    return dst


def test_a_yaml_alias_bomb_in_metadata_yaml_is_one_line_exit_2(tmp_path, ros2_bag, capsys):
    bag = _copy(ros2_bag, tmp_path)
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    (bag / "metadata.yaml").write_text("\n".join(lines) + "\n" + (bag / "metadata.yaml").read_text())
    with deadline(60):
        code, _, err = run(["index", "--rosbag", bag, "--topic", "/cam", "--set", "s", "--domain", "real",
                            "--db", tmp_path / "c.duckdb"], capsys)
    one_line_exit_2(code, err)
    assert "alias" in err


def test_a_ros2_folder_without_metadata_says_so(tmp_path, ros2_bag, capsys):
    bag = _copy(ros2_bag, tmp_path)
    (bag / "metadata.yaml").unlink()
    for path in (bag, next(bag.glob("*.db3"))):
        code, _, err = run(["index", "--rosbag", path, "--topic", "/cam", "--set", "s", "--domain", "real",
                            "--db", tmp_path / "c.duckdb"], capsys)
        one_line_exit_2(code, err)
        assert "metadata.yaml" in err and "no bag" not in err


def test_topics_whose_encoding_does_not_fit_their_role_are_refused(tmp_path, ros2_bag, capsys):
    base = ["index", "--rosbag", ros2_bag, "--set", "s", "--domain", "real", "--db", tmp_path / "c.duckdb"]
    code, _, err = run(base + ["--topic", "/cam", "--depth-topic", "/cam_c"], capsys)
    one_line_exit_2(code, err)
    assert "--depth-topic '/cam_c'" in err and "depth images" in err
    code, _, err = run(base + ["--topic", "/depth"], capsys)
    one_line_exit_2(code, err)
    assert "--topic '/depth'" in err and "16UC1" in err


def test_reindexing_a_set_from_another_topic_leaves_no_ghost_rows(tmp_path, ros2_bag, capsys):
    db = tmp_path / "c.duckdb"
    base = ["index", "--rosbag", ros2_bag, "--set", "s", "--domain", "real", "--db", db]
    assert run(base + ["--topic", "/cam"], capsys)[0] == 0
    code, out, err = run(base + ["--topic", "/cam_c"], capsys)
    assert code == 0 and "0 vanished, 7 no longer listed (removed); 7 usable, 0 skipped" in out, out + err
    with Catalog(db, read_only=True) as cat:
        rows = cat.load_frames("s")
        counts = cat.set_counts("s")
    assert len(rows) == 7 and all("/cam_c:" in r["rgb_path"] for r in rows)
    assert counts.get("missing", 0) == 0 and counts["ok"] == 7


# --- videos --------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_a_still_image_is_not_a_one_frame_video(tmp_path, capsys, fmt):
    path = tmp_path / f"still.{fmt.lower()}"
    Image.fromarray(smooth_frames(1)[0]).save(path, format=fmt)
    code, out, err = run(["index", "--video", path, "--set", "s", "--domain", "sim", "--db", tmp_path / "c.duckdb"],
                         capsys)
    one_line_exit_2(code, err)
    assert "not a video" in out


# --- property-based: generated metadata and layouts, through the CLI --------------------------------

PROPS = settings(max_examples=30, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_OPENED: list[str] = []
_WATCH: list[bool] = [False]


def _audit(event: str, args: tuple) -> None:
    if _WATCH[0] and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@contextlib.contextmanager
def watched_opens():
    """The paths Python opens (`open`, `os.open`: every file a container parser opens goes
    through `open_regular` or `open`) while the body runs."""
    _OPENED.clear()
    _WATCH[0] = True
    try:
        yield _OPENED
    finally:
        _WATCH[0] = False


def outside(opened: list[str], root: Path, tmp: Path) -> list[str]:
    """Opened paths under the test's folder (or /etc) that are neither in the dataset nor the catalog."""
    bad = []
    for p in opened:
        full = os.path.normpath(os.path.abspath(p))
        if full.startswith("/etc/"):
            bad.append(full)
        elif full.startswith(str(tmp) + os.sep) and not full.startswith(str(root) + os.sep) \
                and not Path(full).name.startswith("c.duckdb"):
            bad.append(full)
    return bad


def check_cli(code: int, err: str) -> None:
    assert code in (0, 1, 2) and "Traceback" not in err, (code, err)
    if code == 2:
        assert err.count("\n") == 1, err


_JSONISH = st.recursive(st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True) |
                        st.text(max_size=8), lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c,
                                                                                           max_size=3), max_leaves=6)
_TEMPLATES = st.sampled_from([
    "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet", "data/{episode_index}.parquet",
    "../outside/{episode_index}.parquet", "/etc/passwd", "{episode_index.__class__}", "data/{0}.parquet",
    "data/{episode_index:>99999}.parquet", "data/{", "data/}{", "", "data/chunk-{chunk_index:03d}/file.parquet",
    "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4", "../outside/{video_key}.mp4",
    "videos/{video_key!r}/x.mp4", "videos/{video_key:>5}/x.mp4"]) | st.text(max_size=12) | _JSONISH
_CAMERAS = st.sampled_from([CAM, "../../outside/cam", "/etc", "cam#1", "cam?depth=x", "", "a/../../b"])


@pytest.fixture(scope="module")
def lerobot_base(tmp_path_factory) -> Path:
    return write_lerobot(tmp_path_factory.mktemp("lr") / "base", [smooth_frames(2, seed=0), smooth_frames(2, seed=1)],
                         version="v2.1", dtype="image")


@PROPS
@given(version=st.sampled_from(["v2.1", "v3.0", "v1.6", None]) | _JSONISH, fps=st.sampled_from([10, 0, -1, 1e-308])
       | _JSONISH, chunks=st.sampled_from([1000, 1, 0, None]) | _JSONISH, data_path=_TEMPLATES,
       video_path=_TEMPLATES, features=st.sampled_from(["keep", "video"]) | _JSONISH, camera=_CAMERAS,
       episodes=st.lists(_JSONISH | st.fixed_dictionaries({"episode_index": _JSONISH}), max_size=3) | st.none())
def test_generated_lerobot_metadata_never_crashes_nor_reads_outside(tmp_path_factory, lerobot_base, version, fps,
                                                                    chunks, data_path, video_path, features, camera,
                                                                    episodes):
    tmp = tmp_path_factory.mktemp("lrp")
    root = tmp / "ds"
    shutil.copytree(lerobot_base, root)
    (tmp / "outside").mkdir()
    shutil.copy(root / "data/chunk-000/episode_000000.parquet", tmp / "outside" / "0.parquet")
    info = json.loads((root / "meta/info.json").read_text())
    feats = info["features"]
    if features == "video":
        feats[camera] = {"dtype": "video", "shape": [48, 64, 3]}
    elif features != "keep":
        feats = features
    elif camera != CAM:
        feats[camera] = dict(feats[CAM])
    info.update(codebase_version=version, fps=fps, chunks_size=chunks, data_path=data_path, video_path=video_path,
                features=feats)
    (root / "meta/info.json").write_text(json.dumps(info))
    if episodes is not None:
        (root / "meta/episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    with deadline(120), watched_opens() as opened, contextlib.redirect_stderr(io.StringIO()) as err, \
            contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["index", "--lerobot", str(root), "--camera", camera, "--set", "s", "--domain", "real",
                            "--db", str(tmp / "c.duckdb")])
    check_cli(code, err.getvalue())
    assert any(p.endswith("meta/info.json") for p in opened)  # the hook sees the parser's opens
    assert not outside(opened, root, tmp)


@settings(PROPS, max_examples=25)
@given(demos=st.lists(st.tuples(
    st.sampled_from(["ok", "grey", "chw", "rank2", "rank5", "empty", "string", "bool", "float", "external_link",
                     "external_storage", "virtual", "soft", "loop", "obs_dataset", "demo_dataset", "huge", "missing"]),
    st.sampled_from(["ok", "short", "string", "missing", "external", "2d", "huge_row"])), min_size=1, max_size=4),
    proprio=st.booleans())
def test_generated_hdf5_layouts_never_crash_nor_index_outside_values(tmp_path_factory, demos, proprio):
    tmp = tmp_path_factory.mktemp("h5p")
    other = tmp / "other.hdf5"
    with h5py.File(other, "w") as f:
        f.create_dataset("cam", data=np.zeros((2, 4, 4, 3), np.uint8))
        f.create_dataset("actions", data=np.zeros((2, 2)))
    (tmp / "raw.bin").write_bytes(bytes(range(256)) * 4)
    h5 = tmp / "d.hdf5"
    foreign: set[str] = set()
    with h5py.File(h5, "w") as f:
        d = f.create_group("data")
        for i, (cam, act) in enumerate(demos):
            name, n = f"demo_{i}", 2
            if cam == "demo_dataset":
                d.create_dataset(name, data=np.zeros(3))
                continue
            g = d.create_group(name)
            if cam == "obs_dataset":
                g.create_dataset("obs", data=np.zeros(3))
            elif cam != "missing":
                obs = g.create_group("obs")
                obs.create_dataset("eef", data=np.zeros((n, 3)))
                shapes = {"ok": (n, 4, 5, 3), "grey": (n, 4, 5), "chw": (n, 3, 4, 5), "rank2": (n, 4),
                          "rank5": (n, 1, 4, 5, 3), "empty": (0, 4, 5, 3)}
                if cam in shapes:
                    obs.create_dataset(KEY, data=np.zeros(shapes[cam], np.uint8))
                elif cam in ("string", "bool", "float"):
                    dt = {"string": "S3", "bool": np.bool_, "float": np.float32}[cam]
                    obs.create_dataset(KEY, data=np.zeros((n, 4, 5, 3), dt))
                elif cam == "external_link":
                    obs[KEY] = h5py.ExternalLink(str(other), "/cam")
                elif cam == "external_storage":
                    obs.create_dataset(KEY, shape=(n, 4, 4, 3), dtype=np.uint8, external=[(str(tmp / "raw.bin"), 0, 96)])
                elif cam == "virtual":
                    layout = h5py.VirtualLayout(shape=(n, 4, 4, 3), dtype=np.uint8)
                    layout[:] = h5py.VirtualSource(str(other), "cam", shape=(n, 4, 4, 3))
                    obs.create_virtual_dataset(KEY, layout)
                elif cam == "soft":
                    obs[KEY] = h5py.SoftLink(f"/data/{name}/obs/eef")
                elif cam == "loop":
                    obs[KEY] = h5py.SoftLink(f"/data/{name}/obs/{KEY}")
                elif cam == "huge":
                    obs.create_dataset(KEY, shape=(n, 20000, 20000), dtype=np.uint8)
                if cam in ("external_link", "external_storage", "virtual"):
                    foreign.add(name)
            if act == "ok":
                g.create_dataset("actions", data=np.zeros((n, 2)))
            elif act == "short":
                g.create_dataset("actions", data=np.zeros((n + 1, 2)))
            elif act == "string":
                g.create_dataset("actions", data=np.array([b"x"] * n))
            elif act == "external":
                g["actions"] = h5py.ExternalLink(str(other), "/actions")
                foreign.add(name)
            elif act == "2d":
                g.create_dataset("actions", data=np.zeros(n))
            elif act == "huge_row":
                g.create_dataset("actions", shape=(n, 100_000), dtype=np.float32)
    db = tmp / "c.duckdb"
    argv = ["index", "--hdf5", str(h5), "--camera", KEY, "--set", "s", "--domain", "sim", "--db", str(db)]
    with deadline(120), contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(argv + (["--proprio", "eef"] if proprio else []))
    check_cli(code, err.getvalue())
    if code == 0:
        with Catalog(db, read_only=True) as cat:
            usable = {r["episode"] for r in cat.load_frames("s")}  # the usable frames
        assert not usable & {n.removeprefix("demo_") for n in foreign}


@pytest.fixture(scope="module")
def ros2_metadata(ros2_bag) -> str:
    return (ros2_bag / "metadata.yaml").read_text()


_YAML_VALUES = st.sampled_from(["[]", "{}", "null", "~", "x", "*a", "&a [1]", "!!python/object:os.system {}",
                                "[run_sqlite3_0.db3]", "[../outside.db3]", "[/etc/passwd]", "[1, 2]", "'", "{a: b"])


@PROPS
@given(kind=st.sampled_from(["drop_key", "replace_value", "prepend", "truncate", "files"]),
       key=st.sampled_from(["rosbag2_bagfile_information", "relative_file_paths", "storage_identifier",
                            "compression_mode", "topics_with_message_count", "version", "message_count"]),
       value=_YAML_VALUES, cut=st.integers(0, 2000))
def test_generated_bag_metadata_never_crashes(tmp_path_factory, ros2_bag, ros2_metadata, kind, key, value, cut):
    tmp = tmp_path_factory.mktemp("rosp")
    bag = tmp / ros2_bag.name
    shutil.copytree(ros2_bag, bag)
    lines = ros2_metadata.splitlines()
    if kind == "drop_key":
        lines = [ln for ln in lines if not ln.strip().startswith(key + ":")]
    elif kind == "replace_value":
        lines = [(ln.split(":")[0] + ": " + value) if ln.strip().startswith(key + ":") else ln for ln in lines]
    elif kind == "prepend":
        lines = [f"x: {value}"] + lines
    elif kind == "truncate":
        lines = "\n".join(lines)[:cut].splitlines()
    else:
        lines = [ln for ln in lines if not ln.strip().startswith("- run_")]
        lines = [(ln + " " + value) if ln.strip().startswith("relative_file_paths:") else ln for ln in lines]
    (bag / "metadata.yaml").write_text("\n".join(lines) + "\n")
    with deadline(120), watched_opens() as opened, contextlib.redirect_stderr(io.StringIO()) as err, \
            contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["index", "--rosbag", str(bag), "--topic", "/cam", "--set", "s", "--domain", "real",
                         "--db", str(tmp / "c.duckdb")])
    check_cli(code, err.getvalue())
    assert not outside(opened, bag, tmp)
