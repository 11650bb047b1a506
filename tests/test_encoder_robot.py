"""Robot encoders (R3M, VIP, MCR, MVP, VC-1, HRP) from their released checkpoint layouts.

The real files are not downloaded: random weights are saved the way each release nests them (top
key, DataParallel / wrapper prefixes, the extra keys the authors' loaders drop), loaded through the
family's name, and the features compared with the network built here the way the authors' code
builds and calls it: R3M / VIP / MCR take [0, 255] pixels and apply /255 and ImageNet mean/std
inside; MVP returns norm(x[:, 0]) of its own token loop; VC-1 and HRP add the CLS position
separately and return norm(x)[:, 0]. Both sides see the same pixels (the engine's resized crop,
read back through the engine's own constants, so a wrong mean/std on the engine's side shows).
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
timm = pytest.importorskip("timm")
torchvision = pytest.importorskip("torchvision")

import torchvision.transforms as T  # noqa: E402
import torchvision.transforms.functional as TF  # noqa: E402
from timm.models.vision_transformer import VisionTransformer  # noqa: E402
from torch import nn  # noqa: E402

from perception_gap import cli  # noqa: E402
from perception_gap.catalog import Catalog  # noqa: E402
from perception_gap.encoders import EncoderError, WeightsUnavailableError, get_encoder, preprocess_images  # noqa: E402
from perception_gap.encoders.robot import RELEASES  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _frames(seed: int, n: int = 2, size: tuple[int, int] = (60, 80)) -> list[np.ndarray]:
    """n smooth RGB uint8 frames (upsampled coarse noise)."""
    rng = np.random.default_rng(seed)
    h, w = size
    return [np.asarray(Image.fromarray(rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)).resize((w, h), Image.BILINEAR))
            for _ in range(n)]


def _pixels(enc, batch: torch.Tensor) -> torch.Tensor:
    """The engine's model input read back into [0, 255] pixels through the engine's own constants."""
    p = enc.preprocessing
    mean, std = torch.tensor(p.mean).view(1, 3, 1, 1), torch.tensor(p.std).view(1, 3, 1, 1)
    return (batch * std + mean) * p.input_scale


class ImageNetInside(nn.Module):
    """R3M's / VIP's / MCR's model: float pixels in [0, 255] -> /255 -> ImageNet mean/std -> convnet."""

    def __init__(self, convnet: nn.Module) -> None:
        super().__init__()
        self.convnet = convnet

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.convnet(TF.normalize(obs.float() / 255.0, MEAN, STD))


class Wrapped(nn.Module):
    """data4robotics' BaseModel: the network held as `_model`."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self._model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._model(x)


def _resnet(depth: int, *, fc: int = 0, group_norm: bool = False) -> nn.Module:
    """A torchvision ResNet as R3M / VIP / MCR / data4robotics build it (`fc` an identity, or VIP's Linear)."""
    norm = (lambda c: nn.GroupNorm(16, c)) if group_norm else None
    m = getattr(torchvision.models, f"resnet{depth}")(weights=None, norm_layer=norm)
    m.fc = nn.Linear(m.fc.in_features, fc) if fc else nn.Identity()
    return m.eval()


def _calibrated(m: nn.Module, seed: int) -> nn.Module:
    """Random norm affines; BatchNorm statistics set on smooth frames so activations stay of order one."""
    torch.manual_seed(seed)
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.uniform_(mod.weight, 0.5, 1.5)
            nn.init.uniform_(mod.bias, -0.2, 0.2)
        if isinstance(mod, nn.BatchNorm2d):
            mod.momentum = None
    calib = torch.from_numpy(np.stack(_frames(seed + 1, 2, (48, 48)))).permute(0, 3, 1, 2).float()
    m.train()
    with torch.no_grad():
        m(calib)
    return m.eval()


def _loaded(build, state: dict, *, strict: bool = True) -> nn.Module:
    """The authors' module built (without spending time on an initialization the load replaces),
    then `load_state_dict` as their loader calls it."""
    with torch.device("meta"):
        m = build()
    m.load_state_dict(state, strict=strict, assign=True)
    return m.eval()


def _vit(width: int, depth: int, heads: int) -> nn.Module:
    """The authors' ViT: timm's VisionTransformer with their arguments, its head deleted."""
    m = VisionTransformer(img_size=224, patch_size=16, embed_dim=width, depth=depth, num_heads=heads, mlp_ratio=4,
                          qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6))
    del m.head
    return m.eval()


