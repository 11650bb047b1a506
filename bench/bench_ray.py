"""The Ray Data engine vs the local engine on the same frames: statistics and embeddings.

Generates N 640x480 JPEG frames (the real photos of `../shared/data`, as `bench_stats.py`),
indexes them into a fresh catalog per configuration, then times the statistics pass
(`compute_stats`) and the embedding pass (`embed_sets`) of:
  local, 1 worker | local, 2 workers | ray, 1 worker | ray, 2 workers
on one local Ray instance (started once, outside the timings). The local embedding pass runs its
model in this process (decoding on 2 threads); the ray one in 1 or 2 encoder actors. Also times
the driver's shard merges, the one serial part of the ray engine, and then merges alone at
scale (`--merge-frames`, default 20,000 statistics rows: the measured rows repeated under new
content hashes) under the old policy (32-frame shards, 16 a statement) and the engine's
(TASK_FRAMES-frame shards, MERGE_FRAMES frames a statement), same run, fresh catalogs.
Same-run ratios are printed; on a loaded machine read them, not the absolute figures. Prints a
final REPORT line.

    python bench/bench_ray.py                       # 400 frames, pixel encoder, ~2-4 min loaded
    python bench/bench_ray.py --n 1000 --encoder efficientnet-lite0
    python bench/bench_ray.py --n 100 --merge-frames 100000   # mostly the merge model
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_stats import REPO, describe_sources, make_frames  # noqa: E402

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from perception_gap.catalog import Catalog  # noqa: E402
from perception_gap.embed import embed_sets  # noqa: E402
from perception_gap.ingest import index_folder  # noqa: E402
from perception_gap.workflows.stats import compute_stats  # noqa: E402


def one(frames: Path, db: Path, encoder: str, workers: int, engine: object | None) -> dict[str, float]:
    """Seconds of the statistics and embedding passes (and of shard merges) on a fresh catalog."""
    with Catalog(db) as cat:
        index_folder(cat, frames, "s", "sim")
        merge = [0.0]
        if engine is not None:
            engine.catalog, engine.folder = cat, db.with_name(db.name + ".shards")
            raw = engine._merge

            def timed(files: list[str]) -> int:
                t = time.perf_counter()
                try:
                    return raw(files)
                finally:
                    merge[0] += time.perf_counter() - t

            engine._merge = timed
            engine.workers = workers
        t0 = time.perf_counter()
        compute_stats(cat, ["s"], workers=workers, runner=engine.stats_runner if engine else None)
        t1 = time.perf_counter()
        (rep,) = embed_sets(cat, [encoder], ["s"], device="cpu", batch_size=32, workers=2,
                            runner=engine.embed_runner if engine else None)
        t2 = time.perf_counter()
        assert rep.embedded == len(list(frames.iterdir())), rep
    return {"stats": t1 - t0, "embed": t2 - t1, "merge": merge[0]}


def merge_policies(src: Path, tmp: Path, n: int) -> dict[str, float]:
    """Driver seconds to merge `n` statistics rows (those of `src` repeated under new hashes)
    written as shards, per policy: (rows per shard, shards per merge statement)."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from perception_gap.engines.ray_engine import MERGE_EVERY, MERGE_FRAMES, TASK_FRAMES

    con = duckdb.connect(str(src), read_only=True)
    rows = con.sql("SELECT * FROM frame_stats").to_arrow_table()
    con.close()
    big = pa.concat_tables([rows] * -(-n // rows.num_rows)).slice(0, n)
    big = big.set_column(big.schema.get_field_index("content_hash"), "content_hash",
                         pa.array([f"{i:064x}" for i in range(n)]))
    out = {}
    for name, per, every in (("old", 32, 16), ("new", TASK_FRAMES, min(MERGE_EVERY, MERGE_FRAMES // TASK_FRAMES))):
        folder = tmp / f"merge_{name}"
        folder.mkdir()
        files = []
        for i in range(0, n, per):
            files.append(str(folder / f"frame_stats-{i:09d}.parquet"))
            pq.write_table(big.slice(i, per), files[-1])
        with Catalog(tmp / f"merge_{name}.duckdb") as cat:
            t = time.perf_counter()
            added = sum(cat.merge_shards(files[i : i + every]) for i in range(0, len(files), every))
            out[name] = time.perf_counter() - t
        assert added == n, (added, n)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="frames (default 400)")
    ap.add_argument("--encoder", default="pixel", help="encoder (default pixel)")
    ap.add_argument("--merge-frames", type=int, default=20_000, help="rows for the merge policies (default 20,000)")
    args = ap.parse_args()
    import ray

    from perception_gap.engines.ray_engine import RayEngine

    print(f"{args.n} JPEG 640x480 frames from {describe_sources()}; encoder {args.encoder}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        frames = tmp_dir / "frames"
        make_frames(frames, args.n, "jpg")
        t = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        print(f"ray.init: {time.perf_counter() - t:.1f}s (not timed below)", flush=True)
        results = {}
        with Catalog(tmp_dir / "warm.duckdb") as cat, RayEngine(cat, workers=2) as eng:
            one(frames, tmp_dir / "warmup.duckdb", args.encoder, 2, eng)  # Ray's worker processes start once
            one(frames, tmp_dir / "warmup_local.duckdb", args.encoder, 2, None)  # imports (torch) once here
            for name, workers, engine in (("local 1", 1, None), ("local 2", 2, None),
                                          ("ray 1", 1, eng), ("ray 2", 2, eng)):
                results[name] = one(frames, tmp_dir / f"{name.replace(' ', '_')}.duckdb", args.encoder, workers, engine)
                r = results[name]
                print(f"{name:<8} statistics {r['stats']:6.2f}s ({args.n / r['stats']:6.1f} frames/s)  "
                      f"embed {r['embed']:6.2f}s ({args.n / r['embed']:6.1f} frames/s)  shard merges {r['merge']:.2f}s",
                      flush=True)
        ray.shutdown()
        merges = merge_policies(tmp_dir / "ray_2.duckdb", tmp_dir, args.merge_frames)
    lo1, lo2, r1, r2 = (results[k] for k in ("local 1", "local 2", "ray 1", "ray 2"))
    print(f"scaling 1 -> 2 workers: local statistics {lo1['stats'] / lo2['stats']:.2f}x, "
          f"ray statistics {r1['stats'] / r2['stats']:.2f}x, ray embed {r1['embed'] / r2['embed']:.2f}x")
    print(f"ray / local at 2 workers (time): statistics {r2['stats'] / lo2['stats']:.2f}x, "
          f"embed {r2['embed'] / lo2['embed']:.2f}x")
    per = {k: 1000 * 2 * (v["stats"] + v["embed"]) / args.n for k, v in (("local", lo2), ("ray", r2))}
    merge_ms = 1000 * r2["merge"] / args.n
    old, new = (1000 * merges[k] / args.merge_frames for k in ("old", "new"))
    print(f"merges alone, {args.merge_frames} statistics rows: 32-frame shards x 16 a statement {old:.3f} ms/frame, "
          f"the engine's shards and batches {new:.3f} ms/frame ({old / new:.1f}x less)")
    print(f"REPORT per frame, 2 workers (core-ms): local {per['local']:.1f}, ray {per['ray']:.1f}; "
          f"driver merge {merge_ms:.2f} ms/frame in the run (serial), {new:.3f} ms/frame at {args.merge_frames} rows")


if __name__ == "__main__":
    main()
