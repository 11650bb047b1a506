"""`hf:REPO_OR_DIR[#POOLING]`: transformers vision models from a Hugging Face cache snapshot or a
plain folder, their features against transformers' own model on the same files, the pooling
choices, the preprocessing read from preprocessor_config.json, and the one-line refusals.

Models are tiny and random (hidden size 32, nothing downloads), written by `save_pretrained` into
the layouts users hold: `models--ORG--NAME/snapshots/<commit>/` with `refs/main` for a cached repo
id, and a plain folder.
"""

from __future__ import annotations

import json
import shutil
import sys

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from perception_gap import cli  # noqa: E402
from perception_gap.catalog import Catalog  # noqa: E402
from perception_gap.encoders import EncoderError, WeightsUnavailableError, get_encoder  # noqa: E402

REPO = "tiny-org/tiny-dinov2"
COMMIT = "9f1c0ffee0000000000000000000000000000000"
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, patch_size=8,
            image_size=32)
# DINOv2's processor (BitImageProcessor) at a small size: shortest side 40, centre crop 32
DINO_PP = {"image_processor_type": "BitImageProcessor", "do_resize": True, "size": {"shortest_edge": 40},
           "resample": 3, "do_center_crop": True, "crop_size": {"height": 32, "width": 32}, "do_rescale": True,
           "rescale_factor": 1 / 255, "do_normalize": True, "do_convert_rgb": True,
           "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}
# SigLIP's and ViT's: both sides resized, no crop
SQUASH_PP = {"image_processor_type": "ViTImageProcessor", "do_resize": True, "size": {"height": 32, "width": 32},
             "resample": 2, "do_rescale": True, "rescale_factor": 1 / 255, "do_normalize": True,
             "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}


def _frames(n: int, size: tuple[int, int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    h, w = size
    return [np.asarray(Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((w, h), Image.BILINEAR))
            for _ in range(n)]


def _save(model, folder, pp: dict) -> str:
    model.save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text(json.dumps(pp))
    return str(folder)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    """'cache': a hub cache holding REPO (a Dinov2Model); 'clip': a plain folder of a whole CLIP
    model (text tower included)."""
    root = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    repo = root / "hub" / ("models--" + REPO.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    _save(transformers.Dinov2Model(transformers.Dinov2Config(**TINY)), snapshot, DINO_PP)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    clip = transformers.CLIPConfig(
        vision_config=TINY, projection_dim=16,
        text_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                         vocab_size=100, bos_token_id=0, eos_token_id=1, pad_token_id=1))
    _save(transformers.CLIPModel(clip), root / "clip", SQUASH_PP)
    return {"cache": str(root / "hub"), "snapshot": str(snapshot), "clip": str(root / "clip")}


@pytest.fixture()
def cache(models, monkeypatch) -> str:
    monkeypatch.setenv("HF_HUB_CACHE", models["cache"])
    return models["cache"]


def _reference(cls, folder: str, x: "torch.Tensor"):
    level = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.set_verbosity_error()  # its load report of the CLIP text tower left out
    try:
        model = cls.from_pretrained(folder).eval()
    finally:
        transformers.utils.logging.set_verbosity(level)
    with torch.no_grad():
        return model(pixel_values=x)


@pytest.mark.parametrize("pooling", [None, "cls", "mean", "pooler"])
def test_dinov2_from_the_cache_equals_automodel_on_the_snapshot(models, cache, pooling):
    enc = get_encoder(f"hf:{REPO}" + (f"#{pooling}" if pooling else ""))
    assert enc.folder == models["snapshot"] and enc.pooling == (pooling or "cls")
    batch = enc.preprocess(_frames(3, (50, 70)))
    out = _reference(transformers.AutoModel, models["snapshot"], batch)
    hidden = out.last_hidden_state  # (3, 1 + 16, 32): the class token, then 4 x 4 patches
    want = {"cls": hidden[:, 0], "mean": hidden[:, 1:].mean(1), "pooler": out.pooler_output}[enc.pooling].numpy()
    got = enc.encode(batch)
    assert got.shape == (3, 32) and enc.dim == 32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert np.abs(want).max() > 1e-2


def test_clip_folder_uses_the_vision_tower_and_its_pooler(models):
    enc = get_encoder(f"hf:{models['clip']}")
    assert (enc.model_class, enc.pooling) == ("CLIPVisionModel", "pooler")
    batch = enc.preprocess(_frames(2, (40, 40)))
    want = _reference(transformers.CLIPVisionModel, models["clip"], batch).pooler_output.numpy()
    np.testing.assert_allclose(enc.encode(batch), want, rtol=0, atol=1e-5)


def test_pooling_and_weights_are_in_the_fingerprint(models, cache):
    prints = {get_encoder(f"hf:{REPO}#{p}").fingerprint for p in ("cls", "mean", "pooler")}
    assert len(prints) == 3
    assert get_encoder(f"hf:{REPO}").fingerprint == get_encoder(f"hf:{models['snapshot']}#cls").fingerprint


def test_preprocessing_follows_the_processor_config(models, cache):
    enc = get_encoder(f"hf:{REPO}")
    p = enc.preprocessing
    assert (p.size, p.interpolation, p.resize_mode, int(32 / p.crop_pct)) == ((32, 32), "bicubic", "shortest", 40)
    processor = transformers.AutoImageProcessor.from_pretrained(models["snapshot"])
    image = _frames(1, (90, 150), seed=4)[0]
    want = processor(images=Image.fromarray(image), return_tensors="pt")["pixel_values"][0].numpy()
    # its resize vs torchvision's on uint8: within ~1 grey level (/ std 0.225)
    assert np.abs(enc.preprocess([image])[0].numpy() - want).max() < 1.5 / 255 / 0.225
    clip = get_encoder(f"hf:{models['clip']}").preprocessing
    assert (clip.size, clip.resize_mode, clip.interpolation, clip.mean) == ((32, 32), "squash", "bilinear", (0.5,) * 3)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[str, object]:
    root = tmp_path_factory.mktemp("hf_frames")
    for i, frame in enumerate(_frames(3, (48, 64), seed=5)):
        Image.fromarray(frame).save(root / f"f{i}.png")
    db = str(root / "c.duckdb")
    assert cli.main(["index", str(root), "--set", "s", "--domain", "sim", "--db", db, "--quiet"]) == 0
    return db, root


def test_embed_through_the_cli_from_a_cached_repo_id(cache, indexed):
    db, root = indexed
    name = f"hf:{REPO}#mean"
    assert cli.main(["embed", "--encoder", name, "--db", db, "--quiet"]) == 0
    enc = get_encoder(name)
    with Catalog(db) as cat:
        meta, vecs = cat.load_embeddings("s", enc.fingerprint)
    frames = [np.asarray(Image.open(root / f"{m['pair_key']}.png").convert("RGB")) for m in meta]
    assert vecs.shape == (3, 32)
    np.testing.assert_allclose(vecs, enc.embed(frames), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["uncached", "missing_dir", "no_weights", "other_arch", "pooling", "no_transformers"])
def test_a_wrong_name_or_folder_is_one_line_and_exit_2(models, cache, indexed, tmp_path, monkeypatch, capsys, case):
    db, _ = indexed
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(f"{models['snapshot']}/config.json", folder)
    shutil.copy(f"{models['snapshot']}/preprocessor_config.json", folder)
    if case == "other_arch":  # a DINOv2 config beside CLIP's weights
        shutil.copy(f"{models['clip']}/model.safetensors", folder)
    if case == "no_transformers":
        monkeypatch.setitem(sys.modules, "transformers", None)  # as if it were not installed
    name, want = {
        "uncached": ("hf:other-org/absent-model", "other-org/absent-model is not in the cache"),
        "missing_dir": (f"hf:{tmp_path / 'absent'}", "(not found)"),
        "no_weights": (f"hf:{folder}", "only the config is here"),
        "other_arch": (f"hf:{folder}", "missing keys (first: embeddings.cls_token, embeddings.mask_token)"),
        "pooling": (f"hf:{REPO}#max", "in ('cls', 'pooler', 'mean'), got 'max'"),
        "no_transformers": (f"hf:{REPO}", "pip install 'perception-gap[hf]'"),
    }[case]
    capsys.readouterr()
    code = cli.main(["embed", "--encoder", name, "--db", db, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert want in err, err


def test_a_folder_of_another_architecture_names_the_unexpected_keys_too(models, tmp_path):
    shutil.copytree(models["snapshot"], tmp_path / "m")
    shutil.copy(f"{models['clip']}/model.safetensors", tmp_path / "m")
    with pytest.raises(EncoderError, match=r"unexpected keys \(first: logit_scale"):
        get_encoder(f"hf:{tmp_path / 'm'}")


def test_a_cached_repo_with_only_its_config_has_no_weights(models, tmp_path, monkeypatch):
    snapshot = tmp_path / "models--tiny-org--config-only" / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    shutil.copy(f"{models['snapshot']}/config.json", snapshot)
    shutil.copy(f"{models['snapshot']}/preprocessor_config.json", snapshot)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # no refs/main: the only snapshot is taken
    with pytest.raises(WeightsUnavailableError, match="only the config is here"):
        get_encoder("hf:tiny-org/config-only")
