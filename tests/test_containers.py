"""Frames inside containers (videos, Parquet image cells): catalog keys, caching, sequential
decoding, schema upgrade, and parity of statistics and embeddings with the same frames as PNG files."""

from __future__ import annotations

from pathlib import Path

import av
import duckdb
import numpy as np
import pytest
from PIL import Image

from perception_gap.catalog import SCHEMA_VERSION, Catalog
from perception_gap.embed import embed_sets
from perception_gap.errors import FrameError
from perception_gap.ingest import containers
from perception_gap.ingest import threads as ingest_threads
from perception_gap.ingest.containers import decode_members, frame_hash, probe_video
from perception_gap.ingest.folders import index_folder
from perception_gap.ingest.lerobot import index_lerobot
from perception_gap.ingest.video import index_video
from perception_gap.workflows.stats import compute_stats
from tests.robot_data import smooth_frames, write_lerobot, write_video

CAM = "observation.images.top"
# yuv420p moves an 8-bit grey level by about one: per-channel means of a smooth frame stay
# within this many levels of the PNG's (measured on these 64x48 frames: up to 1.7 for H.264 and AV1)
LOSSY_MEAN_TOL = 2.5


def stats_by_step(cat: Catalog, set_name: str) -> dict[tuple[str, int], dict]:
    out = {}
    for r in cat.load_frames(set_name):
        assert r["img_error"] is None, r
        out[(r["episode"], r["step"])] = {k: v for k, v in r.items() if k.startswith("img_") and k != "img_error"}
    return out


def png_set(cat: Catalog, root: Path, episodes: list[list[np.ndarray]], name: str = "png") -> None:
    for ep, frames in enumerate(episodes):
        (root / str(ep)).mkdir(parents=True)
        for i, f in enumerate(frames):
            Image.fromarray(f).save(root / str(ep) / f"{i}.png")
    index_folder(cat, root, name, "sim")


@pytest.fixture()
def episodes():
    return [smooth_frames(5, seed=0), smooth_frames(4, seed=1)]


def test_lossless_containers_give_the_png_statistics_and_embeddings(tmp_path, episodes):
    with Catalog(tmp_path / "c.duckdb") as cat:
        png_set(cat, tmp_path / "png", episodes)
        # v3.0 packs both episodes into one video: episode 1 starts at from_timestamp = 0.5 s
        write_lerobot(tmp_path / "lossless", episodes, version="v3.0", codec="h264-lossless")
        write_lerobot(tmp_path / "cells", episodes, version="v2.1", dtype="image")
        assert index_lerobot(cat, tmp_path / "lossless", CAM, "video", "real").usable == 9
        assert index_lerobot(cat, tmp_path / "cells", CAM, "cells", "real").usable == 9
        assert compute_stats(cat, ["png", "video", "cells"], workers=2).computed == 9 + 9  # cells share the PNGs' hashes
        ref = stats_by_step(cat, "png")
        assert stats_by_step(cat, "video") == ref and stats_by_step(cat, "cells") == ref
        reports = embed_sets(cat, ["pixel"], ["png", "video", "cells"], device="cpu", batch_size=4)
        meta_p, vec_p = cat.load_embeddings("png", reports[0].fingerprint)
        meta_v, vec_v = cat.load_embeddings("video", reports[0].fingerprint)
    assert [(m["episode"], m["step"]) for m in meta_p] == [(m["episode"], m["step"]) for m in meta_v]
    np.testing.assert_array_equal(vec_p, vec_v)


@pytest.mark.parametrize("codec", ["h264", "av1"])
def test_lossy_video_statistics_within_the_documented_tolerance(tmp_path, episodes, codec):
    with Catalog(tmp_path / "c.duckdb") as cat:
        png_set(cat, tmp_path / "png", episodes)
        write_lerobot(tmp_path / "ds", episodes, version="v2.1", codec=codec)
        index_lerobot(cat, tmp_path / "ds", CAM, "video", "real")
        compute_stats(cat, ["png", "video"], workers=1)
        ref, got = stats_by_step(cat, "png"), stats_by_step(cat, "video")
    assert got.keys() == ref.keys()
    for key, st in got.items():
        ep, step = key
        direct = episodes[int(ep)][step].reshape(-1, 3).mean(0)  # independent reference: numpy on the source frame
        np.testing.assert_allclose(ref[key]["img_mean"], direct, atol=1e-9)
        assert np.max(np.abs(np.subtract(st["img_mean"], direct))) <= LOSSY_MEAN_TOL, (key, st["img_mean"], direct)
    # the other frames are far away: a wrong frame mapping would not stay within the tolerance
    assert np.max(np.abs(episodes[0][0].reshape(-1, 3).mean(0) - episodes[1][0].reshape(-1, 3).mean(0))) > 3 * LOSSY_MEAN_TOL


