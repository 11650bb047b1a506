"""What closes the gap, through the CLI and the API: known camera answers, identical frames, moved content."""

from __future__ import annotations

import json

import numpy as np
import pytest

try:
    import camera_cases as C
except ImportError:  # tests/ imported as a package
    from tests import camera_cases as C

import perception_gap as pg
from perception_gap.camera.attribution import counterfactual_size, variants
from perception_gap.camera.model import CameraModel
from perception_gap.cli import main
from perception_gap.embed import default_encoders

N = 24
SIZE = (192, 144)


def _index(root, db) -> None:
    for side in ("sim", "real"):
        assert main(["index", str(root / side), "--set", side, "--domain", side, "--db", str(db), "-q"]) == 0


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """A robot camera's frames as sim; the same frames through the known camera (JPEG q60 files) as real;
    `run` with efficientnet-lite0 and the pixel baseline."""
    root = tmp_path_factory.mktemp("known")
    sim = [C.tabletop(s, SIZE) for s in range(N)]
    real = [C.jpeg(f) for f in [pg.apply_camera_model(x, C.KNOWN, rng=s) for s, x in enumerate(sim)]]
    C.write_pairs(root, sim, real_jpeg=real)
    db = root / "c.duckdb"
    _index(root, db)
    out = root / "out"
    # lite0 and the pixel baseline here; bench/bench_attribution.py reads every encoder with weights
    encoders = [e for e in default_encoders() if e in ("efficientnet-lite0", "pixel")]
    assert main(["run", "--sim", "sim", "--real", "real", "--encoders", ",".join(encoders), "--out", str(out),
                 "--db", str(db), "--device", "cpu", "-q"]) == 0
    return json.loads((out / "results.json").read_text()), out, encoders


def test_known_camera_is_fitted_and_closes_the_gap_for_every_encoder(known):
    res, out, encoders = known
    cam = res["camera_model"]
    by = {f["code"]: f["params"] for f in cam["factors"]}
    assert by["brightness"]["stops"] == pytest.approx(0.5, rel=0.2)
    assert by["white_balance"]["r_gain"] == pytest.approx(1.15, rel=0.2)
    assert by["white_balance"]["b_gain"] == pytest.approx(0.88, rel=0.2)
    assert by["sharpness"]["sigma_px"] == pytest.approx(1.2, rel=0.2)
    assert by["sensor_noise"]["mid_grey_levels"] == pytest.approx(3.0, rel=0.2)
    assert by["compression"] == {"quality": 60, "subsampling": "4:2:0"}
    assert {e["name"] for e in res["encoders"]} == set(encoders) == {"efficientnet-lite0", "pixel"}
    for e in res["encoders"]:
        a = e["attribution"]
        assert a["clear_gap"] and a["n_pairs"] == N and a["basis"] == "pairs", e["name"]
        assert a["all"]["share"] >= 0.8, (e["name"], a["all"])
        assert a["all"]["ci"][0] <= a["all"]["share"] <= a["all"]["ci"][1]
        assert a["residual"]["share"] == pytest.approx(1 - a["all"]["share"], abs=1e-3)
        steps = [f["step"] for f in a["factors"]]
        assert sum(steps) == pytest.approx(a["all"]["share"], abs=1e-3)  # the waterfall adds up
        assert [f["code"] for f in a["factors"]] == [f["code"] for f in cam["factors"]]
        assert a["n_variants"] == len(variants(CameraModel.from_dict(cam))) == 2 * len(a["factors"]) - 1
        assert a["n_counterfactual"] == counterfactual_size(N, a["n_variants"], True)
    # the file beside results.json is the same model, and applies as it says
    assert json.loads((out / "camera_model.json").read_text()) == cam
    frame = C.tabletop(99, SIZE)
    assert pg.apply_camera_model(frame, out / "camera_model.json", rng=0).shape == frame.shape
    cm = next(f for f in res["findings"] if f["code"] == "camera_model")
    assert cm["severity"] == "gap" and " closes " in cm["action"] and "depth" not in cm["action"].lower()


def test_a_rerun_reads_the_counterfactuals_from_the_catalog(known):
    res, out, _ = known
    db = out.parent / "c.duckdb"
    before = res["camera_model"]["seconds"]["attribution"]
    with pg.open_catalog(db) as cat:  # the API, without `out`: no report to draw again
        again = pg.run(cat, "sim", "real", encoders=["pixel"], device="cpu")
    first = next(e for e in res["encoders"] if e["name"] == "pixel")["attribution"]
    assert again["encoders"][0]["attribution"]["all"] == first["all"]  # the same vectors, read back
    assert again["camera_model"]["seconds"]["attribution"] <= before + 1.0


