"""Benchmark: the stages of `run` (statistics, embedding, comparison) at 1k, 4k (and 16k) frames.

Generates paired JPEG frames (quality 90) per size: episodes of 50 frames of a smooth
coloured background with three moving rectangles; "real" is the same frame with a small
exposure lift, a blur, sensor noise and JPEG at quality 80 (a gap the pixel encoder sees).
Then, in a fresh catalog: `index` both folders, and the three stages of `workflows.run.run_job`
with the pixel encoder, timed one by one: statistics (`stats_job`), embedding (`embed_sets`)
and comparison (`analyze_encoder`: centroid distance, noise floor, paired cosine, domain AUC,
MMD, probes), with the domain AUC also timed alone on the same embeddings. Times are wall
seconds (the pools run 2 workers), and CPU seconds of the process and its pool workers (the
figure to read on a shared machine); "frames" counts one side (sim and real each have N).

    python bench/bench_run.py                    # 1k and 4k frames, 160x120 (~3-4 min)
    python bench/bench_run.py --frames 1000 4000 16000 --size 640x480   # the issue's setting

A report, not a test: exits 0 whatever the figures, printing PASS/FAIL per size against the
target (comparison time < statistics time).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from perception_gap.catalog import Catalog
from perception_gap.embed import embed_sets, load_encoder
from perception_gap.ingest import index_folder
from perception_gap.metrics import domain_auc
from perception_gap.workflows.run import analyze_encoder
from perception_gap.workflows.stats import stats_job

EPISODE = 50


def cpu_seconds() -> float:
    """CPU seconds of this process (all threads) plus its exited children (the forked pool workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def make_frames(root: Path, n: int, size: tuple[int, int], seed: int = 0) -> None:
    """n paired frames under root/sim/epXXX/fXXXX.jpg and root/real/... (see the module doc)."""
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    for e in range(0, n, EPISODE):
        ep = f"ep{e // EPISODE:04d}"
        (root / "sim" / ep).mkdir(parents=True, exist_ok=True)
        (root / "real" / ep).mkdir(parents=True, exist_ok=True)
        base = rng.uniform(40, 200, 3)
        grad = rng.uniform(-0.3, 0.3, (3, 2))
        rects = rng.uniform(0, 1, (3, 4))
        vel = rng.normal(0, 0.01, (3, 2))
        colours = rng.uniform(0, 255, (3, 3))
        for i in range(min(EPISODE, n - e)):
            img = np.stack([base[c] + grad[c, 0] * xx + grad[c, 1] * yy for c in range(3)], axis=-1)
            for r in range(3):
                x0 = int(((rects[r, 0] + vel[r, 0] * i) % 1) * w * 0.8)
                y0 = int(((rects[r, 1] + vel[r, 1] * i) % 1) * h * 0.8)
                img[y0:y0 + int(h * (0.1 + 0.2 * rects[r, 3])), x0:x0 + int(w * (0.1 + 0.2 * rects[r, 2]))] = colours[r]
            sim = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
            sim.save(root / "sim" / ep / f"f{i:04d}.jpg", quality=90)
            real = np.asarray(sim.filter(ImageFilter.GaussianBlur(0.8)), dtype=np.float32) * 1.08 + 4
            real += rng.normal(0, 3.0, real.shape)
            Image.fromarray(np.clip(real, 0, 255).astype(np.uint8)).save(root / "real" / ep / f"f{i:04d}.jpg",
                                                                         quality=80)


def bench(n: int, size: tuple[int, int], workdir: Path) -> dict[str, float]:
    root = workdir / f"frames_{n}"
    t0 = time.perf_counter()
    make_frames(root, n, size)
    t_gen = time.perf_counter() - t0
    times: dict[str, float] = {"generate": t_gen}
    with Catalog(workdir / f"cat_{n}.duckdb") as cat:
        t0 = time.perf_counter()
        index_folder(cat, root / "sim", "sim", "sim", workers=2)
        index_folder(cat, root / "real", "real", "real", workers=2)
        times["index"] = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), cpu_seconds()
        stats_job(cat, "sim", "real", workers=2)
        times["statistics"], times["statistics_cpu"] = time.perf_counter() - t0, cpu_seconds() - c0
        t0, c0 = time.perf_counter(), cpu_seconds()
        embed_sets(cat, ["pixel"], ["sim", "real"], device="cpu", workers=2)
        times["embedding"], times["embedding_cpu"] = time.perf_counter() - t0, cpu_seconds() - c0
        enc = load_encoder("pixel", device="cpu")
        t0, c0 = time.perf_counter(), cpu_seconds()
        entry = analyze_encoder(cat, "sim", "real", enc)
        times["comparison"], times["comparison_cpu"] = time.perf_counter() - t0, cpu_seconds() - c0
        _, emb_s = cat.load_embeddings("sim", enc.fingerprint)
        _, emb_r = cat.load_embeddings("real", enc.fingerprint)
    eps = [i // EPISODE for i in range(n)]
    t0, c0 = time.perf_counter(), cpu_seconds()
    auc = domain_auc(emb_s, emb_r, episodes_sim=eps, episodes_real=eps)
    times["domain_auc"], times["domain_auc_cpu"] = time.perf_counter() - t0, cpu_seconds() - c0
    times["auc"] = auc.value
    times["auc_run"] = entry["domain_auc"]
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, nargs="+", default=[1000, 4000], help="frames per side (default 1000 4000)")
    ap.add_argument("--size", default="160x120", help="frame size WxH (default 160x120; the issue used 640x480)")
    a = ap.parse_args(argv)
    size = tuple(int(v) for v in a.size.lower().split("x"))
    with tempfile.TemporaryDirectory(prefix="bench_run_") as tmp:
        for n in a.frames:
            t = bench(n, size, Path(tmp))
            ok = t["comparison"] < t["statistics"]
            ok_cpu = t["comparison_cpu"] < t["statistics_cpu"]
            print(f"{n:>6} frames/side {a.size}: statistics {t['statistics']:.1f} s, embedding {t['embedding']:.1f} s, "
                  f"comparison {t['comparison']:.1f} s (domain AUC alone {t['domain_auc']:.1f} s, AUC {t['auc']:.4f}) | "
                  f"index {t['index']:.1f} s, generate {t['generate']:.1f} s | comparison < statistics: "
                  f"{'PASS' if ok else 'FAIL'}", flush=True)
            print(f"{n:>6} frames/side, CPU s (process + pool workers): statistics {t['statistics_cpu']:.1f}, "
                  f"embedding {t['embedding_cpu']:.1f}, comparison {t['comparison_cpu']:.1f} (domain AUC alone "
                  f"{t['domain_auc_cpu']:.1f}) | comparison < statistics in CPU time: {'PASS' if ok_cpu else 'FAIL'}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
