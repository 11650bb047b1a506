"""Benchmark: what settling the findings costs (resampling), against the diagnoses themselves.

Writes N pairs of 320x240 PNG crops of the real photos under ../shared/data (sim: a 0.2-stop
exposure change and sigma-2 noise, so findings fire and get settled), indexes them and computes
their statistics (not timed), then times `diagnose_with_maps` on the loaded records with
`resamples=0` (the checks once) and with the default `verdicts.N_RESAMPLES`, alternating, and
prints the extra time of the resampling as a ratio of the diagnose time measured in the same run.
Target: the resampling adds at most 2x the diagnose time.

    python bench/bench_verdicts.py            # 1,000 pairs, 3 repeats
    python bench/bench_verdicts.py --heavy    # sim with a tone curve, a 1.1x zoom and noise
    python bench/bench_verdicts.py --n 300 --repeat 1

A report, not a test: exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PERCEPTION_GAP_DATA", REPO.parent / "shared" / "data"))
sys.path.insert(0, str(REPO))
TARGET = 2.0


def write_pairs(root: Path, n: int, heavy: bool = False) -> None:
    import numpy as np
    from PIL import Image

    src = sorted((DATA / "detection_voc100" / "images").glob("*.jpg"))
    if not src:
        raise SystemExit(f"no photos under {DATA}/detection_voc100/images")
    rng = np.random.default_rng(0)
    for side in ("sim", "real"):
        (root / side).mkdir(parents=True, exist_ok=True)
    for i in range(n):
        im = np.asarray(Image.open(src[i % len(src)]).convert("RGB"))
        h, w = im.shape[:2]
        y, x = rng.integers(0, max(1, h - 240)), rng.integers(0, max(1, w - 320))
        a = np.asarray(Image.fromarray(np.ascontiguousarray(im[y:y + 240, x:x + 320])).resize((320, 240)))
        Image.fromarray(a).save(root / "real" / f"f{i:05d}.png")
        if heavy:  # a camera's tone curve, a 1.1x zoom and sensor noise: several findings, field of view among them
            lin = (a.astype(np.float64) / 255) ** 2.2
            c = np.clip(lin ** 0.74, 0, 1) ** (1 / 2.2) * 255
            zoomed = Image.fromarray(c.astype(np.uint8)).crop((15, 11, 305, 229)).resize((320, 240), Image.BICUBIC)
            b = np.clip(np.asarray(zoomed, np.float64) + rng.normal(0, 4, a.shape), 0, 255).astype(np.uint8)
        else:
            b = np.clip(a.astype(np.float64) * 2 ** 0.2 + rng.normal(0, 2, a.shape), 0, 255).astype(np.uint8)
        Image.fromarray(b).save(root / "sim" / f"f{i:05d}.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--heavy", action="store_true", help="sim: tone curve, 1.1x zoom and noise (several findings)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from perception_gap.catalog import Catalog
    from perception_gap.cli import main as cli
    from perception_gap.diagnoses import verdicts
    from perception_gap.diagnoses.checks import diagnose_with_maps
    from perception_gap.workflows.stats import load_set_records

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_pairs(root, args.n, args.heavy)
        db = str(root / "cat.duckdb")
        for side in ("sim", "real"):
            cli(["index", str(root / side), "--set", side, "--domain", side, "--db", db, "--quiet"])
        cli(["stats", "--sim", "sim", "--real", "real", "--db", db, "--quiet", "--json", str(root / "s.json")])
        cat = Catalog(db)
        sim, real = load_set_records(cat, "sim"), load_set_records(cat, "real")
        cat.close()
        once, settled, codes = [], [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            diagnose_with_maps(sim, real, resamples=0)
            once.append(time.perf_counter() - t)
            t = time.perf_counter()
            found, _ = diagnose_with_maps(sim, real)
            settled.append(time.perf_counter() - t)
            codes = [(f.code, f.severity, f.evidence.get("stability")) for f in found]
    d, s = statistics.median(once), statistics.median(settled)
    ratio = (s - d) / d
    print(f"pairs {args.n}{' (heavy)' if args.heavy else ''}, resamples {verdicts.N_RESAMPLES}, repeats {args.repeat}")
    print(f"diagnose once      {d:8.2f} s")
    print(f"diagnose + settle  {s:8.2f} s")
    print(f"resampling / diagnose = {ratio:.2f} (target <= {TARGET:.1f}): {'PASS' if ratio <= TARGET else 'FAIL'}")
    print(f"findings: {codes}")


if __name__ == "__main__":
    main()
