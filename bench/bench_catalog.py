"""Benchmark: cataloguing rate (hash + header probe, no pixel decode) of `index_folder`.

Generates N 640x480 JPEGs (quality 90) from the real photos under ../shared/data (see
bench_stats.py) into a temp folder, then times, per repeat:

- cold: `perception_gap.ingest.index_folder` into a new, empty catalog (folder scan, reading,
  hashing, header probes and DuckDB writes; opening/creating the DuckDB file is not timed);
- warm: the same call again on that catalog with nothing changed (stat only, no reads);
- partial: after touching every 10th file (new mtime), the same call again (re-reads those);
- reference: a bare serial loop of `os.stat` + read + BLAKE2b over the same files.

Repeats alternate the reference and the index calls; figures are medians over repeats.

With `--png-n` (default 200) the cold rate is also measured on 640x480 PNGs.

The files were just written, so they are in the page cache for every measurement alike (the
numbers are CPU-bound rates, not disk rates).

    python bench/bench_catalog.py             # N=2000 JPEG (+200 PNG), 3 repeats (~40 s)
    python bench/bench_catalog.py --n 5000 --repeat 5

A report, not a test: always exits 0, prints PASS/FAIL against the target (>= 2000 frames/s).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stats import REPO, describe_sources, make_frames, start_forkserver  # noqa: E402

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TARGET = 2000.0


def bare_hash(paths: list[str]) -> float:
    """Seconds for a serial stat + read + BLAKE2b-128 loop over paths."""
    t0 = time.perf_counter()
    for p in paths:
        os.stat(p)
        with open(p, "rb") as f:
            hashlib.blake2b(f.read(), digest_size=16).hexdigest()
    return time.perf_counter() - t0


def index_once(folder: Path, db: Path, paths: list[str]) -> tuple[float, float, float, int]:
    """(cold, warm, partial seconds, frames) for index_folder into a new catalog at db."""
    from perception_gap.catalog import Catalog
    from perception_gap.ingest import index_folder

    with Catalog(db) as cat:
        t0 = time.perf_counter()
        rep = index_folder(cat, folder, "bench", "real")
        cold = time.perf_counter() - t0
        assert rep.new == rep.listed == rep.usable, (rep.new, rep.listed, rep.usable, rep.skipped[:3])
        t0 = time.perf_counter()
        rep2 = index_folder(cat, folder, "bench", "real")
        warm = time.perf_counter() - t0
        assert rep2.unchanged == rep2.listed and rep2.new == rep2.changed == 0, rep2
        touched = paths[::10]
        for p in touched:
            st = os.stat(p)
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        t0 = time.perf_counter()
        rep3 = index_folder(cat, folder, "bench", "real")
        partial = time.perf_counter() - t0
        assert rep3.changed == len(touched) and rep3.new == 0, rep3
    db.unlink()
    return cold, warm, partial, rep.listed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="JPEG frames to generate (default 2000)")
    ap.add_argument("--png-n", type=int, default=200, help="PNG frames for a cold-index figure, 0 to skip (default 200)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repeats; medians reported (default 3)")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"bench_catalog: {args.n} JPEG frames 640x480 from {describe_sources()}; {os.cpu_count()} CPUs, "
          f"load average {load:.2f}, Python {sys.version.split()[0]}", flush=True)
    if load > 0.5 * (os.cpu_count() or 1):
        print(f"warning: the machine is busy (load average {load:.2f}); rates will be low and noisy", flush=True)
    start_forkserver()
    with tempfile.TemporaryDirectory(prefix="pg_bench_catalog_") as tmp:
        folder = Path(tmp) / "jpg"
        t0 = time.perf_counter()
        files = make_frames(folder, args.n, "jpg")
        size = sum(p.stat().st_size for p in files) / len(files) / 1024
        print(f"generated {len(files)} JPEG files ({size:.0f} KiB avg) in {time.perf_counter() - t0:.1f}s", flush=True)
        import perception_gap.catalog  # noqa: F401  (import cost not timed)
        import perception_gap.ingest  # noqa: F401

        paths = [str(p) for p in files]
        refs, colds, warms, partials = [], [], [], []
        for r in range(args.repeat):
            refs.append(bare_hash(paths))
            cold, warm, partial, n = index_once(folder, Path(tmp) / f"cat{r}.duckdb", paths)
            assert n == len(paths)
            colds.append(cold)
            warms.append(warm)
            partials.append(partial)
            print(f"  repeat {r + 1}: bare stat+read+hash {n / refs[-1]:7.0f} files/s, index cold {n / cold:7.0f} "
                  f"frames/s, warm re-index {n / warm:7.0f} frames/s, 10%-touched re-index "
                  f"{n / partial:7.0f} frames/s", flush=True)
        png_line = None
        med = statistics.median
        if args.png_n > 0:
            png_folder = Path(tmp) / "png"
            png_files = make_frames(png_folder, args.png_n, "png")
            png_paths = [str(p) for p in png_files]
            png_ref, png_cold = [], []
            for r in range(args.repeat):
                png_ref.append(bare_hash(png_paths))
                png_cold.append(index_once(png_folder, Path(tmp) / f"png{r}.duckdb", png_paths)[0])
            m = len(png_paths)
            png_line = (f"catalog cold index, PNG (N={m}): {m / med(png_cold):.0f} frames/s vs bare stat+read+hash "
                        f"{m / med(png_ref):.0f} files/s -> ratio {med(png_ref) / med(png_cold):.2f} (informative)")
    n = len(paths)
    med = statistics.median
    ref, cold, warm, part = n / med(refs), n / med(colds), n / med(warms), n / med(partials)
    verdict = "PASS" if cold >= TARGET else "FAIL"
    print()
    if png_line:
        print(png_line)
    print(f"catalog warm re-index (N={n}, nothing changed): {warm:.0f} frames/s")
    print(f"catalog re-index with 10% touched (N={n}, {len(paths[::10])} re-read): {part:.0f} listed frames/s")
    print(f"catalog cold index (N={n}): {cold:.0f} frames/s vs bare stat+read+hash {ref:.0f} files/s "
          f"-> ratio {cold / ref:.2f}; target >= {TARGET:.0f} frames/s {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
