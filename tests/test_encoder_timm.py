"""`timm:NAME` and `timm:NAME@PATH`: the engine's features against timm's own model built from the
same file, the Hugging Face cache layout timm's tags live in, the preprocessing read from the
tag's pretrained config, and the one-line refusals through the CLI.

Weights are random (nothing downloads): timm's own state dicts of small architectures, saved as
timm saves them (a safetensors file with the classifier, as the `timm/` hub repos hold them).
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")

from safetensors.torch import save_file  # noqa: E402

from perception_gap import cli  # noqa: E402
from perception_gap.catalog import Catalog  # noqa: E402
from perception_gap.encoders import EncoderError, WeightsUnavailableError, get_encoder  # noqa: E402

ARCHS = ("resnet10t", "test_vit")  # a CNN and a ViT, both small
HUB_TAG = {"resnet10t": "resnet10t.c3_in1k"}


def _frames(n: int, size: tuple[int, int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    h, w = size
    return [np.asarray(Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((w, h), Image.BILINEAR))
            for _ in range(n)]


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> dict[str, str]:
    """arch -> a safetensors file of its full timm state dict (classifier included)."""
    root = tmp_path_factory.mktemp("timm")
    out = {}
    for i, arch in enumerate(ARCHS):
        torch.manual_seed(i)
        path = root / f"{arch}.safetensors"
        save_file(timm.create_model(arch, pretrained=False).state_dict(), str(path))
        out[arch] = str(path)
    return out


@pytest.mark.parametrize("arch", ARCHS)
def test_features_equal_timms_own_model_on_the_same_file(weights, arch):
    enc = get_encoder(f"timm:{arch}@{weights[arch]}")
    ref = timm.create_model(arch, pretrained=True, pretrained_cfg_overlay={"file": weights[arch]}, num_classes=0).eval()
    batch = enc.preprocess(_frames(3, (50, 70)))
    with torch.no_grad():
        want = ref(batch).numpy()
    got = enc.encode(batch)
    assert got.shape == (3, enc.dim) == (3, ref.num_features)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert np.abs(want).max() > 1e-3  # not a degenerate all-zero feature


def test_preprocessing_is_the_tags_pretrained_config_and_matches_timms_transform(weights):
    enc = get_encoder(f"timm:test_vit@{weights['test_vit']}")
    cfg = timm.data.resolve_data_config(pretrained_cfg=timm.models.get_pretrained_cfg("test_vit").to_dict())
    p = enc.preprocessing
    assert (3, *p.size) == tuple(cfg["input_size"]) and p.interpolation == cfg["interpolation"]
    assert p.mean == tuple(cfg["mean"]) and p.std == tuple(cfg["std"]) and p.crop_pct == cfg["crop_pct"]
    image = _frames(1, (120, 200), seed=3)[0]
    want = timm.data.create_transform(**cfg)(Image.fromarray(image))
    # Pillow's resampling vs torchvision's on uint8: within ~1 grey level (/ std 0.5)
    assert np.abs(enc.preprocess([image])[0].numpy() - want.numpy()).max() < 2.5 / 255 / 0.5


def test_a_cached_tag_loads_from_the_hub_cache_with_the_files_fingerprint(weights, tmp_path, monkeypatch):
    snapshot = tmp_path / "models--timm--resnet10t.c3_in1k" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").write_bytes(open(weights["resnet10t"], "rb").read())
    (tmp_path / "models--timm--resnet10t.c3_in1k" / "refs").mkdir()
    (tmp_path / "models--timm--resnet10t.c3_in1k" / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    cached = get_encoder("timm:resnet10t")
    assert cached.weights == str(snapshot / "model.safetensors")
    # same weights, same preprocessing: the same vectors, cached once for both names
    assert cached.fingerprint == get_encoder(f"timm:resnet10t@{weights['resnet10t']}").fingerprint
    (snapshot / "model.safetensors").unlink()
    with pytest.raises(WeightsUnavailableError, match="timm/resnet10t.c3_in1k is not in the Hugging Face cache"):
        get_encoder("timm:resnet10t.c3_in1k")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[str, object]:
    root = tmp_path_factory.mktemp("timm_frames")
    for i, frame in enumerate(_frames(3, (48, 64), seed=5)):
        Image.fromarray(frame).save(root / f"f{i}.png")
    db = str(root / "c.duckdb")
    assert cli.main(["index", str(root), "--set", "s", "--domain", "sim", "--db", db, "--quiet"]) == 0
    return db, root


def test_embed_through_the_cli_stores_the_encoders_vectors(weights, indexed, capsys):
    db, root = indexed
    name = f"timm:resnet10t@{weights['resnet10t']}"
    assert cli.main(["embed", "--encoder", name, "--db", db, "--quiet"]) == 0
    enc = get_encoder(name)
    with Catalog(db) as cat:
        meta, vecs = cat.load_embeddings("s", enc.fingerprint)
    frames = [np.asarray(Image.open(root / f"{m['pair_key']}.png").convert("RGB")) for m in meta]
    assert vecs.shape == (3, 512)
    np.testing.assert_allclose(vecs, enc.embed(frames), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["missing", "other_arch", "unknown_arch", "unknown_tag", "uncached", "unsafe",
                                  "crop_mode"])
def test_a_wrong_name_or_file_is_one_line_and_exit_2(weights, indexed, tmp_path, monkeypatch, capsys, case):
    db, _ = indexed
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty_cache"))
    bad = tmp_path / "model.pth"
    if case == "unsafe":
        torch.save({"w": np.random.default_rng(0)}, bad)  # unpickling it would build a numpy object
    name, want = {
        "missing": (f"timm:resnet10t@{tmp_path / 'absent.safetensors'}", "not found"),
        "other_arch": (f"timm:resnet10t@{weights['test_vit']}", "missing keys (first: conv1.0.weight"),
        "unknown_arch": (f"timm:no_such_net@{weights['resnet10t']}", "Unknown timm architecture 'no_such_net'"),
        "unknown_tag": ("timm:resnet10t.bogus", "expected one of: resnet10t.c3_in1k"),
        "uncached": ("timm:resnet10t", "pass a local file: timm:resnet10t@"),
        "unsafe": (f"timm:resnet10t@{bad}", "refusing"),
        "crop_mode": ("timm:vit_medium_patch16_gap_384", "crop_mode 'squash' with crop_pct"),
    }[case]
    capsys.readouterr()
    code = cli.main(["embed", "--encoder", name, "--db", db, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert want in err, err


def test_a_file_of_another_architecture_names_the_unexpected_keys(weights):
    with pytest.raises(EncoderError, match=r"unexpected keys \(first: blocks\.0\.attn"):
        get_encoder(f"timm:resnet10t@{weights['test_vit']}")


def test_a_layout_timms_checkpoint_filter_maps_is_taken(weights, tmp_path):
    """open_clip keeps timm towers under `visual.trunk.`: the keys differ from the model's, timm's
    filter for the ViT maps them, and the features are those of the same weights."""
    state = timm.models.load_state_dict(weights["test_vit"])
    save_file({f"visual.trunk.{k}": v for k, v in state.items()}, str(tmp_path / "trunk.safetensors"))
    enc = get_encoder(f"timm:test_vit@{tmp_path / 'trunk.safetensors'}")
    batch = enc.preprocess(_frames(2, (40, 40)))
    np.testing.assert_allclose(enc.encode(batch), get_encoder(f"timm:test_vit@{weights['test_vit']}").encode(batch),
                               rtol=0, atol=1e-6)
