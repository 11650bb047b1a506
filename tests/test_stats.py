"""Every statistic against an independent numpy reference, and known answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from PIL import Image

from perception_gap.statistics.depth import DEPTH_PERCENTILES, depth_stats, infer_depth_unit, parse_depth_unit
from perception_gap.statistics.image import LUM_PERCENTILES, image_stats_array, image_stats_pil
from perception_gap.statistics.sampling import floats, mean32, sample_stride


def textured(h: int = 240, w: int = 320, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x / w * 200, y / h * 180, (x + y) / (w + h) * 220], -1)
    noise = rng.normal(0, 12, (h, w, 3))
    return np.clip(base + noise + 20, 0, 255).astype(np.uint8)


# -- independent references (plain numpy, written from the definitions) --------------------------

def ref_grid(a: np.ndarray) -> np.ndarray:
    h, w = a.shape[:2]
    s = max(1, int(np.floor(np.sqrt(h * w / 8192))))
    rows = np.arange(s // 2, (h // s) * s, s) if s > 1 else np.arange(h)
    cols = np.arange(s // 2, (w // s) * s, s) if s > 1 else np.arange(w)
    return a[np.ix_(rows, cols)]


def ref_luma_u8(a: np.ndarray) -> np.ndarray:
    # Pillow's documented integer transform L = R*299/1000 + G*587/1000 + B*114/1000, rounded.
    return np.asarray(Image.fromarray(a).convert("L"))


def ref_srgb_linear(v: np.ndarray) -> np.ndarray:
    v = v / 255.0
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def ref_crop(a: np.ndarray, size: int = 128) -> np.ndarray:
    h, w = a.shape[:2]
    ch, cw = min(h, size), min(w, size)
    top, left = ((h - ch) // 2) // 8 * 8, ((w - cw) // 2) // 8 * 8
    return a[top : top + ch, left : left + cw]


def ref_hf(lum: np.ndarray) -> dict[str, float]:
    lum = lum.astype(np.float64)
    p = np.pad(lum, 1)
    lap = (4 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:])[1:-1, 1:-1]
    dx = np.diff(lum, axis=1)
    dy = np.diff(lum, axis=0)
    d2 = lum[:, 2:] - lum[:, :-2]
    return {
        "sharpness": np.mean(lap**2),
        "hf_ratio": np.mean(lap**2) / (np.mean(dx**2) + np.mean(dy**2)),
        "grad_ratio": np.mean(d2**2) / np.mean(dx**2),
        "dup_frac": np.mean(dx == 0),
    }


@pytest.mark.parametrize("shape", [(240, 320), (480, 640), (37, 53), (720, 1280)])
def test_uint8_rgb_matches_numpy_reference(shape):
    a = textured(*shape, seed=shape[0])
    s = image_stats_pil(Image.fromarray(a))
    g = ref_grid(a).reshape(-1, 3).astype(np.float64)
    np.testing.assert_allclose(s.mean, g.mean(0), rtol=1e-12)
    np.testing.assert_allclose(s.std, g.std(0), rtol=1e-9)
    np.testing.assert_array_equal(s.min, g.min(0))
    np.testing.assert_array_equal(s.max, g.max(0))
    lum = ref_grid(ref_luma_u8(a)).ravel()
    np.testing.assert_array_equal(s.lum_percentiles, np.percentile(lum, LUM_PERCENTILES, method="inverted_cdf"))
    assert s.lum_mean == pytest.approx(lum.mean(), rel=1e-12)
    np.testing.assert_allclose(s.lin_mean, ref_srgb_linear(g).mean(0), rtol=1e-9)
    ref = ref_hf(ref_crop(ref_luma_u8(a)) / 255.0)
    for k, v in ref.items():
        assert getattr(s, k) == pytest.approx(v, rel=1e-4), k
    # the array path computes the same numbers as the Pillow path
    s2 = image_stats_array(a)
    for k in ("mean", "std", "min", "max", "lum_percentiles", "lin_mean"):
        np.testing.assert_allclose(getattr(s2, k), getattr(s, k), rtol=1e-9, err_msg=k)
    for k in ("sharpness", "hf_ratio", "grad_ratio", "dup_frac", "dup_parity", "blockiness"):
        assert getattr(s2, k) == pytest.approx(getattr(s, k), rel=1e-4), k


def test_float_array_keeps_own_units_and_counts_nonfinite():
    a = textured().astype(np.float32) / 255.0
    a[0, :50] = np.nan
    s = image_stats_array(a)
    assert s.dtype == "float32" and s.nominal_max is None and s.lin_mean is None
    g = ref_grid(a).reshape(-1, 3).astype(np.float64)
    fin = np.isfinite(g)
    for c in range(3):
        assert s.mean[c] == pytest.approx(g[fin[:, c], c].mean(), rel=1e-9)
        assert s.max[c] <= 1.0
    assert s.nonfinite_frac == pytest.approx((~fin).mean())
    # normalized (ImageNet) arrays keep their negative values: never silently rescaled
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    n = ((textured().astype(np.float32) / 255.0 - mean) / std).astype(np.float32)
    sn = image_stats_array(n)
    assert min(sn.min) < 0
    np.testing.assert_allclose(sn.mean, ref_grid(n).reshape(-1, 3).astype(np.float64).mean(0), rtol=1e-9)


def test_uint16_nominal_scale():
    a = (textured().astype(np.uint16) * 257)
    s16, s8 = image_stats_array(a), image_stats_array(textured())
    assert s16.nominal_max == 65535 and s16.dtype == "uint16"
    np.testing.assert_allclose(np.array(s16.mean) / 257, s8.mean, rtol=1e-9)
    np.testing.assert_allclose(s16.lin_mean, s8.lin_mean, rtol=1e-9)
    # 8-bit luma is rounded to integers (as Pillow does), 16-bit luma is not: 1% agreement
    assert s16.sharpness == pytest.approx(s8.sharpness, rel=1e-2)


def test_known_answers():
    const = np.full((64, 64, 3), 77, np.uint8)
    s = image_stats_pil(Image.fromarray(const))
    assert s.mean == (77.0, 77.0, 77.0) and s.std == (0.0, 0.0, 0.0)
    assert all(type(v) is float for v in s.mean + s.std + s.lin_mean + (s.dup_parity, s.lum_mean))
    assert s.sharpness == pytest.approx(0, abs=1e-12) and s.hf_ratio is None and s.grad_ratio is None and s.blockiness is None
    assert s.dup_frac == 1.0
    # white noise: E[lap^2] = 20 s^2, E[dx^2] + E[dy^2] = 4 s^2 -> 5; step-2 vs step-1 -> 1
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 1, (256, 256)).astype(np.float64)
    sn = image_stats_array(noise)
    assert sn.hf_ratio == pytest.approx(5.0, rel=0.05)
    assert sn.grad_ratio == pytest.approx(1.0, rel=0.05)
    # a linear ramp has no Laplacian, and step-2 differences are twice step-1: ratio 4
    ramp = np.tile(np.arange(256, dtype=np.float64), (64, 1))
    sr = image_stats_array(ramp)
    assert sr.sharpness == pytest.approx(0.0, abs=1e-12)
    assert sr.grad_ratio == pytest.approx(4.0)
    # 2x nearest upscaling duplicates every other column pair
    up = np.repeat(noise[:64, :64], 2, axis=1)
    su = image_stats_array(up)
    assert su.dup_parity == pytest.approx(1.0) and su.grad_ratio == pytest.approx(2.0, rel=0.05)


def test_jpeg_blockiness_is_detected(tmp_path):
    a = textured(256, 256)
    p = tmp_path / "x.jpg"
    Image.fromarray(a).save(p, quality=20)
    sj = image_stats_pil(Image.open(p).convert("RGB"))
    sp = image_stats_pil(Image.fromarray(a))
    assert sj.blockiness > 1.15 > sp.blockiness


def test_grayscale_single_channel():
    a = textured()[..., 0]
    s = image_stats_pil(Image.fromarray(a))
    assert s.channels == 1
    g = ref_grid(a).astype(np.float64).ravel()
    assert s.mean[0] == pytest.approx(g.mean()) and s.lum_mean == pytest.approx(g.mean())


def test_depth_stats_reference():
    rng = np.random.default_rng(3)
    d = rng.uniform(0.4, 3.0, (480, 640)).astype(np.float32)
    d[:40] = 0
    d[40:50] = np.nan
    d[50:52] = np.inf
    s = depth_stats(d)
    g = ref_grid(d).ravel()
    valid = np.isfinite(g) & (g > 0)
    np.testing.assert_allclose(s.percentiles, np.percentile(g[valid].astype(np.float64), DEPTH_PERCENTILES), rtol=1e-9)
    assert s.dropout == pytest.approx(1 - valid.mean())
    assert s.dropout == pytest.approx(52 / 480, abs=0.01)
    assert s.inferred_unit == "m"
    mm = depth_stats((np.nan_to_num(d, posinf=0) * 1000).astype(np.uint16))
    assert mm.inferred_unit == "mm"
    np.testing.assert_allclose(np.array(mm.percentiles) / 1000, s.percentiles, rtol=2e-3)
    empty = depth_stats(np.zeros((10, 10), np.uint16))
    assert empty.dropout == 1.0 and empty.percentiles is None and empty.inferred_unit == "unknown"


def test_depth_units():
    assert parse_depth_unit("mm") == 1000 and parse_depth_unit("m") == 1 and parse_depth_unit("5000") == 5000
    assert parse_depth_unit("tum") == 5000 and parse_depth_unit(None) is None
    for bad in ("furlong", "-1", "0", "nan"):
        with pytest.raises(ValueError, match="depth_unit"):
            parse_depth_unit(bad)
    assert infer_depth_unit(np.float32, 1.2) == "m"
    assert infer_depth_unit(np.uint16, 1200) == "mm"
    assert infer_depth_unit(np.float32, None) == "unknown"


def test_stride_bounds_cost():
    assert sample_stride(90, 90) == 1
    assert sample_stride(240, 320) == 3
    assert sample_stride(480, 640) == 6
    assert sample_stride(1080, 1920) == 15


@settings(max_examples=40, deadline=None)
@given(arrays(np.uint8, st.tuples(st.integers(3, 40), st.integers(3, 40), st.just(3))))
def test_property_pil_and_array_paths_agree_and_are_bounded(a):
    s = image_stats_pil(Image.fromarray(a))
    s2 = image_stats_array(a)
    np.testing.assert_allclose(s.mean, s2.mean, rtol=1e-9, atol=1e-9)
    assert all(0 <= m <= 255 for m in s.mean)
    assert all(lo <= m <= hi for lo, m, hi in zip(s.min, s.mean, s.max))
    assert list(s.lum_percentiles) == sorted(s.lum_percentiles)
    assert 0 <= s.dup_frac <= 1 and 0 <= s.dup_parity <= 1
    # statistics of a frame do not depend on the order of its channels beyond permuting them
    sw = image_stats_array(a[..., ::-1].copy())
    np.testing.assert_allclose(sw.mean, s.mean[::-1], rtol=1e-9, atol=1e-9)


def test_channel_histograms_match_numpy_reference():
    from perception_gap.statistics.image import HIST_BINS

    a = textured(480, 640, seed=5)
    s = image_stats_pil(Image.fromarray(a))
    g = ref_grid(a).reshape(-1, 3)
    ref = np.stack([np.histogram(g[:, c], bins=HIST_BINS, range=(0, 256))[0] / len(g) for c in range(3)])
    np.testing.assert_allclose(np.array(s.hist).reshape(3, HIST_BINS), ref, atol=1e-12)
    assert image_stats_array(a).hist == pytest.approx(s.hist)  # the array path agrees
    a16 = (a.astype(np.uint16) * 257)  # the same picture coded on 16 bits: same histogram
    np.testing.assert_allclose(image_stats_array(a16).hist, s.hist, atol=1e-12)
    # known answer: a constant frame puts everything in one bin per channel
    const = np.full((50, 60, 3), (0, 128, 255), np.uint8)
    h = np.array(image_stats_pil(Image.fromarray(const)).hist).reshape(3, HIST_BINS)
    assert h[0, 0] == 1 and h[1, 16] == 1 and h[2, 31] == 1 and h.sum() == 3
    assert image_stats_array(a.astype(np.float32) / 255).hist is None  # floats: no fixed scale


def test_depth_log_histogram_reference_and_unit_shift():
    from perception_gap.statistics.depth import DEPTH_HIST_BINS, DEPTH_HIST_BINS_PER_DECADE, DEPTH_HIST_LOG10

    rng = np.random.default_rng(4)
    d = rng.uniform(0.3, 2.5, (240, 320)).astype(np.float32)
    d[:20] = 0
    d[20:25] = np.nan
    s = depth_stats(d)
    g = ref_grid(d).ravel()
    v = g[np.isfinite(g) & (g > 0)].astype(np.float64)
    ref = np.histogram(np.log10(v), bins=DEPTH_HIST_BINS, range=DEPTH_HIST_LOG10)[0] / v.size
    np.testing.assert_allclose(s.log_hist, ref, atol=1e-12)
    assert sum(s.log_hist) == pytest.approx(1.0)
    # the same scene in millimetres sits exactly three decades to the right
    mm = depth_stats(np.round(np.nan_to_num(d) * 1000).astype(np.uint16))
    shift = 3 * DEPTH_HIST_BINS_PER_DECADE
    moved = np.argmax(mm.log_hist) - np.argmax(s.log_hist)
    assert abs(moved - shift) <= 1
    # out-of-range values land in the end bins, never lost
    far = depth_stats(np.full((20, 20), 1e7, np.float64))
    assert far.log_hist[-1] == 1.0
    assert depth_stats(np.zeros((10, 10), np.uint16)).log_hist is None


def test_set_histograms_are_frame_means():
    from perception_gap.statistics.records import FrameRecord, SetRecords
    from perception_gap.statistics.summary import summarize_set

    frames = [textured(60, 80, seed=i) for i in range(4)]
    depths = [np.full((30, 40), z, np.float32) for z in (0.5, 0.5, 2.0, 2.0)]
    recs = SetRecords("s", "sim", tuple(
        FrameRecord(pair_key=str(i), image=image_stats_pil(Image.fromarray(a)), depth=depth_stats(d))
        for i, (a, d) in enumerate(zip(frames, depths))))
    out = summarize_set(recs).to_dict()
    ch = out["channel_hist"]
    assert ch["full_scale"] == 255 and ch["n_frames"] == 4 and len(ch["channels"]) == 3
    ref = np.mean([np.array(r.image.hist).reshape(3, -1) for r in recs.frames], axis=0)
    np.testing.assert_allclose(ch["channels"], ref, atol=1e-5)
    lh = np.array(out["depth"]["log_hist"])
    # known answer: half the frames at 0.5 m, half at 2 m
    assert lh.sum() == pytest.approx(1.0, abs=1e-4) and sorted(lh[lh > 0]) == pytest.approx([0.5, 0.5])


# --- texture statistics (noise, spectrum, chroma, JPEG quality) ---------------------------------

def test_texture_features_known_answers():
    """White noise of sigma s: noise_sigma reads s and every band of the spectrum reads log10(s^2)."""
    from perception_gap.statistics.texture import SPECTRUM_BANDS, texture_features

    rng = np.random.default_rng(0)
    for sigma in (1.0, 4.0):
        lum = rng.normal(128.0, sigma, (128, 128)).astype(np.float32)
        t = texture_features(lum, 255.0)
        assert t["noise_sigma"] * 255 == pytest.approx(sigma, rel=0.06)
        assert len(t["spectrum"]) == len(SPECTRUM_BANDS)
        # each band's mean power is a chi-square average over its bins (a dozen in the lowest band)
        assert np.allclose(t["spectrum"], np.log10((sigma / 255.0) ** 2), atol=0.2)
        assert np.mean(t["spectrum"][1:]) == pytest.approx(np.log10((sigma / 255.0) ** 2), abs=0.05)
    # a linear ramp has no noise and no high-frequency power
    ramp = np.add.outer(np.arange(128.0), np.arange(128.0)).astype(np.float32)
    t = texture_features(ramp, 255.0)
    assert t["noise_sigma"] == pytest.approx(0.0, abs=1e-6)
    assert texture_features(ramp[:10, :10], 255.0) == {"noise_sigma": None, "spectrum": None}


@pytest.mark.parametrize("quality", [30, 50, 75, 90])
def test_jpeg_quality_read_back_from_the_file(tmp_path, quality):
    path = tmp_path / "f.jpg"
    Image.fromarray(textured()).save(path, quality=quality)
    s = image_stats_pil(Image.open(path))
    assert s.jpeg_quality == pytest.approx(quality, abs=2)
    png = tmp_path / "f.png"
    Image.fromarray(textured()).save(png)
    assert image_stats_pil(Image.open(png)).jpeg_quality is None


def test_chroma_detail_falls_with_subsampling_and_rises_with_noise(tmp_path):
    a = textured()
    full = image_stats_pil(Image.fromarray(a)).chroma_hf
    path = tmp_path / "s.jpg"
    Image.fromarray(a).save(path, quality=97, subsampling=2)  # 4:2:0
    sub = image_stats_pil(Image.open(path).convert("RGB")).chroma_hf
    noisy = np.clip(a + np.random.default_rng(1).normal(0, 4, a.shape), 0, 255).astype(np.uint8)
    assert sub < 0.8 * full < image_stats_pil(Image.fromarray(noisy)).chroma_hf
    grey = image_stats_pil(Image.fromarray(a).convert("L"))
    assert grey.chroma_hf is None and grey.noise_sigma is not None


def test_older_catalog_gains_the_new_statistics_columns(tmp_path):
    """A catalog written before the texture statistics: the columns are added on open, the stale
    cache is dropped, and the next `stats` fills them (no stale row is read as 'no noise')."""
    import duckdb

    from perception_gap.catalog import Catalog
    from perception_gap.ingest import index_folder
    from perception_gap.workflows.stats import compute_stats

    root = tmp_path / "f"
    root.mkdir()
    for i in range(3):
        Image.fromarray(textured(seed=i)).save(root / f"{i}.png")
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_folder(cat, root, "s", "sim")
        compute_stats(cat, ["s"], workers=1)
    con = duckdb.connect(str(db))
    for col in ("noise_sigma", "spectrum", "chroma_hf", "jpeg_quality"):
        con.execute(f"ALTER TABLE frame_stats DROP COLUMN {col}")
    con.close()
    with Catalog(db) as cat:
        assert cat.load_frames("s")[0]["img_width"] is None  # cache dropped with the migration
        compute_stats(cat, ["s"], workers=1)
        rows = cat.load_frames("s")
    assert all(r["img_noise_sigma"] is not None and len(r["img_spectrum"]) == 6 for r in rows)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 70), st.integers(1, 70)),
              elements=st.floats(-1e6, 1e6, width=32, allow_nan=False)))
def test_mean32_is_np_mean_bit_for_bit(a):
    """The statistics' float32 means (mean32) against np.mean itself, on contiguous arrays and on
    the strided products the statistics take them of."""
    for x in (a, a * a, np.abs(a[:, ::2]) if a.shape[1] > 1 else a):
        assert mean32(x) == float(np.mean(x))


def test_floats_are_exact_python_floats():
    for a in (np.array([1, 255], np.intp), np.array([0.1, 1 / 3], np.float32), np.array([1e-300, 1e300])):
        got = floats(a)
        assert got == tuple(float(v) for v in a) and all(type(v) is float for v in got)


def test_jpeg_quality_matches_a_per_quality_scan_of_the_ijg_tables():
    """The cached, vectorized match against a plain scan of qualities 1..100 (first minimum wins),
    on scaled tables, jittered ones and random ones."""
    from perception_gap.statistics.texture import _IJG_LUMA, jpeg_quality

    def scan(q0):
        best, err = None, np.inf
        for q in range(1, 101):
            sc = 5000.0 / q if q < 50 else 200.0 - 2.0 * q
            e = np.abs(np.sort(np.clip(np.floor((_IJG_LUMA * sc + 50.0) / 100.0), 1, 255)) - np.sort(q0)).sum()
            if e < err:
                best, err = float(q), e
        return best

    rng = np.random.default_rng(0)
    tables = [rng.integers(1, 256, 64) for _ in range(40)]
    for q in (1, 10, 49, 50, 51, 75, 90, 100):
        sc = 5000.0 / q if q < 50 else 200.0 - 2.0 * q
        t = np.clip(np.floor((_IJG_LUMA * sc + 50.0) / 100.0), 1, 255).astype(int)
        assert jpeg_quality({0: list(rng.permutation(t))}) == scan(t) == q
        tables.append(np.clip(t + rng.integers(-3, 4, 64), 1, 255))
    for t in tables:
        assert jpeg_quality({0: t.tolist()}) == scan(t.astype(float))
    assert jpeg_quality({0: [1] * 63}) is None and jpeg_quality({}) is None and jpeg_quality(None) is None
