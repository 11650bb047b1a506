"""Benchmark: every comparison metric and the probes on 100k x 1280 float32 embeddings per side.

Synthetic embeddings with a known structure: a 64-D Gaussian latent z mixed into 1280-D
(emb = z A + 0.3 noise), 1,000 episodes of 100 frames per side. Real frames are paired with
sim frames (z_real = 0.9 z_sim + 0.44 e, so each pair shares most of its latent) and shifted by
`--shift` standard deviations along latent axis 0: a known mean shift. Targets for the probes
are a linear map of z plus noise (what a policy would need).

Prints the wall time and the process's peak RSS after each metric (resource.getrusage; the
peak includes the 2 x 512 MB of inputs), then one line: PASS/FAIL against peak RSS < 2 GB.
A report, not a test: exits 0 whatever the figures. Runs in about 1-2 minutes on 2 cores.
On a shared 2-core machine, OpenBLAS's 2 threads slow small matrix products down several
times whenever other processes hold a core; `--blas-threads 1` shows the figures without that.

    python bench/bench_compare.py
    python bench/bench_compare.py --n 20000 --shift 0.5
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # run from a checkout without installing the package

from perception_gap import metrics, probes  # noqa: E402

LIMIT_BYTES = 2_000_000_000
LATENT = 64
CHUNK = 8192


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def make_sets(n: int, d: int, shift: float, seed: int):
    rng = np.random.default_rng(seed)
    mix = (rng.normal(size=(LATENT, d)) / np.sqrt(LATENT)).astype(np.float32)
    w = rng.normal(size=(LATENT, 7))
    sim = np.empty((n, d), dtype=np.float32)
    real = np.empty((n, d), dtype=np.float32)
    y_sim = np.empty((n, 7))
    y_real = np.empty((n, 7))
    for s in range(0, n, CHUNK):
        m = min(CHUNK, n - s)
        z_sim = rng.standard_normal((m, LATENT), dtype=np.float32)
        z_real = 0.9 * z_sim + 0.44 * rng.standard_normal((m, LATENT), dtype=np.float32)
        z_real[:, 0] += shift
        sim[s:s + m] = z_sim @ mix + 0.3 * rng.standard_normal((m, d), dtype=np.float32)
        real[s:s + m] = z_real @ mix + 0.3 * rng.standard_normal((m, d), dtype=np.float32)
        y_sim[s:s + m] = z_sim @ w + 0.1 * rng.standard_normal((m, 7))
        y_real[s:s + m] = (z_real - np.r_[shift, np.zeros(LATENT - 1)].astype(np.float32)) @ w \
            + 0.1 * rng.standard_normal((m, 7))
    episodes = np.arange(n) // 100
    return sim, real, y_sim, y_real, episodes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="frames per side (default 100000)")
    ap.add_argument("--d", type=int, default=1280, help="embedding width (default 1280)")
    ap.add_argument("--shift", type=float, default=1.0, help="real mean shift in latent standard deviations")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-probe", action="store_true", help="skip the probes")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="limit BLAS threads (threadpoolctl); default: the library's own setting")
    args = ap.parse_args(argv)
    if args.blas_threads is not None:
        from threadpoolctl import threadpool_limits
        threadpool_limits(limits=args.blas_threads, user_api="blas")
    from threadpoolctl import threadpool_info
    blas = ", ".join(f"{i['internal_api']} x{i['num_threads']}" for i in threadpool_info() if i["user_api"] == "blas")

    t0 = time.perf_counter()
    sim, real, y_sim, y_real, episodes = make_sets(args.n, args.d, args.shift, args.seed)
    print(f"data: {args.n} x {args.d} float32 per side ({sim.nbytes / 1e6:.0f} MB each), "
          f"{episodes.max() + 1} episodes per side, shift {args.shift} sd; "
          f"{time.perf_counter() - t0:.1f} s, peak RSS {peak_rss() / 1e6:.0f} MB; BLAS: {blas}; "
          f"load average {os.getloadavg()[0]:.2f}")
    pairs = np.c_[np.arange(args.n), np.arange(args.n)]
    eps = dict(episodes_sim=episodes, episodes_real=episodes)

    runs = [
        ("centroid_distance", lambda: metrics.centroid_distance(sim, real)),
        ("noise_floor", lambda: metrics.noise_floor(real, episodes=episodes)),
        ("paired_cosine", lambda: metrics.paired_cosine(sim, real, pairs)),
        ("domain_auc", lambda: metrics.domain_auc(sim, real, **eps)),
        ("mmd", lambda: metrics.mmd(sim, real, **eps)),
        ("centroid_distance_ci", lambda: metrics.centroid_distance_ci(sim, real, **eps)),
        ("bootstrap_ci(mean diff)", lambda: metrics.bootstrap_ci(
            lambda s, r: float(np.linalg.norm(s.mean(axis=0) - r.mean(axis=0))), sim, real, **eps)),
    ]
    if not args.no_probe:
        runs.append(("probe", lambda: probes.probe(sim, y_sim, real, y_real, **eps)))

    total = 0.0
    for name, fn in runs:
        t = time.perf_counter()
        res = fn()
        dt = time.perf_counter() - t
        total += dt
        shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.to_dict().items()
                 if k not in ("detail",)}
        print(f"{name:24s} {dt:7.2f} s  peak RSS {peak_rss() / 1e6:6.0f} MB  {shown}")

    peak = peak_rss()
    verdict = "PASS" if peak < LIMIT_BYTES else "FAIL"
    print(f"compare (N={args.n} x {args.d} per side, BLAS {blas}): metrics {total:.1f} s, peak RSS {peak / 1e6:.0f} MB "
          f"(target < {LIMIT_BYTES / 1e9:.0f} GB) {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
