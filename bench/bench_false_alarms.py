"""Benchmark: how often does `stats` raise a bug or gap on clean real data? (the false-alarm budget)

Every split compares a real camera with itself, so every `bug` finding is a false alarm (target:
none) and every `gap` finding needs a reason a reader can check (listed, with an independent test
of whether the two halves really differ where one exists).

Cameras (bench/truth_cases.py `discover_cameras` under `../shared/data` or `PERCEPTION_GAP_DATA`,
plus the virtual moving cameras of bench/moving_cameras.py), by kind:

- `moving`: the RGB-D sequence (a hand-held camera) and the virtual moving cameras: a smooth random
  pan/zoom/translate (`pan0`, `pan1`) or a forward, slowly yawing "corridor" walk (`corridor0`)
  across a large real photo (ClearGrasp 1280x720 scenes, SimplerEnv 640x480 robot views, VOC
  500x375 photos), 96 frames each, rendered as crops resampled to 320x240 (VOC: 160x120); see
  bench/moving_cameras.py for the construction. A static real scene seen by a moving camera:
  consecutive views look alike and the set mean image has structure, but the camera is not fixed.
- `fixed`: SimplerEnv robot views (one mounted camera, many scenes).
- `photos`: VOC photos and the ClearGrasp scenes (one tabletop view per scene, the camera moved
  between scenes).

Splits, each at 4, 8, 16 and 32 frames a side where the camera has the frames:

- `unpaired`: 2n frames drawn at random, split into two disjoint random halves (sim, real).
- `reencode` (paired): n frames against themselves re-encoded losslessly: sim PNG, real the source
  file's own bytes (JPEG, PNG, BMP for virtual cameras, EXR/PNG depth): identical pixels.
- `neighbour` (paired): n frames against their next frame in time (same pair key), on cameras
  that move slowly: the median correlation of consecutive frames (32x32 grey) is >= SLOW_NCC.
  Drawn frames lie at least 3 steps apart, so each sim frame's closest real frame is its own pair:
  consecutive draws would make the real side the sim side shifted by one step, which is exactly
  the off-by-one a `pair_sync` bug names (not a false alarm).

Each split is written, indexed and diagnosed by `pg.stats` (statistics and plumbing diagnoses, no
encoders) through bench/bench_truth.py's `Runner` (clean controls of the `none` code); depth comes
along for unpaired and re-encoded splits of cameras that have it.

Seeds: a split's seed is 1000 * draw + 100 * mode + n (mode 0 unpaired, 1 reencode, 2 neighbour);
draws run from `--seed-offset` over `--seeds` per moving camera and config (default 1) and
`--real-seeds` per real camera and config (default 4); frames are drawn by that seed plus the
camera name's CRC32. The baseline read used draws from 0; read fresh seeds with `--seed-offset 1000`.
The moving cameras' trajectories are fixed (seed 0).

Tune / holdout (`--split`): real cameras as in bench/bench_truth.py (`TUNE_CAMERAS`); a moving
camera is holdout when the CRC32 of its source photo's name is divisible by 3, else tune (all
trajectories over one photo fall in the same part).

    python bench/bench_false_alarms.py --split tune                  # the baseline read
    python bench/bench_false_alarms.py --split holdout --seed-offset 1000 --json fa.json
    python bench/bench_false_alarms.py --quick                       # 4 and 8 frames a side, fewer cameras

A report, not a test: always exits 0 (2 on bad arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "tests", REPO / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

SIDES = (4, 8, 16, 32)
QUICK_SIDES = (4, 8)
MODES = ("unpaired", "reencode", "neighbour")
KINDS = ("moving", "fixed", "photos")
SLOW_NCC = 0.9
MOVING_FRAMES = 96  # 32 a side unpaired, and 32 neighbour pairs 3 steps apart
SPREAD_CODES = ("brightness", "white_balance", "sensor_noise", "depth_dropout")  # scene_spread_clear reads these


@dataclass(frozen=True)
class BenchCamera:
    """A camera of this bench: a truth_cases `Camera`, its kind and part, and how it was made."""

    camera: object  # truth_cases.Camera
    kind: str
    part: str
    slow: bool
    neighbour_ncc: float
    origin: str  # `real`, or `<variant> over <source photo>`


@dataclass
class SplitResult:
    """One clean split and every finding on it (the JSON rows of `--json`)."""

    case: str
    camera: str
    kind: str
    part: str
    mode: str
    n: int
    seed: int
    n_sim: int
    n_real: int
    findings: list[dict]
    seconds: float


def kind_of(name: str) -> str:
    """The kind of a real camera, from its name (module docstring)."""
    if name.startswith(("moving_", "rgbd_")):
        return "moving"
    return "fixed" if name.startswith("simpler_") else "photos"


def moving_part(source_name: str) -> str:
    return "holdout" if zlib.crc32(source_name.encode()) % 3 == 0 else "tune"


def _grey(path: Path, size: int = 32) -> np.ndarray:
    from PIL import Image
    from truth_cases import load_rgb

    g = np.asarray(Image.fromarray(load_rgb(path)).convert("L").resize((size, size), Image.BOX), np.float64)
    return g - g.mean()


def neighbour_ncc(paths: tuple[Path, ...]) -> float:
    """Median correlation of consecutive frames (32x32 grey, area filter): how slowly the camera moves."""
    g = [_grey(p) for p in paths]
    r = [float((a * b).sum() / max(np.sqrt((a * a).sum() * (b * b).sum()), 1e-12)) for a, b in zip(g, g[1:])]
    return float(np.median(r)) if r else 0.0


def cameras(data: Path, folder: Path, *, quick: bool, names: list[str]) -> tuple[list[BenchCamera], list[str]]:
    """The real cameras and the virtual moving ones (rendered into `folder`), filtered by name prefixes."""
    import moving_cameras as M
    from bench_truth import _split_of
    from truth_cases import Camera, discover_cameras

    def wanted(name: str) -> bool:
        return not names or any(name.startswith(p) for p in names)

    real, notes = discover_cameras(data)
    out = []
    for cam in real:
        if wanted(cam.name):
            ncc = neighbour_ncc(cam.rgb_paths)
            out.append(BenchCamera(cam, kind_of(cam.name), _split_of(cam.name), ncc >= SLOW_NCC, round(ncc, 4), "real"))
    pans, corridors = (1, 1) if quick else (2, 1)
    sources = [s for s in M.pick_sources(real)
               if any(wanted(f"moving_{s.name}_{v}{k}") for v, c in (("pan", pans), ("corridor", corridors))
                      for k in range(c))]
    for name, src, variant, paths in M.build(sources, folder, n_frames=MOVING_FRAMES, pans=pans,
                                              corridors=corridors, names=wanted):
        cam = Camera(name, f"moving/{src.name}", tuple(paths))
        ncc = neighbour_ncc(cam.rgb_paths)
        out.append(BenchCamera(cam, "moving", moving_part(src.name), ncc >= SLOW_NCC, round(ncc, 4),
                               f"{variant} over {src.path.name} at {src.size[0]}x{src.size[1]}"))
    return out, notes


def spaced_indices(n_frames: int, n: int, seed: int) -> list[int]:
    """`n` sorted frame indices, at least 3 apart, each with a next frame: uniform over such sets.

    n values drawn from range(n_frames - 2n + 1), sorted, the k-th shifted by 2k.
    """
    free = n_frames - 1 - 2 * (n - 1)
    picks = np.sort(np.random.default_rng(seed).choice(free, size=n, replace=False))
    return [int(v) + 2 * k for k, v in enumerate(picks)]


def _neighbour(cam) -> object:
    """A transform: the real side's frames replaced by each one's next frame in time (keys kept)."""
    from truth_cases import load_rgb

    nxt = dict(zip(cam.rgb_paths, cam.rgb_paths[1:]))

    def t(s, r, m, rng):
        src = tuple(nxt[p] for p in r.sources)
        return s, replace(r, rgb=tuple(load_rgb(p) for p in src), sources=src)
    return t


def plan(cams: list[BenchCamera], sides: tuple[int, ...], args) -> list[tuple[BenchCamera, str, int, int]]:
    """Every (camera, mode, frames a side, seed) to run, in a fixed order."""
    out = []
    for bc in cams:
        n_frames = len(bc.camera.rgb_paths)
        draws = args.seeds if bc.origin != "real" else args.real_seeds
        for mi, mode in enumerate(MODES):
            for n in sides:
                need = {"unpaired": 2 * n, "reencode": n, "neighbour": 3 * n - 1}[mode]
                if n_frames < need or (mode == "neighbour" and not bc.slow):
                    continue
                for d in range(args.seed_offset, args.seed_offset + draws):
                    out.append((bc, mode, n, 1000 * d + 100 * mi + n))
    return out


def run_split(runner, bc: BenchCamera, mode: str, n: int, seed: int) -> SplitResult:
    from truth_cases import FAULTS, split_indices

    cam = bc.camera
    control = {f.family: f for f in FAULTS}
    n_frames = len(cam.rgb_paths)
    s = seed + zlib.crc32(cam.name.encode())
    if mode == "unpaired":
        fault, basis, idx = control["control/split"], "unpaired", split_indices(n_frames, 2 * n, s)
    elif mode == "reencode":
        fault, basis, idx = control["control/reencode"], "paired", split_indices(n_frames, n, s)
    else:
        fault = replace(control["control/reencode"], transform=_neighbour(cam), needs="rgb")
        basis, idx = "paired", (spaced_indices(n_frames, n, s), [], [])
    fault = replace(fault, family=f"clean/{mode}", label=lambda m: f"n{n}")
    r = runner.run(cam, seed, fault, 1.0, basis, idx)
    return SplitResult(r.case, cam.name, bc.kind, bc.part, mode, n, seed, r.n_sim, r.n_real, r.findings, r.seconds)


def halves_differ(bc: BenchCamera, res: SplitResult, code: str) -> str:
    """Whether an unpaired split's halves differ clearly by bench/truth_cases.py `scene_spread_clear`
    (an independent test of brightness, white balance, noise and depth dropout): `yes`, `no` or `-`."""
    from truth_cases import clean_side, scene_spread_clear, split_indices

    if res.mode != "unpaired" or code not in SPREAD_CODES:
        return "-"
    n_frames = len(bc.camera.rgb_paths)
    _, a, b = split_indices(n_frames, 2 * res.n, res.seed + zlib.crc32(bc.camera.name.encode()))
    depth = code == "depth_dropout"
    sim, real = clean_side(bc.camera, a, "a", depth=depth), clean_side(bc.camera, b, "b", depth=depth)
    return "yes" if scene_spread_clear(code, sim, real) else "no"


# --- report ----------------------------------------------------------------------------------

def _cell(k: int, n: int) -> str:
    return f"{k}/{n} {100 * k / n:4.1f}%" if n else "-"


def _fired(rows: list[SplitResult], severity: str, code: str | None = None) -> int:
    """Splits with at least one finding of this severity (and code)."""
    return sum(any(f["severity"] == severity and (code is None or f["code"] == code) for f in r.findings)
               for r in rows)


def tables(rows: list[SplitResult]) -> list[str]:
    """Per kind, per mode and per frames a side: splits and splits with a bug / gap; then per check code."""
    lines = [f"{'':<22}{'splits':>7}{'with a bug':>16}{'with a gap':>16}{'with an error':>15}"]

    def line(label: str, sub: list[SplitResult]) -> str:
        return (f"{label:<22}{len(sub):>7}{_cell(_fired(sub, 'bug'), len(sub)):>16}"
                f"{_cell(_fired(sub, 'gap'), len(sub)):>16}{_fired(sub, 'error'):>15}")

    for kind in KINDS:
        lines.append(line(f"kind {kind}", [r for r in rows if r.kind == kind]))
    for mode in MODES:
        lines.append(line(f"mode {mode}", [r for r in rows if r.mode == mode]))
    for n in SIDES:
        sub = [r for r in rows if r.n == n]
        if sub:
            lines.append(line(f"{n} frames a side", sub))
    lines.append(line("all", rows))
    codes = sorted({f["code"] for r in rows for f in r.findings if f["severity"] in ("bug", "gap")})
    by_kind = {k: [r for r in rows if r.kind == k] for k in KINDS}
    lines += ["", "PER CHECK: splits where the code fired as bug / gap, per camera kind (splits of that kind)",
              f"{'code':<22}" + "".join(f"{f'{k} ({len(by_kind[k])})':>18}" for k in KINDS)
              + f"{f'all ({len(rows)})':>18}{'bug rate':>10}"]
    for code in codes:
        cells = [f"{_fired(sub, 'bug', code)} / {_fired(sub, 'gap', code)}" for sub in (*by_kind.values(), rows)]
        rate = 100 * _fired(rows, "bug", code) / len(rows) if rows else 0.0
        lines.append(f"{code:<22}" + "".join(f"{c:>18}" for c in cells) + f"{rate:>9.1f}%")
    if not codes:
        lines.append("(no bug or gap finding)")
    return lines


def report(rows: list[SplitResult], cams: list[BenchCamera], notes: list[str], args, seconds: float,
           cpu_seconds: float) -> str:
    lines = [f"data: {args.data}" + (f" ({'; '.join(notes)})" if notes else "")]
    counts = Counter(r.camera for r in rows)
    for bc in cams:
        c = bc.camera
        lines.append(f"  {c.name:<42} {bc.kind:<7} {bc.part:<8} {len(c.rgb_paths):>3} frames"
                     f"{' + depth' if c.depth_paths else '':<8} ncc {bc.neighbour_ncc:5.2f}"
                     f"{' slow' if bc.slow else '     '} {counts[c.name]:>3} splits  [{bc.origin}]")
    lines += ["", (f"{len(rows)} splits in {seconds:.0f} s, {cpu_seconds:.0f} CPU s (split {args.split}, seeds {args.seeds} a moving camera, "
                   f"{args.real_seeds} a real one, offset {args.seed_offset}, sides "
                   f"{','.join(map(str, args.sides))})"), ""]
    lines += tables(rows)
    by_cam = {bc.camera.name: bc for bc in cams}
    for sev in ("bug", "gap", "error"):
        hits = [(r, f) for r in rows for f in r.findings if f["severity"] == sev]
        lines += ["", f"{sev.upper()} FINDINGS: {len(hits)}"
                  + (" (halves differ: bench/truth_cases.py scene_spread_clear on unpaired halves)" if sev == "gap" else "")]
        for r, f in hits:
            extra = f"  halves differ: {halves_differ(by_cam[r.camera], r, f['code'])}" if sev == "gap" else ""
            lines.append(f"  {r.camera:<40} {r.mode:<9} n={r.n:<3} seed {r.seed:<6} {f['code']}: {f['title']}{extra}")
    return "\n".join(lines)


def headline(rows: list[SplitResult]) -> str:
    bugs = sum(f["severity"] == "bug" for r in rows for f in r.findings)
    gaps = sum(f["severity"] == "gap" for r in rows for f in r.findings)
    errors = _fired(rows, "error")
    ok = bugs == 0 and errors == 0
    return (f"false alarms: {len(rows)} clean splits, {bugs} bug findings in {_fired(rows, 'bug')} splits, "
            f"{gaps} gap findings in {_fired(rows, 'gap')} splits, {errors} errors -> "
            f"{'PASS' if ok else 'FAIL'} (target 0 bugs)")


# --- main ------------------------------------------------------------------------------------

def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 and 8 frames a side, one pan and one corridor a photo")
    ap.add_argument("--split", choices=("tune", "holdout", "all"), default="all")
    ap.add_argument("--seeds", type=int, default=1, help="draws per moving camera and config (default 1)")
    ap.add_argument("--real-seeds", type=int, default=None, help="draws per real camera and config (default 4; quick 2)")
    ap.add_argument("--seed-offset", type=int, default=0, help="first draw (fresh seeds: 1000)")
    ap.add_argument("--camera", action="append", default=[], help="only cameras starting with this (repeatable)")
    ap.add_argument("--mode", action="append", choices=MODES, default=[], help="only these split modes (repeatable)")
    ap.add_argument("--sides", type=int, nargs="+", default=None, help=f"frames a side (default {SIDES})")
    ap.add_argument("--max-splits", type=int, default=None, help="stop after this many splits (spread over cameras)")
    ap.add_argument("--json", type=Path, default=None, help="write every split and its findings here")
    args = ap.parse_args(argv)
    args.sides = tuple(args.sides or (QUICK_SIDES if args.quick else SIDES))
    args.real_seeds = args.real_seeds if args.real_seeds is not None else (2 if args.quick else 4)
    if args.seeds < 0 or args.real_seeds < 0 or any(n < 2 for n in args.sides):
        ap.error("--seeds and --real-seeds must be >= 0 and --sides >= 2")
    args.data = Path(os.environ.get("PERCEPTION_GAP_DATA", REPO.parent / "shared" / "data"))
    return args


def _spread(todo: list, limit: int | None) -> list:
    """At most `limit` items, taken round-robin over cameras so each keeps some."""
    if limit is None or len(todo) <= limit:
        return todo
    by_cam: dict[str, list] = {}
    for t in todo:
        by_cam.setdefault(t[0].camera.name, []).append(t)
    out, k = [], 0
    while len(out) < limit:
        out += [v[k] for v in by_cam.values() if k < len(v)][: limit - len(out)]
        k += 1
    return out


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    import logging

    logging.disable(logging.WARNING)  # skipped-frame warnings etc. are not this report's business
    if not args.data.is_dir():
        print(f"false alarms: SKIP, no data folder at {args.data} (set PERCEPTION_GAP_DATA)")
        return 0
    from bench_truth import Runner

    import perception_gap as pg

    t0, c0 = time.perf_counter(), time.process_time()
    rows: list[SplitResult] = []
    with tempfile.TemporaryDirectory(prefix="false_alarms_") as tmp:
        cams, notes = cameras(args.data, Path(tmp) / "moving", quick=args.quick, names=args.camera)
        cams = [bc for bc in cams if args.split in ("all", bc.part)]
        todo = [t for t in plan(cams, args.sides, args) if not args.mode or t[1] in args.mode]
        todo = _spread(todo, args.max_splits)
        with pg.open_catalog(Path(tmp) / "false_alarms.duckdb") as cat, cat.session():
            runner = Runner(cat, Path(tmp))
            for i, (bc, mode, n, seed) in enumerate(todo):
                rows.append(run_split(runner, bc, mode, n, seed))
                if sys.stderr.isatty():
                    print(f"\r{i + 1}/{len(todo)} {rows[-1].case[:90]:<90}", end="", file=sys.stderr, flush=True)
        if sys.stderr.isatty():
            print("\r" + " " * 100 + "\r", end="", file=sys.stderr)
        seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        text = report(rows, cams, notes, args, seconds, cpu_seconds)  # the gap listing rereads frames: inside the temp folder
    print(text)
    line = headline(rows)
    if args.json:
        args.json.write_text(json.dumps({
            "config": {"quick": args.quick, "split": args.split, "seeds": args.seeds, "real_seeds": args.real_seeds,
                       "seed_offset": args.seed_offset, "sides": args.sides, "modes": args.mode or list(MODES),
                       "max_splits": args.max_splits, "data": str(args.data), "slow_ncc": SLOW_NCC,
                       "moving_frames": MOVING_FRAMES, "seconds": round(seconds, 1),
                       "cpu_seconds": round(cpu_seconds, 1)},
            "cameras": [{"name": bc.camera.name, "kind": bc.kind, "part": bc.part, "frames": len(bc.camera.rgb_paths),
                         "depth": bc.camera.depth_paths is not None, "neighbour_ncc": bc.neighbour_ncc,
                         "slow": bc.slow, "origin": bc.origin} for bc in cams],
            "headline": line, "splits": [asdict(r) for r in rows],
        }, indent=1, default=str), encoding="utf-8")
    print()
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
