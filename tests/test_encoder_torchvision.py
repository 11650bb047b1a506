"""`torchvision:NAME@PATH`: penultimate features against torchvision's own model on the same state
dict (its head's last linear layer replaced by the test itself), the ImageNet preprocessing of the
weights enum, and the one-line refusals through the CLI.

Weights are random (nothing downloads), saved as torchvision's files are: `torch.save(state_dict)`.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

from perception_gap import cli  # noqa: E402
from perception_gap.catalog import Catalog  # noqa: E402
from perception_gap.encoders import get_encoder  # noqa: E402

# (architecture, how the test itself takes the head off torchvision's model)
ARCHS = {
    "mobilenet_v3_small": lambda m: m.classifier.__setitem__(3, torch.nn.Identity()),  # Linear-Hardswish-Dropout-Linear
    "shufflenet_v2_x0_5": lambda m: setattr(m, "fc", torch.nn.Identity()),
}


def _frames(n: int, size: tuple[int, int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    h, w = size
    return [np.asarray(Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((w, h), Image.BILINEAR))
            for _ in range(n)]


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("torchvision")
    out = {}
    calib = torch.from_numpy(np.stack(_frames(4, (224, 224), seed=9))).permute(0, 3, 1, 2).float() / 127.5 - 1
    for i, arch in enumerate(ARCHS):
        torch.manual_seed(i)
        model = torchvision.models.get_model(arch, weights=None)
        # BatchNorm statistics of a calibration batch, so activations stay of order one through the
        # random network (torchvision's initialization alone leaves MobileNetV3's features near 1e-9)
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.momentum = None
        with torch.no_grad():
            model.train()(calib)
        path = root / f"{arch}_random.pth"
        torch.save(model.eval().state_dict(), path)
        out[arch] = str(path)
    return out


@pytest.mark.parametrize("arch", list(ARCHS))
def test_penultimate_features_equal_torchvisions_own_model(weights, arch):
    enc = get_encoder(f"torchvision:{arch}@{weights[arch]}")
    ref = torchvision.models.get_model(arch, weights=None)
    ref.load_state_dict(torch.load(weights[arch], weights_only=True))
    ARCHS[arch](ref)
    batch = enc.preprocess(_frames(2, (60, 90)))
    with torch.no_grad():
        want = ref.eval()(batch).numpy()
    got = enc.encode(batch)
    assert got.shape == want.shape == (2, enc.dim)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert np.abs(want).max() > 1e-3


def test_preprocessing_is_the_default_enum_entrys_imagenet_transform(weights):
    enc = get_encoder(f"torchvision:mobilenet_v3_small@{weights['mobilenet_v3_small']}")
    p = enc.preprocessing
    assert (p.size, p.interpolation, p.resize_mode) == ((224, 224), "bilinear", "shortest")
    assert int(224 / p.crop_pct) == 256 and p.mean == (0.485, 0.456, 0.406) and p.std == (0.229, 0.224, 0.225)
    assert enc.transforms_entry == "DEFAULT (IMAGENET1K_V1)"
    image = _frames(1, (180, 300), seed=2)[0]
    transform = torchvision.models.get_model_weights("mobilenet_v3_small").DEFAULT.transforms()
    want = transform(Image.fromarray(image))  # a PIL image, as torchvision's reference scripts feed it
    np.testing.assert_allclose(enc.preprocess([image])[0].numpy(), want.numpy(), atol=1e-5)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[str, object]:
    root = tmp_path_factory.mktemp("torchvision_frames")
    for i, frame in enumerate(_frames(3, (48, 64), seed=5)):
        Image.fromarray(frame).save(root / f"f{i}.png")
    db = str(root / "c.duckdb")
    assert cli.main(["index", str(root), "--set", "s", "--domain", "sim", "--db", db, "--quiet"]) == 0
    return db, root


def test_embed_through_the_cli_stores_the_encoders_vectors(weights, indexed):
    db, root = indexed
    name = f"torchvision:mobilenet_v3_small@{weights['mobilenet_v3_small']}"
    assert cli.main(["embed", "--encoder", name, "--db", db, "--quiet"]) == 0
    enc = get_encoder(name)
    with Catalog(db) as cat:
        meta, vecs = cat.load_embeddings("s", enc.fingerprint)
    frames = [np.asarray(Image.open(root / f"{m['pair_key']}.png").convert("RGB")) for m in meta]
    assert vecs.shape == (3, 1024)
    np.testing.assert_allclose(vecs, enc.embed(frames), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["missing", "no_path", "unknown_arch", "other_arch", "renamed", "unsafe", "suffix"])
def test_a_wrong_name_or_file_is_one_line_and_exit_2(weights, indexed, tmp_path, capsys, case):
    db, _ = indexed
    mobilenet = weights["mobilenet_v3_small"]
    renamed = tmp_path / "mobilenet_v3_small-047dcff4.pth"  # torchvision's file name, other bytes
    bad = tmp_path / "model.pth"
    if case == "renamed":
        renamed.write_bytes(open(mobilenet, "rb").read())
    elif case == "unsafe":
        torch.save({"w": np.random.default_rng(0)}, bad)
    elif case == "suffix":
        (tmp_path / "model.txt").write_text("x")
    name, want = {
        "missing": (f"torchvision:resnet18@{tmp_path / 'absent.pth'}", "not found"),
        "no_path": ("torchvision:resnet18", "torchvision:NAME@PATH"),
        "unknown_arch": (f"torchvision:googlenet@{mobilenet}", "Unknown torchvision classification model 'googlenet'"),
        "other_arch": (f"torchvision:shufflenet_v2_x0_5@{mobilenet}",
                       "missing keys (first: conv1.0.weight, conv1.1.weight); "),
        "renamed": (f"torchvision:mobilenet_v3_small@{renamed}", "a corrupt or renamed file"),
        "unsafe": (f"torchvision:mobilenet_v3_small@{bad}", "refusing"),
        "suffix": (f"torchvision:mobilenet_v3_small@{tmp_path / 'model.txt'}", "ending in"),
    }[case]
    capsys.readouterr()
    code = cli.main(["embed", "--encoder", name, "--db", db, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert want in err, err
    if case == "other_arch":
        assert "unexpected keys (first: features.0.0.weight" in err, err
