"""The fused crop statistics (`statistics.texture.crop_features`) against float64 references.

The references below are written from the definitions (ImageStats and `texture_features`
docstrings), each statistic on its own, in float64 with plain numpy; the engine computes them
in one float32 pass. Stated tolerance (README, "Statistics cost"): 1e-5 relative for every
ratio and energy, 1e-4 absolute on the log10 band powers of `spectrum` where a band holds at
least 1e-9 of the crop's power (float32 FFT rounding sits at ~1e-7 of the total), integer
counts (duplicates, parity) exact.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from perception_gap.statistics.image import image_stats_array, image_stats_pil
from perception_gap.statistics.texture import NOISE_FLAT_BIAS, SPECTRUM_BANDS, chroma_planes, crop_features

REL = 1e-5
SPECTRUM_ATOL = 1e-4
HF_KEYS = ("sharpness", "hf_ratio", "grad_ratio", "blockiness", "noise_sigma", "chroma_hf")


def _centre(a: np.ndarray, size: int = 128) -> np.ndarray:
    h, w = a.shape[:2]
    ch, cw = min(h, size), min(w, size)
    top, left = ((h - ch) // 2) // 8 * 8, ((w - cw) // 2) // 8 * 8
    return a[top : top + ch, left : left + cw]


def _lap(z: np.ndarray) -> np.ndarray:
    """4-neighbour Laplacian at interior pixels (sign irrelevant: squared)."""
    return 4 * z[1:-1, 1:-1] - z[:-2, 1:-1] - z[2:, 1:-1] - z[1:-1, :-2] - z[1:-1, 2:]


def ref_crop_stats(lum: np.ndarray, rgb: np.ndarray | None, scale: float) -> dict[str, object]:
    """Every crop statistic from its definition, float64 (the flat-pixel choice in float32, as defined)."""
    z = lum.astype(np.float64)
    dx, dy, lap = np.diff(z, axis=1), np.diff(z, axis=0), _lap(z)
    out: dict[str, object] = {
        "sharpness": np.mean(lap ** 2) / scale ** 2,
        "hf_ratio": np.mean(lap ** 2) / (np.mean(dx ** 2) + np.mean(dy ** 2)),
        "grad_ratio": np.mean((z[:, 2:] - z[:, :-2]) ** 2) / np.mean(dx ** 2),
        "dup_frac": np.mean(dx == 0),
        "dup_parity": abs(np.mean(dx[:, 0::2] == 0) - np.mean(dx[:, 1::2] == 0)),
        # one- and two-pixel difference energies, horizontal then vertical, in full scale^2
        "grad_xy": [np.mean(dx ** 2) / scale ** 2, np.mean(dy ** 2) / scale ** 2,
                    np.mean((z[:, 2:] - z[:, :-2]) ** 2) / scale ** 2, np.mean((z[2:] - z[:-2]) ** 2) / scale ** 2],
    }
    cols = np.abs(dx).sum(axis=0)
    at = np.zeros(cols.size, bool)
    at[7::8] = True
    out["blockiness"] = cols[at].mean() / cols[~at].mean() if cols[~at].any() else None
    # noise: Immerkaer's kernel over the 30% of pixels with the least 3x3-summed squared gradient
    k = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], float)
    h, w = z.shape
    r = sum(k[i, j] * z[i : h - 2 + i, j : w - 2 + j] for i in range(3) for j in range(3))
    y = lum.astype(np.float32) / np.float32(scale)
    g = (y[1:-1, 2:] - y[1:-1, :-2]) ** 2 + (y[2:, 1:-1] - y[:-2, 1:-1]) ** 2
    row = g[:, :-2] + g[:, 1:-1] + g[:, 2:]  # the 3x3 sum in the engine's float32 order: ties at the
    g2 = row[:-2] + row[1:-1] + row[2:]  # 30% cut are broken by its rounding, so the set is the same
    kth = np.partition(g2.ravel(), g2.size * 30 // 100)[g2.size * 30 // 100]
    out["noise_sigma"] = math.sqrt(math.pi / 2) * np.abs(r[1:-1, 1:-1][g2 <= kth]).mean() / 6 / NOISE_FLAT_BIAS / scale
    # spectrum: mean power per radial band of the mean-removed crop under a unit-energy Hann window
    win = np.outer(np.hanning(h), np.hanning(w))
    win /= np.sqrt((win ** 2).sum())
    p = np.abs(np.fft.fft2((z / scale - (z / scale).mean()) * win)) ** 2
    fr = np.hypot(*np.meshgrid(np.fft.fftfreq(h), np.fft.fftfreq(w), indexing="ij"))
    half = np.broadcast_to(np.fft.fftfreq(w)[None, :], p.shape)
    keep = (half >= 0) | (np.abs(half) == 0.5)  # the rfft half-plane, Nyquist column once
    out["spectrum"] = [np.log10(p[keep & (fr >= lo) & (fr < hi)].mean()) for lo, hi in SPECTRUM_BANDS]
    out["band_share"] = [p[keep & (fr >= lo) & (fr < hi)].sum() / p[keep].sum() for lo, hi in SPECTRUM_BANDS]
    out["chroma_hf"] = None
    if rgb is not None:
        c = rgb[..., :3].astype(np.float64)
        cb = c @ [-0.168736, -0.331264, 0.5]
        cr = c @ [0.5, -0.418688, -0.081312]
        lap_e = sum(np.mean(_lap(q) ** 2) for q in (cb, cr))
        grad_e = sum(np.mean(np.diff(q, axis=a) ** 2) for q in (cb, cr) for a in (0, 1))
        out["chroma_hf"] = lap_e / grad_e
    return out


def assert_matches(got: dict | object, ref: dict[str, object]) -> None:
    get = got.get if isinstance(got, dict) else lambda k: getattr(got, k)
    for k in HF_KEYS:
        if ref[k] is None:
            assert get(k) is None, k
        else:
            assert get(k) == pytest.approx(ref[k], rel=REL), k
    assert list(get("grad_xy")) == pytest.approx(ref["grad_xy"], rel=REL)
    assert get("dup_frac") == ref["dup_frac"] and get("dup_parity") == pytest.approx(ref["dup_parity"], abs=1e-15)
    for band, (v, share) in enumerate(zip(ref["spectrum"], ref["band_share"])):
        if share >= 1e-9:
            assert get("spectrum")[band] == pytest.approx(v, abs=SPECTRUM_ATOL), band


def _frames() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:240, 0:320]
    smooth = np.stack([x * 0.7, y * 0.9, (x + y) * 0.4], -1) + 10
    noisy = smooth + rng.normal(0, 6, smooth.shape)
    blocky = np.kron(rng.integers(0, 255, (30, 40, 3)), np.ones((8, 8, 1)))  # 8x8 blocks: blockiness
    blocky += rng.normal(0, 2, blocky.shape)
    upscaled = np.repeat(np.repeat(rng.integers(0, 255, (120, 160, 3)), 2, axis=0), 2, axis=1)  # dup parity
    return [(name, np.clip(a, 0, 255).astype(np.uint8)) for name, a in
            (("smooth", smooth), ("noisy", noisy), ("blocky", blocky), ("upscaled", upscaled))]


@pytest.mark.parametrize("name,a", _frames(), ids=[n for n, _ in _frames()])
def test_pil_and_array_paths_match_the_float64_reference(name, a):
    crop = _centre(a)
    ref = ref_crop_stats(np.asarray(Image.fromarray(crop).convert("L")), crop, 255.0)
    assert_matches(image_stats_pil(Image.fromarray(a)), ref)
    assert_matches(image_stats_array(a), ref)


def test_real_frames_match_the_float64_reference(shared_data):
    """Real photos and robot frames (JPEG and PNG), as `stats` decodes them."""
    paths = sorted((shared_data / "rgbd" / "color").glob("*.jpg"))[:3]
    paths += sorted((shared_data / "simpler" / "real").rglob("*.png"))[:3]
    assert paths
    for p in paths:
        img = Image.open(p).convert("RGB")
        crop = _centre(np.asarray(img))
        assert_matches(image_stats_pil(img), ref_crop_stats(np.asarray(Image.fromarray(crop).convert("L")), crop, 255.0))


def test_other_dtypes_and_grey_frames():
    rng = np.random.default_rng(3)
    a16 = rng.integers(0, 65536, (150, 140, 3)).astype(np.uint16)
    crop = _centre(a16).astype(np.float64)
    lum = (crop @ [0.299, 0.587, 0.114]).astype(np.float32)
    assert_matches(image_stats_array(a16), ref_crop_stats(lum, crop, 65535.0))
    grey = rng.integers(0, 256, (100, 90)).astype(np.uint8)
    got = image_stats_pil(Image.fromarray(grey))
    assert_matches(got, ref_crop_stats(_centre(grey), None, 255.0))
    assert got.chroma_hf is None


def test_luma_plane_is_pillows_convert_L_bit_for_bit():
    """Plane 0 of `chroma_planes` is Pillow's fixed-point luma, over a spread of colours and the extremes."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (256, 256, 3)).astype(np.uint8)
    a[0, :8] = [[0, 0, 0], [255, 255, 255], [255, 0, 0], [0, 255, 0], [0, 0, 255], [1, 1, 1], [254, 254, 254], [128, 127, 129]]
    planes = chroma_planes(a)
    np.testing.assert_array_equal(planes[0], np.asarray(Image.fromarray(a).convert("L")))
    assert planes.dtype == np.float32 and planes.shape == (3, 256, 256)


