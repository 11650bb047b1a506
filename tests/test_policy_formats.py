"""policy-check on every source the catalog indexes: LeRobot (one video holding both episodes, and
PNG cells of Parquet files), HDF5, a folder of videos and a ROS 2 bag (MCAP), each against the same frames as PNG files, decoded as `stats` decodes them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import perception_gap as pg
from perception_gap.catalog import Catalog
from perception_gap.cli import main
from perception_gap.ingest.hdf5 import index_hdf5
from perception_gap.ingest.lerobot import index_lerobot
from perception_gap.ingest.rosbag import index_rosbag
from perception_gap.ingest.video import index_video
from perception_gap.workflows.policy_check import CHANGED, FrameReader, catalog_pairs
from tests.robot_data import smooth_frames, write_lerobot, write_video
from tests.test_containers import CAM, png_set
from tests.test_hdf5 import KEY, write_robomimic
from tests.test_rosbag import H, W, write_bag


class Means(torch.nn.Module):
    """Actions = the image's channel means: what the policy saw, read back through its actions."""

    def forward(self, images: torch.Tensor, proprio: torch.Tensor) -> torch.Tensor:
        return images.mean(dim=(2, 3))


EPISODES = [smooth_frames(5, seed=0), smooth_frames(4, seed=1)]
BAG_FRAMES = smooth_frames(6, h=H, w=W, seed=2)  # one bag: one episode, raw rgb8 Image messages


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("formats")
    db = root / "c.duckdb"
    write_lerobot(root / "lr", EPISODES, version="v3.0", codec="h264-lossless")  # both episodes in one mp4
    write_lerobot(root / "cells", EPISODES, version="v2.1", dtype="image")  # PNG cells of the data Parquet files
    h5 = write_robomimic(root / "demo.hdf5", EPISODES)
    for ep, frames in enumerate(EPISODES):
        write_video(root / "vid" / f"{ep}.mp4", frames, "h264-lossless")
    write_bag(root / "run_mcap", "MCAP", colour=[("rgb8", f, f) for f in BAG_FRAMES], depth=[])
    with Catalog(db) as cat:
        png_set(cat, root / "png", EPISODES)
        png_set(cat, root / "png_bag", [BAG_FRAMES], name="png_bag")
        assert index_rosbag(cat, root / "run_mcap", "/cam", "bag", "real").usable == 6
        assert index_lerobot(cat, root / "lr", CAM, "lerobot", "real").usable == 9
        assert index_lerobot(cat, root / "cells", CAM, "cells", "real").usable == 9
        assert index_hdf5(cat, h5, KEY, "hdf5", "real").usable == 9
        assert index_video(cat, root / "vid", "video", "real").usable == 9
    torch.jit.script(Means()).save(str(root / "means.pt"))
    return root, str(db)


def _reference_std() -> np.ndarray:
    """(3,) sample std over the 9 frames of their channel means in [0, 1]: computed from the arrays written."""
    means = np.array([f.astype(np.float64).mean(axis=(0, 1)) / 255 for ep in EPISODES for f in ep])
    return means.std(axis=0, ddof=1)


@pytest.mark.parametrize("real", ["lerobot", "cells", "hdf5", "video"])
def test_policy_check_reads_each_container_format_like_the_png_files(world, tmp_path, real):
    root, db = world
    js = tmp_path / "r.json"
    assert main(["policy-check", "--db", db, "--sim", "png", "--real", real, "--policy", str(root / "means.pt"),
                 "--batch-size", "4", "--json", str(js), "-q"]) == 0
    pc = json.loads(js.read_text())["policy_check"]
    assert pc["n_pairs"] == 9 and pc["skipped"] == []
    ref = _reference_std()
    for j, d in enumerate(pc["per_dim"]):
        assert d["paired_diff_mean"] == pytest.approx(0, abs=1e-7)  # lossless: the same pixels as the PNGs
        assert d["sim_std"] == pytest.approx(ref[j], rel=1e-5) and d["real_std"] == pytest.approx(ref[j], rel=1e-5)


def test_policy_check_reads_a_ros_bag_topic_like_the_png_files(world, tmp_path):
    root, db = world
    js = tmp_path / "r.json"
    assert main(["policy-check", "--db", db, "--sim", "png_bag", "--real", "bag", "--policy", str(root / "means.pt"),
                 "--json", str(js), "-q"]) == 0
    pc = json.loads(js.read_text())["policy_check"]
    means = np.array([f.astype(np.float64).mean(axis=(0, 1)) / 255 for f in BAG_FRAMES])
    assert pc["n_pairs"] == 6 and pc["skipped"] == []
    for j, d in enumerate(pc["per_dim"]):
        assert d["paired_diff_mean"] == pytest.approx(0, abs=1e-7)
        assert d["real_std"] == pytest.approx(means[:, j].std(ddof=1), rel=1e-5)


def test_frames_read_out_of_order_restart_the_pass_and_match(world):
    _, db = world
    with Catalog(db, read_only=True) as cat:
        keys, sim_rows, real_rows = catalog_pairs(cat, "png", "lerobot")
    assert keys == [f"{e}/{s}" for e, ep in enumerate(EPISODES) for s in range(len(ep))]  # the decode order
    reader = FrameReader(real_rows)
    flat = [f for ep in EPISODES for f in ep]
    for i in [8, 0, 3, 4, 2, 8]:  # backwards, forwards, repeated
        got = reader.frame(real_rows[i])
        assert got.shape == (3, 48, 64) and got.dtype == np.float32
        np.testing.assert_array_equal(got, flat[i].transpose(2, 0, 1).astype(np.float32) / 255)


def test_a_container_changed_since_index_skips_its_pairs(world, tmp_path):
    root, db = world
    copy = tmp_path / "c.duckdb"
    copy.write_bytes(open(db, "rb").read())
    vid = root / "vid" / "1.mp4"
    original = vid.read_bytes()
    try:
        write_video(vid, smooth_frames(4, seed=7), "h264-lossless")
        with pg.open_catalog(copy, read_only=True) as cat:
            res = pg.policy_check(cat, "png", "video", str(root / "means.pt"), batch_size=3)  # the API's front
    finally:
        vid.write_bytes(original)
    pc = res["policy_check"]
    assert pc["n_pairs"] == 5 and res["config"]["real"] == "video"
    assert sorted(s["pair_key"] for s in pc["skipped"]) == [f"1/{i}" for i in range(4)]
    assert all(s["reason"] == f"real: {CHANGED}" for s in pc["skipped"])
