"""The camera model: its operators against independent references, its file, and fits with known answers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

try:
    import camera_cases as C
except ImportError:  # tests/ imported as a package
    from tests import camera_cases as C

import perception_gap as pg
from perception_gap.camera import ops
from perception_gap.camera.fit import fit_camera_model
from perception_gap.camera.model import CameraModel, Factor, load_camera_model
from perception_gap.camera.texture import JpegInfo
from perception_gap.errors import InputError


def _srgb(v):  # an independent sRGB pair (IEC 61966-2-1), float64
    v = np.asarray(v, np.float64)
    return np.where(v <= 0.0031308, 12.92 * v, 1.055 * v ** (1 / 2.4) - 0.055)


def _lin(v):
    v = np.asarray(v, np.float64)
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def test_light_factors_act_on_linear_light():
    frame = np.full((8, 8, 3), 128, np.uint8)
    m = CameraModel((Factor("brightness", {"stops": 1.0}), Factor("white_balance", {"r_gain": 1.2, "b_gain": 0.5})))
    out = pg.apply_camera_model(frame, m)
    lin = _lin(128 / 255)
    want = np.rint(255 * _srgb(np.clip(lin * 2 * np.array([1.2, 1.0, 0.5]), 0, 1)))
    assert out.dtype == np.uint8 and out.shape == frame.shape
    assert np.array_equal(out[0, 0], want.astype(np.uint8))
    # tone curve: real = sim ** exponent in linear light; vignetting: 2 ** (stops * r^2), r = 1 at a corner
    t = pg.apply_camera_model(frame.astype(np.float32) / 255, CameraModel((Factor("tone_curve", {"exponent": 2.0}),)))
    assert t[0, 0, 0] == pytest.approx(_srgb(lin ** 2), abs=1e-5)
    big = np.full((101, 101, 3), 0.5, np.float32)
    v = pg.apply_camera_model(big, CameraModel((Factor("vignetting", {"corner_stops": -1.0}),)))
    assert v[50, 50, 0] == pytest.approx(0.5, abs=1e-4)
    corner_r2 = ((50 / 50.5) ** 2 * 2) / 2
    assert v[0, 0, 0] == pytest.approx(_srgb(_lin(0.5) * 2 ** -corner_r2), abs=1e-4)


def test_blur_matches_an_explicit_kernel_and_noise_its_level():
    rng = np.random.default_rng(0)
    x = rng.random((64, 64)).astype(np.float32)
    sigma = 1.3
    r = np.arange(-5, 6)
    k = np.exp(-r ** 2 / (2 * sigma ** 2))
    k /= k.sum()
    pad = np.pad(x, 5, mode="reflect")  # scipy's "mirror": the edge sample not repeated
    ref = np.apply_along_axis(lambda a: np.convolve(a, k, "valid"), 0, pad)
    ref = np.apply_along_axis(lambda a: np.convolve(a, k, "valid"), 1, ref)
    got = ops.gaussian_blur(x, sigma)
    assert np.abs(got[8:-8, 8:-8] - ref[8:-8, 8:-8]).max() < 2e-3  # the kernel truncated at 3.5 sigma
    flat = np.full((256, 256, 3), 0.5, np.float32)
    noisy = ops.add_noise(flat, 3.0, 0.0, np.random.default_rng(1))
    assert np.std(noisy - flat) * 255 == pytest.approx(3.0, rel=0.02)
    shot = ops.add_noise(flat, 0.0, 2.0, np.random.default_rng(2))  # var = 2 * 127.5 levels^2
    assert np.std(shot - flat) * 255 == pytest.approx(math.sqrt(2 * 127.5), rel=0.02)


def test_geometry_moves_depth_with_the_frame_and_never_touches_the_input():
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (40, 60, 4), dtype=np.uint8)
    depth = rng.random((40, 60)).astype(np.float32)
    keep, keep_d = frame.copy(), depth.copy()
    m = CameraModel((Factor("orientation", {"transform": "flip_horizontal"}),
                     Factor("brightness", {"stops": 0.3}), Factor("sensor_noise", {"read_levels": 2.0, "shot_levels2": 0.0})))
    out, d = pg.apply_camera_model(frame, m, rng=3, depth=depth)
    assert np.array_equal(frame, keep) and np.array_equal(depth, keep_d)
    assert out.shape == frame.shape and np.array_equal(out[..., 3], frame[:, ::-1, 3])  # alpha flipped, untouched
    assert np.array_equal(d, depth[:, ::-1])  # depth values untouched, only moved
    again, _ = pg.apply_camera_model(frame, m, rng=3, depth=depth)
    assert np.array_equal(out, again)  # a seed gives the same noise
    u16 = pg.apply_camera_model((frame[..., :3].astype(np.uint16) * 257), m, rng=3)
    assert u16.dtype == np.uint16
    with pytest.raises(InputError, match="H x W x 3"):
        pg.apply_camera_model(depth, m)
    with pytest.raises(InputError, match="dtype"):
        pg.apply_camera_model(frame[..., :3].astype(np.int32), m)


def test_model_file_round_trip_and_refusals(tmp_path):
    m = C.KNOWN
    p = m.save(tmp_path / "camera_model.json")
    back = load_camera_model(p)
    assert back.to_dict() == m.to_dict()
    assert json.loads(p.read_text())["factors"][0]["units"]["stops"].startswith("stops")
    frame = C.dead_leaves(0, (64, 48))
    assert np.array_equal(pg.apply_camera_model(frame, p, rng=0), pg.apply_camera_model(frame, m, rng=0))
    (tmp_path / "bad.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(InputError, match="camera model"):
        load_camera_model(tmp_path / "bad.json")
    bad = m.to_dict()
    bad["factors"][0]["params"] = {}
    with pytest.raises(InputError, match="missing parameter"):
        CameraModel.from_dict(bad)


def _check_known(model: CameraModel) -> None:
    by = {f.code: f.params for f in model.factors}
    assert set(by) >= {"brightness", "white_balance", "sharpness", "sensor_noise", "compression"}, model.codes()
    truth = {("brightness", "stops"): 0.5, ("white_balance", "r_gain"): 1.15, ("white_balance", "b_gain"): 0.88,
             ("sharpness", "sigma_px"): 1.2, ("sensor_noise", "mid_grey_levels"): 3.0, ("compression", "quality"): 60}
    for (code, key), want in truth.items():
        assert by[code][key] == pytest.approx(want, rel=0.2), (code, key, by[code][key])
    assert by["compression"]["subsampling"] == "4:2:0"
    for f in model.factors:  # every interval holds its value
        for key, (lo, hi) in f.ci.items():
            assert lo <= f.params[key] <= hi, (f.code, key)


def test_fit_recovers_a_known_mixture_on_dead_leaves():
    sim = [C.dead_leaves(s) for s in range(16)]
    real = C.through_known(sim)
    model = fit_camera_model(sim, real, paired=True, jpeg=JpegInfo(real_quality=60, subsampling="4:2:0"))
    _check_known(model)


def test_fit_recovers_a_known_mixture_on_real_photos(shared_data):
    sim = C.voc_photos(shared_data, 16)
    real = C.through_known(sim)
    model = fit_camera_model(sim, real, paired=True, jpeg=JpegInfo(real_quality=60, subsampling="4:2:0"))
    _check_known(model)


def test_identical_frames_give_an_empty_model():
    sim = [C.dead_leaves(s, (160, 120)) for s in range(10)]
    model = fit_camera_model(sim, [f.copy() for f in sim], paired=True)
    assert model.factors == () and model.n == 10


def test_pairs_whose_light_is_unrelated_fit_no_tone_curve(recwarn):
    """Each sim frame paired with another scene's noise: the light fit's power runs to about 0 there,
    which is no camera's tone curve, so none is reported (a power of 0 also sent 0 ** 0 - to inf)."""
    rng = np.random.default_rng(0)
    sim = [rng.integers(0, 256, (48, 64, 3), dtype=np.uint8) for _ in range(12)]
    real = [rng.integers(0, 256, (48, 64, 3), dtype=np.uint8) for _ in range(12)]
    model = fit_camera_model(sim, real, paired=True)
    assert "tone_curve" not in {f.code for f in model.factors}, model.factors
    pg.apply_camera_model(sim[0], model)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in recwarn]


