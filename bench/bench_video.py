"""Benchmark: indexing plus statistics of a LeRobot dataset against a bare sequential PyAV decode.

Writes a LeRobot v2.1 dataset (tests/robot_data.py: one H.264 or AV1 mp4 per episode, smooth
moving gradients, `--size` pixels) into a temp folder, then times, in the same run and
alternating:

- the pipeline: `index_lerobot` into a fresh catalog (reads the metadata and Parquet files,
  demuxes every video's packets, hashes every video) plus `compute_stats` (decodes each video
  once, sequentially, in worker processes, and computes every frame's statistics);
- the limit: a bare decode of the same videos, front to back, each frame converted to RGB
  (`frame.to_image()`, as the pipeline does), one video per task in a process pool of the same
  size and start method.

Prints the medians and the throughput ratio bare / pipeline (target >= 0.8). A report, not a
test: exits 0 whatever the figures.

    python bench/bench_video.py                       # 6 episodes x 100 frames, 640x480, H.264
    python bench/bench_video.py --codec av1 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run from a checkout without installing the package

TARGET = 0.8
CAM = "observation.images.top"


def bare_decode(path: str) -> int:
    import av

    n = 0
    with av.open(path) as c:
        st = c.streams.video[0]
        st.thread_type = "AUTO"
        for frame in c.decode(st):
            frame.to_image()
            n += 1
    return n


def time_bare(videos: list[str], workers: int) -> tuple[float, int]:
    from perception_gap.workflows.stats import _pool_context

    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
        n = sum(pool.map(bare_decode, videos))
    return time.perf_counter() - t0, n


def time_pipeline(root: Path, db: Path, workers: int) -> tuple[float, int]:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest.lerobot import index_lerobot
    from perception_gap.workflows.stats import compute_stats

    t0 = time.perf_counter()
    with Catalog(db) as cat:
        r = index_lerobot(cat, root, CAM, "bench", "real", workers=workers)
        n = compute_stats(cat, ["bench"], workers=workers).computed
    elapsed = time.perf_counter() - t0
    assert r.usable == n, (r.usable, n)
    return elapsed, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--frames", type=int, default=100, help="frames per episode")
    ap.add_argument("--size", default="640x480", help="WxH (LeRobot cameras are mostly 640x480)")
    ap.add_argument("--codec", default="h264", choices=("h264", "av1"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args(argv)
    from perception_gap.workflows.stats import default_workers
    from tests.robot_data import smooth_frames, write_lerobot

    w, h = (int(v) for v in args.size.lower().split("x"))
    workers = args.workers or default_workers()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ds"
        t0 = time.perf_counter()
        eps = [smooth_frames(args.frames, h=h, w=w, seed=s) for s in range(args.episodes)]
        write_lerobot(root, eps, version="v2.1", codec=args.codec)
        del eps
        videos = sorted(str(p) for p in (root / "videos").rglob("*.mp4"))
        print(f"dataset: {args.episodes} episodes x {args.frames} frames, {w}x{h} {args.codec}, "
              f"{len(videos)} videos, written in {time.perf_counter() - t0:.1f} s; {workers} workers")
        bare, pipe, ratios = [], [], []
        for rep in range(args.repeat):
            tb, nb = time_bare(videos, workers)
            tp, n_pipe = time_pipeline(root, Path(tmp) / f"c{rep}.duckdb", workers)
            assert nb == n_pipe == args.episodes * args.frames, (nb, n_pipe)
            bare.append(tb)
            pipe.append(tp)
            ratios.append(tb / tp)
            print(f"  repeat {rep + 1}: bare decode {nb / tb:7.0f} frames/s, index + stats {n_pipe / tp:7.0f} frames/s, "
                  f"ratio {tb / tp:.2f}")
        n = args.episodes * args.frames
        ratio = statistics.median(ratios)
        print(f"median: bare decode {n / statistics.median(bare):.0f} frames/s, index + stats "
              f"{n / statistics.median(pipe):.0f} frames/s; ratio {ratio:.2f} (target >= {TARGET}) "
              f"{'PASS' if ratio >= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
