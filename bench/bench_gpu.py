"""Benchmark on CUDA: the `embed` stage end to end against a bare forward, per precision.

Generates N 640x480 JPEGs (as bench_stats does), indexes them (not timed), then per precision
(fp32, fp16, and bf16 where the GPU has it):

1. bare forward: `encode` alone on tensors decoded, preprocessed and pinned beforehand, with
   the same batch size and precision (the limit the stage can approach);
2. `embed`: `perception_gap.embed.embed_sets` on CUDA (threaded decode, pinned staging,
   non_blocking copies, prefetching loader, DuckDB writes), the model preloaded;
3. the batch `--batch-size auto` picks (free memory, measured per-frame activations);
4. with `--tolerance`: cosine similarity of each reduced precision's embeddings to fp32 on the
   VOC photos of the shared data (runs on the CPU too, bf16 only there).

    bash bench/bench_gpu.sh                      # N=2048, efficientnet-lite0, batch auto
    python bench/bench_gpu.py --n 512 --encoder efficientnet-lite0 --batch-size 64
    python bench/bench_gpu.py --tolerance        # precision vs fp32, any device

Without CUDA the throughput part prints one SKIP line and exits 0. A report, not a test: exits
0 whatever the figures, printing PASS/FAIL against the target (end-to-end >= 0.9x bare forward).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET_E2E = 0.9
VOC = REPO.parent / "shared" / "data" / "detection_voc100" / "images"


def bare_forward(enc, paths: list[Path], batch: int) -> float:
    """Images/s of `encode` alone on pinned, preprocessed batches (decode not timed)."""
    import numpy as np
    from PIL import Image

    arrays = [np.asarray(Image.open(p).convert("RGB")) for p in paths]
    tensors = [enc.stage(enc.preprocess(arrays[i : i + batch])) for i in range(0, len(arrays), batch)]
    enc.encode(tensors[0])  # warm-up: cuDNN autotuning and allocations, as the stage's first batch
    t0 = time.perf_counter()
    for t in tensors:
        enc.encode(t)  # returns numpy: synchronizes, so the time is the device's
    return len(paths) / (time.perf_counter() - t0)


def stage(enc, db: Path, batch: int | str) -> tuple[float, int]:
    """(images/s of embed_sets with `enc` preloaded, batch size used)."""
    from perception_gap import embed as embed_stage
    from perception_gap.catalog import Catalog

    orig = embed_stage.load_encoder
    embed_stage.load_encoder = lambda name, **kw: enc  # the same loaded model, as a warm process has
    try:
        with Catalog(db) as cat:
            t0 = time.perf_counter()
            (rep,) = embed_stage.embed_sets(cat, [enc.name], ["bench"], device="cuda", batch_size=batch,
                                            precision=enc.precision)
            dt = time.perf_counter() - t0
    finally:
        embed_stage.load_encoder = orig
    assert rep.embedded == rep.todo and rep.skipped == 0, rep
    return rep.embedded / dt, rep.batch_size


def tolerance(encoder: str, device: str, n: int) -> list[str]:
    """Per reduced precision: min / mean cosine similarity to fp32 on n VOC photos."""
    import numpy as np
    from PIL import Image

    from perception_gap import encoders

    files = sorted(VOC.glob("*.jpg"))[:n]
    if not files:
        return [f"tolerance: SKIP: no photos in {VOC}"]
    images = [np.asarray(Image.open(f).convert("RGB")) for f in files]
    t0 = time.process_time()
    ref = encoders.get_encoder(encoder, device=device).embed(images)
    lines = [f"tolerance: fp32 took {time.process_time() - t0:.1f} s CPU time (load included)"]
    for precision in (("fp16", "bf16") if device == "cuda" else ("bf16",)):
        t0 = time.process_time()
        try:
            out = encoders.get_encoder(encoder, device=device, precision=precision).embed(images)
        except encoders.EncoderError as e:
            lines.append(f"tolerance {precision}: SKIP: {e}")
            continue
        cos = (ref * out).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(out, axis=1)
        lines.append(f"tolerance {encoder} {precision} vs fp32 on {len(files)} VOC photos ({device}): "
                     f"cosine min {cos.min():.5f}, mean {cos.mean():.5f}; {time.process_time() - t0:.1f} s CPU time")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2048, help="frames (default 2048)")
    ap.add_argument("--encoder", default="efficientnet-lite0")
    ap.add_argument("--batch-size", default="auto", help="an int, or auto (default)")
    ap.add_argument("--tolerance", action="store_true", help="only compare precisions with fp32 (any device)")
    ap.add_argument("--photos", type=int, default=16, help="VOC photos for --tolerance (default 16)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's)")
    args = ap.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from perception_gap import encoders

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.tolerance:
        print("\n".join(tolerance(args.encoder, device, args.photos)))
        return 0
    if device != "cuda":
        print(f"bench_gpu: SKIP: no CUDA device (torch {torch.__version__} sees none); nothing measured")
        return 0
    from bench_embed import _index
    from bench_stats import make_frames

    batch = args.batch_size if args.batch_size == "auto" else int(args.batch_size)
    print(f"bench_gpu: {args.n} JPEG 640x480, {args.encoder}, batch {batch}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}", flush=True)
    ok = True
    with tempfile.TemporaryDirectory(prefix="pg_bench_gpu_") as tmp:
        files = make_frames(Path(tmp) / "a", args.n, "jpg")
        for precision in ("fp32", "fp16", "bf16"):
            enc = encoders.get_encoder(args.encoder, device="cuda", precision=precision)
            try:
                enc.load()
            except encoders.EncoderError as e:
                print(f"  {precision}: SKIP: {e}")
                continue
            db = Path(tmp) / f"{precision}.duckdb"
            _index(Path(tmp) / "a", db)
            e2e, used = stage(enc, db, batch)
            ref = bare_forward(enc, files, used)
            ratio = e2e / ref
            ok &= ratio >= TARGET_E2E
            print(f"  {precision}: embed {e2e:.0f} vs bare forward {ref:.0f} images/s (batch {used}) -> "
                  f"{ratio:.2f}x (target >= {TARGET_E2E}x) {'PASS' if ratio >= TARGET_E2E else 'FAIL'}", flush=True)
    print(f"bench_gpu: {'PASS' if ok else 'FAIL'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