def test_container_frames_are_keyed_by_container_hash_and_index_and_reindex_when_it_changes(tmp_path, episodes):
    video = write_video(tmp_path / "v" / "run.mp4", episodes[0])
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        r = index_video(cat, video, "v", "sim")
        assert (r.listed, r.new, r.usable) == (5, 5, 5)
        assert compute_stats(cat, ["v"], workers=1).computed == 5
        r2 = index_video(cat, video, "v", "sim")
        assert (r2.unchanged, r2.changed) == (5, 0)
        assert compute_stats(cat, ["v"], workers=1).computed == 0  # cached
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT rgb_path, container_path, container_hash, member, frame_index, content_hash, pair_key "
                       "FROM frames ORDER BY frame_index").fetchall()
    con.close()
    import hashlib
    whole = hashlib.blake2b(video.read_bytes(), digest_size=16).hexdigest()
    assert [r[4] for r in rows] == list(range(5))
    assert {r[1] for r in rows} == {str(video)} and {r[2] for r in rows} == {whole} and {r[3] for r in rows} == {"video"}
    assert [r[5] for r in rows] == [frame_hash(whole, "video", i) for i in range(5)]
    assert rows[2][0] == f"{video}#2" and rows[2][6] == "run/2"
    write_video(video, episodes[1])  # a changed container: 4 other frames
    with Catalog(db) as cat:
        r3 = index_video(cat, video, "v", "sim")
        assert (r3.changed, r3.vanished, r3.usable) == (4, 1, 4)
        assert compute_stats(cat, ["v"], workers=1).computed == 4


