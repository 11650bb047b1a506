"""ROS bag sources (ingest/rosbag.py, ingest/rosmsg.py): tiny bags written with rosbags' own writers
(ROS 1, ROS 2 sqlite3, ROS 2 MCAP), decoded pixels compared exactly with the arrays written, depth
pairing by nearest stamp, the content-hash cache, and bad input through the real CLI."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("rosbags")
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

from perception_gap.catalog import Catalog
from perception_gap.errors import InputError
from perception_gap.ingest.containers import decode_members
from perception_gap.ingest.rosbag import index_rosbag, nearest_within, scan_rosbag
from perception_gap.statistics.depth import depth_stats
from perception_gap.workflows.stats import compute_stats

REPO = Path(__file__).resolve().parents[1]
H, W = 24, 32
T0 = 1_700_000_000  # seconds: header stamps of the colour frames are T0 + 0.1 * i
RNG = np.random.default_rng(7)
RGB = [RNG.integers(0, 256, (H, W, 3), dtype=np.uint8) for _ in range(4)]
ALPHA = RNG.integers(0, 256, (H, W, 1), dtype=np.uint8)
GREY = RNG.integers(0, 256, (H, W), dtype=np.uint8)
MM = RNG.integers(1, 5000, (H, W), dtype=np.uint16)
METRES = RNG.uniform(0.2, 4.0, (H, W)).astype(np.float32)
# (encoding, bytes as stored, what decoding must give back): 6 colour messages, the last unsupported
COLOUR = [("rgb8", RGB[0], RGB[0]), ("bgr8", RGB[1][:, :, ::-1], RGB[1]),
          ("rgba8", np.concatenate([RGB[2], ALPHA], 2), RGB[2]),
          ("bgra8", np.concatenate([RGB[3][:, :, ::-1], ALPHA], 2), RGB[3]), ("mono8", GREY, GREY),
          ("yuv422", RGB[0][:, :, :2], None), ("rgb8", RGB[0][:12], None)]  # the last: height 12, data for 24
# depth stamps offset from colour frames 0, 1, 2 by +5 ms, -15 ms, +50 ms (the last beyond 20 ms)
DEPTH = [("16UC1", MM, 0.005, 0), ("32FC1", METRES, 0.1 - 0.015, 1), ("16UC1", MM, 0.2 + 0.05, None)]


def _header(ts, t: float):
    """A std_msgs Header stamped t seconds (ROS 1's has a `seq`, ROS 2's not)."""
    stamp = ts.types["builtin_interfaces/msg/Time"](sec=int(t), nanosec=round((t - int(t)) * 1e9))
    header_t = ts.types["std_msgs/msg/Header"]
    seq = {"seq": 0} if "seq" in header_t.__dataclass_fields__ else {}
    return header_t(stamp=stamp, frame_id="cam", **seq)


def _image(ts, enc: str, a: np.ndarray, t: float):
    """An Image message declaring H rows: an `a` of fewer rows is a message whose data is cut short."""
    row = a.shape[1] * (a.shape[2] if a.ndim == 3 else 1) * a.dtype.itemsize
    pad = np.zeros((a.shape[0], 4), np.uint8)  # a step wider than the row, as padded drivers write it
    data = np.concatenate([np.ascontiguousarray(a).view(np.uint8).reshape(a.shape[0], row), pad], 1)
    return ts.types["sensor_msgs/msg/Image"](header=_header(ts, t), height=H, width=a.shape[1], encoding=enc,
                                             is_bigendian=0, step=row + 4, data=data.ravel())


def encoded(i: int) -> bytes:
    """The file a CompressedImage message i holds: PNG for even i, JPEG for odd i."""
    buf = io.BytesIO()
    Image.fromarray(RGB[i % 4]).save(buf, format="PNG" if i % 2 == 0 else "JPEG", quality=90)
    return buf.getvalue()


def _compressed(ts, i: int):
    """CompressedImage message i, its header stamp left zero (unset): its time is the receive time."""
    return ts.types["sensor_msgs/msg/CompressedImage"](header=_header(ts, 0.0), format=["png", "jpeg"][i % 2],
                                                       data=np.frombuffer(encoded(i), np.uint8))


def write_bag(path: Path, kind: str, *, colour=COLOUR, depth=DEPTH, start: int = 0) -> Path:
    """A bag with /cam (Image), /cam_c (CompressedImage, PNG and JPEG), /depth (Image) and /odom (not an
    image); colour message k is stamped as frame `start + k` (a later part of a split recording)."""
    ros1 = kind == "ros1"
    ts = get_typestore(Stores.ROS1_NOETIC if ros1 else Stores.ROS2_HUMBLE)
    writer = Writer1(path) if ros1 else Writer2(path, version=9, storage_plugin=StoragePlugin[kind])
    ser = (lambda m, t: ts.serialize_ros1(m, t)) if ros1 else (lambda m, t: ts.serialize_cdr(m, t))
    with writer as w:
        cam = w.add_connection("/cam", "sensor_msgs/msg/Image", typestore=ts)
        cam_c = w.add_connection("/cam_c", "sensor_msgs/msg/CompressedImage", typestore=ts)
        dep = w.add_connection("/depth", "sensor_msgs/msg/Image", typestore=ts)
        w.add_connection("/odom", "std_msgs/msg/String", typestore=ts)
        msgs = []
        for i, (enc, a, _) in enumerate(colour, start):
            t = T0 + 0.1 * i
            msgs.append((t, cam, ser(_image(ts, enc, a, t), "sensor_msgs/msg/Image")))
            msgs.append((t, cam_c, ser(_compressed(ts, i), "sensor_msgs/msg/CompressedImage")))
        for enc, a, dt, _ in depth:
            t = T0 + dt
            msgs.append((t, dep, ser(_image(ts, enc, a, t), "sensor_msgs/msg/Image")))
        for t, con, raw in sorted(msgs, key=lambda m: m[0]):
            w.write(con, round(t * 1e9) + 1000, raw)  # receive time just after the stamp
    return path


KINDS = ("ros1", "SQLITE3", "MCAP")


@pytest.fixture(scope="module")
def bags(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bags")
    return {k: write_bag(root / ("run.bag" if k == "ros1" else f"run_{k.lower()}"), k) for k in KINDS}


def _decoded(entries) -> dict[int, object]:
    c = entries[0].container
    return dict(decode_members(c.file.path, c.member, [e.step for e in entries if e.error is None]))


@pytest.mark.parametrize("kind", KINDS)
def test_pixels_come_back_exactly_as_written(bags, kind):
    entries, _ = scan_rosbag(bags[kind], "/cam", depth_topic="/depth")
    assert [e.step for e in entries] == list(range(len(COLOUR)))
    assert {e.episode for e in entries} == {"0"}  # a single bag is episode 0
    assert [e.timestamp for e in entries] == pytest.approx([T0 + 0.1 * i for i in range(len(COLOUR))], abs=1e-6)
    frames = _decoded(entries)
    for (enc, _, want), e in zip(COLOUR, entries):
        if want is None:  # unsupported encoding, data cut short: recorded skips saying why
            assert ("unsupported image encoding 'yuv422'" if enc == "yuv422" else "holds 1200 bytes") in e.error
            continue
        got = frames[e.step]
        assert isinstance(got, Image.Image) and got.mode == ("L" if want.ndim == 2 else "RGB"), enc
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=enc)
    # compressed frames of another topic of the same bag: as Pillow decodes the file each holds
    comp, _ = scan_rosbag(bags[kind], "/cam_c")
    assert [e.timestamp for e in comp] == pytest.approx([T0 + 0.1 * i + 1e-6 for i in range(len(COLOUR))], abs=1e-6)
    for e, (i, img) in zip(comp, sorted(_decoded(comp).items())):
        assert e.container.header.format == ["PNG", "JPEG"][i % 2]
        np.testing.assert_array_equal(np.asarray(img), np.asarray(Image.open(io.BytesIO(encoded(i))).convert("RGB")))


def test_depth_pairs_with_the_nearest_stamp_within_tolerance(bags):
    entries, warnings = scan_rosbag(bags["MCAP"], "/cam", depth_topic="/depth", tolerance=0.02)
    usable = [e for e in entries if e.error is None]
    paired = {e.step: (e.depth_container.index, e.depth_unit) for e in usable if e.depth_container is not None}
    assert paired == {0: (0, "mm"), 1: (1, "m")}  # frame 2's depth is 50 ms off, frames 3-4 have none near
    assert warnings == [(f"3 of {len(COLOUR)} frame(s) of run_mcap have no /depth message within 0.02 s: "
                         "they keep no depth")]
    c = usable[0].depth_container
    got = dict(decode_members(c.file.path, c.member, [0, 1, 2]))
    np.testing.assert_array_equal(got[0][:, :, 0], MM)
    assert got[0].dtype == np.uint16 and got[1].dtype == np.float32
    np.testing.assert_array_equal(got[1][:, :, 0], METRES)
    wide, _ = scan_rosbag(bags["MCAP"], "/cam", depth_topic="/depth", tolerance=0.06)
    assert wide[2].depth_container.index == 2  # a wider tolerance takes it


def test_nearest_within_matches_brute_force():
    rng = np.random.default_rng(3)
    stamps, targets = rng.uniform(0, 10, 40), rng.uniform(-1, 11, 200)
    got = nearest_within(stamps, targets, 0.1)
    for t, g in zip(targets, got):
        d = np.abs(stamps - t)
        assert g == (int(np.argmin(d)) if d.min() <= 0.1 else -1)
    assert nearest_within(np.array([]), targets[:3], 1.0).tolist() == [-1, -1, -1]
    assert nearest_within(np.array([5.0]), np.array([5.05, 5.2]), 0.1).tolist() == [0, -1]


def test_index_caches_by_bag_content_and_reindexes_a_changed_bag(tmp_path):
    bag = write_bag(tmp_path / "ep.bag", "ros1")
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat, cat.session():  # one open of the file for all the calls below
        r = index_rosbag(cat, bag, "/cam", "real", "real", depth_topic="/depth")
        assert (r.listed, r.new, r.usable, len(r.skipped)) == (7, 7, 5, 2)
        first = compute_stats(cat, ["real"], workers=1)
        assert first.computed == 5 + 2  # five colour frames, two depth maps
        again = index_rosbag(cat, bag, "/cam", "real", "real", depth_topic="/depth")
        assert (again.new, again.changed, again.unchanged) == (0, 0, 7)
        assert compute_stats(cat, ["real"], workers=1).computed == 0
        rows = cat.con.execute("SELECT f.step, f.depth_unit, f.timestamp, d.mean FROM frames f LEFT JOIN depth_stats d "
                               "ON d.content_hash = f.depth_hash WHERE f.status = 'ok' ORDER BY f.step").fetchall()
        hashes = cat.con.execute("SELECT content_hash FROM frames WHERE status = 'ok' ORDER BY step").fetchall()
    assert rows[0][1:] == ("mm", pytest.approx(T0), pytest.approx(depth_stats(MM).mean))
    assert rows[1][1:] == ("m", pytest.approx(T0 + 0.1), pytest.approx(depth_stats(METRES).mean))
    assert [r[1] for r in rows[2:]] == [None, None, None]
    # index after a change: every frame read again, under new hashes
    os.remove(bag)
    write_bag(bag, "ros1", colour=[COLOUR[1], COLOUR[0]] + COLOUR[2:])  # two frames swapped: new content
    with Catalog(db) as cat, cat.session():
        r = index_rosbag(cat, bag, "/cam", "real", "real", depth_topic="/depth")
        assert (r.new, r.changed, r.unchanged) == (0, 7, 0)
        swapped = cat.con.execute("SELECT content_hash FROM frames WHERE status = 'ok' ORDER BY step").fetchall()
        assert not set(swapped) & set(hashes)
        # the bag changes again before `stats`: its frames and depth maps are listed again, then measured
        os.remove(bag)
        write_bag(bag, "ros1", colour=COLOUR[:2] + [COLOUR[3], COLOUR[2]] + COLOUR[4:])
        late = compute_stats(cat, ["real"], workers=1)
        assert late.computed == 5 + 2 and len(late.reindexed) == 5
        now = cat.con.execute("SELECT content_hash FROM frames WHERE status = 'ok' ORDER BY step").fetchall()
        assert not set(now) & (set(swapped) | set(hashes))
        assert index_rosbag(cat, bag, "/cam", "real", "real", depth_topic="/depth").unchanged == 7


def test_folder_of_bags_is_one_episode_per_bag(tmp_path):
    write_bag(tmp_path / "a.bag", "ros1", colour=COLOUR[:2], depth=[])
    write_bag(tmp_path / "b", "SQLITE3", colour=COLOUR[2:3], depth=[])
    entries, warnings = scan_rosbag(tmp_path, "/cam")
    assert [e.pair_key for e in entries] == ["0/0", "0/1", "1/0"] and warnings == []  # a.bag, then b/
    assert [str(e.rgb_path) for e in entries] == [f"{tmp_path}/a.bag#/cam:0", f"{tmp_path}/a.bag#/cam:1",
                                                  f"{tmp_path}/b/b.db3#/cam:0"]


def test_bad_bags_raise_one_line_input_errors(tmp_path, bags):
    with pytest.raises(InputError, match=r"Unknown --topic '/nope'.*image topics: /cam, /cam_c, /depth\."):
        scan_rosbag(bags["ros1"], "/nope")
    with pytest.raises(InputError, match=r"carries std_msgs/msg/String, not an image"):
        scan_rosbag(bags["SQLITE3"], "/odom")
    with pytest.raises(InputError, match="no bag"):
        scan_rosbag(tmp_path, "/cam")


def _main(*argv: str) -> int:
    sys.path.insert(0, str(REPO))
    from perception_gap.cli import main

    return main([str(a) for a in argv])


def test_bad_input_through_the_cli(tmp_path, bags, capsys):
    empty = tmp_path / "empty.bag"
    with Writer1(empty) as w:
        w.add_connection("/cam", "sensor_msgs/msg/Image", typestore=get_typestore(Stores.ROS1_NOETIC))
    truncated = tmp_path / "cut.bag"
    truncated.write_bytes(bags["ros1"].read_bytes()[:3000])
    notbag = tmp_path / "frames.txt"
    notbag.write_text("hello")
    mcap = next(bags["MCAP"].glob("*.mcap"))
    cases = [(empty, "/cam", "is empty"), (bags["ros1"], "/nope", "image topics: /cam, /cam_c, /depth"),
             (notbag, "/cam", "Expected `--rosbag` to be a ROS 1 .bag file"), (tmp_path / "gone.bag", "/cam", "not found")]
    db = tmp_path / "c.duckdb"
    for path, topic, fragment in cases:
        assert _main("index", "--db", db, "--rosbag", path, "--topic", topic, "--set", "s", "--domain", "sim") == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and fragment in err[0], err
    # the real CLI as a user runs it: a truncated bag and a corrupt MCAP are one line, exit 2, no traceback
    mcap_bad = tmp_path / "bad"
    mcap_bad.mkdir()
    (mcap_bad / "metadata.yaml").write_bytes((bags["MCAP"] / "metadata.yaml").read_bytes())
    (mcap_bad / mcap.name).write_bytes(mcap.read_bytes()[:200])
    for path in (truncated, mcap_bad):
        p = subprocess.run([sys.executable, str(REPO / "cli.py"), "index", "--db", str(db), "--rosbag", str(path),
                            "--topic", "/cam", "--set", "s", "--domain", "sim"], capture_output=True, text=True, check=False,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=120)
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "Cannot read `--rosbag`" in lines[0], p.stderr
