"""Benchmark: the cached `embed` stage against the bare model forward, warm reruns, memory.

Generates N 640x480 JPEGs (as bench_stats does), indexes them into a fresh catalog (not
timed), then measures in one run:

1. bare forward: the same encoder, batch size and torch threads on pre-decoded,
   pre-processed tensors (the limit the stage can approach), run before and after the stage;
   the faster of the two is the reference;
2. cold `embed`: `perception_gap.embed.embed_sets` end to end (decode in threads, preprocess,
   forward, bulk DuckDB writes), with the model already loaded so both sides time the same
   work (the one-off model load is printed separately);
3. warm `embed` with nothing new: the whole `perception-gap embed` command in a subprocess
   (imports included) against a cold one of the same frames, since that is what a user reruns;
4. peak RSS of `perception-gap embed` on N and on 2N frames (fresh catalogs, subprocesses).

    python bench/bench_embed.py               # N=512, efficientnet-lite0, batch 32 (~3-4 min)
    python bench/bench_embed.py --n 512 --encoder efficientnet-lite0 --batch-size 16

A report, not a test: exits 0 whatever the figures, printing PASS/FAIL against the targets
(end-to-end >= 0.9x bare forward; warm >= 50x faster than cold; peak memory flat in N).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET_E2E = 0.9
TARGET_WARM = 50.0
_RSS = ("import resource, sys, cli; code = cli.main(sys.argv[1:]); "
        "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(code)")


def _index(folder: Path, db: Path) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest import index_folder

    with Catalog(db) as cat:
        return index_folder(cat, folder, "bench", "real").usable


def bare_forward(encoder: str, paths: list[Path], batch: int) -> float:
    """Images/s of encode() alone on tensors decoded and preprocessed beforehand."""
    import numpy as np
    from PIL import Image

    from perception_gap import encoders

    enc = encoders.get_encoder(encoder, device="cpu").load()
    arrays = [np.asarray(Image.open(p).convert("RGB")) for p in paths]
    tensors = [enc.preprocess(arrays[i : i + batch]) for i in range(0, len(arrays), batch)]
    enc.encode(tensors[0])  # warm-up (allocator, kernels), as the stage's first batch also pays
    t0 = time.perf_counter()
    for t in tensors:
        enc.encode(t)
    return len(paths) / (time.perf_counter() - t0)


def cold_stage(encoder: str, db: Path, batch: int) -> tuple[float, float]:
    """(images/s of embed_sets with the model preloaded, model load seconds)."""
    from perception_gap import embed as stage
    from perception_gap import encoders
    from perception_gap.catalog import Catalog

    enc = encoders.get_encoder(encoder, device="cpu")
    t0 = time.perf_counter()
    enc.load()
    load_s = time.perf_counter() - t0
    orig = stage.load_encoder
    stage.load_encoder = lambda name, **kw: enc  # the same loaded model, as a warm process has
    try:
        with Catalog(db) as cat:
            t0 = time.perf_counter()
            (rep,) = stage.embed_sets(cat, [encoder], ["bench"], device="cpu", batch_size=batch)
            dt = time.perf_counter() - t0
    finally:
        stage.load_encoder = orig
    assert rep.embedded == rep.todo and rep.skipped == 0, rep
    return rep.embedded / dt, load_s


def cli_embed(encoder: str, db: Path, batch: int) -> tuple[float, int]:
    """(seconds, peak RSS KiB) of a whole `perception-gap embed` command in a subprocess."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _RSS, "embed", "--encoder", encoder, "--db", str(db),
                          "--batch-size", str(batch), "--device", "cpu", "-q"],
                         capture_output=True, text=True, cwd=REPO)
    dt = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    rss = int(next(line.split()[1] for line in out.stderr.splitlines() if line.startswith("MAXRSS_KB")))
    return dt, rss


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=512, help="frames (default 512; the warm rerun costs a constant ~0.3 s, the cold run grows with N)")
    ap.add_argument("--encoder", default="efficientnet-lite0")
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args(argv)
    import torch
    from bench_stats import describe_sources, make_frames

    print(f"bench_embed: {args.n} JPEG 640x480 from {describe_sources()}; encoder {args.encoder}, "
          f"batch {args.batch_size}, torch {torch.__version__} with {torch.get_num_threads()} threads", flush=True)
    lines = []
    with tempfile.TemporaryDirectory(prefix="pg_bench_embed_") as tmp:
        tmp_dir = Path(tmp)
        files = make_frames(tmp_dir / "a", args.n, "jpg")
        before = bare_forward(args.encoder, files, args.batch_size)
        db = tmp_dir / "e2e.duckdb"
        _index(tmp_dir / "a", db)
        e2e, load_s = cold_stage(args.encoder, db, args.batch_size)
        after = bare_forward(args.encoder, files, args.batch_size)
        ref = max(before, after)  # the faster of two bare runs around ours: a conservative reference
        ratio = e2e / ref
        print(f"  bare forward {before:.1f} / {after:.1f} images/s (before / after); embed stage {e2e:.1f} images/s "
              f"(model load {load_s:.2f}s, not in the rate)", flush=True)
        lines.append(f"embed end-to-end (N={args.n}): {e2e:.1f} vs bare forward {ref:.1f} images/s -> ratio {ratio:.2f} "
                     f"(target >= {TARGET_E2E}) {'PASS' if ratio >= TARGET_E2E else 'FAIL'}")

        db2 = tmp_dir / "cli.duckdb"
        _index(tmp_dir / "a", db2)
        cold_s, rss_n = cli_embed(args.encoder, db2, args.batch_size)
        warm_s, _ = cli_embed(args.encoder, db2, args.batch_size)
        speed = cold_s / warm_s
        print(f"  CLI cold {cold_s:.2f}s, warm (nothing new) {warm_s:.2f}s", flush=True)
        lines.append(f"embed warm rerun (N={args.n}): {warm_s:.2f}s vs cold {cold_s:.2f}s -> {speed:.0f}x faster "
                     f"(target >= {TARGET_WARM:.0f}x) {'PASS' if speed >= TARGET_WARM else 'FAIL'}")

        db3 = tmp_dir / "big.duckdb"
        _index(tmp_dir / "a", db3)
        from perception_gap.catalog import Catalog
        from perception_gap.ingest import index_folder

        with Catalog(db3) as cat:
            index_folder(cat, tmp_dir / "b", "bench2", "real")
        _, rss_2n = cli_embed(args.encoder, db3, args.batch_size)
        growth = rss_2n / rss_n
        lines.append(f"embed peak RSS: {rss_n / 1024:.0f} MiB for N={args.n}, {rss_2n / 1024:.0f} MiB for N={2 * args.n} "
                     f"-> x{growth:.2f} {'PASS' if growth < 1.15 else 'FAIL'} (flat: < x1.15)")
    print()
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
