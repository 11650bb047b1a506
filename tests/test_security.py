"""Untrusted inputs never run code nor read outside their own file or folder, through the CLI.

A `.pt2` policy carrying a pickle that writes a marker file when unpickled; HDF5 cameras stored
in another file (external storage, an external link, a virtual dataset); LeRobot metadata whose
camera key or path templates lead outside the dataset; and a local Ray instance started with
its dashboard, usage reporting and metrics export off.
"""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import cli
from encoders.policy import weights_only_loads


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line_exit_2(code: int, err: str) -> None:
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (code, err)


# --- .pt2 policies ------------------------------------------------------------------------------


class Mean(torch.nn.Module):
    def forward(self, images: torch.Tensor, proprio: torch.Tensor) -> torch.Tensor:
        return torch.cat([images.mean(dim=(2, 3)), proprio], dim=1)


class Touch:
    """Unpickling this creates the file `path` (what any code run by a pickle could do)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.fixture(scope="module")
def policy_world(tmp_path_factory):
    root = tmp_path_factory.mktemp("pt2")
    lines = ["set,domain,rgb,pair_key,proprio"]
    rng = np.random.default_rng(0)
    for i in range(4):
        img = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)
        for dom in ("sim", "real"):
            Image.fromarray(img).save(root / f"{dom}{i}.png")
            lines.append(f'{dom},{dom},{dom}{i}.png,p{i},"[{i * 0.1}]"')
    (root / "m.csv").write_text("\n".join(lines) + "\n")
    db = str(root / "c.duckdb")
    assert cli.main(["index", "--manifest", str(root / "m.csv"), "--db", db, "-q"]) == 0
    program = torch.export.export(Mean(), (torch.zeros(4, 3, 8, 10), torch.zeros(4, 1)))
    torch.export.save(program, str(root / "mean.pt2"))
    return root, db


def _replace_member(src: Path, dst: Path, suffix: str, payload: bytes) -> None:
    """Copy the zip `src` to `dst` with the member whose name ends with `suffix` replaced by `payload`
    (added under the archive's folder when there is none)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        names = zin.namelist()
        hit = [n for n in names if n.endswith(suffix)]
        for n in names:
            zout.writestr(n, payload if n in hit else zin.read(n))
        if not hit:
            zout.writestr(names[0].split("/", 1)[0] + "/" + suffix, payload)


def _torch_pickle(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@pytest.mark.parametrize("member, payload", [
    ("data/sample_inputs/model.pt", "torch"),  # read with a full-unpickler retry by torch.export.load
    ("data/sample_inputs/model.pt", "raw"),  # a bare pickle, not torch.save's zip
    ("data/constants/opaque_obj_0", "raw"),  # a member torch.export.load reads with pickle.loads
])
def test_a_pickle_inside_a_pt2_policy_is_never_run(policy_world, tmp_path, capsys, member, payload):
    root, db = policy_world
    marker = tmp_path / "pwned"
    evil = Touch(str(marker))
    data = _torch_pickle(evil) if payload == "torch" else pickle.dumps(evil, protocol=2)
    bad = tmp_path / "evil.pt2"
    _replace_member(root / "mean.pt2", bad, member, data)
    code, _, err = run(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy", str(bad), "-q"], capsys)
    assert not marker.exists()
    one_line_exit_2(code, err)
    assert "pt2" in err


def test_the_pickle_does_run_under_a_plain_torch_export_load(policy_world, tmp_path):
    """The hole the guard closes exists: the same archive runs the pickle without the guard."""
    root, _ = policy_world
    marker = tmp_path / "pwned"
    bad = tmp_path / "evil.pt2"
    _replace_member(root / "mean.pt2", bad, "data/sample_inputs/model.pt", _torch_pickle(Touch(str(marker))))
    with weights_only_loads():
        with pytest.raises(Exception):
            torch.export.load(str(bad))
    assert not marker.exists()
    try:
        torch.export.load(str(bad))
    except Exception:  # noqa: BLE001 - what the unpickled object does next does not matter here
        pass
    assert marker.exists()


def test_an_untouched_pt2_policy_still_loads_and_runs(policy_world, tmp_path, capsys):
    root, db = policy_world
    js = tmp_path / "r.json"
    code, _, err = run(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
                        str(root / "mean.pt2"), "--json", str(js), "-q"], capsys)
    assert code == 0, err
    assert json.loads(js.read_text())["policy_check"]["n_pairs"] == 4
