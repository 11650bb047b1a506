"""Benchmark: indexing plus statistics of a LeRobot dataset against a bare sequential PyAV decode.

Writes a LeRobot v2.1 dataset (tests/robot_data.py: one H.264 or AV1 mp4 per episode, smooth
moving gradients, `--size` pixels) into a temp folder, then times, in the same run and
alternating:

- the pipeline: `index_lerobot` into a fresh catalog (reads the metadata and Parquet files,
  demuxes every video's packets, hashes every video) plus `compute_stats` (decodes each video
  once, sequentially, in worker processes, and computes every frame's statistics);
- the limit: a bare decode of the same videos, front to back, each frame converted to RGB
  pixels. `--reference` names one or more (comma-separated; each timed in every repeat,
  alternating with the pipeline; default `sequential,rgb24`):
  - `rgb24`: `frame.to_ndarray(format="rgb24")` with FFmpeg's default threads (a
    frame-threaded decoder, a threaded swscale: the bare loop a user writes), one video per
    task in a process pool of the same size and start method as the pipeline's;
  - `sequential`: the same loop in one process, the videos one after another: the issue's
    literal "bare sequential PyAV decode", which uses the cores through FFmpeg's threads only;
  - `rgb24-single`: the pool of `rgb24` with the decoder and swscale on one thread each, as
    the pipeline's workers run when they fill the cores: the tightest reference (frame threads
    cost ~0.3 ms and swscale's pool ~0.1-0.5 ms of CPU per 640x480 frame in a full pool, and
    make the default reference's own cost vary by up to 30% from run to run);
  - `image`: the pool with `frame.to_image()` (the same pixels through a per-row Python copy:
    ~0.9 ms more per frame), the reference of the figures measured before 2026-12-01.

Prints the medians and the throughput ratio bare / pipeline (target >= 0.8). A report, not a
test: exits 0 whatever the figures.

    python bench/bench_video.py                       # 6 episodes x 100 frames, 640x480, H.264
    python bench/bench_video.py --codec av1 --repeat 5
    python bench/bench_video.py --reference rgb24,sequential,rgb24-single
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


REFERENCES = ("rgb24", "sequential", "rgb24-single", "image")


def time_bare(videos: list[str], workers: int, reference: str) -> tuple[Timing, int]:
    from perception_gap.workflows.stats import _pool_context

    if reference == "sequential":  # one process, FFmpeg's threads only
        with Timing() as t:
            n = sum(bare_decode(v, "rgb24") for v in videos)
        return t, n
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
    ap.add_argument("--reference", default="sequential,rgb24",
                    help="bare decode(s) to compare with, comma-separated, from " + ", ".join(REFERENCES)
                         + ": to_ndarray(format='rgb24') with FFmpeg's default threads in the same pool; the same in "
                         "one process, video after video; the pool with the decoder and swscale on one thread (what "
                         "the pipeline's workers do, the tightest reference in a full pool); or to_image()")
    ap.add_argument("--dataset", default=None,
                    help="keep the generated dataset in this folder and reuse it when it is already there "
                         "(same --episodes/--frames/--size/--codec), so before/after runs skip writing it")
    args = ap.parse_args(argv)
    refs = [r.strip() for r in args.reference.split(",") if r.strip()]
    if not refs or any(r not in REFERENCES for r in refs):
        ap.error(f"--reference: expected one or more of {', '.join(REFERENCES)}, got {args.reference!r}")
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
        bare = {r: [] for r in refs}
        ratios = {r: [] for r in refs}
        cpu_ratios = {r: [] for r in refs}
        pipe = []
        n = args.episodes * args.frames
        for rep in range(args.repeat):  # alternate, so drift (neighbours' load, page cache) hits every side
            tp, n_pipe = time_pipeline(root, Path(tmp) / f"c{rep}.duckdb", workers)
            assert n_pipe == n, (n_pipe, n)
            pipe.append(tp.wall)
            line = f"  repeat {rep + 1}: index + stats {n / tp.wall:5.0f} frames/s"
            if tp.cpu:
                line += f" (CPU {tp.cpu / n * 1e3:.2f} ms/frame)"
            for ref in refs:
                tb, nb = time_bare(videos, workers, ref)
                assert nb == n, (ref, nb, n)
                bare[ref].append(tb.wall)
                ratios[ref].append(tb.wall / tp.wall)
                line += f"; {ref} {n / tb.wall:5.0f} frames/s, ratio {tb.wall / tp.wall:.2f}"
                if tb.cpu and tp.cpu:
                    cpu_ratios[ref].append(tb.cpu / tp.cpu)
                    line += f" (CPU {tb.cpu / n * 1e3:.2f} ms/frame, {cpu_ratios[ref][-1]:.2f})"
            print(line + f"; load {os.getloadavg()[0]:.2f}", flush=True)
        med = statistics.median
        for ref in refs:
            ratio = med(ratios[ref])
            cpu = f"; CPU-time ratio {med(cpu_ratios[ref]):.2f}" if cpu_ratios[ref] else ""
            print(f"median ({ref}): bare decode {n / med(bare[ref]):.0f} frames/s, index + stats "
                  f"{n / med(pipe):.0f} frames/s; ratio {ratio:.2f} (range {min(ratios[ref]):.2f}-"
                  f"{max(ratios[ref]):.2f}; target >= {TARGET}) {'PASS' if ratio >= TARGET else 'FAIL'}{cpu}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