def test_small_crops_keep_their_none_values():
    for shape in ((2, 2), (10, 12), (15, 40)):
        planes = np.random.default_rng(1).integers(0, 255, (3,) + shape).astype(np.float32)
        out = crop_features(planes, 255.0)
        assert out["noise_sigma"] is None and out["spectrum"] is None
        assert (out["hf_ratio"] is None) == (min(shape) < 3)


@pytest.mark.parametrize("shape", [(480, 640), (479, 641), (37, 53), (2, 2), (255, 257)])
def test_video_frames_array_path_is_the_pillow_path_bit_for_bit(shape):
    """A video frame measured as the decoder's array gives exactly the numbers of its Pillow image."""
    from perception_gap.statistics.image import image_stats_rgb8

    a = np.random.default_rng(shape[0]).integers(0, 256, shape + (3,)).astype(np.uint8)
    assert image_stats_rgb8(a) == image_stats_pil(Image.fromarray(a))


def test_video_statistics_job_reads_arrays_and_matches_to_image(tmp_path):
    """`rgb_stats_job` on a video's frames (decoded as arrays) equals the statistics of PyAV's own
    `to_image()` of each frame."""
    av = pytest.importorskip("av")
    from perception_gap.ingest.containers import VIDEO_MEMBER, hash_file
    from perception_gap.statistics.workers import rgb_stats_job

    path = tmp_path / "v.mp4"
    rng = np.random.default_rng(0)
    with av.open(str(path), "w") as c:
        st = c.add_stream("libx264", rate=10)
        st.width, st.height, st.pix_fmt = 96, 64, "yuv420p"
        for _ in range(3):
            img = rng.integers(0, 256, (64, 96, 3)).astype(np.uint8)
            c.mux(st.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        c.mux(st.encode())
    with av.open(str(path)) as c:
        want = [image_stats_pil(f.to_image()) for f in c.decode(video=0)]
    ch, _ = hash_file(path)
    got = rgb_stats_job([(f"h{i}", str(path), VIDEO_MEMBER, i, ch) for i in range(3)])
    assert [g[1] for g in got] == want and all(g[2] is None for g in got)
