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

With `--families`, instead one row per encoder family (FAMILIES below: each family's name form and
how to get weights for it here, random weights saved in the family's own layout where none ship):
the stage's frames/s against a bare batched forward of the same model in the same process, their
ratio, PASS at >= 0.9x. A new family joins the table with one line in FAMILIES.

    python bench/bench_embed.py --families                    # every family, N=96, 3 repeats
    python bench/bench_embed.py --families pixel,open_clip --n 256

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
from typing import Callable

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


def bare_forward(encoder: str, paths: list[Path], batch: int, *, with_decode: bool = False) -> "float | tuple[float, float]":
    """Images/s of encode() alone on tensors decoded and preprocessed beforehand (and, with
    `with_decode`, images/s of that decode + preprocess in one thread, for reading the stage's limit)."""
    import numpy as np
    from PIL import Image

    from perception_gap import encoders

    enc = encoders.get_encoder(encoder, device="cpu").load()
    t0 = time.perf_counter()
    arrays = [np.asarray(Image.open(p).convert("RGB")) for p in paths]
    tensors = [enc.preprocess(arrays[i : i + batch]) for i in range(0, len(arrays), batch)]
    decode = len(paths) / (time.perf_counter() - t0)
    enc.encode(tensors[0])  # warm-up (allocator, kernels), as the stage's first batch also pays
    t0 = time.perf_counter()
    for t in tensors:
        enc.encode(t)
    rate = len(paths) / (time.perf_counter() - t0)
    return (rate, decode) if with_decode else rate


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


def _open_clip_vit_b32(folder: Path) -> str:
    """open_clip ViT-B-32 with random weights, saved as open_clip saves a model folder (local-dir)."""
    import json

    import open_clip
    import torch
    from safetensors.torch import save_file

    d = folder / "open_clip_vit_b32"
    if not (d / "open_clip_model.safetensors").exists():
        d.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(0)
        model = open_clip.create_model("ViT-B-32", pretrained=None)
        cfg = {"model_cfg": open_clip.get_model_config("ViT-B-32"),
               "preprocess_cfg": {"mean": list(open_clip.OPENAI_DATASET_MEAN), "std": list(open_clip.OPENAI_DATASET_STD)}}
        (d / "open_clip_config.json").write_text(json.dumps(cfg))
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(d / "open_clip_model.safetensors"))
    return f"open_clip:ViT-B-32:local-dir:{d}"


def _fid_inception(folder: Path) -> str:
    """pytorch-fid's Inception v3 layout with random weights (`run --inception-weights`)."""
    import torch

    from perception_gap.encoders.fid_inception import build_fid_inception

    path = folder / "fid_inception_random.pth"
    if not path.exists():
        torch.manual_seed(0)
        torch.save(build_fid_inception().state_dict(), path)
    return f"fid-inception:{path}"


def _timm_resnet50(folder: Path) -> str:
    """timm resnet50 with random weights in a safetensors file (what `timm:NAME@PATH` reads)."""
    import timm
    from safetensors.torch import save_file

    path = folder / "timm_resnet50.safetensors"
    if not path.exists():
        save_file(timm.create_model("resnet50", pretrained=False).state_dict(), str(path))
    return f"timm:resnet50@{path}"


def _torchvision_resnet50(folder: Path) -> str:
    """torchvision resnet50 with random weights as a state dict file (`torchvision:NAME@PATH`)."""
    import torch
    import torchvision

    path = folder / "torchvision_resnet50.pth"
    if not path.exists():
        torch.save(torchvision.models.resnet50(weights=None).state_dict(), path)
    return f"torchvision:resnet50@{path}"


def _hf_dinov2_small(folder: Path) -> str:
    """A DINOv2-small-sized transformers model (random weights) in a model folder with its processor config."""
    import json

    import transformers

    d = folder / "hf_dinov2_small"
    if not (d / "config.json").exists():
        transformers.Dinov2Model(transformers.Dinov2Config(hidden_size=384, num_hidden_layers=12, num_attention_heads=6,
                                                           intermediate_size=1536, patch_size=14,
                                                           image_size=518)).save_pretrained(d)
        (d / "preprocessor_config.json").write_text(json.dumps({
            "image_processor_type": "BitImageProcessor", "do_resize": True, "size": {"shortest_edge": 256},
            "resample": 3, "do_center_crop": True, "crop_size": {"height": 224, "width": 224}, "do_rescale": True,
            "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.485, 0.456, 0.406],
            "image_std": [0.229, 0.224, 0.225]}))
    return f"hf:{d}#cls"


