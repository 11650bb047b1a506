"""`run --inception-weights`: the FID Inception v3 written in `encoders/` against pytorch-fid's, and the
FID of `run` against an independent computation on the same features.

The weights are random (the real file is not downloaded): a checkpoint with the real key layout, its
BatchNorm statistics calibrated on image-like inputs so every layer's activations stay of order one
and a wrong block (a padded average pool, a missing max pool) changes the features visibly.
"""

from __future__ import annotations

import json
from unittest import mock

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")

from perception_gap import cli  # noqa: E402
from perception_gap.encoders import EncoderError, UnsafeCheckpointError, get_encoder  # noqa: E402
from perception_gap.encoders.fid_inception import FIDInceptionEncoder, build_fid_inception  # noqa: E402
from perception_gap.reports import render_report  # noqa: E402

N_FRAMES = 4


def _smooth_images(rng: np.random.Generator, n: int, size: tuple[int, int]) -> list[np.ndarray]:
    """n HxWx3 uint8 images of upsampled coarse noise (smooth, like photographs at this scale)."""
    h, w = size
    out = []
    for _ in range(n):
        coarse = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        out.append(np.asarray(Image.fromarray(coarse).resize((w, h), Image.BILINEAR)))
    return out


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> str:
    """A random-weights FID Inception checkpoint, BatchNorm calibrated on smooth 299 x 299 inputs."""
    torch.manual_seed(0)
    model = build_fid_inception()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None  # running statistics = those of the calibration batch
            torch.nn.init.uniform_(m.weight, 0.5, 1.5)
            torch.nn.init.uniform_(m.bias, -0.2, 0.2)
    rng = np.random.default_rng(1)
    calib = torch.from_numpy(np.stack(_smooth_images(rng, 4, (299, 299)))).permute(0, 3, 1, 2).float() / 127.5 - 1
    model.train()
    with torch.no_grad():
        model.features(calib)
    path = tmp_path_factory.mktemp("fid") / "fid_inception_random.pth"
    torch.save(model.eval().state_dict(), path)
    return str(path)


def test_key_layout_is_torchvisions_inception_v3_with_1008_classes(weights):
    """The file pytorch-fid loads is a torchvision inception_v3(num_classes=1008, aux_logits=False)
    state dict: the same keys and shapes, so the real weights file loads key for key."""
    torchvision = pytest.importorskip("torchvision")
    ref = torchvision.models.inception_v3(weights=None, num_classes=1008, aux_logits=False, init_weights=False)
    ours = torch.load(weights, weights_only=True)
    assert {k: tuple(v.shape) for k, v in ours.items()} == {k: tuple(v.shape) for k, v in ref.state_dict().items()}


def test_features_equal_pytorch_fids_inception(weights):
    """pytorch-fid's InceptionV3 (its FID blocks over torchvision's modules) with the same state dict,
    its URL loader patched to return it (no network), gives the same 2048-d features: at the frames'
    own sizes, resized inside its forward as `fid_score` feeds it (ToTensor, then bilinear to 299)."""
    inception = pytest.importorskip("pytorch_fid.inception")
    state = torch.load(weights, weights_only=True)
    with mock.patch.object(inception, "load_state_dict_from_url", lambda *a, **k: state):
        ref = inception.InceptionV3([inception.InceptionV3.BLOCK_INDEX_BY_DIM[2048]]).eval()
    enc = FIDInceptionEncoder(weights, device="cpu")
    rng = np.random.default_rng(2)
    for size in ((48, 64), (320, 300)):
        images = _smooth_images(rng, 1, size)
        with torch.no_grad():
            want = ref(torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float() / 255.0)[0].flatten(1).numpy()
        got = enc.embed(images)
        assert got.shape == (1, 2048)
        assert float(want.std()) > 0.05  # features of order one, not a vanished signal
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    # a block changed the torchvision way (a padded average pool in Mixed_7c) changes them visibly
    with torch.no_grad():
        x = enc.preprocess(images)
        model = enc.load()._model
        model.Mixed_7c.max_pool = False
        changed = model.features(x).numpy()
        model.Mixed_7c.max_pool = True
    assert np.abs(changed - got).max() > 1e-2


