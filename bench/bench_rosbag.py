"""Benchmark: indexing plus statistics of a ROS bag against a bare rosbags read of the same topic.

Writes a ROS 2 bag (MCAP or sqlite3) of `--frames` rgb8 Image messages of `--size` pixels with
tests/test_rosbag.py's writer into a temp folder (`--depth`: and as many 16UC1 depth messages
on a second topic, indexed with `--depth-topic`), then times in CPU seconds of this process
(the machine may be shared; `--workers 1` keeps all work in it), the best of `--repeat` runs:

- `list`: `scan_rosbag` alone (reads the bag's messages of the topics: what `index` lists);
- `index`: `index_rosbag` into a fresh catalog (lists the topics, then hashes the bag's bytes);
- `stats`: `compute_stats` after it (one verified pass per storage file for both topics, every
  frame's statistics);
- the bare read: `AnyReader` over the topics, every message deserialized and turned into an
  array.

and the bytes each read from files (`rchar` of /proc/self/io, Linux; page-cache hits count too),
as a multiple of the bag's size: how many times each stage reads the bag.
Prints the figures and the ratios. A report, not a test: exits 0 whatever the figures.

    python bench/bench_rosbag.py                       # 200 frames, 640x480, MCAP
    python bench/bench_rosbag.py --depth --repeat 3    # colour + depth topics
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _rchar() -> int:
    try:
        with open("/proc/self/io") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("rchar:"))
    except (OSError, StopIteration):
        return 0


def _bare(bag: Path, topics: list[str]) -> None:
    from rosbags.highlevel import AnyReader

    with AnyReader([bag]) as r:
        conns = [c for c in r.connections if c.topic in topics]
        for con, _, raw in r.messages(connections=conns):
            m = r.deserialize(raw, con.msgtype)
            np.asarray(m.data).reshape(int(m.height), -1).copy()


def main() -> int:
    import tests.test_rosbag as tb
    from perception_gap.catalog import Catalog
    from perception_gap.ingest.rosbag import index_rosbag, scan_rosbag
    from perception_gap.workflows.stats import compute_stats

    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--size", default="640x480")
    ap.add_argument("--storage", default="MCAP", choices=("MCAP", "SQLITE3"))
    ap.add_argument("--depth", action="store_true", help="add a 16UC1 depth topic and index it with --depth-topic")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    w, h = map(int, a.size.split("x"))
    rng = np.random.default_rng(0)
    frames = [("rgb8", rng.integers(0, 256, (h, w, 3), dtype=np.uint8), None) for _ in range(a.frames)]
    depth = [("16UC1", rng.integers(1, 5000, (h, w), dtype=np.uint16), 0.1 * i + 0.001, None)
             for i in range(a.frames)] if a.depth else []
    tb.H = h  # the writer's declared height
    depth_topic = "/depth" if a.depth else None
    best = {"bare": np.inf, "list": np.inf, "index": np.inf, "stats": np.inf}
    with tempfile.TemporaryDirectory() as tmp:
        bag = tb.write_bag(Path(tmp) / "bag", a.storage, colour=frames, depth=depth)
        for k in range(a.repeat):
            t = time.process_time()
            _bare(bag, ["/cam", "/depth"] if a.depth else ["/cam"])
            best["bare"] = min(best["bare"], time.process_time() - t)
            t, io0 = time.process_time(), _rchar()
            scan_rosbag(bag, "/cam", depth_topic=depth_topic)
            best["list"] = min(best["list"], time.process_time() - t)
            io1 = _rchar()
            with Catalog(Path(tmp) / f"c{k}.duckdb") as cat, cat.session():
                t, io2 = time.process_time(), _rchar()
                index_rosbag(cat, bag, "/cam", "b", "real", depth_topic=depth_topic, workers=1)
                best["index"] = min(best["index"], time.process_time() - t)
                io3 = _rchar()
                t, io4 = time.process_time(), _rchar()
                done = compute_stats(cat, ["b"], workers=1).computed
                best["stats"] = min(best["stats"], time.process_time() - t)
                io5 = _rchar()
        size = sum(p.stat().st_size for p in bag.iterdir())
    pipe = best["index"] + best["stats"]
    print(f"{a.frames} frames {w}x{h} ({a.storage}{', + depth topic' if a.depth else ''}): bare read "
          f"{best['bare']:.2f} CPU-s, list {best['list']:.2f}, index {best['index']:.2f} + stats {best['stats']:.2f} = {pipe:.2f} CPU-s "
          f"({done} measured), list/bare {best['list'] / best['bare']:.2f}x, all/bare {pipe / best['bare']:.1f}x; "
          f"bytes read: list {(io1 - io0) / size:.2f}x, index {(io3 - io2) / size:.2f}x, stats {(io5 - io4) / size:.2f}x the bag ({size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
