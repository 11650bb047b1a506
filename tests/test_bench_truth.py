"""bench/bench_truth.py and bench/truth_cases.py: the fault-injection suite's own parts do what they say.

The faults are checked against the tests/faults.py functions they stand for or against closed
forms; the report's bookkeeping (limits, hit rule, headline) against hand-made outcomes; one small
end-to-end run on the real RGB-D frames (skipped when ../shared/data is absent).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "tests", ROOT / "bench"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import bench_truth as B
import faults as F
import truth_cases as T

from perception_gap.ingest import decode_depth


def _image(seed: int = 0, h: int = 48, w: int = 64) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_pointwise_tables_equal_the_faults_they_replace():
    a = _image()
    for stops in (-1.0, -0.15, 0.3):
        assert np.array_equal(T.pointwise(lambda x, s=stops: F.expose(x, s))(a), F.expose(a, stops))
    gains = T._wb_gains(0.6)
    assert np.array_equal(T.pointwise(lambda x: F.white_balance(x, gains))(a), F.white_balance(a, gains))
    assert gains[0] / gains[2] == pytest.approx(2 ** 0.6) and gains[1] == 1.0


def test_gaussian_blur_has_the_requested_sigma():
    a = np.zeros((81, 81, 3), np.uint8)
    a[40, :, :] = 255  # a line: its blurred profile is the 1-D Gaussian
    for sigma in (1.0, 2.0):
        prof = T.gaussian_blur(a, sigma)[:, 40, 0].astype(np.float64)
        x = np.arange(81) - 40
        var = float(np.sum(prof * x**2) / np.sum(prof))
        assert var == pytest.approx(sigma**2, rel=0.1)


def test_chroma_420_keeps_luma_and_averages_chroma_over_2x2():
    a = np.full((32, 32, 3), 120, np.uint8)
    a[:, ::2, 0] = 170  # red stripes one pixel wide (chroma at Nyquist), inside the gamut: no clipping
    out = T.chroma_420(a)

    def ycc(x):
        from PIL import Image
        return np.asarray(Image.fromarray(x).convert("YCbCr")).astype(np.float64)

    assert np.abs(ycc(out)[..., 0] - ycc(a)[..., 0]).max() <= 1  # luma untouched (rounding only)
    cr_in, cr_out = ycc(a)[..., 2], ycc(out)[..., 2]
    assert cr_out.std() < 0.1 * cr_in.std()  # the one-pixel chroma stripes are averaged away
    assert cr_out.mean() == pytest.approx(cr_in.mean(), abs=1.5)


def test_add_holes_adds_the_requested_points_on_top_of_existing_ones():
    rng = np.random.default_rng(3)
    d = np.full((120, 160), 1.5, np.float32)
    d[:, :16] = 0  # the sensor's own 10% dropout
    for points in (5.0, 9.0, 20.0):
        out = T.add_holes(d, rng, points)
        added = T.dropout_points((d,), (out,))
        assert added == pytest.approx(points, abs=0.25)
        assert np.all(out[d == 0] == 0) and np.all((out == d) | (out == 0))


def test_split_indices_are_disjoint_halves_fixed_by_the_seed():
    a1 = T.split_indices(40, 16, seed=7)
    assert a1 == T.split_indices(40, 16, seed=7) and a1 != T.split_indices(40, 16, seed=8)
    chosen, half_a, half_b = a1
    assert len(chosen) == 16 and not set(half_a) & set(half_b) and sorted(half_a + half_b) == chosen
    assert T.split_indices(5, 16, seed=0)[0] == [0, 1, 2, 3, 4]


def test_sides_are_written_as_the_engine_reads_them(tmp_path):
    rgb = _image(1)
    depth = np.where(np.arange(48 * 64).reshape(48, 64) % 7 == 0, 0, 1.234).astype(np.float32)
    for fmt, dfmt, factor in (("png", "mm", 1000.0), ("npy", "m", 1.0), ("jpg70", "tum", 5000.0)):
        side = T.Side(keys=("k0",), rgb=(rgb if fmt != "npy" else F.to_float01(rgb),), fmt=fmt,
                      depth=(depth,), depth_fmt=dfmt)
        rows = T.write_side(side, tmp_path / fmt)
        assert rows == [{"rgb": f"{fmt}/k0.{fmt[:3]}", "pair_key": "k0"}]
        back = decode_depth(next((tmp_path / fmt / "depth").glob("k0.*")))
        assert np.allclose(back, depth * factor, atol=0.5)
    assert np.array_equal(np.load(tmp_path / "npy" / "k0.npy"), F.to_float01(rgb))


def _result(split: str, expected: str, hit: bool, at: bool | None) -> B.CaseResult:
    return B.CaseResult("c", "cam", split, 0, expected, "paired", 1.0, "1", expected,
                        "none" if expected == "none" else "bug", at, "x", "bug", "", hit, [], 0.0, 3, 3)


def test_headline_passes_only_at_95_percent_on_both_splits_with_clean_controls():
    rows = ([_result("tune", "channel_swap", True, True)] * 19 + [_result("tune", "channel_swap", False, True)]
            + [_result("holdout", "channel_swap", True, True)] * 20 + [_result("tune", "none", True, None)] * 2
            + [_result("holdout", "channel_swap", False, False)] * 5)  # misses below the limit do not count
    line = B.headline(rows)
    assert line.startswith("truth: tune 95.0% holdout 100.0% (at/above limits), controls clean 2/2")
    assert line.split("-> ")[1].startswith("PASS")
    assert "FAIL" in B.headline(rows + [_result("tune", "none", False, None)])
    assert "FAIL" in B.headline(rows + [_result("holdout", "channel_swap", False, True)] * 2)  # 20/22


def test_every_fault_family_has_a_limit_and_limits_sit_inside_the_magnitudes():
    for fault in T.FAULTS:
        if fault.code == "none":
            continue
        assert set(B.LIMITS[fault.family]) == {"paired", "unpaired"}, fault.family
        assert fault.code in B.BUG_CODES + B.GAP_CODES and fault.severity == (
            "bug" if fault.code in B.BUG_CODES else "gap")
        assert set(fault.quick) <= set(fault.magnitudes)
        assert max(abs(m) for m in fault.magnitudes) >= B.LIMITS[fault.family]["paired"]


def test_small_run_on_real_rgbd_frames(shared_data, tmp_path, capsys):
    out = tmp_path / "truth.json"
    assert B.main(["--quick", "--camera", "rgbd", "--family", "channel_swap", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    res = json.loads(out.read_text())
    cases = {c["case"]: c for c in res["cases"]}
    n_controls = sum(len(f.bases) for f in T.FAULTS if f.code == "none")
    assert len(cases) == n_controls + 2  # controls, and channel_swap paired + unpaired
    swap = cases["rgbd_640x480/s0/channel_swap/1/paired"]
    assert swap["at_or_above_limit"] is True and (swap["n_sim"], swap["n_real"]) == (5, 5)
    assert swap["hit"] == (swap["got"] == "channel_swap" and swap["got_severity"] == "bug")
    unpaired = cases["rgbd_640x480/s0/channel_swap/1/unpaired"]
    assert unpaired["at_or_above_limit"] is False  # 2 frames against 3
    assert text.strip().splitlines()[-1] == res["headline"] and res["headline"].startswith("truth: tune ")


def test_wavelet_noise_sigma_reads_known_noise_and_ignores_smooth_content():
    rng = np.random.default_rng(3)
    yy, xx = np.mgrid[0:240, 0:320]
    ramp = np.stack([xx * 0.5, yy * 0.6, 60 + 0 * xx], -1)  # smooth content: no diagonal detail
    assert T.wavelet_noise_sigma(ramp.astype(np.uint8)) < 0.5
    noisy = ramp + rng.normal(0.0, 5.0, ramp.shape)  # sigma 5 per channel, independent
    luma_sigma = 5.0 * float(np.sqrt(0.299 ** 2 + 0.587 ** 2 + 0.114 ** 2))  # 3.34
    assert abs(T.wavelet_noise_sigma(noisy) - luma_sigma) < 0.1 * luma_sigma


def test_scene_spread_bar_follows_noise_and_swap_only_when_the_sets_separate():
    rng = np.random.default_rng(4)
    def side(sigmas, gains):
        base = rng.uniform(40, 170, (len(sigmas), 1, 1, 1)) * np.asarray(gains) * rng.uniform(0.9, 1.1, (len(sigmas), 1, 1, 3))
        rgb = [np.clip(b + rng.normal(0, s, (64, 64, 3)), 0, 255).astype(np.uint8) for b, s in zip(base, sigmas)]
        return T.Side(keys=[f"k{i}" for i in range(len(rgb))], rgb=rgb)
    quiet, loud = side([1.0] * 8, [1, 1, 1]), side([6.0] * 8, [1, 1, 1])
    assert T.scene_spread_clear("sensor_noise", quiet, loud)
    assert not T.scene_spread_clear("sensor_noise", quiet, side([1.0, 6.0] * 4, [1, 1, 1]))
    warm = side([1.0] * 8, [1.3, 1.0, 0.7])
    swapped = T.Side(keys=warm.keys, rgb=[x[..., ::-1].copy() for x in warm.rgb])
    assert T.scene_spread_clear("channel_swap", warm, swapped)
    grey = side([1.0] * 8, [1, 1, 1])
    assert not T.scene_spread_clear("channel_swap", grey, T.Side(keys=grey.keys, rgb=[x[..., ::-1].copy() for x in grey.rgb]))
