"""Peers side by side: cleanvision's image-property pass vs our statistics, and
alibi-detect's MMD drift test vs our MMD, in one run. A report, not a test: exits 0.

1. Image properties. 640x480 JPEG variants of the real photos (as `bench_stats.py` makes them)
   plus generated faulty frames of known kind (dark, light, blurry, low information, odd aspect,
   odd size). Timed: cleanvision `Imagelab.find_issues` on those six issue types (its own pool,
   same workers) vs our `index_folder` + `compute_stats` (same workers). Compared: Spearman
   correlation of each cleanvision score with the matching statistic of ours, and which frames
   each flags: cleanvision's own `is_*_issue` flags, ours the same number of most extreme frames
   by our statistic (we have no per-frame thresholds); both scored against the injected faults.
2. MMD. The same float64 embeddings (two Gaussian clouds, a small mean shift) through
   `perception_gap.metrics.twosample.mmd` and alibi-detect's `MMDDriftTorch` with OUR bandwidth
   (alibi's default median heuristic differs: sigma = sqrt(median(d^2) / 2) over the reference
   set only, ours sigma = median(d) over the pooled sample). Both use k = exp(-d^2 / (2 sigma^2))
   and the unbiased MMD^2 estimate; p-values: alibi mean(perm >= obs), ours (exceed + 1) / (P + 1).

alibi-detect 0.13 pins numpy<2 and Pillow<11 (and imports transformers, numba, opencv at package
import), so it cannot live in this venv. Install it beside it without dependencies
(`pip install --no-deps --target DIR alibi-detect==0.13.0`) and pass `--alibi-site DIR`: the
script loads only `alibi_detect.cd.pytorch.mmd` and what it imports, skipping the package
`__init__` files (which import every detector). The MMD code that runs is alibi-detect's own.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_stats import describe_sources, make_frames

ISSUES = ("dark", "light", "blurry", "low_information", "odd_aspect_ratio", "odd_size")


# -- frames -------------------------------------------------------------------------------------

def make_faulty(src_dir: Path, out_dir: Path, per_kind: int, seed: int = 0) -> dict[str, str]:
    """Write `per_kind` faulty frames of each kind, derived from the clean ones; returns {name: kind}."""
    from PIL import Image, ImageEnhance, ImageFilter

    rng = np.random.default_rng(seed)
    clean = sorted(src_dir.glob("*.jpg"))
    kinds: dict[str, str] = {}
    for kind in ISSUES:
        for j in range(per_kind):
            img = Image.open(clean[int(rng.integers(len(clean)))]).convert("RGB")
            if kind == "dark":
                img = ImageEnhance.Brightness(img).enhance(float(rng.uniform(0.08, 0.2)))
            elif kind == "light":
                img = Image.blend(img, Image.new("RGB", img.size, (255, 255, 255)), float(rng.uniform(0.96, 0.99)))
            elif kind == "blurry":
                img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(4, 8))))
            elif kind == "low_information":
                level = rng.integers(40, 215, 3)
                arr = np.broadcast_to(level, (480, 640, 3)) + rng.normal(0, 1.0, (480, 640, 3))
                img = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
            elif kind == "odd_aspect_ratio":
                img = img.resize((640, 120))
            else:
                img = img.resize((48, 36))
            name = f"fault_{kind}_{j:03d}.jpg"
            img.save(out_dir / name, "JPEG", quality=90)
            kinds[name] = kind
    return kinds


# -- image properties ---------------------------------------------------------------------------

def run_cleanvision(folder: Path, workers: int) -> tuple[float, object]:
    from cleanvision import Imagelab

    t0 = time.perf_counter()
    with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):  # its progress bars ignore verbose
        lab = Imagelab(data_path=str(folder), verbose=False)
        lab.find_issues({k: {} for k in ISSUES}, n_jobs=workers, verbose=False)
    return time.perf_counter() - t0, lab.issues


def run_ours(folder: Path, db: Path, workers: int) -> tuple[float, float, dict[str, dict]]:
    from perception_gap.catalog import Catalog
    from perception_gap.ingest import index_folder
    from perception_gap.workflows.stats import compute_stats

    with Catalog(db) as cat:
        t0 = time.perf_counter()
        index_folder(cat, folder, "bench", "real")
        t1 = time.perf_counter()
        compute_stats(cat, ["bench"], workers=workers)
        t2 = time.perf_counter()
        rows = cat.con.execute(
            "SELECT f.rgb_path, s.width, s.height, s.lum_percentiles, s.sharpness, s.hist, s.grad_ratio, s.std "
            "FROM frames f "
            "JOIN frame_stats s ON s.content_hash = f.content_hash").fetchall()
    keys = ("width", "height", "lum", "sharpness", "hist", "grad_ratio", "std")
    out = {os.path.basename(r[0]): dict(zip(keys, r[1:], strict=True)) for r in rows}
    return t1 - t0, t2 - t1, out


def _entropy(hist) -> float:
    """Mean over channels of the entropy (bits) of our 32-bin histograms."""
    h = np.asarray(hist, dtype=np.float64).reshape(-1, 32)
    logs = np.log2(h, out=np.zeros_like(h), where=h > 0)
    return float(-(h * logs).sum(axis=1).mean())


def our_scores(v: dict) -> dict[str, float]:
    """Per issue, a number that is LOW for an image with the issue (as cleanvision's scores)."""
    lum = v["lum"]  # percentiles 1, 5, 50, 95, 99 of luma, 0-255
    w, h = v["width"], v["height"]
    grad = v["grad_ratio"]
    contrast = (float(np.mean(v["std"])) / 255.0) ** 2  # sharpness is in (fraction of full scale)^2
    return {"dark": lum[4], "light": 255.0 - lum[1], "blurry": v["sharpness"],
            "blurry (sharp/std^2)": v["sharpness"] / contrast if contrast > 0 else 0.0,
            "blurry (grad_ratio)": -grad if grad is not None else 0.0,
            "low_information": _entropy(v["hist"]), "odd_aspect_ratio": min(w / h, h / w),
            "odd_size": -abs(math.log(math.sqrt(w * h) / math.sqrt(640 * 480)))}


def compare_properties(issues, ours: dict[str, dict], kinds: dict[str, str]) -> list[str]:
    from scipy.stats import spearmanr

    names = [os.path.basename(p) for p in issues.index]
    missing = [n for n in names if n not in ours]
    lines = [f"  frames: cleanvision {len(names)}, ours {len(ours)}, in cleanvision only {len(missing)}"]
    names = [n for n in names if n in ours]
    issues = issues.loc[[p for p in issues.index if os.path.basename(p) in ours]]
    mine = [our_scores(ours[n]) for n in names]
    lines.append(f"  {'issue':<21}{'spearman':>9}{'k(cv)':>7}{'both':>6}"
                 f"{'injected':>10}{'cv found':>10}{'ours found':>11}{'cv false+':>10}{'ours false+':>12}")
    for label in list(mine[0]):
        kind = label.split(" ")[0]
        cv = issues[f"{kind}_score"].to_numpy(dtype=np.float64)
        us = np.array([m[label] for m in mine])
        rho = spearmanr(cv, us).statistic if np.ptp(us) > 0 and np.ptp(cv) > 0 else float("nan")
        cv_flag = issues[f"is_{kind}_issue"].to_numpy(dtype=bool)
        k = int(cv_flag.sum())
        our_flag = np.zeros(len(us), dtype=bool)
        our_flag[np.argsort(us, kind="stable")[:k]] = True
        truth = np.array([kinds.get(n) == kind for n in names])
        lines.append(f"  {label:<21}{rho:9.3f}{k:7d}{int((cv_flag & our_flag).sum()):6d}{int(truth.sum()):10d}"
                     f"{int((cv_flag & truth).sum()):10d}{int((our_flag & truth).sum()):11d}"
                     f"{int((cv_flag & ~truth).sum()):10d}{int((our_flag & ~truth).sum()):12d}")
    return lines


# -- MMD ----------------------------------------------------------------------------------------

def load_alibi(site: str | None):
    """alibi-detect's MMDDriftTorch: a normal import, else from `site` without the package __init__ files."""
    try:
        from alibi_detect.cd.pytorch.mmd import MMDDriftTorch
        return MMDDriftTorch
    except ImportError:
        if not site:
            return None
    root = Path(site) / "alibi_detect"
    if not root.is_dir():
        return None
    for k in [k for k in sys.modules if k == "alibi_detect" or k.startswith("alibi_detect.")]:
        del sys.modules[k]
    sys.path.insert(0, site)
    for name, sub in (("alibi_detect", ""), ("alibi_detect.cd", "cd"), ("alibi_detect.cd.pytorch", "cd/pytorch")):
        mod = types.ModuleType(name)
        mod.__path__ = [str(root / sub)]
        sys.modules[name] = mod
    from alibi_detect.cd.pytorch.mmd import MMDDriftTorch
    return MMDDriftTorch


def compare_mmd(detector_cls, n: int, dim: int, shift: float, perms: int, seed: int) -> list[str]:
    import torch

    from perception_gap.metrics.twosample import median_bandwidth, mmd

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, dim))
    y = rng.normal(size=(n, dim))
    y[:, 0] += shift
    sigma = median_bandwidth(np.vstack([x, y]))
    torch.manual_seed(seed)
    t0, w0 = time.process_time(), time.perf_counter()
    ours = mmd(x, y, n_permutations=perms, max_samples=n, random_state=seed)
    t_ours, w_ours = time.process_time() - t0, time.perf_counter() - w0
    head = (f"  embeddings: {n} + {n} x {dim} float64, mean shift {shift} on one axis, {perms} permutations; "
            f"bandwidth (ours, median pooled distance) {sigma:.6f} = reported {ours.bandwidth:.6f}")
    lines = [head]
    if detector_cls is None:
        return lines + ["  alibi-detect not available: skipped (see --alibi-site)"]
    t0, w0 = time.process_time(), time.perf_counter()
    det = detector_cls(x, sigma=np.array([sigma]), n_permutations=perms, device="cpu",
                       configure_kernel_from_x_ref=False)
    p_ali, stat_ali, _ = det.score(y)
    t_ali, w_ali = time.process_time() - t0, time.perf_counter() - w0
    rel = abs(stat_ali - ours.value) / abs(ours.value)
    mc = 3.0 * math.sqrt(max(ours.p_value * (1 - ours.p_value), 1.0 / perms) * 2.0 / perms)
    lines.append(f"  MMD^2: ours {ours.value:.10g}, alibi-detect {stat_ali:.10g}, relative difference {rel:.2e} "
                 f"({'PASS' if rel < 1e-6 else 'FAIL'} < 1e-6)")
    lines.append(f"  p-value: ours {ours.p_value:.4f}, alibi-detect {p_ali:.4f}, |diff| {abs(ours.p_value - p_ali):.4f}"
                 f" vs 3 Monte-Carlo sd {mc:.4f} ({'PASS' if abs(ours.p_value - p_ali) <= mc else 'FAIL'})")
    if shift == 0:
        det_default = detector_cls(x, n_permutations=1, device="cpu")
        sig_default = float(det_default.kernel.sigma.detach().cpu().numpy()[0])
        lines.append(f"  alibi-detect's own default bandwidth: {sig_default:.6f} (ours {sigma:.6f}, ratio "
                     f"{sig_default / sigma:.3f}): its default statistic differs by design")
    lines.append(f"  kernel + {perms} permutations: CPU ours {t_ours:.3f} s, alibi-detect {t_ali:.3f} s "
                 f"(ours/alibi {t_ours / t_ali:.3f}); wall {w_ours:.3f} vs {w_ali:.3f} s (ours/alibi {w_ours / w_ali:.3f})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=440, help="clean 640x480 JPEG frames")
    ap.add_argument("--per-kind", type=int, default=10, help="faulty frames per issue kind")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--emb-n", type=int, default=500, help="embeddings per side for MMD")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--shift", type=float, nargs="+", default=[0.0, 0.5],
                    help="mean shifts on one axis (0 = no drift)")
    ap.add_argument("--perms", type=int, default=500)
    ap.add_argument("--alibi-site", default=os.environ.get("ALIBI_DETECT_SITE"))
    ap.add_argument("--skip-images", action="store_true")
    args = ap.parse_args(argv)

    if not args.skip_images:
        try:
            import cleanvision
        except ImportError:
            cleanvision = None
        print(f"1. image properties: {args.n} clean frames ({describe_sources()}) + {args.per_kind} faulty per kind")
        if cleanvision is None:
            print("  cleanvision not installed: skipped (pip install cleanvision)")
        else:
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp) / "frames"
                make_frames(folder, args.n, "jpg", workers=args.workers)
                kinds = make_faulty(folder, folder, args.per_kind)
                t_cv, issues = run_cleanvision(folder, args.workers)
                t_idx, t_stats, ours = run_ours(folder, Path(tmp) / "cat.duckdb", args.workers)
                n = len(list(folder.iterdir()))
                print(f"  cleanvision {cleanvision.__version__} find_issues({', '.join(ISSUES)}): {t_cv:.2f} s "
                      f"({n / t_cv:.0f} frames/s); ours: index {t_idx:.2f} s + compute_stats {t_stats:.2f} s "
                      f"({n / t_stats:.0f} frames/s); wall ratio cleanvision/ours: statistics alone "
                      f"{t_cv / t_stats:.2f}x, index + statistics {t_cv / (t_idx + t_stats):.2f}x; "
                      f"load {os.getloadavg()[0]:.1f}")
                print("\n".join(compare_properties(issues, ours, kinds)))
    print(f"2. MMD (alibi-detect site: {args.alibi_site or 'normal import'})")
    detector = load_alibi(args.alibi_site)
    for shift in args.shift:
        print("\n".join(compare_mmd(detector, args.emb_n, args.dim, shift, args.perms, 0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