def _random_vit_state(width: int, depth: int, heads: int, seed: int) -> dict[str, torch.Tensor]:
    """Random weights for every tensor (timm starts the CLS token near 0 and the norms at 1, which
    would hide their misuse)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in _vit(width, depth, heads).state_dict().items()}
    out = {}
    for k, shape in shapes.items():
        if "norm" in k and k.endswith("weight"):
            out[k] = torch.rand(shape, generator=gen) + 0.5
        elif k in ("cls_token", "pos_embed"):
            out[k] = torch.randn(shape, generator=gen) * 0.5
        elif k.endswith("bias"):
            out[k] = torch.randn(shape, generator=gen) * 0.1
        else:
            out[k] = torch.randn(shape, generator=gen) * (1.0 / shape[-1] ** 0.5 if len(shape) == 2 else 0.02)
    return out


def _mvp_forward(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """MVP's extract_feat + forward_norm: CLS prepended, position added, blocks, CLS, LayerNorm."""
    t = m.patch_embed(x)
    t = torch.cat((m.cls_token.expand(t.shape[0], -1, -1), t), dim=1) + m.pos_embed
    for blk in m.blocks:
        t = blk(t)
    return m.norm(t[:, 0])


def _cls_forward(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """VC-1's / HRP's forward_features with use_cls: patch positions, then the CLS token with its
    own position, blocks, LayerNorm, CLS."""
    t = m.patch_embed(x) + m.pos_embed[:, 1:, :]
    cls = (m.cls_token + m.pos_embed[:, :1, :]).expand(t.shape[0], -1, -1)
    return m.norm(m.blocks(torch.cat((cls, t), dim=1)))[:, 0]


def _mae_extras(width: int) -> dict[str, torch.Tensor]:
    """What an MAE pre-training checkpoint keeps beside the encoder; every ViT loader drops it."""
    return {"mask_token": torch.zeros(1, 1, 16), "decoder_embed.weight": torch.zeros(16, width),
            "decoder_pred.bias": torch.zeros(8)}


@pytest.fixture(scope="module")
def releases(tmp_path_factory) -> dict[str, tuple[str, object, int, int]]:
    """family -> (encoder name, reference: pixels -> features, dim, frames to compare), each file in
    its release's layout, each reference loaded from that file the way the authors' loader reads it."""
    d = tmp_path_factory.mktemp("robot")
    out = {}

    def data_parallel(net):  # load_r3m and load_vip wrap their model in DataParallel before loading
        return lambda: torch.nn.DataParallel(ImageNetInside(net()))

    r3m = data_parallel(lambda: _calibrated(_resnet(18), seed=0))()
    sd = dict(r3m.state_dict())
    sd["module.lang_rew.pred.0.weight"] = torch.zeros(4, 4)  # the language head load_r3m removes
    sd["module.lang_enc.model.embeddings.word_embeddings.weight"] = torch.zeros(8, 4)
    torch.save({"r3m": sd}, d / "model_r3m.pt")
    ref = _loaded(data_parallel(lambda: _resnet(18)),
                  {k: v for k, v in torch.load(d / "model_r3m.pt")["r3m"].items() if "lang_" not in k})
    out["r3m"] = (f"r3m:resnet18@{d / 'model_r3m.pt'}", ref, 512, 2)

    trunk = _calibrated(_resnet(50), seed=2)
    torch.save(trunk.state_dict(), d / "mcr_resnet50.pth")
    ref = _loaded(lambda: _resnet(50), torch.load(d / "mcr_resnet50.pth", weights_only=True))
    out["mcr"] = (f"mcr:resnet50@{d / 'mcr_resnet50.pth'}", ImageNetInside(ref), 2048, 2)

    torch.manual_seed(3)
    trunk.fc = nn.Linear(2048, 1024)
    sd = {"module.convnet." + k: v for k, v in trunk.state_dict().items()}
    # a file older than BatchNorm's counters: loading must not need them
    torch.save({"vip": {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}, "global_step": 40000},
               d / "model_vip.pt")
    ref = _loaded(data_parallel(lambda: _resnet(50, fc=1024)), {**sd, **torch.load(d / "model_vip.pt")["vip"]})
    out["vip"] = (f"vip:resnet50@{d / 'model_vip.pt'}", ref, 1024, 2)

    gn = Wrapped(_calibrated(_resnet(18, group_norm=True), seed=4))
    torch.save({"features": gn.state_dict()}, d / "IN_1M_resnet18.pth")
    ref = _loaded(lambda: Wrapped(_resnet(18, group_norm=True)), torch.load(d / "IN_1M_resnet18.pth")["features"])
    out["hrp_resnet18"] = (f"hrp:resnet18@{d / 'IN_1M_resnet18.pth'}", ImageNetInside(ref._model), 512, 2)

    # MVP's ViT-S has 12 heads of 32 (mvp/backbones/vit.py), not timm's 6: heads leave no trace in
    # the shapes, so 6 would load and give other features.
    torch.save({"model": {**_random_vit_state(384, 12, 12, seed=5), **_mae_extras(384)}}, d / "vits-mae-hoi.pth")
    ref = _loaded(lambda: _vit(384, 12, 12), torch.load(d / "vits-mae-hoi.pth")["model"], strict=False)
    out["mvp"] = (f"mvp:vits@{d / 'vits-mae-hoi.pth'}", lambda px, m=ref: _mvp_forward(m, _norm(px)), 384, 2)

    vitb = _random_vit_state(768, 12, 12, seed=6)
    args = argparse.Namespace(model="vit_base_patch16", mask_ratio=0.75)  # MAE saves its args beside the model
    torch.save({"model": {**vitb, **_mae_extras(768)}, "epoch": 182, "args": args}, d / "vc1_vitb.pth")
    torch.save({"features": vitb}, d / "IN_hrp.pth")
    ref = _loaded(lambda: _vit(768, 12, 12), {k: v for k, v in torch.load(d / "vc1_vitb.pth", weights_only=False)[
        "model"].items() if "decoder" not in k and "mask_token" not in k})
    out["vc1"] = (f"vc1:vitb@{d / 'vc1_vitb.pth'}", lambda px, m=ref: _cls_forward(m, _norm(px)), 768, 1)
    out["hrp_vit"] = (f"hrp:vit@{d / 'IN_hrp.pth'}", lambda px, m=ref: _cls_forward(m, _norm(px)), 768, 1)
    return out


def _norm(pixels: torch.Tensor) -> torch.Tensor:
    return TF.normalize(pixels / 255.0, MEAN, STD)


@pytest.mark.parametrize("family", ["r3m", "vip", "mcr", "hrp_resnet18", "mvp", "vc1", "hrp_vit"])
def test_features_equal_the_authors_network_on_the_same_weights(releases, family):
    name, reference, dim, n = releases[family]
    enc = get_encoder(name, device="cpu")
    assert enc.dim == dim and enc.family == "robot" and enc.preprocessing.size == (224, 224)
    batch = enc.preprocess(_frames(10, n))
    got = enc.encode(batch)
    with torch.no_grad():
        want = reference(_pixels(enc, batch)).numpy()
    assert got.shape == (n, dim) and want.shape == (n, dim)
    scale = float(np.abs(want).max())
    assert scale > 1e-3  # features carry signal, so the comparison can fail
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)


