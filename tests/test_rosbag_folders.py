"""ROS bag layouts (ingest/rosbag.py): split ROS 2 bags (several storage files under one
metadata.yaml) read as one bag, checked against rosbags' own reader of the whole folder; a folder
of bags where some bags are unreadable (recorded skips) or all are (one-line error); each storage
file read once for the colour and depth topics together."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")
from rosbags.highlevel import AnyReader
from ruamel.yaml import YAML

import tests.test_rosbag as tb
from perception_gap.catalog import Catalog
from perception_gap.errors import InputError
from perception_gap.ingest.containers import decode_members
from perception_gap.ingest.rosbag import index_rosbag, scan_rosbag
from perception_gap.workflows.stats import compute_stats

SPLIT_AT = 3  # colour frames 0-2 in the first storage file, 3-6 in the second


def write_split_bag(path: Path, kind: str) -> Path:
    """A ROS 2 bag split into two storage files, as rosbag2 writes it when it splits by size: both
    parts written with rosbags' Writer, the second's storage file moved beside the first's and
    metadata.yaml listing both (counts summed)."""
    parts = [tb.write_bag(path.parent / f"{path.name}_{k}", kind, colour=c, depth=d, start=s)
             for k, (c, d, s) in enumerate([(tb.COLOUR[:SPLIT_AT], tb.DEPTH[:2], 0),
                                            (tb.COLOUR[SPLIT_AT:], tb.DEPTH[2:], SPLIT_AT)])]
    yaml = YAML(typ="safe")
    meta = [yaml.load((p / "metadata.yaml").read_text()) for p in parts]
    info, second = meta[0]["rosbag2_bagfile_information"], meta[1]["rosbag2_bagfile_information"]
    storage = [next(p.glob("*.db3" if kind == "SQLITE3" else "*.mcap")) for p in parts]
    shutil.move(str(storage[1]), parts[0] / storage[1].name)
    info["relative_file_paths"] = [s.name for s in storage]
    info["files"] = info["files"] + second["files"]
    info["message_count"] += second["message_count"]
    for t, t2 in zip(info["topics_with_message_count"], second["topics_with_message_count"]):
        t["message_count"] += t2["message_count"]
    with open(parts[0] / "metadata.yaml", "w") as f:
        yaml.dump(meta[0], f)
    shutil.rmtree(parts[1])
    parts[0].rename(path)
    return path


@pytest.mark.parametrize("kind", ["MCAP", "SQLITE3"])
def test_split_bag_reads_as_one_bag(tmp_path, kind):
    bag = write_split_bag(tmp_path / "split", kind)
    entries, warnings = scan_rosbag(bag, "/cam", depth_topic="/depth")
    files = sorted({e.container.file.path.name for e in entries})
    assert files == [f"split_0{s}" for s in ((".db3",) if kind == "SQLITE3" else (".mcap",))] + \
        [f"split_1{'.db3' if kind == 'SQLITE3' else '.mcap'}"]
    assert [e.step for e in entries] == list(range(len(tb.COLOUR)))  # steps run on across the files
    assert [e.container.index for e in entries] == [0, 1, 2, 0, 1, 2, 3]  # places inside each file
    assert [e.pair_key for e in entries] == [f"0/{i}" for i in range(len(tb.COLOUR))]
    # the reference: rosbags' own reader of the whole split folder, message by message
    with AnyReader([bag]) as r:
        cam = [c for c in r.connections if c.topic == "/cam"]
        ref = [r.deserialize(raw, c.msgtype) for c, _, raw in r.messages(connections=cam)]
    assert len(ref) == len(entries)
    for e, msg in zip(entries, ref):
        assert e.timestamp == pytest.approx(msg.header.stamp.sec + msg.header.stamp.nanosec / 1e9, abs=1e-6)
        if e.error is not None:
            continue
        c = e.container
        got = dict(decode_members(c.file.path, c.member, [c.index]))[c.index]
        want = tb.COLOUR[e.step][2]
        np.testing.assert_array_equal(np.asarray(got), want)
    # depth pairs by stamp across the files: frame 0 and 1 with the first part's maps
    paired = {e.step: (e.depth_path.name, e.depth_container.index) for e in entries if e.depth_container}
    assert paired == {0: (files[0], 0), 1: (files[0], 1)} and len(warnings) == 1
    with Catalog(tmp_path / "c.duckdb") as cat, cat.session():
        r = index_rosbag(cat, bag, "/cam", "real", "real", depth_topic="/depth")
        assert (r.listed, r.usable, len(r.skipped)) == (7, 5, 2)
        assert compute_stats(cat, ["real"], workers=1).computed == 5 + 2


def test_split_bag_with_a_missing_storage_file_is_one_line(tmp_path):
    bag = write_split_bag(tmp_path / "split", "MCAP")
    (bag / "split_1.mcap").unlink()
    with pytest.raises(InputError, match=r"Cannot read `--rosbag` .*split.*missing: split_1\.mcap\.$"):
        scan_rosbag(bag, "/cam")


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    root.mkdir()
    tb.write_bag(root / "a.bag", "ros1", colour=tb.COLOUR[:2], depth=[])
    good = tb.write_bag(tmp_path / "good.bag", "ros1", colour=tb.COLOUR[:2], depth=[])
    (root / "b.bag").write_bytes(good.read_bytes()[:3000])  # truncated
    tb.write_bag(root / "c", "MCAP", colour=tb.COLOUR[2:3], depth=[])
    return root


def test_folder_with_a_corrupt_bag_indexes_the_others_and_records_the_skip(tmp_path, capsys):
    root = _folder(tmp_path)
    entries, _ = scan_rosbag(root, "/cam")
    assert [(e.episode, e.step) for e in entries] == [("0", 0), ("0", 1), ("1", None), ("2", 0)]
    skip = entries[2]
    assert skip.rgb_path == root / "b.bag" and skip.error.startswith("bag skipped: Cannot read `--rosbag`")
    db = tmp_path / "c.duckdb"
    assert tb._main("index", "--db", db, "--rosbag", root, "--topic", "/cam", "--set", "s", "--domain", "real") == 0
    out = capsys.readouterr().out
    assert "3 usable, 1 skipped" in out and "skipped 1 frame: bag skipped: Cannot read" in out, out
    assert f"b.bag (in {root})" in out, out
    with Catalog(db) as cat:
        skipped = cat.skipped_frames("s")
        assert [(s["path"], s["reason"][:12]) for s in skipped] == [(str(root / "b.bag"), "bag skipped:")]
        again = index_rosbag(cat, root, "/cam", "s", "real")  # nothing changed: the skip stays as it is
        assert (again.unchanged, again.new, again.changed, len(again.skipped)) == (4, 0, 0, 1)


def test_folder_where_every_bag_is_bad_is_one_line(tmp_path, capsys):
    root = _folder(tmp_path)
    assert tb._main("index", "--db", tmp_path / "c.duckdb", "--rosbag", root, "--topic", "/nope",
                    "--set", "s", "--domain", "real") == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "No bag of" in err[0] and "(3 bags)" in err[0] and "Unknown --topic '/nope'" in err[0], err


@pytest.mark.parametrize("kind", ["ros1", "MCAP", "SQLITE3"])
def test_listing_reads_each_bag_once_for_both_topics(tmp_path, kind, monkeypatch):
    bag = tb.write_bag(tmp_path / ("run.bag" if kind == "ros1" else "run"), kind)
    calls = []
    real = AnyReader.messages

    def counted(self, *a, **k):
        calls.append(sorted({c.topic for c in k.get("connections", a[0] if a else [])}))
        return real(self, *a, **k)

    monkeypatch.setattr(AnyReader, "messages", counted)
    entries, _ = scan_rosbag(bag, "/cam", depth_topic="/depth")
    assert calls == [["/cam", "/depth"]] and len(entries) == len(tb.COLOUR)