def _frechet_reference(f_sim: np.ndarray, f_real: np.ndarray) -> float:
    """FID written independently: ||mu_s - mu_r||^2 + Tr(S_s) + Tr(S_r) - 2 Tr((S_s^1/2 S_r S_s^1/2)^1/2), the
    symmetric form of Tr((S_s S_r)^1/2), with S_s^1/2 from numpy's eigendecomposition. Both covariances live in
    the span of the centred rows (at most 2N - 2 of the 2048 dimensions), so the square roots are taken there,
    in an orthonormal basis of that span: the same number as in 2048 dimensions (where an eigendecomposition of
    each 2048 x 2048 matrix costs seconds, and scipy's `sqrtm` minutes, on the shared 2-core machine)."""
    f_sim, f_real = f_sim.astype(np.float64), f_real.astype(np.float64)
    c_sim, c_real = f_sim - f_sim.mean(0), f_real - f_real.mean(0)
    basis = np.linalg.qr(np.concatenate([c_sim, c_real]).T)[0]  # (2048, 2N) orthonormal columns
    s_s, s_r = np.cov(c_sim @ basis, rowvar=False), np.cov(c_real @ basis, rowvar=False)
    lam, vec = np.linalg.eigh(s_s)
    root = (vec * np.sqrt(np.clip(lam, 0, None))) @ vec.T
    inner = root @ s_r @ root
    tr_sqrt = np.sqrt(np.clip(np.linalg.eigvalsh((inner + inner.T) / 2), 0, None)).sum()
    traces = np.sum(c_sim**2) / (len(c_sim) - 1) + np.sum(c_real**2) / (len(c_real) - 1)
    return float(np.sum((f_sim.mean(0) - f_real.mean(0)) ** 2) + traces - 2 * tr_sqrt)


