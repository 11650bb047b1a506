"""`run --inception-weights` with the right keys and shapes but the wrong kind of tensor: sparse,
quantized or integer weights are refused up front (one line, exit 2, nothing computed), where
they used to pass the check and then raise in `load_state_dict` after statistics and every other
encoder ran, or (integers) be truncated into the network and give FID 0 for any two sets."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")

from perception_gap import cli  # noqa: E402
from perception_gap.encoders.fid_inception import build_fid_inception  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A sim and a real set of two different frames each, and a valid random state dict."""
    root = tmp_path_factory.mktemp("fid_kinds")
    rng = np.random.default_rng(0)
    db = str(root / "c.duckdb")
    for dom, shift in (("sim", 0), ("real", 90)):
        (root / dom).mkdir()
        for i in range(3):
            a = np.clip(rng.integers(0, 150, (32, 32, 3)) + shift, 0, 255).astype(np.uint8)
            Image.fromarray(a).save(root / dom / f"f{i}.png")
        assert cli.main(["index", str(root / dom), "--set", dom, "--domain", dom, "--db", db, "-q"]) == 0
    torch.manual_seed(0)
    state = build_fid_inception().state_dict()
    return root, db, state


def _variant(state: dict, case: str) -> dict:
    out = dict(state)
    conv = "Conv2d_1a_3x3.conv.weight"
    if case == "coo":
        out[conv] = state[conv].to_sparse()
    elif case == "csr":
        out["fc.weight"] = state["fc.weight"].to_sparse_csr()
    elif case == "quantized":
        out[conv] = torch.quantize_per_tensor(state[conv], 0.01, 0, torch.qint8)
    elif case in ("int64", "uint8"):
        dtype = getattr(torch, case)
        out = {k: (v * 100).to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    return out


@pytest.mark.parametrize("case", ["coo", "csr", "quantized", "int64", "uint8"])
def test_weights_of_another_kind_are_refused_before_anything_runs(world, tmp_path, capsys, case):
    root, db, state = world
    path = tmp_path / f"{case}.pth"
    torch.save(_variant(state, case), path)
    out = tmp_path / "out"
    capsys.readouterr()
    code = cli.main(["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--inception-weights", str(path),
                     "--out", str(out), "--db", db, "-q", "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "dense floating-point tensors" in err
    want = {"coo": "sparse_coo float32", "csr": "sparse_csr float32", "quantized": "quantized qint8",
            "int64": ": int64", "uint8": ": uint8"}[case]
    assert want in err
    assert not (out / "results.json").exists()