def _authors_transform(family: str, image: np.ndarray) -> torch.Tensor:
    """The preprocessing each family's code applies to a frame, on Pillow / float tensors as theirs."""
    if family == "hrp":  # data4robotics: a [0, 1] tensor squashed to 224 x 224, no antialiasing
        t = TF.to_tensor(image.copy())
        return TF.normalize(T.Resize((224, 224), antialias=False)(t), MEAN, STD)
    resize = {"r3m": T.Resize(256), "vc1": T.Resize(256, interpolation=T.InterpolationMode.BICUBIC),
              "mvp": T.Resize(224)}[family]
    return TF.normalize(TF.to_tensor(T.CenterCrop(224)(resize(Image.fromarray(image)))), MEAN, STD)


@pytest.mark.parametrize("family", ["r3m", "vc1", "mvp", "hrp"])
@pytest.mark.parametrize("size", [(300, 400), (60, 80)])
def test_preprocessing_is_the_authors_to_a_grey_level(family, size):
    """R3M's (VIP's, MCR's) README pipeline, VC-1's vit_transforms, HRP's default_transform, and
    MVP's bilinear resize: the engine's uint8 resize agrees with Pillow's (and with HRP's float
    resize) to within one grey level; Pillow's bicubic rounds its two passes apart, so a few pixels
    in 10,000 differ by two."""
    image = _frames(20, 1, size)[0]
    got = preprocess_images([image], RELEASES[family].preprocessing(224))[0]
    want = _authors_transform(family, image)
    diff = ((got - want) * torch.tensor(STD).view(3, 1, 1) * 255).abs()
    assert float(diff.max()) <= 2.01 and float((diff > 1.01).float().mean()) < 1e-4