def test_the_reference_frechet_distance_equals_the_full_dimensional_form():
    """The reduction to the span of the rows changes nothing: against the same form in all the
    dimensions, on vectors of a width where that is cheap (the eigenvalues that are zero but for
    rounding set to zero: their square roots, ~1e-8 each, would otherwise add up)."""

    def psd_eigvals(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lam, vec = np.linalg.eigh((m + m.T) / 2)
        return np.where(lam > 1e-12 * lam.max(), lam, 0.0), vec

    rng = np.random.default_rng(5)
    f_sim, f_real = rng.normal(0, 1, (4, 64)), rng.normal(0.5, 1.5, (4, 64))
    s_s, s_r = np.cov(f_sim, rowvar=False), np.cov(f_real, rowvar=False)
    lam, vec = psd_eigvals(s_s)
    root = (vec * np.sqrt(lam)) @ vec.T
    tr_sqrt = np.sqrt(psd_eigvals(root @ s_r @ root)[0]).sum()
    full = np.sum((f_sim.mean(0) - f_real.mean(0)) ** 2) + np.trace(s_s) + np.trace(s_r) - 2 * tr_sqrt
    assert _frechet_reference(f_sim, f_real) == pytest.approx(full, rel=1e-9)


@pytest.fixture(scope="module")
def frame_sets(tmp_path_factory):
    """sim: smooth 64 x 48 frames; real: the same scenes brighter and noisier; PNG files paired by name."""
    root = tmp_path_factory.mktemp("fid_sets")
    rng = np.random.default_rng(3)
    sim = _smooth_images(rng, N_FRAMES, (48, 64))
    real = [np.clip(a.astype(np.int16) * 1.3 + 12 + rng.normal(0, 6, a.shape), 0, 255).astype(np.uint8) for a in sim]
    for name, images in (("sim", sim), ("real", real), ("sim_copy", sim)):
        (root / name).mkdir()
        for i, a in enumerate(images):
            Image.fromarray(a).save(root / name / f"f{i:02d}.png")
    db = str(root / "cat.duckdb")
    for name, domain in (("sim", "sim"), ("real", "real"), ("sim_copy", "real")):
        assert cli.main(["index", str(root / name), "--set", name, "--domain", domain, "--db", db, "--quiet"]) == 0
    return root, db


def test_run_fid_equals_an_independent_computation(weights, frame_sets, tmp_path):
    """`run --inception-weights`: results.json's `fid` is the Frechet distance of pytorch-fid's features of
    the same PNG files (read with PIL, as fid_score reads them), computed independently; a set against
    itself gives 0; the figure is in the report next to the per-encoder Frechet distances."""
    root, db = frame_sets
    out = tmp_path / "out"
    assert cli.main(["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--inception-weights", weights,
                     "--out", str(out), "--db", db, "--quiet", "--device", "cpu", "--no-attribution"]) == 0
    res = json.loads((out / "results.json").read_text())
    fid = res["fid"]
    assert (fid["n_sim"], fid["n_real"], fid["dim"]) == (N_FRAMES, N_FRAMES, 2048)
    assert fid["reference_weights"] is False and len(fid["weights_sha256"]) == 64
    assert res["config"]["inception_weights"] == weights
    assert [e["name"] for e in res["encoders"]] == ["pixel"]  # FID is its own section, never ranked

    inception = pytest.importorskip("pytorch_fid.inception")
    state = torch.load(weights, weights_only=True)
    with mock.patch.object(inception, "load_state_dict_from_url", lambda *a, **k: state):
        ref = inception.InceptionV3([3]).eval()

    def features(name: str) -> np.ndarray:
        files = sorted((root / name).glob("*.png"))
        x = torch.stack([torch.from_numpy(np.asarray(Image.open(f).convert("RGB"))).permute(2, 0, 1) for f in files])
        with torch.no_grad():
            return ref(x.float() / 255.0)[0].flatten(1).numpy()

    want = _frechet_reference(features("sim"), features("real"))
    assert want > 1.0
    assert fid["value"] == pytest.approx(want, rel=1e-4)
    assert fid["ci"]["low"] <= fid["value"] <= fid["ci"]["high"]
    assert fid["kid"]["value"] > 0
    html = (out / "report.html").read_text()
    assert 'id="fid"' in html and f"{fid['value']:.3g}"[:3] in html

    # a set against itself: 0; under --precision bf16 the FID stays at the reference's fp32 (the same vectors)
    same = tmp_path / "same"
    assert cli.main(["run", "--sim", "sim", "--real", "sim_copy", "--encoders", "pixel", "--inception-weights", weights,
                     "--out", str(same), "--db", db, "--quiet", "--device", "cpu", "--precision", "bf16",
                     "--no-attribution"]) == 0
    fid_same = json.loads((same / "results.json").read_text())["fid"]
    assert fid_same["value"] == pytest.approx(0.0, abs=1e-6 * want) and fid_same["fingerprint"] == fid["fingerprint"]


def test_fid_report_without_weights_has_no_fid_block(frame_sets, tmp_path):
    res = {"kind": "run", "encoders": [], "findings": [], "sets": {}}
    assert 'id="fid"' not in render_report(res)


@pytest.mark.parametrize("case", ["missing", "other_network", "unsafe", "corrupt_name", "suffix"])
def test_a_wrong_weights_file_is_one_line_and_exit_2(weights, frame_sets, tmp_path, capsys, case):
    """Checked before any frame is read: one line on stderr, exit 2, nothing written."""
    _, db = frame_sets
    path = tmp_path / "w.pth"
    if case == "other_network":
        torch.save({"fc.weight": torch.zeros(1008, 2048), "conv.weight": torch.zeros(3)}, path)
    elif case == "unsafe":
        torch.save({"f": np.random.default_rng(0)}, path)  # unpickling it would build a numpy object
    elif case == "corrupt_name":
        path = tmp_path / "pt_inception-2015-12-05-00000000.pth"
        path.write_bytes(open(weights, "rb").read())
    elif case == "suffix":
        path = tmp_path / "w.txt"
        path.write_text("x")
    out = tmp_path / "out"
    capsys.readouterr()
    code = cli.main(["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--inception-weights",
                     str(path), "--out", str(out), "--db", db, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert not (out / "results.json").exists()
    want = {"missing": "not found", "other_network": "missing keys", "unsafe": "refusing",
            "corrupt_name": "corrupt", "suffix": "ending in"}[case]
    assert want in err and "inception" in err.lower()


def test_encoder_errors_and_name(weights, tmp_path):
    enc = get_encoder(f"fid-inception:{weights}", device="cpu")
    assert isinstance(enc, FIDInceptionEncoder) and enc.dim == 2048 and enc.preprocessing.size == (299, 299)
    assert enc.fingerprint == FIDInceptionEncoder(weights).fingerprint
    bad = tmp_path / "bad.pt"
    torch.save({"f": np.zeros(2)}, bad)
    with pytest.raises(UnsafeCheckpointError):
        FIDInceptionEncoder(str(bad))
    with pytest.raises(EncoderError, match="empty"):
        enc.preprocess([])
