"""robomimic-layout HDF5 sources: frames keyed inside the file, parity with PNG files, actions and
proprio per step, pairing with other episode-structured sources, and bad input through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from perception_gap.catalog import Catalog
from perception_gap.embed import embed_sets
from perception_gap.ingest import containers
from perception_gap.ingest.containers import frame_hash
from perception_gap.ingest.hdf5 import index_hdf5
from perception_gap.workflows.stats import compute_stats
from tests.cli_process import clean, cli
from tests.robot_data import smooth_frames, write_lerobot
from tests.test_containers import CAM, png_set, stats_by_step

KEY = "agentview_image"


def write_robomimic(path: Path, episodes: list[list[np.ndarray]], *, chw: bool = False) -> Path:
    """A robomimic file: data/demo_N/{obs/<KEY>, obs/eef_pos, obs/gripper, actions} (demo_10 sorts after demo_2)."""
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        for ep, frames in enumerate(episodes):
            g = data.create_group(f"demo_{ep}")
            imgs = np.stack(frames)
            g.create_dataset(f"obs/{KEY}", data=imgs.transpose(0, 3, 1, 2) if chw else imgs,
                             chunks=(1,) + imgs.shape[1:] if not chw else None, compression="gzip")
            n = len(frames)
            g.create_dataset("obs/eef_pos", data=np.arange(n * 3, dtype=np.float64).reshape(n, 3) + 100 * ep)
            g.create_dataset("obs/gripper", data=np.full((n, 2), -ep, np.float32))
            g.create_dataset("actions", data=np.linspace(-1, 1, n * 7).reshape(n, 7) + ep)
    return path


@pytest.fixture()
def episodes():
    return [smooth_frames(5, seed=0), smooth_frames(4, seed=1)]


def test_hdf5_frames_give_the_png_statistics_and_embeddings(tmp_path, episodes):
    h5 = write_robomimic(tmp_path / "demo.hdf5", episodes)
    h5_chw = write_robomimic(tmp_path / "chw.hdf5", episodes, chw=True)
    with Catalog(tmp_path / "c.duckdb") as cat:
        png_set(cat, tmp_path / "png", episodes)
        rep = index_hdf5(cat, h5, KEY, "h5", "sim", proprio=["eef_pos", "gripper"])
        assert (rep.listed, rep.usable, rep.skipped) == (9, 9, ())
        assert index_hdf5(cat, h5_chw, KEY, "chw", "sim").usable == 9
        assert compute_stats(cat, ["png", "h5", "chw"], workers=2).computed == 9 + 9 + 9
        ref = stats_by_step(cat, "png")
        assert stats_by_step(cat, "h5") == ref and stats_by_step(cat, "chw") == ref
        fp = embed_sets(cat, ["pixel"], ["png", "h5"], device="cpu", batch_size=4)[0].fingerprint
        meta_p, vec_p = cat.load_embeddings("png", fp)
        meta_h, vec_h = cat.load_embeddings("h5", fp)
        rows = {(r["episode"], r["step"]): r for r in cat.load_frames("h5")}
    assert [(m["episode"], m["step"]) for m in meta_p] == [(m["episode"], m["step"]) for m in meta_h]
    np.testing.assert_array_equal(vec_p, vec_h)
    # actions and proprio of the step, read back against what was written
    r = rows[("1", 2)]
    np.testing.assert_allclose(r["action"], np.linspace(-1, 1, 4 * 7).reshape(4, 7)[2] + 1)
    np.testing.assert_allclose(r["proprio"], [106, 107, 108, -1, -1])
    whole = containers.ContainerFile(h5).content_hash()
    assert r["content_hash"] == frame_hash(whole, f"hdf5:data/demo_1/obs/{KEY}", 2)


def test_hdf5_decodes_each_dataset_in_slices_front_to_back(tmp_path, monkeypatch, episodes):
    h5 = write_robomimic(tmp_path / "demo.hdf5", [smooth_frames(70, seed=3)])
    monkeypatch.setattr(containers, "HDF5_BLOCK", 16)
    reads: list[tuple[int, int]] = []
    real_getitem = h5py.Dataset.__getitem__

    def spy(self, key):
        if isinstance(key, slice):
            reads.append((key.start, key.stop))
        return real_getitem(self, key)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    got = list(containers.decode_members(h5, f"hdf5:data/demo_0/obs/{KEY}", [69, 3, 4, 40]))
    assert [i for i, _ in got] == [3, 4, 40, 69]
    assert reads == [(3, 5), (40, 41), (69, 70)]  # sorted, one slice per block of wanted frames, never per frame
    frames = smooth_frames(70, seed=3)
    for i, img in got:
        np.testing.assert_array_equal(np.asarray(img), frames[i])
    _, err = next(containers.decode_members(h5, f"hdf5:data/demo_0/obs/{KEY}", [75]))
    assert "frame 75 is missing" in str(err)


def test_hdf5_pairs_with_a_lerobot_dataset_through_the_cli(tmp_path, episodes):
    h5 = write_robomimic(tmp_path / "demo.hdf5", episodes)
    write_lerobot(tmp_path / "ds", episodes, version="v2.1", codec="h264-lossless")
    db = tmp_path / "c.duckdb"
    p = cli("index", "--hdf5", h5, "--camera", KEY, "--proprio", "eef_pos", "--set", "sim", "--domain", "sim", "--db", db)
    clean(p)
    assert p.returncode == 0 and "9 usable, 0 skipped" in p.stdout, p.stdout + p.stderr
    clean(p := cli("index", "--lerobot", tmp_path / "ds", "--camera", CAM, "--set", "real", "--domain", "real", "--db", db))
    assert p.returncode == 0, p.stderr
    p = cli("stats", "--sim", "sim", "--real", "real", "--db", db, "--json", tmp_path / "s.json")
    clean(p)
    res = json.loads((tmp_path / "s.json").read_text())
    # the frames pair and match; the two fixtures log different vectors (HDF5 eef_pos: 3 dims, 7-dim
    # actions; the LeRobot state and action: 2 dims), which is all that is named
    assert res["pairs"]["n_pairs"] == 9, res["pairs"]
    found = {(f["code"], f["evidence"]["field"], f["evidence"]["sim_dims"], f["evidence"]["real_dims"])
             for f in res["findings"]}
    assert found == {("control_dims", "proprio", 3, 2), ("control_dims", "action", 7, 2)}, res["findings"]


def test_hdf5_bad_input_is_one_line_or_a_recorded_skip(tmp_path, episodes):
    db = tmp_path / "c.duckdb"
    args = ("--set", "s", "--domain", "sim", "--db", db)
    h5 = write_robomimic(tmp_path / "demo.hdf5", episodes)
    nodata = tmp_path / "nodata.hdf5"
    with h5py.File(nodata, "w") as f:
        f.create_dataset("images", data=np.zeros((2, 4, 4, 3), np.uint8))
    (tmp_path / "text.hdf5").write_text("not hdf5")
    for path, camera, extra, fragment in [
        (nodata, KEY, (), "`data` group"),
        (tmp_path / "text.hdf5", KEY, (), "Cannot read `--hdf5`"),
        (tmp_path / "gone.hdf5", KEY, (), "not found"),
        (h5, "wrist_image", (), "Unknown --camera key 'wrist_image'; the demos' obs/ hold: agentview_image, eef_pos, gripper"),
        (h5, KEY, ("--proprio", "joint_pos"), "Unknown --proprio key 'joint_pos'"),
    ]:
        p = cli("index", "--hdf5", path, "--camera", camera, *extra, *args)
        clean(p)
        assert p.returncode == 2 and fragment in p.stderr, (path, p.stderr)
    p = cli("index", "--hdf5", h5, *args)
    assert p.returncode == 2 and "--hdf5 needs --camera KEY" in p.stderr
    # a demo without the camera and a camera that is no image stack: recorded skips, the rest is indexed
    with h5py.File(h5, "a") as f:
        f.create_group("data/demo_2/obs").create_dataset("eef_pos", data=np.zeros((3, 3)))
        f.create_dataset(f"data/demo_3/obs/{KEY}", data=np.zeros((3, 5), np.uint8))
    p = cli("index", "--hdf5", h5, "--camera", KEY, *args)
    clean(p)
    assert p.returncode == 0 and "9 usable, 2 skipped" in p.stdout, p.stdout
    assert f"demo demo_2 has no obs/{KEY}" in p.stdout and "expected an (N, H, W[, C]) image dataset" in p.stdout


def test_a_changed_hdf5_file_is_listed_again_with_its_proprio_before_it_is_measured(tmp_path, episodes):
    h5 = write_robomimic(tmp_path / "demo.hdf5", episodes)
    ref = write_robomimic(tmp_path / "ref.hdf5", [smooth_frames(5, seed=3), smooth_frames(4, seed=4)])
    bad = write_robomimic(tmp_path / "bad.hdf5", episodes)
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_hdf5(cat, h5, KEY, "h5", "sim", proprio=["eef_pos", "gripper"])
        index_hdf5(cat, ref, KEY, "ref", "sim")  # reference: the new bytes indexed from scratch
        index_hdf5(cat, bad, KEY, "bad", "sim")
        indexed = {r["content_hash"] for s in ("h5", "bad") for r in cat.load_frames(s)}
        h5.write_bytes(ref.read_bytes())  # after `index`, before `stats`
        bad.write_text("no longer HDF5")  # changed and cannot be listed again: skipped with the reason
        done = compute_stats(cat, ["h5", "ref", "bad"], workers=1)
        assert len(done.reindexed) == 9 + 9
        assert stats_by_step(cat, "h5") == stats_by_step(cat, "ref")
        rows = {(r["episode"], r["step"]): r for r in cat.load_frames("h5")}
        assert cat.set_counts("bad")["ok"] == 0
        reasons = {s["reason"] for s in cat.skipped_frames("bad")}
    assert not indexed & {r["content_hash"] for r in rows.values()}  # nothing measured under the old hashes
    np.testing.assert_allclose(rows[("1", 2)]["proprio"], [106, 107, 108, -1, -1])  # --proprio kept by the source
    assert len(reasons) == 1 and "container changed since `index`" in reasons.pop()