def test_another_variant_names_the_right_one(releases):
    path = releases["mvp"][0].split("@", 1)[1]
    with pytest.raises(EncoderError, match=r"got a ViT/16 \(384-d, 12 blocks\) checkpoint; name it mvp:vits@PATH"):
        get_encoder(f"mvp:vitb@{path}")
    with pytest.raises(EncoderError, match=r"'model'"):  # HRP's ViT is nested under 'features'
        get_encoder(f"vc1:vitb@{releases['hrp_vit'][0].split('@', 1)[1]}")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[str, object]:
    root = tmp_path_factory.mktemp("robot_frames")
    for i, frame in enumerate(_frames(30, 3, (48, 64))):
        Image.fromarray(frame).save(root / f"f{i}.png")
    db = str(root / "c.duckdb")
    assert cli.main(["index", str(root), "--set", "s", "--domain", "sim", "--db", db, "--quiet"]) == 0
    return db, root


def test_embed_through_the_cli_stores_the_encoders_vectors(releases, indexed, capsys):
    db, root = indexed
    name = releases["r3m"][0]
    assert cli.main(["embed", "--encoder", name, "--db", db, "--quiet"]) == 0
    enc = get_encoder(name)
    with Catalog(db) as cat:
        meta, vecs = cat.load_embeddings("s", enc.fingerprint)
    assert vecs.shape == (3, 512)
    frames = [np.asarray(Image.open(root / f"{m['pair_key']}.png").convert("RGB")) for m in meta]
    np.testing.assert_allclose(vecs, enc.embed(frames), rtol=1e-5, atol=1e-5)
    capsys.readouterr()
    assert cli.main(["embed", "--encoder", name, "--db", db]) == 0
    assert "all cached" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["missing", "no_path", "variant", "wrong_variant", "other_release", "other_keys",
                                  "unsafe", "suffix"])
def test_a_wrong_name_or_file_is_one_line_and_exit_2(releases, indexed, tmp_path, capsys, case):
    db, _ = indexed
    r3m18 = releases["r3m"][0].split("@", 1)[1]
    bad = tmp_path / "model.pt"
    name = {"missing": f"r3m:resnet18@{tmp_path / 'absent.pt'}", "no_path": "r3m:resnet18",
            "variant": f"r3m:resnet101@{r3m18}", "wrong_variant": f"r3m:resnet34@{r3m18}",
            "other_release": f"vip:resnet50@{r3m18}", "other_keys": f"r3m:resnet18@{bad}",
            "unsafe": f"r3m:resnet18@{bad}", "suffix": f"r3m:resnet18@{tmp_path / 'model.txt'}"}[case]
    if case == "other_keys":
        torch.save({"r3m": {"module.convnet.conv1.weight": torch.zeros(64, 3, 7, 7),
                            "module.convnet.head.weight": torch.zeros(2)}}, bad)
    elif case == "unsafe":
        torch.save({"r3m": np.random.default_rng(0)}, bad)  # unpickling it would build a numpy object
    elif case == "suffix":
        (tmp_path / "model.txt").write_text("x")
    capsys.readouterr()
    code = cli.main(["embed", "--encoder", name, "--db", db, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    want = {"missing": "not found", "no_path": "r3m:resnet18|resnet34|resnet50@PATH", "variant": "'resnet101'",
            "wrong_variant": "got a ResNet-18 checkpoint; name it r3m:resnet18@PATH",
            "other_release": "under 'vip'", "other_keys": "missing keys", "unsafe": "refusing",
            "suffix": "ending in"}[case]
    assert want in err, err
    if case == "other_keys":
        assert "1 unexpected keys (e.g. 'head.weight')" in err, err


def test_missing_file_is_weights_unavailable():
    with pytest.raises(WeightsUnavailableError, match="not found"):
        get_encoder("hrp:vit@/nonexistent/IN_hrp.pth")


def test_encoders_lists_each_family_with_its_form(capsys):
    assert cli.main(["encoders"]) == 0
    out = capsys.readouterr().out
    for form in ("r3m:resnet18|resnet34|resnet50@PATH", "vip:resnet50@PATH", "mcr:resnet50@PATH",
                 "mvp:vits|vitb|vitl@PATH", "vc1:vitb|vitl@PATH", "hrp:resnet18|vit@PATH"):
        assert f"\n  {form}\n" in out, out
