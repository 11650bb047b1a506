"""Benchmark: a recurring drift check spends its time on the new frames only.

Generates a baseline of N_BASE frames and two current sets of N_CUR frames each (160x120 PNGs of
generated tabletop scenes through a noisy camera, see tests/scenes.py), then times through the CLI:

- cold: a fresh catalog; `index` baseline, `index` current #1, `drift --baseline --current #1`
  (every frame decoded, hashed, its statistics computed and embedded);
- warm: the same catalog afterwards; `drift --current-dir` on current #2 (index + check): the
  baseline's statistics and embeddings come from the cache, only the N_CUR new frames are read;
- compare-only: `drift` on current #2 again (everything cached: the cost of the gates themselves).

The reference is the cold run in the same process: the ratio warm / cold is the figure (ideal:
roughly N_CUR / (N_BASE + N_CUR) plus the fixed cost of the comparison).

    python bench/bench_drift.py                       # 10,000 + 1,000 frames, pixel encoder (~3 min)
    python bench/bench_drift.py --base 2000 --cur 200 --encoders pixel,efficientnet-lite0

With `--baseline N` it measures the check against a large stored baseline instead: N baseline
frames go straight into the catalog (frames, statistics and pixel-encoder embedding rows, bulk
INSERTs through DuckDB/Arrow, copied from --templates rendered frames measured by the real
pipeline, with per-row jitter of the exposure, sharpness and embedding values), then one
`drift --current-dir` of --cur freshly rendered frames runs in a child process, timed with its
peak RSS; a second identical check shows the cached baseline sample at work.

    python bench/bench_drift.py --baseline 1000000 --cur 10000 --workdir /dev/shm/drift1m  # < 60 s, < 4 GB peak RSS

`--workdir` keeps the catalog and frames there (`/dev/shm`: RAM, so the disk is out of the figures),
`--reuse` reruns the checks on the kept baseline, `--profile` runs them under py-spy.

A report, not a test: always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import numpy as np
from PIL import Image


def make_set(root: Path, n: int, seed: int) -> Path:
    from scenes import render, scenes

    root.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i, s in enumerate(scenes(n, h=120, w=160, seed=seed)):
        Image.fromarray(render(s, 1.0, 0.01, rng)).save(root / f"f{i:05d}.png", compress_level=1)
    return root


def make_jittered_set(root: Path, n: int, seed: int, pool: int, noise_seed: int = 0) -> Path:
    """`n` distinct frames from `pool` rendered ones (as `make_set`), each with its own jitter:
    a global gain of 0.99-1.01 and one +-1 level on ~3% of its pixels. Rendering (a float64 power
    a pixel) is half the cost of a frame; this keeps the PNG write, and every frame still has its
    own content hash, so the check decodes, measures and embeds each one."""
    from scenes import render, scenes

    root.mkdir(parents=True)
    rng = np.random.default_rng(noise_seed)
    base = [render(s, 1.0, 0.01, rng).astype(np.float32) for s in scenes(min(pool, n), h=120, w=160, seed=seed)]
    flips = [(rng.random(base[0].shape) < 0.03) * rng.choice(np.float32([-1, 1]), base[0].shape) for _ in range(64)]
    for i in range(n):
        v = base[i % len(base)] * rng.uniform(0.99, 1.01) + flips[i % 64]
        Image.fromarray(np.clip(v, 0, 255).round().astype(np.uint8)).save(root / f"f{i:05d}.png", compress_level=1)
    return root


def timed(argv: list[str]) -> tuple[float, int]:
    from perception_gap import cli

    t0 = time.perf_counter()
    rc = cli.main(argv)
    return time.perf_counter() - t0, rc


def synthetic_baseline(db: str, templates: Path, n: int, seed: int = 0, chunk: int = 100_000) -> float:
    """Index and measure the template frames (set `tmpl`), then write `n` baseline frames (set
    `base`, 1,000 frames an episode) whose statistics and pixel embeddings are the templates'
    with jitter; returns the seconds the bulk writes took."""
    import pyarrow as pa

    from perception_gap import cli
    from perception_gap.catalog import Catalog
    from perception_gap.embed import embed_sets, load_encoder
    from perception_gap.workflows.stats import compute_stats

    cli.main(["index", str(templates), "--set", "tmpl", "--domain", "real", "--db", db, "-q"])
    with Catalog(db) as cat, cat.session():
        compute_stats(cat, ["tmpl"], workers=2)
        embed_sets(cat, ["pixel"], ["tmpl"], device="cpu")
        fp = load_encoder("pixel", device="cpu").fingerprint
        meta, emb = cat.load_embeddings("tmpl", fp)
        t0, c0 = time.perf_counter(), time.process_time()
        cat.ensure_set("base", "real", source="synthetic")
        con = cat.con
        con.execute("CREATE TEMP TABLE t AS SELECT row_number() OVER (ORDER BY rgb_path) - 1 AS j, * FROM frames "
                    "WHERE set_name = 'tmpl' ORDER BY rgb_path")
        k = con.execute("SELECT count(*) FROM t").fetchone()[0]
        con.execute("SELECT setseed(0.5)")
        con.execute(
            "INSERT INTO frames (set_name, rgb_path, pair_key, episode, step, content_hash, file_size, width, height, "
            "format, mode, dtype, channels, status) SELECT 'base', '/synthetic/base/' || i || '.png', 'b' || i, "
            "'ep' || (i // 1000), i % 1000, 'syn' || i, t.file_size, t.width, t.height, t.format, t.mode, t.dtype, "
            f"t.channels, 'ok' FROM range({n}) r(i) JOIN t ON t.j = i % {k}")
        con.execute(
            "INSERT INTO frame_stats SELECT 'syn' || i AS content_hash, s.* EXCLUDE (content_hash) "
            "REPLACE (list_transform(s.lin_mean, lambda x: x * (0.97 + 0.06 * random())) AS lin_mean, "
            "s.sharpness * (0.9 + 0.2 * random()) AS sharpness, s.noise_sigma * (0.95 + 0.1 * random()) AS noise_sigma) "
            f"FROM range({n}) r(i) JOIN t ON t.j = i % {k} JOIN frame_stats s ON s.content_hash = t.content_hash")
        order = {m["rgb_path"]: i for i, m in enumerate(meta)}
        rows = [order[p] for (p,) in con.execute("SELECT rgb_path FROM t ORDER BY j").fetchall()]
        emb = emb[rows]
        scale = 0.25 * emb.std(axis=0, keepdims=True)  # per-frame variation a quarter of the templates' spread
        t_rows = time.perf_counter() - t0
        rng = np.random.default_rng(seed)
        dim = emb.shape[1]
        # jitter rows from a pool of 4,099 (prime) noise vectors: template i % k gets noise i % 4,099,
        # distinct for 2 million frames, without drawing n x dim normals
        noise = scale * rng.standard_normal((4099, dim), dtype=np.float32)
        for lo in range(0, n, chunk):
            # one Arrow table a chunk, one plain INSERT (the hashes are new by construction: no
            # conflict check against the rows already there, unlike write_embeddings' INSERT OR IGNORE)
            idx = np.arange(lo, min(n, lo + chunk))
            vec = emb[idx % k]
            vec += noise[idx % len(noise)]
            batch = pa.table({  # noqa: F841 (DuckDB reads it by name)
                "content_hash": pa.array([f"syn{i}" for i in idx], pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vec.ravel()), dim)})
            con.execute("INSERT INTO embeddings (content_hash, encoder, fingerprint, dim, vector) "
                        "SELECT content_hash, 'pixel', ?, ?, vector::FLOAT[] FROM batch", [fp, dim])
        con.execute("DROP TABLE t")
        con.execute("CHECKPOINT")
        print(f"  frames + statistics rows {t_rows:.1f} s, embeddings {time.perf_counter() - t0 - t_rows:.1f} s "
              f"(wall; CPU of the whole write {time.process_time() - c0:.1f} s)")
        return time.perf_counter() - t0


# Runs the timed drift children. Linux carries the RSS high-water mark across fork and exec, so a
# child forked by this process after it built a 10^6-frame baseline in memory (~6 GiB) reported
# that as its own peak. The launcher is started first, while this process is small, and forks
# every child: their peak RSS is their own (and their pool workers').
_LAUNCHER = r"""
import json, os, subprocess, sys, tempfile, time
for line in sys.stdin:
    argv = json.loads(line)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, text=True)
        _, status, ru = os.wait4(proc.pid, 0)  # its own usage, with its pool workers'
        err.seek(0)
        print(json.dumps([time.perf_counter() - t0, ru.ru_utime + ru.ru_stime, ru.ru_maxrss,
                          os.waitstatus_to_exitcode(status), err.read()[-4000:]]), flush=True)
