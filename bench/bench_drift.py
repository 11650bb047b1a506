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

A report, not a test: always exits 0.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402


def make_set(root: Path, n: int, seed: int) -> Path:
    from scenes import render, scenes

    root.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i, s in enumerate(scenes(n, h=120, w=160, seed=seed)):
        Image.fromarray(render(s, 1.0, 0.01, rng)).save(root / f"f{i:05d}.png", compress_level=1)
    return root


def timed(argv: list[str]) -> tuple[float, int]:
    import cli

    t0 = time.perf_counter()
    rc = cli.main(argv)
    return time.perf_counter() - t0, rc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=int, default=10_000, help="baseline frames")
    ap.add_argument("--cur", type=int, default=1_000, help="frames per current set")
    ap.add_argument("--encoders", default="pixel", help="encoders for the embedding gates (default pixel)")
    args = ap.parse_args()
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