def _r3m_resnet50(folder: Path) -> str:
    """R3M's release layout ({"r3m": DataParallel state dict, the ResNet under module.convnet}), random weights."""
    import torch
    import torchvision

    path = folder / "model_r3m50.pt"
    if not path.exists():
        sd = torchvision.models.resnet50(weights=None).state_dict()
        torch.save({"r3m": {f"module.convnet.{k}": v for k, v in sd.items() if not k.startswith("fc.")}}, path)
    return f"r3m:resnet50@{path}"


# family -> the encoder name it is measured by (a callable builds weights in a scratch folder first).
# One line per family: the row of a family whose name does not resolve here says why and is skipped.
FAMILIES: dict[str, "str | Callable[[Path], str]"] = {
    "pixel": "pixel",
    "efficientnet-lite": "efficientnet-lite0",
    "open_clip": _open_clip_vit_b32,
    "fid-inception": _fid_inception,
    "timm": _timm_resnet50,
    "torchvision": _torchvision_resnet50,
    "hf": _hf_dinov2_small,
    "r3m": _r3m_resnet50,
}


def family_rows(families: list[str], n: int, batch: int, folder: Path, repeat: int = 3) -> list[str]:
    """One line per family: stage vs bare forward frames/s on the same N frames. Each repeat times
    the bare forward, then the stage on a fresh catalog, back to back, so both see the same load
    from other processes; the figures are medians over repeats, the ratio the median of each
    repeat's ratio."""
    import statistics

    from bench_stats import make_frames

    from perception_gap import encoders

    files = make_frames(folder / "frames", n, "jpg")
    rows = []
    for fam in families:
        spec = FAMILIES[fam]
        try:
            name = spec if isinstance(spec, str) else spec(folder)
            encoders.get_encoder(name, device="cpu")
        except Exception as e:  # noqa: BLE001 (a family not usable here: say why, measure the rest)
            rows.append(f"{fam:<18} skipped: {str(e).splitlines()[0][:100]}")
            print(rows[-1], flush=True)
            continue
        bare, stage, ratios, decode = [], [], [], 0.0
        for r in range(repeat):
            b, decode = bare_forward(name, files, batch, with_decode=True)
            db = folder / f"{fam}-{r}.duckdb"
            _index(folder / "frames", db)
            st, load_s = cold_stage(name, db, batch)
            bare.append(b)
            stage.append(st)
            ratios.append(st / b)
        ratio = statistics.median(ratios)
        shown = name.replace(str(folder), "…")  # scratch weights: the form, not the temporary path
        rows.append(f"{fam:<18} {shown[:44]:<44} stage {statistics.median(stage):7.1f}  bare forward "
                    f"{statistics.median(bare):7.1f}  decode+preprocess (1 thread) {decode:6.1f} frames/s  ratio "
                    f"{ratio:.2f} ({min(ratios):.2f}-{max(ratios):.2f}) {'PASS' if ratio >= TARGET_E2E else 'FAIL'}")
        print(rows[-1], flush=True)
    return rows


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
    ap.add_argument("--repeat", type=int, default=3, help="with --families: repeats per family (default 3)")
    ap.add_argument("--families", nargs="?", const=",".join(FAMILIES), default=None,
                    help=f"one row per family instead (comma-separated; default all: {', '.join(FAMILIES)}); N=96 "
                         "unless --n is given")
    args = ap.parse_args(argv)
    import torch
    from bench_stats import describe_sources, make_frames

    if args.families is not None:
        fams = [f for f in args.families.split(",") if f]
        unknown = [f for f in fams if f not in FAMILIES]
        if unknown:
            ap.error(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
        n = args.n if "--n" in (argv if argv is not None else sys.argv) else 96
        print(f"bench_embed --families: {n} JPEG 640x480 from {describe_sources()}, batch {args.batch_size}, "
              f"torch {torch.__version__} with {torch.get_num_threads()} threads, {args.repeat} repeats; stage = "
              f"embed_sets with the model preloaded, bare = encode() on pre-decoded, pre-processed tensors", flush=True)
        with tempfile.TemporaryDirectory(prefix="pg_bench_families_") as tmp:
            rows = family_rows(fams, n, args.batch_size, Path(tmp), args.repeat)
        print()
        for line in rows:
            print(line)
        return 0

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
