"""The hot inner paths written out for speed, each timed against the general form it replaces in
the same run, on the same inputs, with the largest difference between their results.

- `diagnoses.common.rank_p` (numpy ranks, the exact null by a Gaussian binomial) vs scipy's
  `mannwhitneyu(method="auto")`, and `common.median` vs `np.median`, on the sizes the distribution
  bar sees (8 to 48 values a side);
- the field-of-view search (`spatial._best_zoom`: one sparse warp and the overlap's sums) vs the
  dense form it replaced (`thumbs.zoom_stack` + `spatial._ncc_one`, centred copies);
- the drift gates' bootstrap medians for every replicate at once (`WeightedMedian.replicates`) vs one
  call per replicate;
- a catalog open: ATTACH + DETACH of the file on one open in-memory database (what each catalog
  operation pays now, `catalog/host.py`) vs `duckdb.connect` + close (what it paid before).

A report, not a test: prints one line per path and exits 0.

    python bench/bench_fast_paths.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The fastest of `repeat` timed calls, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _line(name: str, ours: float, ref: float, diff: float, unit: str = "s") -> None:
    print(f"{name:<34} ours {ours:9.4f} {unit}   reference {ref:9.4f} {unit}   "
          f"speed-up {ref / max(ours, 1e-12):6.1f}x   max |difference| {diff:.2e}")


def rank_test(repeat: int) -> None:
    from scipy.stats import mannwhitneyu

    from perception_gap.diagnoses.common import median, rank_p

    rng = np.random.default_rng(0)
    cases = [(rng.normal(0, 1, n1), rng.normal(0.5, 1, n2)) for n1, n2 in ((8, 8), (8, 40), (16, 16), (48, 48))] * 50
    ours, got = _best(lambda: [rank_p(a, b) for a, b in cases], repeat)
    ref, want = _best(lambda: [float(mannwhitneyu(a, b, alternative="two-sided").pvalue) for a, b in cases], repeat)
    _line(f"Mann-Whitney p ({len(cases)} pairs of sets)", ours, ref, float(np.max(np.abs(np.subtract(got, want)))))
    ours, got = _best(lambda: [median(a) for a, _ in cases], repeat)
    ref, want = _best(lambda: [float(np.median(a)) for a, _ in cases], repeat)
    _line(f"median ({len(cases)} sets)", ours, ref, float(np.max(np.abs(np.subtract(got, want)))))


def fov_search(repeat: int) -> None:
    from perception_gap.diagnoses import spatial
    from perception_gap.diagnoses.thumbs import THUMB, zoom_stack

    rng = np.random.default_rng(1)
    ts, tr = rng.random((16, THUMB, THUMB)), rng.random((16, THUMB, THUMB))
    zz = np.repeat(spatial.FOV_ZOOMS, len(spatial.FOV_SHIFTS))
    sh = np.tile(spatial.FOV_SHIFTS, (len(spatial.FOV_ZOOMS), 1))

    def dense() -> np.ndarray:
        return np.stack([spatial._ncc_one(s, zoom_stack(r, zz, sh)) for s, r in zip(ts, tr)])

    def sparse() -> np.ndarray:
        op, inside = spatial.zoom_operator(zz, sh)
        return np.stack([spatial._ncc_inside(s.ravel(), (op @ r.ravel()).reshape(inside.shape), inside)
                         for s, r in zip(ts, tr)])

    spatial._best_zoom(ts[:1], tr[:1])  # the warp's taps and operator built once, outside the timings
    ours, got = _best(sparse, repeat)
    ref, want = _best(dense, repeat)
    _line("field of view, 16 pairs x 549 warps", ours, ref, float(np.max(np.abs(got - want))))


def replicate_medians(repeat: int) -> None:
    from perception_gap.metrics.resampling import WeightedMedian

    rng = np.random.default_rng(2)
    values = rng.normal(0, 1, (60, 3))
    counts = rng.multinomial(60, np.full(60, 1 / 60), size=1000)
    wm = WeightedMedian(values)
    ours, got = _best(lambda: wm.replicates(counts), repeat)
    ref, want = _best(lambda: np.stack([wm(c) for c in counts]), repeat)
    _line("bootstrap medians, 1000 x 60 x 3", ours, ref, float(np.max(np.abs(got - want))))


def catalog_open(repeat: int) -> None:
    import duckdb

    cfg = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "c.duckdb")
        con = duckdb.connect(db, config=cfg)
        con.execute("CREATE TABLE frames AS SELECT range AS id FROM range(10000)")
        con.close()
        n = 40

        def connect() -> int:
            total = 0
            for _ in range(n):
                c = duckdb.connect(db, config=cfg)
                total += c.execute("SELECT count(*) FROM frames").fetchone()[0]
                c.close()
            return total

        host = duckdb.connect(":memory:", config=cfg)

        def attach() -> int:
            total = 0
            for _ in range(n):
                host.execute(f"ATTACH '{db}' AS cat")
                total += host.execute("SELECT count(*) FROM cat.frames").fetchone()[0]
                host.execute("DETACH cat")
            return total

        ours, got = _best(attach, repeat)
        ref, want = _best(connect, repeat)
        print(f"{'catalog open + query + close':<34} attach on one open database {1000 * ours / n:6.2f} ms   "
              f"duckdb.connect {1000 * ref / n:6.2f} ms   speed-up {ref / ours:5.1f}x   (same counts: {got == want})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per path; the fastest is reported")
    args = ap.parse_args()
    for bench in (rank_test, fov_search, replicate_medians, catalog_open):
        bench(max(1, args.repeat))


if __name__ == "__main__":
    main()
