"""Unpaired transfer curve, orientation, field of view and the faults that must not read as a
resize-filter bug.

End to end through the CLI on real frames from `../shared/data` (skipped without them): PASCAL VOC
photos resized to 160x120 (`diagnosis_cases`), and SimplerEnv's fixed 320x256 robot camera for the
mean-image orientation and field-of-view readings. Unpaired sets are disjoint frames with no shared pair key. The
quantile-quantile slope behind the unpaired `tone_curve` reading is checked against its closed form.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap.diagnoses.tone import qq_slope

try:
    import diagnosis_cases as D
except ImportError:  # tests/ imported as a package
    from tests import diagnosis_cases as D



@pytest.fixture(scope="module")
def photos(shared_data: Path) -> list[np.ndarray]:
    """16 VOC photos at their native 500x375 (a camera's own noise and detail up to Nyquist)."""
    out = []
    for p in D.voc_sources(shared_data, 100):
        with Image.open(p) as im:
            if im.size == (500, 375):
                out.append(np.asarray(im.convert("RGB")))
        if len(out) == 16:
            return out
    pytest.skip(f"need 16 VOC photos of 500x375 under {shared_data}")


def _robot_frames(shared_data: Path, n: int = 16) -> list[np.ndarray]:
    """SimplerEnv's 320x256 Google-robot frames (a fixed camera), sorted, at most `n`."""
    root = shared_data / "simpler" / "real"
    out = []
    for p in sorted(root.rglob("*.png")):
        if any(t in p.stem for t in ("mask", "debug", "_darker", "_brighter")):
            continue
        with Image.open(p) as im:
            if im.size == (320, 256):
                out.append(np.asarray(im.convert("RGB")))
        if len(out) == n:
            break
    if len(out) < n:
        pytest.skip(f"need {n} SimplerEnv 320x256 frames under {root}")
    return out


def _power(g: float):
    return lambda a: D.to_srgb8(D.to_linear(a) ** g)


# --- the quantile-quantile slope (closed form) ------------------------------------------------------

def _encode(lin: np.ndarray) -> np.ndarray:
    return np.where(lin <= 0.0031308, lin * 12.92, 1.055 * lin ** (1 / 2.4) - 0.055)


@pytest.mark.parametrize("g", [0.45, 1.0, 1.5, 2.2])
def test_qq_slope_of_a_power_is_its_exponent(g):
    """Sim linear light = real's to the power g: log-quantiles scale by exactly g."""
    rng = np.random.default_rng(0)
    lin = rng.uniform(0.02, 0.8, (6, 32, 32))
    other = rng.uniform(0.02, 0.8, (6, 32, 32))  # different "scenes" of the same distribution
    assert qq_slope(_encode(lin ** g), _encode(other)) == pytest.approx(g, rel=0.08)


def test_qq_slope_of_a_gain_is_one():
    """An exposure gain moves every log-quantile alike: slope 1 (highlights kept under clipping)."""
    rng = np.random.default_rng(1)
    lin = rng.uniform(0.01, 0.4, (6, 32, 32))
    assert qq_slope(_encode(lin * 2.0), _encode(lin)) == pytest.approx(1.0, abs=0.02)


# --- tone curve, unpaired -------------------------------------------------------------------------

@pytest.mark.parametrize("g", [2.2, 0.45])
def test_unpaired_tone_curve(frames, tmp_path, g):
    """Different photos a side, sim luminance to the power g: `tone_curve`, never brightness first. Unpaired
    there is no pair to match the exact encode mapping, and eight photos a side leave the interval short
    of the bug bar: a gap, worded with its interval."""
    res = D.run_folders(tmp_path, *D.unpaired(frames, sim_fn=_power(g)))
    ev = D.first(res, "tone_curve", "gap")
    assert ev["bug_basis"] is None and ev["ci"][0] <= ev["value"] <= ev["ci"][1], ev
    assert ev["basis"] == "distribution", ev
    lo, hi = ev["log2_exponent_ci95"]
    assert lo <= np.log2(ev["exponent_sim_over_real"]) <= hi, ev
    assert (lo > 0.5) if g > 1 else (hi < -0.5), ev
    assert ev["exponent_sim_over_real"] == pytest.approx(g, rel=0.35), ev
    assert not {"brightness", "white_balance", "channel_swap"} & D.named(res), D.codes(res)


def test_unpaired_tone_curve_needs_eight_frames_a_side(frames, tmp_path):
    """At 6 photos a side the pooled quantiles of different scenes vary as much as a curve moves them:
    no unpaired tone-curve reading is made, even of a missing encode."""
    res = D.run_folders(tmp_path, *D.unpaired(frames, sim_fn=_power(2.2), n=6))
    assert "tone_curve" not in D.named(res), D.codes(res)


@pytest.mark.parametrize("stops", [1.0, -1.0])
def test_unpaired_exposure_is_not_tone_curve(frames, tmp_path, stops):
    res = D.run_folders(tmp_path, *D.unpaired(frames, real_fn=lambda a: D.expose(a, stops)))
    assert "tone_curve" not in D.named(res), D.codes(res)


# --- no resize-filter bug for a zoom or a directional blur ------------------------------------------

@pytest.mark.parametrize("factor", [1.1, 1.25, 1.5])
def test_unpaired_field_of_view_is_never_a_resize_filter(photos, tmp_path, factor):
    """A zoomed sim side (bicubic upscale of the centre) against different native photos, 8 a side:
    the softened side's lost top band is not a resize-filter bug."""
    res = D.run_folders(tmp_path, *D.unpaired(photos, sim_fn=lambda a: D.zoom(a, factor), n=8))
    assert "resize_filter" not in D.named(res), D.codes(res)


def test_unpaired_motion_blur_is_never_a_resize_filter(photos, tmp_path):
    res = D.run_folders(tmp_path, *D.unpaired(photos, real_fn=lambda a: D.motion_blur(a, 5, axis=1), n=8))
    assert "resize_filter" not in D.named(res), D.codes(res)


def test_unpaired_aliased_downscale_stays_a_resize_filter(frames, tmp_path):
    """The rule that keeps softened sides off `resize_filter` leaves real aliasing named: sim 2x
    nearest-neighbour, real 2x antialiased (Pillow bilinear), different photos."""
    w, h = D.W // 2, D.H // 2

    def nearest(a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a[1::2, 1::2])
    res = D.run_folders(tmp_path, *D.unpaired(
        frames, sim_fn=nearest, real_fn=lambda a: np.asarray(Image.fromarray(a).resize((w, h), Image.BILINEAR))))
    ev = D.first(res, "resize_filter", "bug")
    assert ev["sharper_side"] == "sim", ev
    assert ev["corner_over_noise_sim"] >= 1.0, ev


# --- noise under a camera's JPEG ----------------------------------------------------------------------

def test_paired_noise_on_jpeg_files_is_sensor_noise(frames, tmp_path):
    """Real frames with sigma-5 noise, stored as JPEG q90 files as a recorder writes them; sim PNG."""
    rng = np.random.default_rng(3)
    sim, real = D.paired(frames)
    D.write_set(tmp_path / "sim", sim)
    (tmp_path / "real").mkdir()
    for key, a in real.items():
        noisy = np.clip(np.round(a + rng.normal(0.0, 5.0, a.shape)), 0, 255).astype(np.uint8)
        Image.fromarray(noisy).save(tmp_path / "real" / f"{key}.jpg", quality=90)
    db = tmp_path / "c.duckdb"
    D.index(db, str(tmp_path / "sim"), "--set", "s", "--domain", "sim")
    D.index(db, str(tmp_path / "real"), "--set", "r", "--domain", "real")
    ev = D.first(D.stats(tmp_path), "sensor_noise", "gap")
    assert ev["noisier_side"] == "real", ev


# --- orientation and field of view, unpaired: only on a fixed camera ------------------------------------

@pytest.mark.parametrize("turn", ["flip_vertical", "rotate_180"])
def test_unpaired_orientation_of_mixed_robot_views_is_not_read(shared_data, tmp_path, turn):
    """SimplerEnv's 320x256 frames come from several robot set-ups (the camera sits differently in
    each): their frames' edges do not line up, so the set mean images are not read for a flip, and
    an info says why. A fixed camera's flip is still a bug (tests/test_verdicts.py)."""
    robot = _robot_frames(shared_data)
    fn = {"flip_vertical": lambda a: a[::-1], "rotate_180": lambda a: a[::-1, ::-1]}[turn]
    sim = {f"s{i:02d}": np.ascontiguousarray(fn(a)) for i, a in enumerate(robot[0::2])}
    real = {f"r{i:02d}": a for i, a in enumerate(robot[1::2])}
    res = D.run_folders(tmp_path, sim, real)
    assert not {"orientation", "field_of_view"} & D.named(res), D.codes(res)
    info = [f for f in res["findings"] if f["code"] == "moving_camera"]
    assert info and "orientation" in info[0]["evidence"]["codes"], D.codes(res)


def test_unpaired_robot_split_names_no_orientation(shared_data, tmp_path):
    robot = _robot_frames(shared_data)
    sim = {f"s{i:02d}": a for i, a in enumerate(robot[0::2])}
    real = {f"r{i:02d}": a for i, a in enumerate(robot[1::2])}
    res = D.run_folders(tmp_path, sim, real)
    assert not {"orientation", "tone_curve", "resize_filter", "field_of_view"} & D.named(res), D.codes(res)


def test_paired_motion_blur_of_soft_frames_is_never_compression(shared_data, tmp_path):
    """Soft 640x512 frames (SimplerEnv's robot frames upscaled 2x, bicubic) with real blurred 9 px
    horizontally: the blur takes the horizontal block edges with it, which is not compression."""
    robot = [np.asarray(Image.fromarray(a).resize((640, 512), Image.BICUBIC)) for a in _robot_frames(shared_data, 8)]
    sim, real = D.paired(robot, real_fn=lambda a: D.motion_blur(a, 9, axis=1), n=8)
    res = D.run_folders(tmp_path, sim, real)
    assert "compression" not in D.named(res), D.codes(res)
    assert not [c for c in D.codes(res) if c[1] == "bug"], D.codes(res)
    if res["findings"]:
        ev = D.first(res, "motion_blur", "gap")
        assert (ev["blurred_side"], ev["direction"]) == ("real", "horizontal"), ev


def test_paired_noise_on_jpeg_files_of_clean_renders_is_sensor_noise(shared_data, tmp_path):
    """The RGB-D sample's rendered-looking 640x480 frames (no sensor noise of their own) against the
    same frames with sigma-8 noise stored as JPEG q90: noise, not aliasing on the JPEG side."""
    src = sorted((shared_data / "rgbd" / "color").glob("*.jpg"))
    if len(src) < 5:
        pytest.skip(f"need the 5 RGB-D colour frames under {shared_data}")
    rng = np.random.default_rng(5)
    frames = [np.asarray(Image.open(p).convert("RGB")) for p in src[:5]]
    D.write_set(tmp_path / "sim", {f"f{i}": a for i, a in enumerate(frames)})
    (tmp_path / "real").mkdir()
    for i, a in enumerate(frames):
        noisy = np.clip(np.round(a + rng.normal(0.0, 8.0, a.shape)), 0, 255).astype(np.uint8)
        Image.fromarray(noisy).save(tmp_path / "real" / f"f{i}.jpg", quality=90)
    db = tmp_path / "c.duckdb"
    D.index(db, str(tmp_path / "sim"), "--set", "s", "--domain", "sim")
    D.index(db, str(tmp_path / "real"), "--set", "r", "--domain", "real")
    res = D.stats(tmp_path)
    ev = D.first(res, "sensor_noise", "gap")
    assert ev["noisier_side"] == "real", ev
    assert "resize_filter" not in D.named(res), D.codes(res)
