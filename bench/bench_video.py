"""Benchmark: indexing plus statistics of a LeRobot dataset against a bare sequential PyAV decode.

Writes a LeRobot v2.1 dataset (tests/robot_data.py: one H.264 or AV1 mp4 per episode, smooth
moving gradients, `--size` pixels) into a temp folder, then times, in the same run and
alternating:

- the pipeline: `index_lerobot` into a fresh catalog (reads the metadata and Parquet files,
  demuxes every video's packets, hashes every video) plus `compute_stats` (decodes each video
  once, sequentially, in worker processes, and computes every frame's statistics);
- the limit: a bare decode of the same videos, front to back, each frame converted to RGB
  pixels, one video per task in a process pool of the same size and start method. By default
  the conversion is `frame.to_ndarray(format="rgb24")` with FFmpeg's default threads (a
  frame-threaded decoder, a threaded swscale: the bare loop a user writes). `--reference
  rgb24-single` runs the decoder and swscale on one thread each, as the pipeline's workers do
  when they fill the cores: the tightest reference (frame threads cost ~0.3 ms and swscale's
  pool ~0.1-0.5 ms of CPU per 640x480 frame in a full pool, and make the default reference's
  own cost vary by up to 30% from run to run). `--reference image` uses `frame.to_image()` (the
  same pixels through a per-row Python copy: ~0.9 ms more per frame), the reference of the
  figures measured before 2026-12-01.

Prints the medians and the throughput ratio bare / pipeline (target >= 0.8). A report, not a
test: exits 0 whatever the figures.

    python bench/bench_video.py                       # 6 episodes x 100 frames, 640x480, H.264
    python bench/bench_video.py --codec av1 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run from a checkout without installing the package

from bench.bench_stats import Timing

TARGET = 0.8
CAM = "observation.images.top"


def bare_decode(path: str, reference: str = "rgb24") -> int:
    import av

    n = 0
    single = reference == "rgb24-single"
    with av.open(path) as c:
        st = c.streams.video[0]
        st.thread_type = "NONE" if single else "AUTO"
        for frame in c.decode(st):
            if reference == "image":
                frame.to_image()
            elif single:
                frame.to_ndarray(format="rgb24", threads=1)
            else:
                frame.to_ndarray(format="rgb24")
            n += 1
    return n


def time_bare(videos: list[str], workers: int, reference: str) -> tuple[Timing, int]:
    from perception_gap.workflows.stats import _pool_context

    with Timing() as t, ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context()) as pool:
        n = sum(pool.map(bare_decode, videos, [reference] * len(videos)))
    return t, n


def time_pipeline(root: Path, db: Path, workers: int) -> tuple[Timing, int]:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest.lerobot import index_lerobot
    from perception_gap.workflows.stats import compute_stats

    with Timing() as t, Catalog(db) as cat:
        r = index_lerobot(cat, root, CAM, "bench", "real", workers=workers)
        n = compute_stats(cat, ["bench"], workers=workers).computed
    assert r.usable == n, (r.usable, n)
    return t, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--frames", type=int, default=100, help="frames per episode")
    ap.add_argument("--size", default="640x480", help="WxH (LeRobot cameras are mostly 640x480)")
    ap.add_argument("--codec", default="h264", choices=("h264", "av1"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--reference", default="rgb24", choices=("rgb24", "rgb24-single", "image"),
                    help="bare decode's RGB conversion: to_ndarray(format='rgb24') with FFmpeg's default threads "
                         "(frame-threaded decoder, threaded swscale); the same with the decoder and swscale on one "
                         "thread (what the pipeline's workers do, the tightest reference in a full pool); or to_image()")
    ap.add_argument("--dataset", default=None,
                    help="keep the generated dataset in this folder and reuse it when it is already there "
                         "(same --episodes/--frames/--size/--codec), so before/after runs skip writing it")
    args = ap.parse_args(argv)
    from perception_gap.workflows.stats import default_workers
    from tests.robot_data import smooth_frames, write_lerobot

    w, h = (int(v) for v in args.size.lower().split("x"))
    workers = args.workers or default_workers()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.dataset) if args.dataset else Path(tmp) / "ds"
        t0 = time.perf_counter()
        if not (root / "meta" / "info.json").is_file():
            eps = [smooth_frames(args.frames, h=h, w=w, seed=s) for s in range(args.episodes)]
            write_lerobot(root, eps, version="v2.1", codec=args.codec)
            del eps
        videos = sorted(str(p) for p in (root / "videos").rglob("*.mp4"))
        print(f"dataset: {args.episodes} episodes x {args.frames} frames, {w}x{h} {args.codec}, "
              f"{len(videos)} videos, written in {time.perf_counter() - t0:.1f} s; {workers} workers; "
              f"reference: bare decode + {args.reference}")
        bare, pipe, ratios, cpu_ratios = [], [], [], []
        for rep in range(args.repeat):
            tb, nb = time_bare(videos, workers, args.reference)
            tp, n_pipe = time_pipeline(root, Path(tmp) / f"c{rep}.duckdb", workers)
            assert nb == n_pipe == args.episodes * args.frames, (nb, n_pipe)
            bare.append(tb.wall)
            pipe.append(tp.wall)
            ratios.append(tb.wall / tp.wall)
            cpu = ""
            if tb.cpu and tp.cpu:
                cpu_ratios.append(tb.cpu / tp.cpu)
                cpu = f" (CPU {tb.cpu / nb * 1e3:.2f} vs {tp.cpu / n_pipe * 1e3:.2f} ms/frame, ratio {cpu_ratios[-1]:.2f})"
            print(f"  repeat {rep + 1}: bare decode {nb / tb.wall:7.0f} frames/s, index + stats "
                  f"{n_pipe / tp.wall:7.0f} frames/s, ratio {tb.wall / tp.wall:.2f}{cpu}; load {os.getloadavg()[0]:.2f}",
                  flush=True)
        n = args.episodes * args.frames
        ratio = statistics.median(ratios)
        cpu = f"; CPU-time ratio {statistics.median(cpu_ratios):.2f}" if cpu_ratios else ""
        print(f"median: bare decode {n / statistics.median(bare):.0f} frames/s, index + stats "
              f"{n / statistics.median(pipe):.0f} frames/s; ratio {ratio:.2f} (target >= {TARGET}) "
              f"{'PASS' if ratio >= TARGET else 'FAIL'}{cpu}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
