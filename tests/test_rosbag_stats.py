"""Statistics of a ROS bag with a depth topic (workflows/stats.py `joint_items`, statistics/workers.py
`joint_stats_job`, ingest/containers.py `verified_container`): each storage file hashed once and read
once for the colour and depth topics together; the rows equal the per-topic passes' and the
statistics of the arrays written; a bag changed after `index` is refused, never measured."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("rosbags")
from rosbags.highlevel import AnyReader

import tests.test_rosbag as tb
from perception_gap.catalog import Catalog
from perception_gap.engines.ray_engine import stats_task
from perception_gap.ingest import containers
from perception_gap.ingest.rosbag import index_rosbag
from perception_gap.statistics.depth import depth_stats
from perception_gap.statistics.image import image_stats_pil
from perception_gap.statistics.workers import depth_stats_job, joint_stats_job, rgb_stats_job
from perception_gap.workflows.stats import compute_stats, joint_items

KINDS = ("ros1", "MCAP", "SQLITE3")
_ROWS = ("SELECT f.step, s.* EXCLUDE (content_hash), d.* EXCLUDE (content_hash) FROM frames f "
         "LEFT JOIN frame_stats s ON s.content_hash = f.content_hash "
         "LEFT JOIN depth_stats d ON d.content_hash = f.depth_hash WHERE f.status = 'ok' ORDER BY f.step")


def _indexed(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    bag = tb.write_bag(tmp_path / ("run.bag" if kind == "ros1" else "run"), kind)
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat, cat.session():
        index_rosbag(cat, bag, "/cam", "real", "real", depth_topic="/depth")
    return bag, db


def _storage(bag: Path) -> Path:
    return bag if bag.is_file() else next(p for p in bag.iterdir() if p.suffix in (".db3", ".mcap"))


def _counting(monkeypatch) -> dict[str, list]:
    """Count container hashes (`hash_file`) and bag passes (`AnyReader.messages`, by topics read)."""
    calls: dict[str, list] = {"hash": [], "pass": []}
    real_hash, real_messages = containers.hash_file, AnyReader.messages

    def hash_file(path):
        calls["hash"].append(Path(path).name)
        return real_hash(path)

    def messages(self, *a, **k):
        calls["pass"].append(sorted({c.topic for c in k.get("connections", a[0] if a else [])}))
        return real_messages(self, *a, **k)

    monkeypatch.setattr(containers, "hash_file", hash_file)
    monkeypatch.setattr(AnyReader, "messages", messages)
    return calls


@pytest.mark.parametrize("kind", KINDS)
def test_bag_with_depth_is_hashed_and_read_once_with_the_rows_of_separate_passes(tmp_path, kind, monkeypatch):
    bag, db = _indexed(tmp_path, kind)
    with Catalog(db) as cat:
        rgb, depth = cat.hashes_needing_stats(["real"]), cat.hashes_needing_depth_stats(["real"])
    joint, rest_rgb, rest_depth = joint_items(rgb, depth)
    assert (len(joint), rest_rgb, rest_depth) == (5 + 2, [], [])  # five colour frames, two depth maps
    # the reference: the per-topic passes, each hashing and reading the bag on its own
    separate = {("rgb", h): (st, err) for h, st, err in rgb_stats_job(rgb)}
    separate |= {("depth", h): (st, err) for h, st, err in depth_stats_job(depth)}
    calls = _counting(monkeypatch)
    with Catalog(db) as cat, cat.session():
        assert compute_stats(cat, ["real"], workers=1).computed == 5 + 2
        rows = cat.con.execute(_ROWS).fetchall()
    assert calls == {"hash": [_storage(bag).name], "pass": [["/cam", "/depth"]]}  # once, both topics
    calls["hash"].clear()
    calls["pass"].clear()
    together = {(k, h): (st, err) for k, h, st, err in joint_stats_job(joint)}
    assert together == separate and len(calls["hash"]) == 1 and len(calls["pass"]) == 1
    # the rows are the statistics of the arrays written (known answer), colour and depth
    assert [r[0] for r in rows] == [0, 1, 2, 3, 4]
    with Catalog(tmp_path / "ref.duckdb") as ref, ref.session():
        ref.write_image_stats([(f"{i}", image_stats_pil(Image.fromarray(tb.COLOUR[i][2])), None) for i in range(5)])
        ref.write_depth_stats([(f"{i}", depth_stats(a), None) for i, (_, a, _, _) in enumerate(tb.DEPTH[:2])])
        want = ref.con.execute("SELECT s.* EXCLUDE (content_hash), d.* EXCLUDE (content_hash) FROM frame_stats s "
                               "LEFT JOIN depth_stats d USING (content_hash) ORDER BY s.content_hash").fetchall()
    assert [r[1:] for r in rows] == want


@pytest.mark.parametrize("kind", ["ros1", "MCAP"])
def test_joint_pass_reads_the_bytes_of_the_bag_about_twice_where_separate_passes_read_four_times(tmp_path, kind,
                                                                                              monkeypatch):
    """Bytes read from files (/proc/self/io rchar): one hash plus one decode, against two of each."""
    io = Path("/proc/self/io")
    if not io.exists():
        pytest.skip("needs /proc/self/io (Linux)")
    monkeypatch.setattr(tb, "H", 120)
    rng = np.random.default_rng(1)
    colour = [("rgb8", rng.integers(0, 256, (120, 160, 3), dtype=np.uint8), None) for _ in range(8)]
    depth = [("16UC1", rng.integers(1, 5000, (120, 160), dtype=np.uint16), 0.1 * i + 0.001, None) for i in range(8)]
    bag = tb.write_bag(tmp_path / ("run.bag" if kind == "ros1" else "run"), kind, colour=colour, depth=depth)
    with Catalog(tmp_path / "c.duckdb") as cat, cat.session():
        index_rosbag(cat, bag, "/cam", "real", "real", depth_topic="/depth")
        rgb, depth_items = cat.hashes_needing_stats(["real"]), cat.hashes_needing_depth_stats(["real"])
    joint = joint_items(rgb, depth_items)[0]
    size = _storage(bag).stat().st_size

    def rchar() -> int:
        return next(int(ln.split()[1]) for ln in io.read_text().splitlines() if ln.startswith("rchar:"))

    joint_stats_job(joint)  # warm: imports and first-use reads out of the measurement
    a = rchar()
    assert all(r[2] is not None for r in joint_stats_job(joint))
    b = rchar()
    rgb_stats_job(rgb), depth_stats_job(depth_items)
    c = rchar()
    assert (b - a) / size < 2.2, ((b - a) / size, (c - b) / size)
    assert (c - b) / size > 3.5, ((b - a) / size, (c - b) / size)


@pytest.mark.parametrize("kind", ["ros1", "MCAP"])
def test_a_bag_changed_after_index_is_refused_by_the_joint_pass(tmp_path, kind):
    bag, db = _indexed(tmp_path, kind)
    with Catalog(db) as cat:
        joint = joint_items(cat.hashes_needing_stats(["real"]), cat.hashes_needing_depth_stats(["real"]))[0]
    storage = _storage(bag)
    before = storage.stat()
    data = bytearray(storage.read_bytes())
    data[-1] ^= 1  # one byte: same size, new content
    storage.write_bytes(bytes(data))
    os.utime(storage, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same mtime: only the hash tells
    assert [r[2:] for r in joint_stats_job(joint)] == [(None, None)] * 7  # nothing measured under old hashes
    # through `stats`: the changed bag is re-indexed, then measured under its new hashes
    os.remove(bag) if kind == "ros1" else shutil.rmtree(bag)
    tb.write_bag(bag, kind, colour=[tb.COLOUR[1], tb.COLOUR[0]] + tb.COLOUR[2:])  # two frames swapped
    with Catalog(db) as cat, cat.session():
        old = {r[0] for r in cat.con.execute("SELECT content_hash FROM frames").fetchall()}
        late = compute_stats(cat, ["real"], workers=1)
        assert late.computed == 5 + 2 and len(late.reindexed) == 5
        means = cat.con.execute("SELECT f.step, s.mean FROM frames f JOIN frame_stats s USING (content_hash) "
                                "WHERE f.status = 'ok' ORDER BY f.step").fetchall()
        assert not {r[0] for r in cat.con.execute("SELECT content_hash FROM frame_stats").fetchall()} & old
    want = [image_stats_pil(Image.fromarray(tb.COLOUR[i][2])).mean for i in (1, 0, 2, 3, 4)]
    assert [m for _, m in means] == [pytest.approx(w) for w in want]


def test_a_bag_that_changes_during_the_joint_pass_measures_nothing_after_the_change(tmp_path, monkeypatch):
    _, db = _indexed(tmp_path, "MCAP")
    with Catalog(db) as cat:
        joint = joint_items(cat.hashes_needing_stats(["real"]), cat.hashes_needing_depth_stats(["real"]))[0]
    real, n = containers._current, []

    def current(path):  # the file's signature moves after the second frame decoded
        n.append(1)
        sig = real(path)
        return sig if len(n) <= 2 else sig[:3] + (sig[3] + 1,)

    monkeypatch.setattr(containers, "_current", current)
    got = joint_stats_job(joint)
    measured = [r for r in got if r[2] is not None or r[3] is not None]
    assert len(got) == 7 and len(measured) == 2


def test_ray_task_writes_the_joint_rows_to_both_tables(tmp_path):
    _, db = _indexed(tmp_path, "SQLITE3")
    with Catalog(db) as cat, cat.session():
        joint = joint_items(cat.hashes_needing_stats(["real"]), cat.hashes_needing_depth_stats(["real"]))[0]
        out = stats_task({"task": [json.dumps([joint])]}, table="joint", folder=str(tmp_path / "shards"))
        assert out["n"] == [7] and json.loads(out["changed"][0]) == []
        assert cat.merge_shards(out["shard"][0].split("\n")) == 7
        assert cat.hashes_needing_stats(["real"]) == [] and cat.hashes_needing_depth_stats(["real"]) == []
        got = cat.con.execute("SELECT d.mean FROM frames f JOIN depth_stats d ON d.content_hash = f.depth_hash "
                              "ORDER BY f.step").fetchall()
    assert [m for (m,) in got] == [pytest.approx(depth_stats(a).mean) for _, a, _, _ in tb.DEPTH[:2]]
