"""The spatial and transfer-curve diagnoses and the gap maps, end to end through the CLI.

Each test writes real frames (PASCAL VOC JPEGs from `../shared/data`, resized to 160x120) with
one known fault into temporary folders, runs `index` and `stats --json` through `cli.main`, and
checks that the fault's code is named first, with its severity and its evidence matching the
injected truth. Negative controls check what must stay quiet or keep its own name: an exposure
change is `brightness`, never `tone_curve`; a resize is never `field_of_view`; identical frames, a
lossless re-encode and a clean unpaired split name no bug and no gap. The control-vector, frame-format
and depth-convention codes and `unexplained_gap` are in tests/test_diagnoses_control.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

try:
    import diagnosis_cases as D
except ImportError:  # tests/ imported as a package
    from tests import diagnosis_cases as D



# --- tone curve ------------------------------------------------------------------------------------

def test_missing_srgb_encode_is_tone_curve(frames, tmp_path):
    res = D.run_folders(tmp_path, *D.paired(frames, sim_fn=D.missing_encode))
    ev = D.first(res, "tone_curve", "bug")
    # The sRGB decode is a power of ~2.2 only in the mid-tones; its toe pulls the fitted exponent of
    # a missing encode on real frames to ~1.5-1.7. The reading must still name the missing encode.
    assert 1.4 < ev["exponent_sim_over_real"] < 2.6, ev
    assert "without the sRGB encode" in ev["reading"], ev
    assert ev["missing_encode_residual_log2"] < ev["double_encode_residual_log2"], ev
    assert not {"brightness", "white_balance"} & D.named(res), D.codes(res)


def test_double_srgb_encode_is_tone_curve(frames, tmp_path):
    res = D.run_folders(tmp_path, *D.paired(frames, sim_fn=D.double_encode))
    ev = D.first(res, "tone_curve", "bug")
    assert ev["exponent_sim_over_real"] < 0.6, ev
    assert "encoded twice" in ev["reading"], ev
    assert "brightness" not in D.named(res), D.codes(res)


def test_power_curve_is_tone_curve_but_not_read_as_an_encode(frames, tmp_path):
    """Sim linear light to the power 1.5 (a tone mapper's contrast): a curve, not a missing encode, so a
    gap worded with its interval and bar (no plumbing signature, interval short of the bug bar)."""
    res = D.run_folders(tmp_path, *D.paired(frames, sim_fn=lambda a: D.to_srgb8(D.to_linear(a) ** 1.5)))
    ev = D.first(res, "tone_curve", "gap")
    assert ev["exponent_sim_over_real"] == pytest.approx(1.5, rel=0.12), ev
    assert "without the sRGB encode" not in ev["reading"], ev
    assert ev["bar"] == pytest.approx(1.3) and ev["ci"][0] <= ev["value"] <= ev["ci"][1], ev
    assert ev["bug_basis"] is None and ev["stability"] >= 0.8, ev
    assert "milder than a missing or doubled sRGB encode" in res["findings"][0]["title"], res["findings"][0]


@pytest.mark.parametrize(("basis", "stops"), [("paired", 1.5), ("paired", -1.0), ("unpaired", -2.0)])
def test_exposure_change_is_brightness_never_tone_curve(frames, tmp_path, basis, stops):
    split = D.paired if basis == "paired" else D.unpaired
    res = D.run_folders(tmp_path, *split(frames, real_fn=lambda a: D.expose(a, stops)))
    ev = D.first(res, "brightness", "gap")
    if stops < 0:
        assert ev["stops_sim_minus_real"] == pytest.approx(-stops, abs=0.3 if basis == "paired" else 0.8), ev
    else:  # clipped highlights gain less than 2**stops: the mean luminance rises by less
        assert -stops - 0.3 < ev["stops_sim_minus_real"] < -0.5, ev
    assert "tone_curve" not in D.named(res), D.codes(res)
    if basis == "paired":  # the difference map (sim minus real) moves against real's exposure, everywhere
        diff = np.asarray(res["maps"]["paired"]["mean_signed_diff"])
        assert diff.shape == (32, 32)
        assert np.sign(diff.mean()) == -np.sign(stops)
        assert (np.sign(diff) == -np.sign(stops)).mean() > 0.9


# --- orientation, field of view ------------------------------------------------------------------

TURNS = {
    "flip_vertical": lambda a: a[::-1],
    "flip_horizontal": lambda a: a[:, ::-1],
    "rotate_180": lambda a: a[::-1, ::-1],
    "transpose": lambda a: a.transpose(1, 0, 2),  # a W x H frame: the aspect differs too
    "rotate_90_ccw": np.rot90,
}


@pytest.mark.parametrize("turn", list(TURNS))
def test_orientation_paired(frames, tmp_path, turn):
    res = D.run_folders(tmp_path, *D.paired(frames, sim_fn=lambda a: np.ascontiguousarray(TURNS[turn](a))))
    ev = D.first(res, "orientation", "bug")
    assert ev["transform"] == turn, ev
    assert ev["share"] >= 0.75, ev
    assert ev["ncc_turned_median"] > ev["ncc_as_is_median"] + 0.3, ev
    assert res["maps"]["orientation_applied"] == turn
    # once turned back, the pairs are the same frames: nothing else to name but a turned aspect
    assert D.named(res) <= {"orientation", "resolution"}, D.codes(res)
    assert ("resolution" in D.named(res)) == (turn in ("transpose", "rotate_90_ccw")), D.codes(res)


def test_orientation_unpaired_fixed_camera(shared_data, tmp_path):
    """A fixed camera (one scene, views jittered by a few pixels and +-0.3 stops), no shared keys: the
    sets' mean images show the sim side upside down. (A view shaken by 20 px of 160 is no fixed camera:
    its frames' edges do not line up, `thumbs.fixed_camera`.)"""
    im = np.asarray(Image.open(D.voc_sources(shared_data, 1)[0]).convert("RGB").resize((2 * D.W, 2 * D.H)))
    rng = np.random.default_rng(0)

    def view() -> np.ndarray:
        y, x = rng.integers(57, 63), rng.integers(77, 83)
        return D.expose(np.ascontiguousarray(im[y:y + D.H, x:x + D.W]), rng.uniform(-0.3, 0.3))
    sim = {f"s{i:02d}": np.ascontiguousarray(view()[::-1]) for i in range(12)}
    real = {f"r{i:02d}": view() for i in range(12)}
    res = D.run_folders(tmp_path, sim, real)
    ev = D.first(res, "orientation", "bug")
    assert (ev["basis"], ev["transform"]) == ("distribution", "flip_vertical"), ev
    assert ev["mean_image_ncc_turned"] > 0.8 > ev["mean_image_ncc_as_is"], ev


@pytest.mark.parametrize("factor", [1.25, 0.8])
def test_field_of_view_zoom(frames, tmp_path, factor):
    if factor > 1:  # sim zoomed in
        sim, real = D.paired(frames, sim_fn=lambda a: D.zoom(a, factor))
    else:  # real zoomed in by 1/factor: sim shows the scene `factor` times as large
        sim, real = D.paired(frames, real_fn=lambda a: D.zoom(a, 1 / factor))
    res = D.run_folders(tmp_path, sim, real)
    ev = D.first(res, "field_of_view", "bug")
    assert ev["zoom_sim_over_real"] == pytest.approx(factor, rel=0.05), ev
    assert not {"resize_filter", "compression", "sharpness", "resolution"} & D.named(res), D.codes(res)


def test_resolution_change_is_never_field_of_view(frames, tmp_path):
    """Real frames at twice the resolution of the same views: `resolution`, not a zoom."""
    sim, real = D.paired(frames)
    real = {k: np.asarray(Image.fromarray(a).resize((2 * D.W, 2 * D.H), Image.BICUBIC)) for k, a in real.items()}
    res = D.run_folders(tmp_path, sim, real)
    D.first(res, "resolution", "bug")
    assert "field_of_view" not in D.named(res), D.codes(res)


def test_different_resize_chains_are_never_field_of_view(shared_data, tmp_path):
    """The same views downscaled to 160x120 two ways (sim straight from the original, real through
    320x240): resampled differently, same field of view."""
    src = D.voc_sources(shared_data, 10)
    sim = {f"f{i:03d}": a for i, a in enumerate(D.load_frames(src))}
    real = {f"f{i:03d}": np.asarray(Image.fromarray(a).resize((D.W, D.H), Image.BILINEAR))
            for i, a in enumerate(D.load_frames(src, (2 * D.W, 2 * D.H)))}
    res = D.run_folders(tmp_path, sim, real)
    assert "field_of_view" not in D.named(res), D.codes(res)
    assert not [c for c in D.codes(res) if c[1] == "bug"], D.codes(res)


def test_half_resolution_render_is_never_field_of_view(frames, tmp_path):
    """Sim rendered at half size and upscaled against full-resolution real: softer, same view."""
    def round_trip(a):
        small = Image.fromarray(a).resize((D.W // 2, D.H // 2), Image.BILINEAR)
        return np.asarray(small.resize((D.W, D.H), Image.BILINEAR))
    res = D.run_folders(tmp_path, *D.paired(frames, sim_fn=round_trip))
    assert res["findings"], "a half-resolution render names nothing"
    assert "field_of_view" not in D.named(res), D.codes(res)


# --- pair sync -------------------------------------------------------------------------------------

def _pan(src: Path, moments: int, step_px: int) -> list[np.ndarray]:
    """A camera panning across one real image: `moments` W x H windows of it, `step_px` apart."""
    im = np.asarray(Image.open(src).convert("RGB").resize((2 * D.W, 2 * D.H), Image.LANCZOS))
    top = D.H // 2
    return [np.ascontiguousarray(im[top:top + D.H, step_px * k:step_px * k + D.W]) for k in range(moments)]


@pytest.mark.parametrize("lag", [1, -1])
def test_pair_sync_one_step_off(shared_data, tmp_path, lag):
    """Three episodes of a panning camera; real frames keyed `lag` steps late (real step k shows moment
    k - lag), so each sim frame matches the real frame `lag` steps later in its episode."""
    steps = 6
    sim, real = {}, {}
    for e, src in enumerate(D.voc_sources(shared_data, 3)):
        moments = _pan(src, steps + 2, step_px=12)  # moments -1 .. steps
        for k in range(steps):
            sim[f"ep{e}/{k:03d}"] = moments[k + 1]
            real[f"ep{e}/{k:03d}"] = moments[k + 1 - lag]
    res = D.run_folders(tmp_path, sim, real)
    ev = D.first(res, "pair_sync", "bug")
    assert ev["offset_steps"] == lag, ev
    # every pair whose matching frame lies inside its episode (5 of 6 per episode) is off
    assert ev["pairs_at_offset"] >= 3 * (steps - 1) - 1, ev
    assert ev["share_off"] >= 0.75, ev


def test_pair_sync_of_a_slow_camera(shared_data, tmp_path):
    """A camera panning 2 px a step: neighbouring frames correlate ~0.99, so no neighbour beats the
    own pair by the plain margin; one step out of sync is still named (the neighbour leaves a
    fraction of the own pair's decorrelation). Synced, with sensor noise on real (which lowers
    every correlation alike), it stays quiet."""
    steps, sim, real, synced = 6, {}, {}, {}
    rng = np.random.default_rng(5)
    for e, src in enumerate(D.voc_sources(shared_data, 3)):
        moments = _pan(src, steps + 1, step_px=2)
        for k in range(steps):
            key = f"ep{e}/{k:03d}"
            sim[key], real[key] = moments[k + 1], moments[k]
            noisy = moments[k + 1].astype(np.float64) + rng.normal(0.0, 3.0, moments[k + 1].shape)
            synced[key] = np.clip(np.round(noisy), 0, 255).astype(np.uint8)
    (tmp_path / "off").mkdir()
    ev = D.first(D.run_folders(tmp_path / "off", sim, real), "pair_sync", "bug")
    assert ev["offset_steps"] == 1 and ev["share_off"] >= 0.75, ev
    (tmp_path / "synced").mkdir()
    res = D.run_folders(tmp_path / "synced", sim, synced)
    assert "pair_sync" not in D.named(res), D.codes(res)


def test_pair_sync_quiet_on_synced_sequences(shared_data, tmp_path):
    steps = 6
    seq = {}
    for e, src in enumerate(D.voc_sources(shared_data, 3)):
        for k, a in enumerate(_pan(src, steps, step_px=12)):
            seq[f"ep{e}/{k:03d}"] = a
    res = D.run_folders(tmp_path, seq, dict(seq))
    D.assert_quiet(res)


# --- vignetting, motion blur -------------------------------------------------------------------------

def test_unpaired_vignetting_needs_eight_frames_a_side(frames, tmp_path):
    """Four photos a side, unpaired, sim 80% darker at the corners (strength 0.8, ~2.3 stops): every
    sim frame falls off more than every real one, yet four different scenes a side differ by as
    much corner to centre on their own (skies in the corners), so no vignetting gap is named below
    VIGNETTE_MIN_FRAMES; the engine says how few frames it had."""
    from perception_gap.diagnoses.tone import VIGNETTE_MIN_FRAMES

    assert VIGNETTE_MIN_FRAMES == 8
    res = D.run_folders(tmp_path, *D.unpaired(frames, sim_fn=lambda a: D.vignette(a, 0.8), n=4))
    assert "vignetting" not in D.named(res), D.codes(res)
    assert ("insufficient_data", "info") in D.codes(res), D.codes(res)


def test_vignetting_sim(frames, tmp_path):
    res = D.run_folders(tmp_path, *D.paired(frames, sim_fn=lambda a: D.vignette(a, 0.5)))
    ev = D.first(res, "vignetting", "gap")
    assert ev["darker_side"] == "sim", ev
    # corners at most 50% (1 stop) darker; the outer ring's mean lies a little inside them
    assert -1.1 < ev["corner_minus_centre_stops_sim_minus_real"] < -0.4, ev
    assert abs(ev["centre_stops_sim_minus_real"]) < 0.2, ev
    assert "brightness" not in D.named(res), D.codes(res)
    maps = res["maps"]
    assert np.asarray(maps["sim"]["mean_linear"]).shape == (32, 32)
    rs, rr = np.asarray(maps["sim"]["radial"]), np.asarray(maps["real"]["radial"])
    assert rs[-1] / rs[0] < 0.8 * (rr[-1] / rr[0]), (rs, rr)
    diff = np.asarray(maps["paired"]["mean_signed_diff"])
    corners = diff[[0, 0, -1, -1], [0, -1, 0, -1]]
    assert (corners < 0).all() and corners.mean() < diff[12:20, 12:20].mean(), diff


@pytest.mark.parametrize(("basis", "side", "axis"), [("paired", "sim", 1), ("paired", "real", 0),
                                                    ("unpaired", "real", 1)])
def test_motion_blur_direction(frames, tmp_path, basis, side, axis):
    """A 9 px box blur along one axis (the unpaired detection limit)."""
    blur = lambda a: D.motion_blur(a, 9, axis)  # noqa: E731
    split = D.paired if basis == "paired" else D.unpaired
    res = D.run_folders(tmp_path, *split(frames, **{f"{side}_fn": blur}))
    ev = D.first(res, "motion_blur", "gap")
    assert ev["blurred_side"] == side, ev
    assert ev["direction"] == ("horizontal" if axis == 1 else "vertical"), ev
    # 2**(anisotropy change) reads a box of L px as ~0.65 L on these frames (5 -> 3.6, 9 -> 6.2, 15 -> 9.6)
    assert 9 / (2 if basis == "paired" else 3) <= ev["approx_length_px"] <= 9 * 1.5, ev
    assert "sharpness" not in D.named(res), D.codes(res)


def _under_noise(frames: list[np.ndarray], real_blur, sigma: float = 10.0):
    """Paired: both sides with their own readout noise of `sigma`, real blurred (`real_blur`) before it."""
    sim = {f"f{i:03d}": D.readout_noise(a, sigma, i) for i, a in enumerate(frames[:10])}
    real = {f"f{i:03d}": D.readout_noise(real_blur(a), sigma, 100 + i) for i, a in enumerate(frames[:10])}
    return sim, real


def test_motion_blur_under_readout_noise(frames, tmp_path):
    """A 5 px horizontal blur with sensor noise of sigma 10 added after it, on both sides, as a camera
    does: the noise adds the same energy to both directions' differences and pulls the raw anisotropy
    change under the 1.0 bar (0.85 log2 on these frames); with each frame's own noise taken out it
    reads 2.1 and is named."""
    res = D.run_folders(tmp_path, *_under_noise(frames, lambda a: D.motion_blur(a, 5, axis=1)))
    ev = D.first(res, "motion_blur", "gap")
    assert (ev["blurred_side"], ev["direction"]) == ("real", "horizontal"), ev
    assert ev["anisotropy_log2_sim_minus_real"] >= 1.0, ev
    assert not [c for c in D.codes(res) if c[1] == "bug"], D.codes(res)


def test_motion_blur_under_fine_texture_is_named_by_smoothness(shared_data, tmp_path):
    """The RGB-D camera's renders (320x240), real blurred 5 px along x, then readout noise of sigma 6 on
    both sides: their fine texture carries much of the gradient energy, so even with the noise taken out
    the energy anisotropy moves under the 1.0 bar (0.89 log2). The blurred direction is still smoother
    at the pixel scale (two-pixel over one-pixel energy), and that names it, with a lower bound on the
    length instead of a length."""
    srcs = sorted((shared_data / "rgbd" / "color").glob("*.jpg"))
    if len(srcs) < 5:
        pytest.skip("need the 5 RGB-D colour frames")
    frs = [np.asarray(Image.open(p).convert("RGB").resize((320, 240), Image.BILINEAR)) for p in srcs]
    sim = {f"f{i:03d}": D.readout_noise(a, 6.0, i) for i, a in enumerate(frs)}
    real = {f"f{i:03d}": D.readout_noise(D.motion_blur(a, 5, axis=1), 6.0, 100 + i) for i, a in enumerate(frs)}
    ev = D.first(D.run_folders(tmp_path, sim, real), "motion_blur", "gap")
    assert (ev["blurred_side"], ev["direction"]) == ("real", "horizontal"), ev
    assert ev["anisotropy_log2_sim_minus_real"] < 1.0, ev  # under the energy bar
    assert ev["smoothness_anisotropy_log2_sim_minus_real"] <= -ev["smoothness_threshold_log2"], ev
    assert ev["approx_length_px"] is None and ev["min_length_px"] == 2.0, ev


def test_isotropic_blur_under_readout_noise_is_not_motion_blur(frames, tmp_path):
    """Gaussian blur (sigma 1.5) under the same noise: the noise correction must not invent a direction."""
    from scipy.ndimage import gaussian_filter

    def blur(a: np.ndarray) -> np.ndarray:
        return np.clip(np.round(gaussian_filter(a.astype(np.float64), (1.5, 1.5, 0))), 0, 255).astype(np.uint8)

    res = D.run_folders(tmp_path, *_under_noise(frames, blur))
    assert "motion_blur" not in D.named(res), D.codes(res)


# --- clean controls --------------------------------------------------------------------------------------

def test_identical_frames_name_nothing(frames, tmp_path):
    res = D.run_folders(tmp_path, *D.paired(frames))
    D.assert_quiet(res)
    diff = np.asarray(res["maps"]["paired"]["mean_abs_diff"])
    assert diff.shape == (32, 32) and diff.max() == 0


def test_lossless_reencode_names_nothing(frames, tmp_path):
    res = D.run_folders(tmp_path, *D.paired(frames), sim_ext=".webp")
    D.assert_quiet(res)


def test_clean_unpaired_split_is_quiet(frames, tmp_path):
    res = D.run_folders(tmp_path, *D.unpaired(frames))
    D.assert_quiet(res)
    assert res["maps"]["paired"] is None
    assert np.asarray(res["maps"]["real"]["mean_linear"]).shape == (32, 32)


def test_the_field_of_view_warp_and_correlation_match_scipy_and_the_plain_form():
    """The search's precomputed bilinear taps, and the sparse warp built from them, give scipy's
    `map_coordinates` (order 1, NaN outside), and its one-image correlations (centred copies, and the
    overlap's sums the search runs) give `ncc` on K copies, on the grid the search uses."""
    from scipy.ndimage import map_coordinates

    from perception_gap.diagnoses import spatial
    from perception_gap.diagnoses.thumbs import THUMB, ncc, zoom_operator, zoom_stack

    zooms = np.repeat(spatial.FOV_ZOOMS, len(spatial.FOV_SHIFTS))
    shifts = np.tile(spatial.FOV_SHIFTS, (len(spatial.FOV_ZOOMS), 1))
    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[0:THUMB, 0:THUMB].astype(np.float64)
    c = (THUMB - 1) / 2.0
    ys = c + (yy[None] - c - shifts[:, 0, None, None]) / zooms[:, None, None]
    xs = c + (xx[None] - c - shifts[:, 1, None, None]) / zooms[:, None, None]
    outside = (ys < 0) | (ys > THUMB - 1) | (xs < 0) | (xs > THUMB - 1)
    for trial in range(3):
        t = rng.random((THUMB, THUMB)) * 255
        ref = map_coordinates(t, [ys.ravel(), xs.ravel()], order=1).reshape(zooms.shape + (THUMB, THUMB))
        ref[outside] = np.nan
        got = zoom_stack(t, zooms, shifts)
        assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.nanmax(np.abs(got - ref)) < 1e-9
        s = rng.random((THUMB, THUMB)) * 255
        want = ncc(np.broadcast_to(s, got.shape), got)
        assert np.allclose(spatial._ncc_one(s, got), want, atol=1e-12)
        # the sparse form the search runs: the same warp (zeros outside), the same correlations from sums
        op, inside = zoom_operator(zooms, shifts)
        warped = (op @ t.ravel()).reshape(inside.shape)
        assert np.array_equal(inside.reshape(got.shape) == 0, outside)
        assert np.nanmax(np.abs(np.where(inside > 0, warped, np.nan).reshape(got.shape) - ref)) < 1e-9
        assert np.allclose(spatial._ncc_inside(s.ravel() / 255, warped / 255, inside), want, atol=1e-12)