def test_unpaired_fit_reads_set_level_gains():
    sim = [C.dead_leaves(s, (160, 120)) for s in range(24)]
    m = CameraModel((Factor("brightness", {"stops": -0.6}), Factor("white_balance", {"r_gain": 0.85, "b_gain": 1.2})))
    real = [pg.apply_camera_model(f, m) for f in sim[::-1]]  # the same scenes, in another order: no pairs
    model = fit_camera_model(sim, real, paired=False)
    by = {f.code: f.params for f in model.factors}
    assert model.basis == "sets"
    assert by["brightness"]["stops"] == pytest.approx(-0.6, rel=0.2)
    assert by["white_balance"]["r_gain"] == pytest.approx(0.85, rel=0.05)
    assert by["white_balance"]["b_gain"] == pytest.approx(1.2, rel=0.05)


@pytest.mark.parametrize("length,angle,direction", [(6.0, 0.0, "horizontal"), (4.0, 90.0, "vertical")])
def test_a_line_blur_is_fitted_where_motion_blur_fired(length, angle, direction):
    m = CameraModel((Factor("motion_blur", {"length_px": length, "angle_deg": angle}),
                     Factor("sensor_noise", {"read_levels": 2.0, "shot_levels2": 0.0})))
    sim = [C.tabletop(s, (192, 144)) for s in range(12)]
    real = [pg.apply_camera_model(f, m, rng=s) for s, f in enumerate(sim)]
    fired = [{"code": "motion_blur", "severity": "gap", "evidence": {"blurred_side": "real", "direction": direction}}]
    by = {f.code: f.params for f in fit_camera_model(sim, real, paired=True, findings=fired).factors}
    assert by["motion_blur"]["angle_deg"] == angle
    assert by["motion_blur"]["length_px"] == pytest.approx(length, rel=0.2)
    assert by["sensor_noise"]["mid_grey_levels"] == pytest.approx(2.0, rel=0.2)
    # the sim side blurred: no camera factor takes blur away; said, not modelled
    back = fit_camera_model(real, sim, paired=True, findings=[{**fired[0], "evidence": {"blurred_side": "sim",
                                                                                         "direction": direction}}])
    assert "motion_blur" not in back.codes() and back.not_modelled[0]["code"] == "motion_blur"
