"""Benchmark: what the camera stage of `run` costs per encoder, and what it reads on the demo and real data.

1. **Cost.** N pairs (default 256, the stage's cap) of 320 x 240 frames of a robot camera (tests/
   camera_cases.tabletop) as sim, and the same frames through the issue's known camera (+0.5 stop,
   white balance R x1.15 B x0.88, blur 1.2 px, noise 3 levels, JPEG q60 4:2:0) as real. Per
   encoder, in one process: the reference is `embed_sets` of the 2N frames of the sample (decode,
   preprocess, forward, writes; model loaded before timing); then the camera stage
   (`workflows.camera.camera_stage`: sample, decode, fit, counterfactual frames, their embeddings,
   shares) for that encoder alone, so the fit is charged to each encoder in full (a run with several
   encoders fits once). Printed: both times, their ratio (target <= 1.5x), the fitted parameters
   against the truth (target within 20%) and the share of the gap the factors close (target >= 80%).
2. **Shares** on the built-in demo (every encoder with weights) and on the real sim-vs-real data in
   ../shared/data (SIMPLER's visual-matching renders against the real robot frames, unpaired;
   ClearGrasp's synthetic against real frames, unpaired), when present.

    python bench/bench_attribution.py                 # N=256, every encoder with weights (~10 min on 2 cores)
    python bench/bench_attribution.py --n 96 --encoders efficientnet-lite0 --skip-real

A report, not a test: exits 0 whatever the figures, printing PASS/FAIL against the targets.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

TRUTH = {("brightness", "stops"): 0.5, ("white_balance", "r_gain"): 1.15, ("white_balance", "b_gain"): 0.88,
         ("sharpness", "sigma_px"): 1.2, ("sensor_noise", "mid_grey_levels"): 3.0, ("compression", "quality"): 60}


def _pairs(root: Path, n: int) -> Path:
    import camera_cases as C

    import perception_gap as pg
    from perception_gap.cli import main

    sim = [C.tabletop(s, (320, 240)) for s in range(n)]
    real = [C.jpeg(pg.apply_camera_model(x, C.KNOWN, rng=s)) for s, x in enumerate(sim)]
    C.write_pairs(root, sim, real_jpeg=real)
    db = root / "c.duckdb"
    for side in ("sim", "real"):
        assert main(["index", str(root / side), "--set", side, "--domain", side, "--db", str(db), "-q"]) == 0
    return db


def cost(n: int, encoders: list[str]) -> None:
    from perception_gap.catalog import Catalog
    from perception_gap.embed import embed_sets, load_encoder
    from perception_gap.workflows.camera import camera_stage
    from perception_gap.workflows.stats import stats_job

    print(f"== cost: {n} pairs (320 x 240), the stage for one encoder against embedding the sample's {2 * n} frames")
    print(f"{'encoder':<20} {'embed s':>8} {'stage s':>8} {'ratio':>6}  {'all share (95% CI)':<22} fit within 20%")
    for name in encoders:
        with tempfile.TemporaryDirectory() as tmp:
            db = _pairs(Path(tmp), n)
            with Catalog(db) as cat:
                res = stats_job(cat, "sim", "real", workers=2)
                enc = load_encoder(name, device="cpu").load()
                t0 = time.perf_counter()
                embed_sets(cat, [name], ["sim", "real"], device="cpu")
                t_embed = time.perf_counter() - t0
                t0 = time.perf_counter()
                section, attrs = camera_stage(cat, "sim", "real", res["findings"], [enc])
                t_stage = time.perf_counter() - t0
        a = attrs[name]
        by = {f["code"]: f["params"] for f in section["factors"]}
        fit_ok = all(abs(by.get(c, {}).get(k, 0) - v) <= 0.2 * abs(v) for (c, k), v in TRUTH.items())
        ratio = t_stage / t_embed
        share = a["all"]
        print(f"{name:<20} {t_embed:>8.1f} {t_stage:>8.1f} {ratio:>5.2f}x  "
              f"{share['share']:.2f} [{share['ci'][0]:.2f}, {share['ci'][1]:.2f}]{'':<6} {fit_ok}  "
              f"{'PASS' if ratio <= 1.5 and share['share'] >= 0.8 and fit_ok else 'FAIL'}"
              f"  (sample and fit {section['seconds']['sample_and_fit']:.1f} s, m = {a['n_counterfactual']}, "
              f"V = {a['n_variants']})")
    print("fitted (last encoder's run):", json.dumps({f"{c}.{k}": by.get(c, {}).get(k) for c, k in TRUTH}))
    if len(encoders) > 1:  # one run with every encoder: the sample is decoded and fitted once
        with tempfile.TemporaryDirectory() as tmp:
            db = _pairs(Path(tmp), n)
            with Catalog(db) as cat:
                res = stats_job(cat, "sim", "real", workers=2)
                encs = [load_encoder(name, device="cpu").load() for name in encoders]
                t0 = time.perf_counter()
                embed_sets(cat, encoders, ["sim", "real"], device="cpu")
                t_embed = time.perf_counter() - t0
                t0 = time.perf_counter()
                section, _ = camera_stage(cat, "sim", "real", res["findings"], encs)
                t_stage = time.perf_counter() - t0
        print(f"all {len(encoders)} encoders in one run: embed {t_embed:.1f} s, stage {t_stage:.1f} s "
              f"(sample and fit {section['seconds']['sample_and_fit']:.1f} s once): {t_stage / t_embed:.2f}x "
              f"{'PASS' if t_stage / t_embed <= 1.5 else 'FAIL'}")


def _report(title: str, res: dict) -> None:
    cam = res.get("camera_model")
    print(f"== {title}")
    if cam is None:
        print("   no camera stage (fewer than 8 frames a side)")
        return
    print(f"   model ({cam['basis']}, n = {cam['n']}): " +
          "; ".join(f"{f['code']} {f['params']}" for f in cam["factors"]) or "empty")
    for x in cam.get("not_modelled", []):
        print(f"   not modelled: {x['code']}: {x['reason']}")
    for e in res["encoders"]:
        a = e.get("attribution") or {}
        if not a.get("clear_gap"):
            print(f"   {e['name']:<20} {a.get('note') or 'no attribution'} (gap {a.get('gap_above_floor')}, "
                  f"floor {a.get('floor')})")
            continue
        steps = ", ".join(f"{f['code']} {f['step']:+.2f}" for f in a["factors"])
        print(f"   {e['name']:<20} all {a['all']['share']:.2f} [{a['all']['ci'][0]:.2f}, {a['all']['ci'][1]:.2f}]"
              f"  residual {a['residual']['share']:.2f}  steps: {steps}")
    for f in res["findings"]:
        if f["code"] in ("appearance_gap", "camera_model", "unexplained_gap"):
            print(f"   [{f['severity']}] {f['code']}: {f['title']}")
            print(f"      action: {f['action']}")


def demo(encoders: list[str]) -> None:
    import perception_gap as pg

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        res = pg.run_demo(tmp, encoders=encoders)
        print(f"(demo in {time.perf_counter() - t0:.0f} s)")
    _report("demo (96 pairs, the demo's camera: exposure +0.06 stops, WB 1.03/0.97, blur 0.35 px, vignetting, "
            "shot and read noise, JPEG 90)", res)


def _copy(files: list[Path], folder: Path) -> Path:
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy(f, folder / f.name)
    return folder


def real_data(encoders: list[str], shared: Path) -> None:
    """SIMPLER by robot (its renders against the real frames of the same robot, unpaired) and
    ClearGrasp (3 synthetic against 4 real frames: too few for the camera stage, so the model only)."""
    import perception_gap as pg

    sim_dir, real_dir = shared / "simpler" / "sim", shared / "simpler" / "real"
    if not sim_dir.is_dir():
        print(f"== real data: not found under {shared}")
        return
    real_all = sorted(real_dir.rglob("*.png"))
    cases = {"SIMPLER Google robot (visual-matching renders vs real frames, unpaired)":
             (sorted(sim_dir.glob("google_robot_*.png")),
              [p for p in real_all if p.name.startswith(("google", "open_drawer", "move_near"))]),
             "SIMPLER WidowX/Bridge (visual-matching renders vs real frames, unpaired)":
             (sorted(sim_dir.glob("widowx_*.png")), [p for p in real_all if p.name.startswith("bridge")])}
    for title, (s, r) in cases.items():
        with tempfile.TemporaryDirectory() as tmp, pg.open_catalog(Path(tmp) / "c.duckdb") as cat:
            pg.index_folder(cat, _copy(s, Path(tmp) / "sim"), "sim", "sim")
            pg.index_folder(cat, _copy(r, Path(tmp) / "real"), "real", "real")
            print(f"({len(s)} sim, {len(r)} real frames)")
            _report(title, pg.run(cat, "sim", "real", encoders=encoders, workers=2))
    cg = shared / "cleargrasp"
    s = sorted((cg / "synthetic-val").rglob("*rgb*.jpg")) + sorted((cg / "synthetic-val").rglob("*rgb*.png"))
    r = sorted((cg / "real-val" / "d435").glob("*-transparent-rgb-img.jpg"))
    if s and r:
        with tempfile.TemporaryDirectory() as tmp, pg.open_catalog(Path(tmp) / "c.duckdb") as cat:
            pg.index_folder(cat, _copy(s, Path(tmp) / "sim"), "sim", "sim")
            pg.index_folder(cat, _copy(r, Path(tmp) / "real"), "real", "real")
            m = pg.camera_model(cat, "sim", "real", workers=2)
        print(f"== ClearGrasp ({len(s)} synthetic vs {len(r)} real frames, unpaired): camera model only")
        print("   " + ("; ".join(f"{f.code} {f.params}" for f in m.factors) or "empty"))
        for x in m.not_modelled:
            print(f"   not modelled: {x['code']}: {x['reason']}")


def main() -> None:
    from perception_gap.embed import default_encoders

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--encoders", default=None, help="comma-separated (default: every encoder with weights)")
    ap.add_argument("--skip-cost", action="store_true")
    ap.add_argument("--skip-real", action="store_true")
    args = ap.parse_args()
    encoders = args.encoders.split(",") if args.encoders else default_encoders()
    if not args.skip_cost:
        cost(args.n, encoders)
    if not args.skip_real:
        demo(encoders)
        real_data(encoders, REPO.parent / "shared" / "data")


if __name__ == "__main__":
    main()