def test_identical_frames_give_zero_shares_and_an_empty_model(tmp_path):
    frames = [C.tabletop(s, (128, 96), base=2) for s in range(12)]
    C.write_pairs(tmp_path, frames, real_png=frames)
    db = tmp_path / "c.duckdb"
    _index(tmp_path, db)
    with pg.open_catalog(db) as cat:
        res = pg.run(cat, "sim", "real", encoders=["pixel"], workers=1)
        model = pg.camera_model(cat, "sim", "real", out=tmp_path / "cm", workers=1)
    assert res["camera_model"]["factors"] == [] and model.factors == ()
    a = res["encoders"][0]["attribution"]
    assert a["factors"] == [] and a["all"]["share"] == 0.0 and a["n_variants"] == 0
    assert json.loads((tmp_path / "cm" / "camera_model.json").read_text())["factors"] == []
    assert "camera_model" not in [f["code"] for f in res["findings"]]


def test_moved_content_stays_in_the_residual(tmp_path):
    """Same camera, objects moved: the camera factors close under 20% of the gap."""
    rng = np.random.default_rng(0)
    sim = [C.tabletop(s, (160, 120), base=3) for s in range(16)]
    real = []
    for f in sim:
        g = f.copy()
        y, x = rng.integers(10, 60), rng.integers(10, 90)
        g[y:y + 50, x:x + 60] = f[60:110, 90:150][::-1]  # an object moved and turned
        g[5:35, 5:40] = (200, 40, 40)  # and a new red one
        real.append(g)
    C.write_pairs(tmp_path, sim, real_png=real)
    db = tmp_path / "c.duckdb"
    _index(tmp_path, db)
    with pg.open_catalog(db) as cat:
        res = pg.run(cat, "sim", "real", encoders=["pixel"], workers=1)
    a = res["encoders"][0]["attribution"]
    assert a["clear_gap"]  # the encoder does see the moved content
    assert a["all"]["share"] < 0.2, (res["camera_model"]["factors"], a["all"])


def test_camera_model_command_and_its_errors(known, tmp_path, capsys):
    _, out, _ = known
    db = out.parent / "c.duckdb"
    assert main(["camera-model", "--sim", "sim", "--real", "real", "--out", str(tmp_path / "cm"), "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "brightness: exposure +0.4" in text or "brightness: exposure +0.5" in text
    assert "written:" in text and (tmp_path / "cm" / "camera_model.json").is_file()
    model = pg.load_camera_model(tmp_path / "cm" / "camera_model.json")
    assert "sharpness" in model.codes()
    assert main(["camera-model", "--sim", "sim", "--real", "nope", "--out", str(tmp_path / "x"), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nope" in err


def test_unpaired_sets_are_attributed_on_set_statistics(tmp_path):
    """Other object placements on the real side, no shared pair keys: set-level gains, the
    real-vs-real floor."""
    light = C.KNOWN.only(["brightness", "white_balance"])
    sim = [C.tabletop(s, (160, 120), base=4) for s in range(32)]
    real = [pg.apply_camera_model(C.tabletop(100 + s, (160, 120), base=4), light, rng=0) for s in range(32)]
    (tmp_path / "sim").mkdir()
    (tmp_path / "real").mkdir()
    from PIL import Image

    for i, (s, r) in enumerate(zip(sim, real)):
        Image.fromarray(s).save(tmp_path / "sim" / f"s{i:03d}.png")
        Image.fromarray(r).save(tmp_path / "real" / f"r{i:03d}.png")  # no shared pair keys
    db = tmp_path / "c.duckdb"
    _index(tmp_path, db)
    with pg.open_catalog(db) as cat:
        res = pg.run(cat, "sim", "real", encoders=["pixel"], workers=1)
    assert res["camera_model"]["basis"] == "sets"
    by = {f["code"]: f["params"] for f in res["camera_model"]["factors"]}
    assert by["brightness"]["stops"] == pytest.approx(0.5, rel=0.2)
    a = res["encoders"][0]["attribution"]
    assert a["basis"] == "sets" and a["clear_gap"] and a["all"]["share"] >= 0.8
