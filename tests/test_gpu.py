"""GPU readiness, tested on the CPU: device resolution, reduced precision against fp32 (real
EfficientNet-Lite0 weights on real photos, a tiny open_clip checkpoint through the real loading
path), precision in the embedding cache key, pinned staging, and `--batch-size auto`'s choice.

What needs a GPU (fp16, channels_last on CUDA, the probe batch, pinned copies) is measured by
bench/bench_gpu.sh where a GPU exists; here the CPU paths and the pure selection are checked.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from perception_gap import cli
from perception_gap.catalog import Catalog
from perception_gap.embed import embed_sets, load_encoder
from perception_gap.encoders import EncoderError, get_encoder
from perception_gap.encoders.base import resolve_device
from perception_gap.encoders.memory import DEFAULT_BATCH, auto_batch_size, choose_batch_size
from perception_gap.encoders.preprocessing import preprocess_images
from perception_gap.errors import InputError
from perception_gap.ingest import index_folder

# Stated tolerances of bf16 autocast against fp32, per vector (cosine similarity). Measured:
# lite0 on 16 VOC photos at 224 px min 0.9982 (the encode path bench/bench_gpu.py --tolerance runs);
# at 64 px min 0.9977.
LITE_BF16_MIN_COS = 0.995
CLIP_BF16_MIN_COS = 0.99
TINY = "PgGpuTinyViT"
TINY_CFG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16, "head_width": 32},
    "text_cfg": {"context_length": 16, "vocab_size": 1000, "width": 32, "heads": 2, "layers": 1},
}


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def _photos(shared_data: Path, n: int, size: int) -> list[np.ndarray]:
    files = sorted((shared_data / "detection_voc100" / "images").glob("*.jpg"))[:n]
    if len(files) < n:
        pytest.skip("VOC photos not found")
    return [np.asarray(Image.open(f).convert("RGB").resize((size, size), Image.BICUBIC)) for f in files]


def test_device_resolution(monkeypatch):
    assert resolve_device("cpu") == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"  # auto takes CUDA when torch sees it
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(EncoderError, match="CUDA"):
        resolve_device("cuda")


def test_cuda_and_fp16_without_cuda_are_one_line_errors(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present here")
    root = tmp_path / "f"
    root.mkdir()
    Image.fromarray(np.full((8, 8, 3), 90, np.uint8)).save(root / "a.png")
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_folder(cat, root, "s", "sim")
    for extra, words in ((["--device", "cuda"], "CUDA"), (["--precision", "fp16"], "fp16")):
        rc = cli.main(["embed", "--db", str(db), "--encoder", "efficientnet-lite0", *extra])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and words in err and "\n" not in err and "Traceback" not in err, err
    with pytest.raises(InputError, match="precision"):
        load_encoder("efficientnet-lite0", device="cpu", precision="fp16")
    assert cli.main(["embed", "--db", str(db), "--encoder", "pixel", "--batch-size", "0"]) == 2
    assert "positive integer or 'auto'" in capsys.readouterr().err


def test_lite0_bf16_within_tolerance_of_fp32(shared_data):
    # One forward of 2 photos at 32 px: on a CPU without bf16 instructions torch runs bf16
    # depthwise convolutions one channel group at a time (~9,000 slow conv calls per forward,
    # whatever the size), so the input is tiny; the network is fully convolutional with global
    # pooling and the same autocast path runs at any size (224 px: bench_gpu.py --tolerance).
    fp32 = get_encoder("efficientnet-lite0", device="cpu").load()
    bf16 = get_encoder("efficientnet-lite0", device="cpu", precision="bf16")
    bf16._model = fp32._model  # the same loaded weights
    pp = dataclasses.replace(fp32.preprocessing, size=(32, 32))
    x = preprocess_images(_photos(shared_data, 2, 32), pp)
    outs = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # ~9,000 tiny calls: 2 threads on a busy machine spend it all in sync
    try:
        for enc in (fp32, bf16):
            with torch.inference_mode(), enc.autocast():
                outs.append(enc._forward(enc._model, x.contiguous()).float().numpy())
    finally:
        torch.set_num_threads(threads)
    cos = _cos(*outs)
    assert cos.min() >= LITE_BF16_MIN_COS, cos
    assert not np.array_equal(outs[0], outs[1])  # bf16 really ran: rounding moved the numbers


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    import open_clip

    d = tmp_path_factory.mktemp("tiny_clip_gpu")
    (d / f"{TINY}.json").write_text(json.dumps(TINY_CFG))
    open_clip.add_model_config(d / f"{TINY}.json")
    torch.manual_seed(0)
    model = open_clip.create_model(TINY, pretrained=None)
    torch.save({k: v.contiguous() for k, v in model.state_dict().items()}, d / "tiny.pt")
    return f"open_clip:{TINY}:{d / 'tiny.pt'}"


def test_open_clip_bf16_within_tolerance_of_fp32(tiny_clip, shared_data):
    fp32 = get_encoder(tiny_clip, device="cpu")
    bf16 = get_encoder(tiny_clip, device="cpu", precision="bf16")
    images = _photos(shared_data, 6, 96)
    a, b = fp32.embed(images), bf16.embed(images)
    assert a.dtype == b.dtype == np.float32 and np.isfinite(b).all()
    cos = _cos(a, b)
    assert cos.min() >= CLIP_BF16_MIN_COS, cos
    assert not np.array_equal(a, b)


def test_precision_is_in_the_fingerprint_and_the_cache_key(tiny_clip, tmp_path):
    # fp32 keeps the fingerprint it had before precisions existed (cached vectors stay valid)
    assert get_encoder(tiny_clip).fingerprint == get_encoder(tiny_clip, precision="fp32").fingerprint
    prints = {p: get_encoder(tiny_clip, precision=p).fingerprint for p in ("fp32", "fp16", "bf16")}
    assert len(set(prints.values())) == 3
    with pytest.raises(EncoderError, match="precision"):
        get_encoder(tiny_clip, precision="int8")
    root = tmp_path / "f"
    root.mkdir()
    rng = np.random.default_rng(0)
    for i in range(5):
        Image.fromarray(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)).save(root / f"{i}.png")
    with Catalog(tmp_path / "c.duckdb") as cat:
        index_folder(cat, root, "s", "sim")
        (a,) = embed_sets(cat, [tiny_clip], device="cpu", batch_size=2)
        (b,) = embed_sets(cat, [tiny_clip], device="cpu", batch_size="auto", precision="bf16")
        (c,) = embed_sets(cat, [tiny_clip], device="cpu", precision="bf16")
        _, va = cat.load_embeddings("s", a.fingerprint)
        _, vb = cat.load_embeddings("s", b.fingerprint)
    # the bf16 request is not served the fp32 rows: all 5 are embedded again, then cached
    assert (a.precision, a.embedded, a.batch_size) == ("fp32", 5, 2)
    assert (b.precision, b.embedded, b.batch_size) == ("bf16", 5, DEFAULT_BATCH)
    assert (c.todo, c.model_loaded) == (0, False)
    assert a.fingerprint == prints["fp32"] and b.fingerprint == prints["bf16"]
    assert va.shape == vb.shape == (5, 32) and not np.array_equal(va, vb)
    assert _cos(va, vb).min() >= CLIP_BF16_MIN_COS


def test_pixel_encoder_stays_fp32():
    enc = get_encoder("pixel", precision="bf16")
    assert enc.precision == "fp32" and enc.fingerprint == get_encoder("pixel").fingerprint


def test_staging_pins_only_for_cuda():
    enc = get_encoder("pixel", device="cpu")
    x = torch.zeros(2, 3, 64, 64)
    assert enc.stage(x) is x and not enc.stage(x).is_pinned()


@pytest.mark.parametrize(("free", "per_frame", "expected"), [
    (80 << 30, 50 << 20, 512),        # 80 GiB free, 50 MiB/frame: 983 fit, clamped to 512
    (8 << 30, 50 << 20, 98),          # floor(8 GiB * 0.6 / 50 MiB) = 98
    (1 << 30, 100 << 20, 6),          # floor(614.4 MiB / 100 MiB) = 6
    (10 << 20, 100 << 20, 1),         # nothing fits: still one frame (the OOM then says why)
    (0, 1, 1),
])
def test_choose_batch_size_known_answers(free, per_frame, expected):
    assert choose_batch_size(free, per_frame) == expected


def test_choose_batch_size_bounds_and_bad_input():
    assert choose_batch_size(1 << 30, 1 << 20, headroom=1.0, hi=100_000) == 1024
    assert choose_batch_size(1 << 30, 1 << 20, lo=2000, hi=3000) == 2000
    for kw in ({"per_frame_bytes": 0}, {"per_frame_bytes": 1, "headroom": 0.0}, {"per_frame_bytes": 1, "lo": 0}):
        with pytest.raises(EncoderError):
            choose_batch_size(1 << 30, **kw)


def test_auto_batch_size_on_cpu_is_the_default():
    choice = auto_batch_size(get_encoder("pixel", device="cpu"))
    assert (choice.batch_size, choice.device, choice.free_bytes) == (DEFAULT_BATCH, "cpu", 0)
    assert auto_batch_size(get_encoder("pixel", device="cpu"), default=7).batch_size == 7


def test_bench_gpu_skips_cleanly_without_cuda(capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is present here: bench/bench_gpu.sh measures instead")
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import bench_gpu

    assert bench_gpu.main([]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("bench_gpu: SKIP: no CUDA device") and "\n" not in out