def test_a_container_is_opened_once_and_decoded_in_order(tmp_path, episodes, monkeypatch):
    video = write_video(tmp_path / "run.mp4", episodes[0] + episodes[1])
    opened = []
    real_open = av.open
    monkeypatch.setattr(av, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    got = list(decode_members(video, "video", [7, 1, 3]))
    assert opened == [str(video)]
    assert [i for i, _ in got] == [1, 3, 7]
    frames = episodes[0] + episodes[1]
    for i, img in got:  # lossy: close to its own source frame, far from the others
        err = [np.abs(np.asarray(img, float) - f).mean() for f in frames]
        assert int(np.argmin(err)) == i and err[i] < 4  # mean |error| per pixel (chroma is subsampled)
    past = list(decode_members(video, "video", [8, 12]))
    assert past[0][0] == 8 and not isinstance(past[0][1], FrameError)
    assert isinstance(past[1][1], FrameError) and "missing from the video" in str(past[1][1])


@pytest.mark.parametrize("threads", [None, 1, 2])
def test_video_frames_are_the_pixels_pyav_to_image_gives(tmp_path, episodes, threads):
    """The fast RGB route (`to_ndarray(format="rgb24")` single-threaded + `Image.fromarray`, or the
    array itself) against PyAV's own `to_image()` with FFmpeg's default threads: the same pixels,
    mode and size, whatever threads the decoder is given (`set_decode_threads`: a statistics
    worker's share of the cores): yuv420p H.264, and planar RGB (lossless H.264) at an odd width,
    whose rows the decoder pads."""
    odd = [np.ascontiguousarray(f[:, :63]) for f in episodes[0]]  # 63 x 48
    ingest_threads.set_decode_threads(threads)
    try:
        for name, frames, codec in (("yuv.mp4", episodes[0], "h264"), ("odd.mp4", odd, "h264-lossless")):
            video = write_video(tmp_path / name, frames, codec=codec)
            with av.open(str(video)) as c:
                reference = [f.to_image() for f in c.decode(c.streams.video[0])]
            got = list(decode_members(video, "video", range(len(reference))))
            arrays = list(decode_members(video, "video", range(len(reference)), arrays=True))
            assert [i for i, _ in got] == [i for i, _ in arrays] == list(range(len(reference)))
            for (_, img), (_, frame), ref in zip(got, arrays, reference):
                assert isinstance(img, Image.Image) and (img.mode, img.size) == (ref.mode, ref.size)
                assert np.array_equal(np.asarray(img), np.asarray(ref))
                assert np.array_equal(frame.array, np.asarray(ref))
    finally:
        ingest_threads.set_decode_threads(None)


def test_single_threaded_rgb_conversion_only_where_pyav_has_the_option():
    """PyAV 17 added threaded swscale and the `threads` argument; older releases convert on one
    thread and would refuse the argument (a TypeError on every frame)."""
    class Av:
        def __init__(self, version):
            self.__version__ = version

    assert ingest_threads.rgb24_options(Av("18.1.0")) == {"threads": 1}
    assert ingest_threads.rgb24_options(Av("17.0.0")) == {"threads": 1}
    assert ingest_threads.rgb24_options(Av("16.1.0")) == {}
    assert ingest_threads.rgb24_options(Av("12.3.0")) == {}
    assert ingest_threads.rgb24_options(Av("dev")) == {}
    frame = av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24").reformat(format="yuv420p")
    assert frame.to_ndarray(format="rgb24", **ingest_threads.rgb24_options(av)).shape == (48, 64, 3)


def test_statistics_workers_share_the_cores_between_their_video_decoders(tmp_path, episodes, monkeypatch):
    """A pool of statistics workers gives each worker's video decoders its share of the cores
    (1 when the workers fill them: frame threads would only add their hand-over), and the
    numbers are those of a decode with FFmpeg's own threads."""
    from perception_gap.statistics import workers as stats_workers
    from perception_gap.workflows import stats as stats_flow

    shares = []
    real_pool = stats_flow.ProcessPoolExecutor

    class Pool:  # the real pool, recording the initializer's argument as the parent passes it
        def __init__(self, *a, initializer=None, initargs=(), **kw):
            assert initializer is stats_workers.worker_init
            shares.append(initargs)
            self._pool = real_pool(*a, initializer=initializer, initargs=initargs, **kw)

        def __getattr__(self, name):
            return getattr(self._pool, name)

    for ep in range(3):
        write_video(tmp_path / "v" / f"ep{ep}.mp4", episodes[ep % 2], codec="h264")
    by_threads = {}
    for label in ("pool", "serial"):
        with Catalog(tmp_path / f"{label}.duckdb") as cat:
            index_video(cat, tmp_path / "v", "v", "real")
            if label == "pool":
                monkeypatch.setattr(stats_flow, "ProcessPoolExecutor", Pool)
                monkeypatch.setattr(stats_flow, "default_workers", lambda: 2)
                compute_stats(cat, ["v"], workers=2)
                monkeypatch.undo()
            else:
                compute_stats(cat, ["v"], workers=1)  # in this process: FFmpeg's threads
            by_threads[label] = stats_by_step(cat, "v")
    assert shares == [(1,)]
    assert by_threads["pool"] == by_threads["serial"] and len(by_threads["pool"]) == 5 + 4 + 5


def test_statistics_tasks_keep_each_container_whole(tmp_path):
    from perception_gap.workflows.stats import CHUNK, _chunks

    items = [(f"h{i}", "a.mp4", "video", i) for i in range(3 * CHUNK)] + [(f"f{i}", f"f{i}.png", None, None) for i in range(40)]
    items += [(f"g{i}", "b.mp4", "video", i) for i in range(5)]
    chunks = _chunks(items)
    videos = [c for c in chunks if c[0][2] is not None]
    assert [len(c) for c in videos] == [3 * CHUNK, 5]
    assert sorted(len(c) for c in chunks if c[0][2] is None) == [8, 32]


def test_a_version_1_catalog_is_upgraded_in_place(tmp_path, episodes):
    db = tmp_path / "old.duckdb"
    with Catalog(db) as cat:
        png_set(cat, tmp_path / "png", episodes)
    con = duckdb.connect(str(db))  # make it a version-1 file, as written before container frames
    for col in ("container_path", "container_hash", "member", "frame_index"):
        con.execute(f"ALTER TABLE frames DROP COLUMN {col}")
    con.execute("DROP TABLE listing_repeats")  # nor the table of repeated listings
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(Exception, match="upgrade it in place"):
        Catalog(db, read_only=True)
    with Catalog(db) as cat:
        assert cat.set_counts("png")["ok"] == 9
        write_lerobot(tmp_path / "ds", episodes, version="v2.1", codec="h264")
        assert index_lerobot(cat, tmp_path / "ds", CAM, "video", "real").usable == 9
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert con.execute("SELECT count(*) FROM frames WHERE member = 'video'").fetchone() == (9,)
    assert con.execute("SELECT count(*) FROM listing_repeats").fetchone() == (0,)
    con.close()


def test_unreadable_videos_are_named(tmp_path, episodes):
    video = write_video(tmp_path / "ok.mp4", episodes[0])
    data = video.read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[: len(data) // 3])
    (tmp_path / "empty.mp4").write_bytes(b"")
    for name in ("cut.mp4", "empty.mp4"):
        with pytest.raises(FrameError, match="not a readable video"):
            probe_video(tmp_path / name)
    with pytest.raises(FrameError, match="unsupported video codec 'no-such-codec'"):
        containers._check_decoder("no-such-codec")


def _hashes(db: Path, sql: str) -> set[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {r[0] for r in con.execute(sql).fetchall()}
    finally:
        con.close()


def test_a_container_changed_after_index_is_reindexed_before_it_is_measured_or_embedded(tmp_path, episodes):
    old_frames, new_frames = smooth_frames(5, seed=0), smooth_frames(5, seed=7)
    old_bytes = write_video(tmp_path / "a" / "run.mp4", old_frames).read_bytes()
    new_bytes = write_video(tmp_path / "b" / "run.mp4", new_frames).read_bytes()
    with Catalog(tmp_path / "ref.duckdb") as ref:  # independent reference: each video indexed from scratch
        for name in ("a", "b"):
            index_video(ref, tmp_path / name / "run.mp4", name, "sim")
        compute_stats(ref, ["a", "b"], workers=1)
        ref_stats = {name: stats_by_step(ref, name) for name in ("a", "b")}
        fp = embed_sets(ref, ["pixel"], ["a", "b"], device="cpu", batch_size=2)[0].fingerprint
        ref_vec = {name: ref.load_embeddings(name, fp)[1] for name in ("a", "b")}
    assert ref_stats["a"] != ref_stats["b"]
    video, db = tmp_path / "v" / "run.mp4", tmp_path / "c.duckdb"
    video.parent.mkdir()
    video.write_bytes(old_bytes)
    with Catalog(db) as cat:
        index_video(cat, video, "v", "sim")
        indexed = _hashes(db, "SELECT content_hash FROM frames")
        video.write_bytes(new_bytes)  # after `index`, before `stats`: the catalog still holds the old hashes
        done = compute_stats(cat, ["v"], workers=1)
        assert done.reindexed == tuple(f"{video}#{i}" for i in range(5)) and done.computed == 5
        assert stats_by_step(cat, "v") == ref_stats["b"]
        video.write_bytes(old_bytes)  # and back, before `embed`
        report = embed_sets(cat, ["pixel"], ["v"], device="cpu", batch_size=2)[0]
        assert report.reindexed == done.reindexed and report.embedded == 5
        np.testing.assert_array_equal(cat.load_embeddings("v", fp)[1], ref_vec["a"])
    measured = _hashes(db, "SELECT content_hash FROM frame_stats")
    assert not measured & indexed  # nothing was measured under the hashes of the bytes `index` saw
    assert _hashes(db, "SELECT content_hash FROM embeddings") == indexed  # back to those bytes: their hashes


def test_a_changed_lerobot_container_is_listed_again_and_an_unlistable_one_skipped(tmp_path, episodes):
    other = [smooth_frames(5, seed=3), smooth_frames(4, seed=4)]  # same episode lengths, other pixels
    root = write_lerobot(tmp_path / "ds", episodes, version="v3.0", codec="h264-lossless")
    write_lerobot(tmp_path / "ref", other, version="v3.0", codec="h264-lossless")
    gone = write_video(tmp_path / "w" / "gone.mp4", episodes[0])
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_lerobot(cat, root, CAM, "video", "real")
        index_lerobot(cat, tmp_path / "ref", CAM, "ref", "real")  # reference: the new bytes indexed from scratch
        index_video(cat, gone, "w", "sim")
        indexed = _hashes(db, "SELECT content_hash FROM frames WHERE set_name <> 'ref'")
        mp4 = f"videos/{CAM}/chunk-000/file-000.mp4"
        (root / mp4).write_bytes((tmp_path / "ref" / mp4).read_bytes())
        gone.unlink()  # and a plain video that vanished: its source cannot be listed again
        done = compute_stats(cat, ["video", "ref", "w"], workers=1)
        assert len(done.reindexed) == 9 + 5
        assert stats_by_step(cat, "video") == stats_by_step(cat, "ref")
        assert cat.set_counts("w")["ok"] == 0
        reasons = {s["reason"] for s in cat.skipped_frames("w")}
    assert len(reasons) == 1 and "container changed since `index`" in reasons.pop()
    assert not _hashes(db, "SELECT content_hash FROM frame_stats") & indexed