"""


class _Launcher:
    def __init__(self) -> None:
        self._proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)

    def run(self, argv: list[str]) -> tuple[float, float, float, int, str]:
        """(wall s, CPU s, peak RSS GiB, exit code, stderr tail) of one drift child."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(argv) + "\n")
        self._proc.stdin.flush()
        wall, cpu, maxrss_kb, rc, err = json.loads(self._proc.stdout.readline())
        return wall, cpu, maxrss_kb / 2**20, rc, err

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        self._proc.wait()


def large_baseline(args: argparse.Namespace) -> None:
    launcher = _Launcher()  # before anything grows this process (see _LAUNCHER)
    with contextlib.ExitStack() as stack:
        stack.callback(launcher.close)
        if args.workdir:
            tmp = Path(args.workdir)
            tmp.mkdir(parents=True, exist_ok=True)
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        print(f"workdir {tmp} ({'RAM-backed' if str(tmp).startswith('/dev/shm') else 'disk'}); "
              f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
        built = tmp / f"base{args.baseline}.duckdb"  # the built baseline, kept for --reuse
        cur = tmp / f"cur{args.cur}"
        t0 = time.perf_counter()
        if not (args.reuse and cur.is_dir()):
            shutil.rmtree(cur, ignore_errors=True)
            # new captures of the templates' scenes (seed 1): another noise draw, another jitter
            make_jittered_set(cur, args.cur, 1, args.templates, noise_seed=2)
            print(f"generated {args.cur} current frames (160x120 PNG, {args.templates} rendered, jittered) in "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
        if not (args.reuse and built.exists()):
            shutil.rmtree(tmp / "tmpl", ignore_errors=True)
            built.unlink(missing_ok=True)
            templates = make_set(tmp / "tmpl", args.templates, 1)
            t_w = synthetic_baseline(str(built), templates, args.baseline)
            print(f"baseline: {args.baseline:,} frames + statistics + pixel embeddings written in {t_w:.1f} s "
                  f"(catalog {built.stat().st_size / 2**30:.2f} GiB)", flush=True)
        db = tmp / "c.duckdb"
        shutil.copyfile(built, db)  # every run starts from the same baseline-only catalog
        for run in ("first", "again"):
            out = tmp / f"o_{run}"
            shutil.rmtree(out, ignore_errors=True)
            argv = [sys.executable, str(REPO / "cli.py"), "drift", "--baseline", "base", "--current", "cur",
                    "--current-dir", str(cur), "--out", str(out), "--encoders", "pixel", "--db", str(db), "-q"]
            if args.profile:
                argv = ["py-spy", "record", "--subprocesses", "-r", "50", "-f", "raw",
                        "-o", str(tmp / f"profile_{run}.txt"), "--", *argv]
            load = os.getloadavg()[0]
            wall, cpu, rss, rc, stderr = launcher.run(argv)
            res = json.loads((out / "results.json").read_text()) if rc in (0, 1) else {}
            sample = res.get("drift", {}).get("baseline_sample")
            print(f"drift {run:5s} ({'index + ' if run == 'first' else ''}check of {args.cur:,} frames): wall {wall:6.1f} s, "
                  f"CPU {cpu:6.1f} s, peak RSS {rss:.2f} GiB (the drift process "
                  f"and its workers), load {load:.1f}, exit {rc}; baseline sample {sample}", flush=True)
            if rc not in (0, 1):
                print(stderr[-2000:])
            failed = [g["name"] for g in res.get("drift", {}).get("gates", []) if g["status"] == "failed"]
            print(f"  gates failed: {failed or 'none'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=int, default=10_000, help="baseline frames")
    ap.add_argument("--cur", type=int, default=1_000, help="frames per current set")
    ap.add_argument("--encoders", default="pixel", help="encoders for the embedding gates (default pixel)")
    ap.add_argument("--baseline", type=int, default=None,
                    help="a synthetic baseline of this many frames written straight into the catalog (see above)")
    ap.add_argument("--templates", type=int, default=500,
                    help="rendered frames the synthetic baseline copies (and the current frames jitter)")
    ap.add_argument("--workdir", default=None,
                    help="folder for the catalog and frames, kept afterwards (e.g. /dev/shm/drift: RAM-backed, "
                         "takes the disk out of the measurement); default a temporary folder")
    ap.add_argument("--reuse", action="store_true",
                    help="with --workdir: reuse the built baseline and current frames found there")
    ap.add_argument("--profile", action="store_true", help="run each drift child under py-spy (raw profile in workdir)")
    args = ap.parse_args()
    if args.baseline is not None:
        large_baseline(args)
        return
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        t0 = time.perf_counter()
        base = make_set(tmp / "base", args.base, 1)
        cur1 = make_set(tmp / "cur1", args.cur, 2)
        cur2 = make_set(tmp / "cur2", args.cur, 3)
        print(f"generated {args.base} + 2 x {args.cur} frames (160x120 PNG) in {time.perf_counter() - t0:.1f} s")
        db = str(tmp / "c.duckdb")
        common = ["--db", db, "-q"]
        enc = ["--encoders", args.encoders]
        t_ib, _ = timed(["index", str(base), "--set", "base", "--domain", "real", *common])
        t_ic, _ = timed(["index", str(cur1), "--set", "cur1", "--domain", "real", *common])
        t_d, rc1 = timed(["drift", "--baseline", "base", "--current", "cur1", "--out", str(tmp / "o1"), *enc, *common])
        cold = t_ib + t_ic + t_d
        warm, rc2 = timed(["drift", "--baseline", "base", "--current", "cur2", "--current-dir", str(cur2),
                           "--out", str(tmp / "o2"), *enc, *common])
        again, rc3 = timed(["drift", "--baseline", "base", "--current", "cur2", "--out", str(tmp / "o3"), *enc, *common])
    print(f"encoders: {args.encoders}; exit codes {rc1}/{rc2}/{rc3} (1 = a gate failed, expected 0 here)")
    print(f"cold  (index {args.base}+{args.cur}, drift): {cold:7.1f} s  (index {t_ib:.1f} + {t_ic:.1f}, drift {t_d:.1f})")
    print(f"warm  (index + drift of {args.cur} new frames): {warm:7.1f} s")
    print(f"cached (drift again, nothing new):  {again:7.1f} s  = the comparison itself")
    ideal = args.cur / (args.base + args.cur)
    print(f"warm / cold = {warm / cold:.3f}   (share of new frames: {ideal:.3f}; "
          f"(warm - cached) / cold = {(warm - again) / cold:.3f})")


if __name__ == "__main__":
    main()
