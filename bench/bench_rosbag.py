"""Benchmark: indexing plus statistics of a ROS bag against a bare rosbags read of the same topic.

Writes a ROS 2 bag (MCAP or sqlite3) of `--frames` rgb8 Image messages of `--size` pixels with
tests/test_rosbag.py's writer into a temp folder, then times in CPU seconds of this process
(the machine may be shared; `--workers 1` keeps all work in it):

- the pipeline: `index_rosbag` into a fresh catalog (hashes the bag, deserializes every message
  for its header) plus `compute_stats` (one verified sequential pass, every frame's statistics);
- the bare read: `AnyReader` over the topic, every message deserialized and turned into an
  (H, W, 3) array.

Prints both and their ratio. A report, not a test: exits 0 whatever the figures.

    python bench/bench_rosbag.py                       # 200 frames, 640x480, MCAP
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    from rosbags.highlevel import AnyReader

    import tests.test_rosbag as tb
    from perception_gap.catalog import Catalog
    from perception_gap.ingest.rosbag import index_rosbag
    from perception_gap.workflows.stats import compute_stats

    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--size", default="640x480")
    ap.add_argument("--storage", default="MCAP", choices=("MCAP", "SQLITE3"))
    a = ap.parse_args()
    w, h = map(int, a.size.split("x"))
    rng = np.random.default_rng(0)
    frames = [("rgb8", rng.integers(0, 256, (h, w, 3), dtype=np.uint8), None) for _ in range(a.frames)]
    with tempfile.TemporaryDirectory() as tmp:
        bag = tb.write_bag(Path(tmp) / "bag", a.storage, colour=frames, depth=[])
        t = time.process_time()
        with AnyReader([bag]) as r:
            conns = [c for c in r.connections if c.topic == "/cam"]
            for con, _, raw in r.messages(connections=conns):
                m = r.deserialize(raw, con.msgtype)
                np.asarray(m.data).reshape(h, -1)[:, : w * 3].reshape(h, w, 3).copy()
        bare = time.process_time() - t
        t = time.process_time()
        with Catalog(Path(tmp) / "c.duckdb") as cat, cat.session():
            index_rosbag(cat, bag, "/cam", "b", "real", workers=1)
            done = compute_stats(cat, ["b"], workers=1).computed
        pipe = time.process_time() - t
    print(f"{a.frames} frames {w}x{h} ({a.storage}): bare read {bare:.2f} CPU-s, index+stats {pipe:.2f} CPU-s "
          f"({done} measured), ratio {pipe / bare:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
