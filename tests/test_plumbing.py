"""Plumbing diagnoses: clean pairs stay quiet, every injected fault is named by its code.

Sets are built directly from arrays with the stats functions (no catalog, no files besides the
shared real data). Faults are injected at realistic magnitudes on top of sensor noise, on
synthetic scenes and on real photos from ../shared/data (those tests skip when it is absent).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap.diagnoses.checks import diagnose
from perception_gap.diagnoses.colour import BRIGHTNESS_STOPS, chroma_log2, exposure_stops, swap_costs
from perception_gap.diagnoses.common import srgb_to_linear
from perception_gap.diagnoses.depth import name_depth_ratio, nearest_depth_unit
from perception_gap.diagnoses.encoding import moment_distance
from perception_gap.diagnoses.joints import DEG_PER_RAD, joint_scale_ratios
from perception_gap.diagnoses.sharpness import ALIAS_SHAPE
from perception_gap.findings import Finding
from perception_gap.statistics.depth import depth_stats
from perception_gap.statistics.image import image_stats_array, image_stats_pil
from perception_gap.statistics.records import FrameRecord, SetRecords

try:
    import faults as F
except ImportError:  # tests/ imported as a package
    from tests import faults as F

CODES = {"channel_swap", "sharpness", "value_range", "normalization", "depth_scale", "resize_filter",
         "brightness", "white_balance", "resolution", "joint_units", "depth_dropout", "sensor_noise",
         "compression", "insufficient_data",
         # the spatial, transfer-curve, depth-convention, control and format codes
         "frame_format", "orientation", "field_of_view", "pair_sync", "tone_curve", "vignetting", "motion_blur",
         "depth_invalid", "control_dims", "control_scale", "control_sign", "unexplained_gap", "non_finite", "depth_registration",
         "moving_camera"}


# --------------------------------------------------------------------------------------------
# builders
# --------------------------------------------------------------------------------------------

def stats_of(a: np.ndarray):
    """Image stats the way ingest computes them: Pillow for 8-bit RGB, numpy otherwise."""
    if a.dtype == np.uint8 and a.ndim == 3 and a.shape[2] == 3:
        return image_stats_pil(Image.fromarray(a))
    return image_stats_array(a)


def frame(key: str, rgb: np.ndarray | None = None, *, depth: np.ndarray | None = None,
          units: float | None = None, proprio=None, episode: str | None = None) -> FrameRecord:
    return FrameRecord(
        pair_key=key, episode=episode,
        image=stats_of(rgb) if rgb is not None else None,
        depth=depth_stats(depth) if depth is not None else None,
        depth_units_per_m=units,
        proprio=tuple(float(x) for x in proprio) if proprio is not None else None,
    )


def image_set(name: str, domain: str, images, keys=None, **per_frame) -> SetRecords:
    keys = keys if keys is not None else [f"k{i:03d}" for i in range(len(images))]
    frames = []
    for i, (k, a) in enumerate(zip(keys, images)):
        kw = {n: v[i] for n, v in per_frame.items() if v is not None}
        frames.append(frame(k, a, **kw))
    return SetRecords(name, domain, tuple(frames))


def run(sim: SetRecords, real: SetRecords) -> list[Finding]:
    """diagnose() plus the contract every finding must meet."""
    findings = diagnose(sim, real)
    for f in findings:
        assert f.code in CODES
        assert f.severity in ("bug", "gap", "info")
        assert f.title and f.action and f.title.count(". ") == 0, f.title
        json.dumps(f.to_dict(), allow_nan=False)  # JSON-serializable, no NaN
        _assert_plain(f.evidence)
        assert isinstance(f.score, float) and math.isfinite(f.score)
        assert f.evidence["basis"] in ("pairs", "distribution")
    return findings


def _assert_plain(x) -> None:
    if isinstance(x, dict):
        for v in x.values():
            _assert_plain(v)
    elif isinstance(x, list):
        for v in x:
            _assert_plain(v)
    else:
        assert x is None or type(x) in (int, float, str, bool), (type(x), x)
        if isinstance(x, float):
            assert math.isfinite(x)


def codes(findings) -> dict[str, Finding]:
    return {f.code: f for f in findings}


def assert_clean(findings) -> None:
    loud = [(f.code, f.title) for f in findings if f.severity in ("bug", "gap")]
    assert not loud, loud


def assert_only_noise(findings, noisier: str = "real") -> None:
    """Sides that differ only by the sigma-2 sensor noise (and JPEG q90) of `mild_sensor`: no bug,
    and no gap but the named sensor noise on the noisier side."""
    loud = [(f.code, f.title) for f in findings if f.severity in ("bug", "gap") and f.code != "sensor_noise"]
    assert not loud, loud
    noise = codes(findings).get("sensor_noise")
    if noise is not None:
        assert noise.evidence["noisier_side"] == noisier


def assert_top(findings, code: str, severity: str) -> Finding:
    by = codes(findings)
    assert code in by, [(f.code, f.title) for f in findings]
    assert by[code].severity == severity
    same = [f for f in findings if f.severity == severity]
    assert same[0].code == code, [(f.code, f.title) for f in findings]
    return by[code]


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data_dir() -> Path:
    env = os.environ.get("PERCEPTION_GAP_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path}")
    return path


@pytest.fixture(scope="module")
def scenes():
    """16 synthetic 320x240 scenes: (rgb uint8, depth metres)."""
    return F.scene_set(seed=7, n=16)


@pytest.fixture(scope="module")
def scenes_640():
    """12 synthetic 640x480 sources for resize faults."""
    return [a for a, _ in F.scene_set(seed=11, n=12, width=640, height=480)]


@pytest.fixture(scope="module")
def photos(data_dir):
    """Up to 24 real robot photos at 320x256 from simpler/real (RGB)."""
    paths = sorted((data_dir / "simpler" / "real").rglob("*.png"))
    out = []
    for p in paths:
        with Image.open(p) as im:
            if im.size != (320, 256) or im.mode not in ("RGB", "RGBA"):
                continue
            out.append(np.asarray(im.convert("RGB")))
    if len(out) < 12:
        pytest.skip("too few simpler/real frames")
    return out[:24]


@pytest.fixture(scope="module")
def photos_640(data_dir):
    """640x480 real photos (rgbd/color JPEGs and bridge PNGs) as resize sources."""
    paths = sorted((data_dir / "rgbd" / "color").glob("*.jpg"))
    paths += [p for p in sorted((data_dir / "simpler" / "real").rglob("*bridge*.png"))
              if "mask" not in p.name and "debug" not in p.name]
    paths += [p for p in sorted((data_dir / "simpler" / "real" / "bridge").glob("*.png"))
              if "mask" not in p.name and "debug" not in p.name and p not in paths]
    out = []
    for p in paths:
        with Image.open(p) as im:
            if im.size == (640, 480):
                out.append(np.asarray(im.convert("RGB")))
    if len(out) < 6:
        pytest.skip("too few 640x480 real frames")
    return out


@pytest.fixture(scope="module")
def rgbd(data_dir):
    """The rgbd samples: (color uint8 640x480, depth uint16 mm) x 5."""
    colors = sorted((data_dir / "rgbd" / "color").glob("*.jpg"))
    depths = sorted((data_dir / "rgbd" / "depth").glob("*.png"))
    if len(colors) < 3 or len(colors) != len(depths):
        pytest.skip("rgbd samples missing")
    out = []
    for c, d in zip(colors, depths):
        with Image.open(c) as ci, Image.open(d) as di:
            out.append((np.asarray(ci.convert("RGB")), np.asarray(di).astype(np.uint16)))
    return out


def _read_exr_depth(path: Path) -> np.ndarray:
    OpenEXR = pytest.importorskip("OpenEXR")
    with OpenEXR.File(str(path)) as f:
        px = next(iter(f.channels().values())).pixels
    d = np.asarray(px, dtype=np.float32)
    return d[..., 0] if d.ndim == 3 else d


def source(request, name: str):
    return request.getfixturevalue(name)


def rgb_of(src):
    return [a if isinstance(a, np.ndarray) else a[0] for a in src]


RGB_SOURCES = ["scenes", "photos"]
SIDES = ["sim", "real"]


def fault_pair(images, fault, side: str, seed: int = 0, sensor=True):
    """(sim set, real set) of the same frames; the real side gets sensor noise + JPEG q90, the
    `side` side gets `fault` (after noise on the real side, so noise and fault compound)."""
    rng = np.random.default_rng(seed)
    sim = [a for a in images]
    real = [F.mild_sensor(a, rng) if sensor else a for a in images]
    if side == "sim":
        sim = [fault(a) for a in sim]
    else:
        real = [fault(a) for a in real]
    return image_set("sim", "sim", sim), image_set("real", "real", real)


# --------------------------------------------------------------------------------------------
# helpers checked against closed forms
# --------------------------------------------------------------------------------------------

def test_exposure_stops_closed_form():
    lin = np.array([[0.2, 0.3, 0.1], [0.05, 0.1, 0.4]])
    assert np.allclose(exposure_stops(lin * 2 ** 0.5, lin), 0.5)
    assert np.allclose(exposure_stops(lin, lin), 0.0)


def test_moment_distance_is_affine_invariant():
    rng = np.random.default_rng(0)
    ms, ss, mr, sr = (rng.uniform(0.1, 1.0, (5, 3)) for _ in range(4))
    scale, off = np.array([0.229, 0.224, 0.225]), np.array([0.485, 0.456, 0.406])
    assert np.allclose(moment_distance(ms, ss, mr, sr),
                       moment_distance(ms * scale + off, ss * scale, mr * scale + off, sr * scale))
    assert np.allclose(moment_distance(ms, ss, ms, ss), 0.0)


def test_noise_sigma_matches_white_noise():
    """Known answer: luma of i.i.d. RGB noise of sigma s has sigma 0.668 s (BT.601 weights)."""
    rng = np.random.default_rng(1)
    base = np.full((240, 320, 3), 128, np.uint8)
    for sigma in (2.0, 5.0):
        s = image_stats_pil(Image.fromarray(F.add_sensor_noise(base, rng, sigma)))
        assert s.noise_sigma * 255 == pytest.approx(sigma * math.hypot(0.299, 0.587, 0.114), rel=0.1)


def test_chroma_log2_closed_form():
    lin = np.array([[0.4, 0.2, 0.1]])
    assert np.allclose(chroma_log2(lin), [[1.0, -1.0]])


def test_swap_costs_separate_swap_from_gains():
    rng = np.random.default_rng(2)
    lm_r = np.log(rng.uniform(0.1, 0.8, (10, 3)))
    cv_r = np.log(rng.uniform(0.2, 0.9, (10, 3)))
    gains = np.log([1.2, 1.0, 0.8])
    c_id, c_sw, _ = swap_costs(lm_r + gains, cv_r, lm_r, cv_r, True)
    assert c_id == pytest.approx(0.5 * np.mean(np.abs(gains[[0, 2]])))  # only the gain penalty
    assert c_sw > 4 * c_id
    c_id, c_sw, details = swap_costs(lm_r[:, ::-1] + 0.3, cv_r[:, ::-1], lm_r, cv_r, True)
    assert c_sw == pytest.approx(0.0, abs=1e-12)  # a swap under a common exposure gain is free
    assert details["swapped"]["log_gain_r"] == pytest.approx(0.0, abs=1e-12)


def test_joint_scale_ratios_closed_form():
    rng = np.random.default_rng(3)
    real = rng.normal(0, 1, (20, 3))
    sim = real * np.array([DEG_PER_RAD, 1.0, 0.5])
    assert np.allclose(joint_scale_ratios(sim, real, True), [DEG_PER_RAD, 1.0, 0.5])
    assert np.allclose(joint_scale_ratios(sim, real, False), [DEG_PER_RAD, 1.0, 0.5])
    assert np.isnan(joint_scale_ratios(np.zeros((4, 1)), np.ones((4, 1)), True)[0])


def test_name_depth_ratio():
    assert nearest_depth_unit(1000.0) == "mm" and nearest_depth_unit(3.0) is None
    assert name_depth_ratio(1000.0)[:2] == ("mm", "m")
    assert name_depth_ratio(1 / 5.0)[:2] == ("mm", "1/5000 m (TUM)")
    assert name_depth_ratio(1.02) is None
    assert srgb_to_linear(np.array([1.0]))[0] == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------
# clean cases: no bug, no gap
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("jpeg", [False, True])
def test_clean_noise_generated(scenes, jpeg):
    rng = np.random.default_rng(3)
    joints = F.joint_trajectory(rng, len(scenes))
    sim = image_set("sim", "sim", [a for a, _ in scenes], depth=[d for _, d in scenes],
                    units=[1.0] * len(scenes), proprio=list(joints))
    real = image_set(
        "real", "real", [F.mild_sensor(a, rng, jpeg) for a, _ in scenes],
        depth=[F.depth_noise(F.depth_to_mm_u16(d), rng) for _, d in scenes],
        units=[1000.0] * len(scenes), proprio=list(joints + rng.normal(0, 0.01, joints.shape)))
    assert_only_noise(run(sim, real), "real")
    assert_only_noise(run(real, sim), "sim")


def test_clean_halves_generated():
    rng = np.random.default_rng(5)
    sc = F.scene_set(seed=21, n=24)
    joints = F.joint_trajectory(rng, 24)
    imgs = [F.mild_sensor(a, rng) for a, _ in sc]
    depth = [F.depth_noise(F.depth_to_mm_u16(d), rng) for _, d in sc]
    a = image_set("a", "sim", imgs[0::2], keys=[f"a{i}" for i in range(12)], depth=depth[0::2],
                  proprio=list(joints[0::2]))
    b = image_set("b", "real", imgs[1::2], keys=[f"b{i}" for i in range(12)], depth=depth[1::2],
                  proprio=list(joints[1::2]))
    findings = run(a, b)
    assert_clean(findings)
    assert_clean(run(b, a))


def test_clean_noise_photos(photos):
    rng = np.random.default_rng(8)
    for jpeg in (False, True):
        sim = image_set("sim", "sim", photos)
        real = image_set("real", "real", [F.mild_sensor(a, rng, jpeg) for a in photos])
        assert_only_noise(run(sim, real))


def test_clean_halves_photos(photos):
    a = image_set("a", "sim", photos[0::2], keys=[f"a{i}" for i in range(len(photos[0::2]))])
    b = image_set("b", "real", photos[1::2], keys=[f"b{i}" for i in range(len(photos[1::2]))])
    assert_clean(run(a, b))
    assert_clean(run(b, a))


def test_clean_rgbd(rgbd):
    rng = np.random.default_rng(9)
    sim = image_set("sim", "sim", [c for c, _ in rgbd], depth=[d for _, d in rgbd])
    real = image_set("real", "real", [F.mild_sensor(c, rng) for c, _ in rgbd],
                     depth=[F.depth_noise(d, rng) for _, d in rgbd])
    assert_clean(run(sim, real))


def test_clean_float_observations(scenes):
    """Both sides as float [0, 1] observation arrays, or both ImageNet-normalized: no finding."""
    rng = np.random.default_rng(10)
    imgs = [a for a, _ in scenes]
    noisy = [F.mild_sensor(a, rng) for a in imgs]
    for enc in (F.to_float01, lambda a: F.normalize(a, F.IMAGENET_MEAN, F.IMAGENET_STD)):
        sim = image_set("sim", "sim", [enc(a) for a in imgs])
        real = image_set("real", "real", [enc(a) for a in noisy])
        assert_clean(run(sim, real))


def test_same_dtype_range_is_not_a_value_range_bug(scenes):
    """uint8 vs float32 holding the same 0..255 values: the values agree, nothing to report."""
    imgs = [a for a, _ in scenes]
    assert "value_range" not in codes(run(image_set("s", "sim", imgs),
                                          image_set("r", "real", [F.to_float255(a) for a in imgs])))


# --------------------------------------------------------------------------------------------
# faults
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("src", RGB_SOURCES)
@pytest.mark.parametrize("side", SIDES)
def test_channel_swap(request, src, side):
    images = rgb_of(source(request, src))
    sim, real = fault_pair(images, F.swap_rb, side)
    findings = run(sim, real)
    f = assert_top(findings, "channel_swap", "bug")
    assert "white_balance" not in codes(findings)
    assert "brightness" not in codes(findings)  # luminance is compared after un-swapping
    assert f.evidence["basis"] == "pairs" and f.evidence["n_pairs"] == len(images)
    assert f.evidence["swapped_cost"] < 0.4 * f.evidence["identity_cost"]
    if src == "photos":  # real photos are redder than bluer, so the BGR side can be named
        assert f.evidence["likely_bgr_side"] == side
        assert f"in the {side} pipeline" in f.action


def test_channel_swap_distribution(photos):
    """No pairs: a swapped set is still recognised from its colour statistics."""
    a = photos[0::2]
    b = [F.swap_rb(x) for x in photos[1::2]]
    sim = image_set("sim", "sim", b, keys=[f"s{i}" for i in range(len(b))])
    real = image_set("real", "real", a, keys=[f"r{i}" for i in range(len(a))])
    f = assert_top(run(sim, real), "channel_swap", "bug")
    assert f.evidence["basis"] == "distribution"
    assert f.evidence["likely_bgr_side"] == "sim"


@pytest.mark.parametrize("src", RGB_SOURCES)
@pytest.mark.parametrize("gains", [(1.15, 1.0, 0.85), (0.85, 1.0, 1.2), (1.5, 1.0, 0.6)])
def test_white_balance_is_not_a_swap(request, src, gains):
    images = rgb_of(source(request, src))
    sim, real = fault_pair(images, lambda a: F.white_balance(a, gains), "sim")
    findings = run(sim, real)
    assert "channel_swap" not in codes(findings)
    f = assert_top(findings, "white_balance", "gap")
    rg, bg = f.evidence["log2_r_over_g_sim_minus_real"], f.evidence["log2_b_over_g_sim_minus_real"]
    # Clipping at white only shrinks the measured gains, and only a little at these levels.
    assert rg == pytest.approx(math.log2(gains[0]), abs=0.06)
    assert bg == pytest.approx(math.log2(gains[2]), abs=0.06)
    # the gains move luminance too (Rec.709 weights): a brightness gap may follow, never lead
    b = codes(findings).get("brightness")
    assert b is None or b.score < f.score


@pytest.mark.parametrize("src", RGB_SOURCES)
@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("stops", [0.5, -0.5])
def test_brightness(request, src, side, stops):
    images = rgb_of(source(request, src))
    sim, real = fault_pair(images, lambda a: F.expose(a, stops), side)
    findings = run(sim, real)
    f = assert_top(findings, "brightness", "gap")
    expected = stops if side == "sim" else -stops
    # Highlights clip when brightening, which pulls the measured offset toward 0.
    assert f.evidence["stops_sim_minus_real"] == pytest.approx(expected, abs=0.12)
    assert abs(f.evidence["stops_sim_minus_real"]) >= BRIGHTNESS_STOPS["pairs"]
    word = "brighter" if expected > 0 else "darker"
    assert word in f.title and "stops" in f.title
    assert "white_balance" not in codes(findings) and "channel_swap" not in codes(findings)
    assert not [x for x in findings if x.severity == "bug"]


def test_brightness_below_threshold_is_quiet(scenes):
    images = rgb_of(scenes)
    sim, real = fault_pair(images, lambda a: F.expose(a, 0.07), "sim")
    assert "brightness" not in codes(run(sim, real))


def test_brightness_distribution(scenes):
    """Different scenes on each side: a 1.5-stop offset clears the scene-to-scene spread."""
    rng = np.random.default_rng(2)
    other = [a for a, _ in F.scene_set(seed=99, n=16)]
    sim = image_set("sim", "sim", [F.expose(a, 1.5) for a, _ in scenes],
                    keys=[f"s{i}" for i in range(len(scenes))])
    real = image_set("real", "real", [F.mild_sensor(a, rng) for a in other])
    f = assert_top(run(sim, real), "brightness", "gap")
    assert f.evidence["basis"] == "distribution"
    assert f.evidence["stops_sim_minus_real"] == pytest.approx(1.5, abs=0.5)


@pytest.mark.parametrize("src", RGB_SOURCES)
@pytest.mark.parametrize("side", SIDES)
def test_value_range_float01_vs_255(request, src, side):
    images = rgb_of(source(request, src))
    rng = np.random.default_rng(4)
    noisy = [F.mild_sensor(a, rng) for a in images]
    f01 = [F.to_float01(a) for a in (images if side == "sim" else noisy)]
    f255 = [F.to_float255(a) for a in (noisy if side == "sim" else images)]
    sim, real = (f01, f255) if side == "sim" else (f255, f01)
    findings = run(image_set("sim", "sim", sim), image_set("real", "real", real))
    f = assert_top(findings, "value_range", "bug")
    ranges = {f.evidence["sim_range"], f.evidence["real_range"]}
    assert ranges == {"float32 [0, 1]", "float32 [0, 255]"}
    assert f.evidence[f"{side}_range"] == "float32 [0, 1]"
    assert "brightness" not in codes(findings) and "white_balance" not in codes(findings)
    assert "normalization" not in codes(findings)


@pytest.mark.parametrize("src", RGB_SOURCES)
def test_value_range_uint8_vs_uint16(request, src):
    images = rgb_of(source(request, src))
    rng = np.random.default_rng(6)
    sim = image_set("sim", "sim", [F.to_uint16(a) for a in images])
    real = image_set("real", "real", [F.mild_sensor(a, rng) for a in images])
    f = assert_top(run(sim, real), "value_range", "bug")
    assert f.evidence["sim_range"] == "uint16 [0, 65535]"
    assert f.evidence["real_range"] == "uint8 [0, 255]"
    assert f.evidence["real_over_sim_scale"] == pytest.approx(255 / 65535, rel=1e-3)


def test_value_range_distribution(scenes):
    imgs = [a for a, _ in scenes]
    sim = image_set("sim", "sim", [F.to_float01(a) for a in imgs[:8]], keys=[f"s{i}" for i in range(8)])
    real = image_set("real", "real", imgs[8:])
    f = assert_top(run(sim, real), "value_range", "bug")
    assert f.evidence["basis"] == "distribution"
    assert f.evidence["sim_range"] == "float32 [0, 1]" and f.evidence["real_range"] == "uint8 [0, 255]"


NORM = {
    "imagenet": lambda a: F.normalize(a, F.IMAGENET_MEAN, F.IMAGENET_STD),
    "openai_clip": lambda a: F.normalize(a, F.CLIP_MEAN, F.CLIP_STD),
    "half": lambda a: F.normalize(a, F.HALF_MEAN, F.HALF_STD),
    "uint8": lambda a: a,
    "float_0_1": F.to_float01,
}


@pytest.mark.parametrize("src", RGB_SOURCES)
@pytest.mark.parametrize("enc_sim,enc_real", [
    ("imagenet", "openai_clip"), ("openai_clip", "imagenet"), ("half", "imagenet"),
    ("imagenet", "uint8"), ("float_0_1", "openai_clip"), ("half", "float_0_1"),
])
def test_normalization(request, src, enc_sim, enc_real):
    images = rgb_of(source(request, src))
    rng = np.random.default_rng(12)
    sim = image_set("sim", "sim", [NORM[enc_sim](a) for a in images])
    real = image_set("real", "real", [NORM[enc_real](F.mild_sensor(a, rng)) for a in images])
    findings = run(sim, real)
    f = assert_top(findings, "normalization", "bug")
    assert f.evidence["sim_encoding"] == enc_sim
    assert f.evidence["real_encoding"] == enc_real
    assert f.evidence["matched_distance"] < 0.5 * f.evidence["raw_distance"]
    assert not ({"value_range", "brightness", "white_balance", "channel_swap"} & set(codes(findings)))


def test_normalized_brightness_gap_is_not_a_normalization_bug(scenes):
    """Same constants on both sides plus a real exposure gap: a brightness gap, not a bug."""
    images = rgb_of(scenes)
    rng = np.random.default_rng(13)
    sim = image_set("sim", "sim", [NORM["imagenet"](F.expose(a, 0.5)) for a in images])
    real = image_set("real", "real", [NORM["imagenet"](F.mild_sensor(a, rng)) for a in images])
    findings = run(sim, real)
    assert "normalization" not in codes(findings) and "value_range" not in codes(findings)
    f = assert_top(findings, "brightness", "gap")
    # Float arrays have no lin_mean; linearized channel means still give the offset.
    assert f.evidence["stops_sim_minus_real"] == pytest.approx(0.5, abs=0.1)


@pytest.mark.parametrize("side", SIDES)
def test_resolution_size(scenes_640, side):
    rng = np.random.default_rng(14)
    small = [F.resize_pil(a, (320, 240), Image.BICUBIC) for a in scenes_640]
    big = [F.mild_sensor(a, rng) for a in scenes_640]
    sim, real = (small, big) if side == "sim" else (big, small)
    findings = run(image_set("sim", "sim", sim), image_set("real", "real", real))
    f = assert_top(findings, "resolution", "bug")
    assert f.evidence[f"{side}_size"] == [320, 240]
    assert f.evidence["aspect_mismatch"] is False
    assert "resize_filter" not in codes(findings)


def test_resolution_aspect(photos_640):
    rng = np.random.default_rng(15)
    sim = [F.resize_pil(a, (320, 240), Image.BICUBIC) for a in photos_640]
    wide = [F.resize_pil(F.centre_crop_to_aspect(F.mild_sensor(a, rng), 16 / 9), (320, 180), Image.BICUBIC)
            for a in photos_640]
    findings = run(image_set("sim", "sim", sim), image_set("real", "real", wide))
    f = assert_top(findings, "resolution", "bug")
    assert f.evidence["aspect_mismatch"] is True
    assert f.evidence["sim_aspect_name"] == "4:3" and f.evidence["real_aspect_name"] == "16:9"
    same_aspect = assert_top(run(image_set("s", "sim", sim), image_set("r", "real", [
        F.resize_pil(a, (640, 480)) for a in sim])), "resolution", "bug")
    assert f.score > same_aspect.score


DOWN = (224, 168)
FILTERS = {
    "nearest": lambda a: F.resize_nearest(a, DOWN),
    "bilinear_no_aa": lambda a: F.resize_bilinear_no_aa(a, DOWN),
}


@pytest.mark.parametrize("src", ["scenes_640", "photos_640"])
@pytest.mark.parametrize("aliased", list(FILTERS))
@pytest.mark.parametrize("side", SIDES)
def test_resize_filter_downscale(request, src, aliased, side):
    """640x480 -> 224x168: antialiased Pillow BILINEAR on one side, aliased on the other; the real
    side is noisy JPEG before its resize, as a camera stream is."""
    images = source(request, src)
    rng = np.random.default_rng(16)
    camera = [F.mild_sensor(a, rng) for a in images]
    aa = lambda a: F.resize_pil(a, DOWN, Image.BILINEAR)  # noqa: E731
    sim = [FILTERS[aliased](a) if side == "sim" else aa(a) for a in images]
    real = [FILTERS[aliased](a) if side == "real" else aa(a) for a in camera]
    findings = run(image_set("sim", "sim", sim), image_set("real", "real", real))
    f = codes(findings)["resize_filter"]
    assert f.evidence["sharper_side"] == side
    assert f.evidence["signature"] == "aliasing"
    assert f.evidence["where_it_sits"] >= ALIAS_SHAPE["pairs"]
    # aliasing is a bug when its interval over the pairs clears the bar, else a gap worded with it
    clear = f.evidence["ci"][0] > ALIAS_SHAPE["pairs"] and f.evidence["stability"] >= 0.8
    assert_top(findings, "resize_filter", "bug" if clear else "gap")
    assert (f.evidence["bug_basis"] is None) != clear, f.evidence


@pytest.mark.parametrize("src", ["scenes_640", "photos_640"])
@pytest.mark.parametrize("side", SIDES)
def test_resize_filter_nearest_upscale(request, src, side):
    """160x120 -> 320x240 2x upscale: nearest on one side, bilinear on the other."""
    images = source(request, src)
    rng = np.random.default_rng(17)
    low = [F.resize_pil(a, (160, 120), Image.BICUBIC) for a in images]
    camera = [F.mild_sensor(a, rng) for a in low]
    near = lambda a: F.resize_nearest(a, (320, 240))  # noqa: E731
    bil = lambda a: F.resize_pil(a, (320, 240), Image.BILINEAR)  # noqa: E731
    sim = [near(a) if side == "sim" else bil(a) for a in low]
    real = [near(a) if side == "real" else bil(a) for a in camera]
    findings = run(image_set("sim", "sim", sim), image_set("real", "real", real))
    f = assert_top(findings, "resize_filter", "bug")
    assert f.evidence[f"{side}_filter_family"] == "nearest-neighbour upscaling"
    assert f.evidence["sharper_side"] == side


@pytest.mark.parametrize("src", ["scenes_640", "photos_640"])
def test_resize_same_filter_is_quiet(request, src):
    images = source(request, src)
    rng = np.random.default_rng(18)
    for filt in (lambda a: F.resize_pil(a, DOWN, Image.BILINEAR), FILTERS["nearest"]):
        sim = [filt(a) for a in images]
        real = [filt(F.mild_sensor(a, rng)) for a in images]
        assert "resize_filter" not in codes(run(image_set("s", "sim", sim), image_set("r", "real", real)))


def _depth_sets(depth_sim, depth_real, units_sim=None, units_real=None, keys_real=None):
    n_s, n_r = len(depth_sim), len(depth_real)
    sim = SetRecords("sim", "sim", tuple(
        frame(f"k{i:03d}", depth=d, units=units_sim) for i, d in enumerate(depth_sim)))
    keys_real = keys_real or [f"k{i:03d}" for i in range(n_r)]
    real = SetRecords("real", "real", tuple(
        frame(k, depth=d, units=units_real) for k, d in zip(keys_real, depth_real)))
    assert n_s and n_r
    return sim, real


@pytest.mark.parametrize("side", SIDES)
def test_depth_scale_m_vs_mm(scenes, side):
    rng = np.random.default_rng(19)
    metres = [d for _, d in scenes]
    mm = [F.depth_noise(F.depth_to_mm_u16(d), rng) for d in metres]
    ds, dr = (metres, mm) if side == "sim" else (mm, metres)
    f = assert_top(run(*_depth_sets(ds, dr)), "depth_scale", "bug")
    expected = 1e-3 if side == "sim" else 1e3
    assert f.evidence["ratio_sim_over_real"] == pytest.approx(expected, rel=0.03)
    assert f.evidence["unit_conflict"] is True
    assert {f.evidence["sim_looks_like"], f.evidence["real_looks_like"]} == {"m", "mm"}
    assert f.evidence[f"{side}_looks_like"] == "m"
    other = "real" if side == "sim" else "sim"
    assert f.evidence["likely_wrong_side"] == other and "divide by 1000" in f.action


def test_depth_scale_tum_vs_mm(scenes):
    """Both uint16 and both 'look like mm' by magnitude; only the 5x ratio gives TUM away."""
    rng = np.random.default_rng(20)
    metres = [d for _, d in scenes]
    sim, real = _depth_sets([F.depth_to_tum_u16(d) for d in metres],
                            [F.depth_noise(F.depth_to_mm_u16(d), rng) for d in metres])
    f = assert_top(run(sim, real), "depth_scale", "bug")
    assert f.evidence["ratio_sim_over_real"] == pytest.approx(5.0, rel=0.03)
    assert f.evidence["sim_looks_like"] == "1/5000 m (TUM)" and f.evidence["real_looks_like"] == "mm"
    assert "5000" in f.action


def test_depth_scale_wrong_declaration(scenes):
    """TUM depth declared as mm: the declared conversion leaves a 5x error."""
    metres = [d for _, d in scenes]
    sim, real = _depth_sets([F.depth_to_tum_u16(d) for d in metres], metres, 1000.0, 1.0)
    f = assert_top(run(sim, real), "depth_scale", "bug")
    assert f.evidence["compared_in"] == "metres"
    assert f.evidence["ratio_sim_over_real"] == pytest.approx(5.0, rel=0.03)
    assert f.evidence["likely_wrong_side"] == "sim"
    assert f.evidence["sim_looks_like"] == "1/5000 m (TUM)" and f.evidence["real_looks_like"] == "m"
    assert "declare 5000 units per metre" in f.action


def test_depth_declared_units_agree(scenes):
    metres = [d for _, d in scenes]
    sim, real = _depth_sets(metres, [F.depth_to_mm_u16(d) for d in metres], 1.0, 1000.0)
    assert_clean(run(sim, real))


@pytest.mark.parametrize("side", SIDES)
def test_depth_scale_rgbd(rgbd, side):
    rng = np.random.default_rng(21)
    mm = [d for _, d in rgbd]
    metres = [F.depth_noise(d, rng).astype(np.float32) / 1000.0 for d in mm]
    ds, dr = (metres, mm) if side == "sim" else (mm, metres)
    f = assert_top(run(*_depth_sets(ds, dr)), "depth_scale", "bug")
    ratio = f.evidence["ratio_sim_over_real"]
    assert (ratio if side == "real" else 1 / ratio) == pytest.approx(1000, rel=0.03)
    tum = [F.depth_to_tum_u16(d.astype(np.float64) / 1000.0) for d in mm]
    f = assert_top(run(*_depth_sets(mm, tum)), "depth_scale", "bug")
    assert f.evidence["ratio_sim_over_real"] == pytest.approx(0.2, rel=0.03)


def test_depth_dropout_generated(scenes):
    rng = np.random.default_rng(22)
    metres = [d for _, d in scenes]
    real = [F.depth_holes(F.depth_noise(F.depth_to_mm_u16(d), rng), rng, 0.2) for d in metres]
    findings = run(*_depth_sets(metres, real, 1.0, 1000.0))
    f = assert_top(findings, "depth_dropout", "gap")
    assert f.evidence["real_dropout"] == pytest.approx(0.2, abs=0.03)
    assert f.evidence["sim_dropout"] == pytest.approx(0.0, abs=0.005)
    assert "depth_scale" not in codes(findings)
    # Reversed roles: the sim has the holes.
    f = assert_top(run(*_depth_sets(real, metres, 1000.0, 1.0)), "depth_dropout", "gap")
    assert f.evidence["dropout_diff_real_minus_sim"] < -0.15


def test_depth_dropout_rgbd(rgbd):
    rng = np.random.default_rng(23)
    mm = [d for _, d in rgbd]
    real = [F.depth_holes(F.depth_noise(d, rng), rng, 0.2) for d in mm]
    f = assert_top(run(*_depth_sets(mm, real)), "depth_dropout", "gap")
    assert f.evidence["real_dropout"] - f.evidence["sim_dropout"] == pytest.approx(0.2, abs=0.04)


def test_depth_dropout_cleargrasp(data_dir):
    """Real D435 depth (holes on transparent objects) vs Blender renders (none), unpaired."""
    real_paths = sorted((data_dir / "cleargrasp" / "real-val" / "d435").glob("*-transparent-depth-img.exr"))
    syn_paths = sorted((data_dir / "cleargrasp" / "synthetic-val").rglob("*-depth-rectified.exr"))
    if len(real_paths) < 2 or len(syn_paths) < 2:
        pytest.skip("cleargrasp depth missing")
    # Decimate 4x: dropout and percentiles are sampled on a grid anyway.
    sim = [_read_exr_depth(p)[::4, ::4] for p in syn_paths]
    real = [_read_exr_depth(p)[::4, ::4] for p in real_paths]
    findings = run(*_depth_sets(sim, real, keys_real=[f"r{i}" for i in range(len(real))]))
    f = assert_top(findings, "depth_dropout", "gap")
    assert f.evidence["basis"] == "distribution"
    assert f.evidence["real_dropout"] > 0.15 and f.evidence["sim_dropout"] < 0.01
    assert "depth_scale" not in codes(findings)


def _joint_sets(sim_j, real_j, keys_real=None):
    sim = SetRecords("sim", "sim", tuple(frame(f"k{i:03d}", proprio=j) for i, j in enumerate(sim_j)))
    keys_real = keys_real or [f"k{i:03d}" for i in range(len(real_j))]
    real = SetRecords("real", "real", tuple(frame(k, proprio=j) for k, j in zip(keys_real, real_j)))
    return sim, real


@pytest.mark.parametrize("side", SIDES)
def test_joint_units(side):
    rng = np.random.default_rng(24)
    rad = F.joint_trajectory(rng, 30)
    noisy = rad + rng.normal(0, 0.01, rad.shape)
    deg = np.degrees(noisy)
    sim_j, real_j = (np.degrees(rad), noisy) if side == "sim" else (rad, deg)
    f = assert_top(run(*_joint_sets(sim_j, real_j)), "joint_units", "bug")
    assert f.evidence["degrees_side"] == side
    assert f.evidence["dims"] == list(range(7))
    assert f.evidence["median_ratio"] == pytest.approx(DEG_PER_RAD, rel=0.02)


def test_joint_units_partial_and_distribution():
    """Only the arm joints (dims 0-5) in degrees, gripper (dim 6) in metres; unpaired sets."""
    rng = np.random.default_rng(25)
    # 8 episodes of 5 steps per set, different episodes on each side.
    a = np.vstack([F.joint_trajectory(rng, 5) for _ in range(8)])
    a[:, 6] = rng.uniform(0.0, 0.08, 40)
    b = np.vstack([F.joint_trajectory(rng, 5) for _ in range(8)])
    b[:, 6] = rng.uniform(0.0, 0.08, 40)
    b_deg = b.copy()
    b_deg[:, :6] = np.degrees(b[:, :6])
    f = assert_top(run(*_joint_sets(a, b_deg, keys_real=[f"r{i}" for i in range(40)])), "joint_units", "bug")
    assert f.evidence["basis"] == "distribution"
    assert f.evidence["degrees_side"] == "real" and f.evidence["dims"] == list(range(6))
    assert_clean(run(*_joint_sets(a, b, keys_real=[f"r{i}" for i in range(40)])))


def test_empty_and_imageless_sets():
    empty = SetRecords("e", "sim", ())
    assert diagnose(empty, SetRecords("r", "real", ())) == []
    only_depth = SetRecords("d", "real", (frame("k0", depth=np.ones((8, 8), np.float32)),))
    assert diagnose(empty, only_depth) == []


def test_compound_faults_are_each_named(photos):
    """A BGR sim that is also half a stop brighter: both named, the bug first, and the
    brightness measured on un-swapped channels."""
    sim, real = fault_pair(photos, lambda a: F.swap_rb(F.expose(a, 0.5)), "sim")
    findings = run(sim, real)
    assert findings[0].code == "channel_swap"
    f = codes(findings)["brightness"]
    assert f.evidence["stops_sim_minus_real"] == pytest.approx(0.5, abs=0.1)
    assert "white_balance" not in codes(findings)


def test_grey_and_rgba_frames_do_not_break_checks(scenes):
    rng = np.random.default_rng(26)
    grey = [np.asarray(Image.fromarray(a).convert("L")) for a, _ in scenes]
    rgba = [np.dstack([a, np.full(a.shape[:2], 255, np.uint8)]) for a, _ in scenes]
    noisy_grey = [F.add_sensor_noise(g, rng) for g in grey]
    noise = assert_top(run(image_set("s", "sim", grey), image_set("r", "real", noisy_grey)), "sensor_noise", "gap")
    assert noise.evidence["noise_sigma_real"] == pytest.approx(2.0, abs=0.4)  # grey: luma is the channel
    assert_clean(run(image_set("s", "sim", rgba), image_set("r", "real", [a for a, _ in scenes])))


def _blur(a: np.ndarray, sigma: float = 1.2) -> np.ndarray:
    from PIL import ImageFilter

    return np.asarray(Image.fromarray(a).filter(ImageFilter.GaussianBlur(sigma)))


@pytest.mark.parametrize("src", RGB_SOURCES)
@pytest.mark.parametrize("side", SIDES)
def test_optical_blur_is_a_sharpness_gap(request, src, side):
    images = rgb_of(source(request, src))
    sim, real = fault_pair(images, _blur, side)
    findings = run(sim, real)
    f = assert_top(findings, "sharpness", "gap")
    sharper = "real" if side == "sim" else "sim"
    assert f.evidence["sharper_side"] == sharper and f.evidence["top_band_power_ratio"] > 2
    assert "resize_filter" not in codes(findings) and not [x for x in findings if x.severity == "bug"]


# --------------------------------------------------------------------------------------------
# noise, compression, precision-following thresholds, dropout against the sensor's own
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("src", RGB_SOURCES)
@pytest.mark.parametrize("side", SIDES)
def test_sensor_noise_is_named_with_its_level(request, src, side):
    """sigma 5 i.i.d. RGB noise on one side of otherwise identical frames: named, and its size read back."""
    images = rgb_of(source(request, src))
    rng = np.random.default_rng(40)
    noisy = [F.add_sensor_noise(a, rng, 5.0) for a in images]
    sim, real = (noisy, images) if side == "sim" else (images, noisy)
    findings = run(image_set("s", "sim", sim), image_set("r", "real", real))
    f = assert_top(findings, "sensor_noise", "gap")
    assert f.evidence["noisier_side"] == side
    assert f.evidence["added_sigma_rgb_iid"] == pytest.approx(5.0, abs=1.5)
    assert not [x for x in findings if x.severity == "bug"]  # noise is never a resize-filter bug


@pytest.mark.parametrize("src", RGB_SOURCES)
def test_jpeg_compression_is_named(request, src):
    images = rgb_of(source(request, src))
    real = [F.jpeg_roundtrip(a, 30) for a in images]
    f = assert_top(run(image_set("s", "sim", images), image_set("r", "real", real)), "compression", "gap")
    assert f.evidence["compressed_side"] == "real" and f.evidence["signature"] == "blockiness"
    assert f.evidence["blockiness_real"] > f.evidence["blockiness_sim"] * 1.15


def test_chroma_subsampling_is_named(scenes):
    """4:2:0 (Cb/Cr averaged over 2x2, upsampled) on one side: compression by chroma detail."""
    images = rgb_of(scenes)

    def c420(a: np.ndarray) -> np.ndarray:
        y, cb, cr = Image.fromarray(a).convert("YCbCr").split()
        w, h = cb.size
        cb, cr = (c.resize(((w + 1) // 2, (h + 1) // 2), Image.BOX).resize((w, h), Image.BILINEAR) for c in (cb, cr))
        return np.asarray(Image.merge("YCbCr", (y, cb, cr)).convert("RGB"))

    f = assert_top(run(image_set("s", "sim", [c420(a) for a in images]), image_set("r", "real", images)),
                   "compression", "gap")
    assert f.evidence["compressed_side"] == "sim" and f.evidence["signature"] == "chroma_subsampling"


@pytest.mark.parametrize("stops", [0.2, -0.2])
def test_paired_brightness_follows_paired_precision(scenes, stops):
    """Matched pairs measure a 0.2-stop shift to a few hundredths: named (the unpaired bar is 0.3)."""
    images = rgb_of(scenes)
    sim = image_set("s", "sim", [F.expose(a, stops) for a in images])
    f = assert_top(run(sim, image_set("r", "real", images)), "brightness", "gap")
    assert f.evidence["stops_sim_minus_real"] == pytest.approx(stops, abs=0.04)


def test_depth_dropout_against_the_sensors_own_rate(scenes):
    """A sensor that already drops ~11% on both sides, +9 points more on real: named (no 'twice as many' rule)."""
    rng = np.random.default_rng(41)
    base = [F.depth_holes(F.depth_to_mm_u16(d), rng, 0.11) for _, d in scenes]
    more = [F.depth_holes(b, rng, 0.10) for b in base]
    f = assert_top(run(*_depth_sets(base, more, 1000.0, 1000.0)), "depth_dropout", "gap")
    assert f.evidence["dropout_diff_real_minus_sim"] == pytest.approx(0.09, abs=0.03)
    assert f.evidence["dropout_diff_ci"][0] > 0
    assert_clean(run(*_depth_sets(base, [b.copy() for b in base], 1000.0, 1000.0)))  # the same rate: quiet


def test_unpaired_grey_scenes_say_they_cannot_tell_a_swap():
    """Near-grey unpaired frames with red and blue swapped on one side: `info`, not a white-balance gap."""
    rng = np.random.default_rng(42)

    def grey(n):
        return [np.clip(rng.normal(rng.uniform(60, 200), 20, (64, 80, 1)) * np.array([1.02, 1.0, 1.0]), 0, 255)
                .astype(np.uint8) for _ in range(n)]

    sim = image_set("s", "sim", [a[..., ::-1].copy() for a in grey(8)], keys=[f"s{i}" for i in range(8)])
    real = image_set("r", "real", grey(8), keys=[f"r{i}" for i in range(8)])
    findings = run(sim, real)
    assert findings[0].code == "channel_swap" and findings[0].severity == "info"
    assert_clean(findings)


@pytest.mark.parametrize("n", [7, 40, 1023, 1024, 4000, 16001])
def test_median_ci_order_statistics_match_scipy_binomial_past_1023_values(n):
    # 2.0 ** n overflowed at n = 1024 (a `stats` of 1,024+ pairs crashed); reference: scipy's
    # binomial CDF for the rank k, the largest with P(B < k) <= alpha, B ~ Binomial(n, 1/2)
    from scipy.stats import binom

    from perception_gap.diagnoses.common import median_ci

    x = np.random.default_rng(n).permutation(np.arange(n, dtype=float))
    k = 1
    while k < n // 2 and binom.cdf(k, n, 0.5) <= 0.025:
        k += 1
    assert median_ci(x) == (float(k - 1), float(n - k))
