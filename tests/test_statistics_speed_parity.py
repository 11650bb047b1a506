"""The engine's fast statistics equal the frozen reference implementation, bit for bit.

The reference is a straightforward implementation kept frozen in
tests/stats_reference.py: the crop statistics, the 8-bit frame entry points and the JPEG
quality lookup. Stated tolerance: none. Every field of every frame must be equal (`==` on the
frozen dataclass, floats compared exactly), whether a frame is measured alone or in a batch
with others (`image_stats_sampled`, `crop_features_batch`): the speed work removed temporaries
and copies, and batched numpy passes over frames, but each per-frame sum is still the same
operation on the same values (a BLAS dot per plane, a pairwise reduction per row).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap.statistics import image as image_mod
from perception_gap.statistics.image import (
    ImageStats,
    image_stats_array,
    image_stats_pil,
    image_stats_rgb8,
    image_stats_sampled,
    sample_pil,
    sample_rgb8,
)
from perception_gap.statistics.texture import (
    chroma_hf,
    chroma_planes,
    crop_features,
    crop_features_batch,
    jpeg_quality,
    texture_features,
)
from tests.stats_reference import (
    _ref_noise_and_spectrum,
    ref_chroma_planes,
    ref_crop_features,
    ref_image_stats_pil,
    ref_image_stats_rgb8,
    ref_jpeg_quality,
)


@pytest.fixture()
def reference(monkeypatch):
    """Calls `fn(*args)` with the frozen crop statistics swapped into `statistics.image` (whose
    float-array path, `image_stats_array`, the speed work left as it was)."""

    def run(fn, *args):
        with monkeypatch.context() as m:
            m.setattr(image_mod, "crop_features", ref_crop_features)
            m.setattr(image_mod, "chroma_planes", ref_chroma_planes)
            return fn(*args)

    return run


def _types(st) -> dict:
    return {k: [type(x) for x in v] if isinstance(v, tuple) else type(v) for k, v in st.to_dict().items()}


# statistics the frozen reference predates (checked against their own references in
# tests/test_spatial_stats.py)
_NEWER = ("thumb", "grad_xy", "edges")


def same(got, want) -> bool:
    """Equal field for field, and every value of the same Python type (a numpy scalar where the
    previous code gave a float would still compare equal); the statistics newer than the
    reference are compared only where the reference has them."""
    if isinstance(got, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(got, ImageStats):
        got = replace(got, **{k: None for k in _NEWER if getattr(want, k) is None})
    return got == want and _types(got) == _types(want)


def _older(feats: dict) -> dict:
    """Crop statistics without those newer than the reference."""
    return {k: v for k, v in feats.items() if k not in _NEWER}


def _synthetic() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(17)
    y, x = np.mgrid[0:240, 0:320].astype(np.float64)
    smooth = np.stack([x * 0.7, y * 0.9, (x + y) * 0.4], -1) + 10
    noisy = smooth + rng.normal(0, 6, smooth.shape)
    blocky = np.kron(rng.integers(0, 255, (30, 40, 3)), np.ones((8, 8, 1))) + rng.normal(0, 2, (240, 320, 3))
    upscaled = np.repeat(np.repeat(rng.integers(0, 255, (120, 160, 3)), 2, axis=0), 2, axis=1)
    frames = [("smooth", smooth), ("noisy", noisy), ("blocky", blocky), ("upscaled", upscaled),
              ("constant", np.full((64, 80, 3), 77.0)), ("tiny", rng.integers(0, 255, (12, 20, 3))),
              ("odd", rng.integers(0, 255, (37, 53, 3)))]
    return [(name, np.clip(a, 0, 255).astype(np.uint8)) for name, a in frames]


@pytest.mark.parametrize("name,a", _synthetic(), ids=[n for n, _ in _synthetic()])
def test_synthetic_frames_equal_the_previous_statistics(name, a, reference):
    img = Image.fromarray(a)
    assert same(image_stats_pil(img), ref_image_stats_pil(img))
    assert same(image_stats_rgb8(a), ref_image_stats_rgb8(a))  # the video path: a strided crop
    grey = img.convert("L")
    assert same(image_stats_pil(grey), ref_image_stats_pil(grey))
    assert same(image_stats_array(a), reference(image_stats_array, a))


def test_other_dtypes_equal_the_previous_statistics(reference):
    """16-bit and float frames take the float luma route (a luma plane handed to `chroma_planes`)."""
    rng = np.random.default_rng(5)
    a16 = rng.integers(0, 65536, (150, 140, 3)).astype(np.uint16)
    f32 = rng.normal(0.4, 0.2, (90, 120, 3)).astype(np.float32)
    f32[3, 5, 1] = np.nan
    for a in (a16, f32, a16[..., 0], rng.integers(0, 256, (64, 64, 4)).astype(np.uint8)):
        assert same(image_stats_array(a), reference(image_stats_array, a))


def test_real_jpeg_and_png_frames_equal_the_previous_statistics(shared_data, reference):
    """Real photos and robot frames as `stats` decodes them, JPEG quality included."""
    paths = sorted((shared_data / "detection_voc100" / "images").glob("*.jpg"))[:4]
    paths += sorted((shared_data / "rgbd" / "color").glob("*.jpg"))[:2]
    paths += sorted((shared_data / "simpler" / "real").rglob("*.png"))[:2]
    assert len(paths) >= 4
    from perception_gap.ingest.frames import decode_rgb

    for p in paths:
        img = decode_rgb(p)
        got = image_stats_pil(img)
        assert same(got, ref_image_stats_pil(img)), p.name
        assert (got.jpeg_quality is not None) == (p.suffix == ".jpg")
        a = np.asarray(img.convert("RGB"))
        assert same(image_stats_rgb8(a), ref_image_stats_rgb8(a)), p.name


def test_crop_level_functions_equal_the_previous_ones():
    rng = np.random.default_rng(9)
    rgb = rng.integers(0, 256, (128, 128, 3)).astype(np.uint8)
    np.testing.assert_array_equal(chroma_planes(rgb), ref_chroma_planes(rgb))
    lum = rng.normal(0, 1, (128, 128)).astype(np.float32)
    np.testing.assert_array_equal(chroma_planes(rgb[1:-3, 2:], lum[1:-3, 2:]), ref_chroma_planes(rgb[1:-3, 2:], lum[1:-3, 2:]))
    planes = ref_chroma_planes(rgb)
    assert _older(crop_features(planes.copy(), 255.0)) == ref_crop_features(planes.copy(), 255.0)
    assert chroma_hf(rgb) == ref_crop_features(ref_chroma_planes(rgb))["chroma_hf"]
    d2x = lum[:, 2:] - 2 * lum[:, 1:-1] + lum[:, :-2]
    assert texture_features(lum, 3.0) == _ref_noise_and_spectrum(lum, d2x, 3.0)


def test_jpeg_quality_equals_the_previous_lookup():
    rng = np.random.default_rng(2)
    tables = [{0: list(rng.integers(1, 120, 64))} for _ in range(5)]
    tables += [{0: [2] * 64}, {0: list(range(1, 65))}, {0: [1] * 63}, {}, None, {0: None}, {0: "x" * 64}]
    for q in tables:
        assert jpeg_quality(q) == ref_jpeg_quality(q), q


def test_batches_equal_frames_measured_alone(shared_data):
    """A worker's batch (JPEGs, PNGs, grey, odd sizes, video arrays, in any mix) gives each frame
    the numbers of the previous per-frame code."""
    from perception_gap.ingest.frames import decode_rgb

    paths = sorted((shared_data / "detection_voc100" / "images").glob("*.jpg"))[:6]
    imgs = [decode_rgb(p) for p in paths]
    imgs += [imgs[0].convert("L"), imgs[1].crop((3, 5, 200, 150)), imgs[2].convert("L").crop((0, 0, 90, 61))]
    arrays = [a for _, a in _synthetic()]
    sampled = [sample_pil(i) for i in imgs] + [sample_rgb8(a) for a in arrays]
    want = [ref_image_stats_pil(i) for i in imgs] + [ref_image_stats_rgb8(a) for a in arrays]
    order = np.random.default_rng(4).permutation(len(sampled))
    got = image_stats_sampled([sampled[i] for i in order])
    assert same(got, [want[i] for i in order])
    rng = np.random.default_rng(8)
    planes = rng.normal(100, 40, (5, 3, 40, 52)).round().astype(np.float32)
    assert [_older(f) for f in crop_features_batch(planes.copy(), 255.0)] == [
        ref_crop_features(p.copy(), 255.0) for p in planes]


def test_worker_batches_keep_order_reasons_and_values(shared_data, tmp_path):
    """`rgb_stats_job` over more files than a batch, with a corrupt and a changed file among them:
    results in input order, each good frame with the previous code's numbers, each bad one with its
    own outcome; a frame that breaks its batch is measured alone and only it is skipped."""
    from perception_gap.ingest.entries import content_hash
    from perception_gap.ingest.frames import decode_rgb
    from perception_gap.statistics.image import Sampled
    from perception_gap.statistics.workers import BATCH, _measured, rgb_stats_job

    srcs = sorted((shared_data / "detection_voc100" / "images").glob("*.jpg"))[: BATCH + 3]
    items = [(content_hash(p.read_bytes()), str(p)) for p in srcs]
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(srcs[0].read_bytes()[:300])
    items.insert(2, (content_hash(bad.read_bytes()), str(bad)))
    items.insert(5, ("0" * 32, str(srcs[1])))  # bytes no longer hash to what was indexed
    out = rgb_stats_job(items)
    assert [h for h, _, _ in out] == [h for h, _ in items]
    assert out[2][1] is None and "not a readable image" in out[2][2]
    assert out[5][1:] == (None, None)
    good = [(r, p) for r, (_, p) in zip(out, items) if r[1] is not None]
    assert len(good) == len(srcs)
    assert same([r[1] for r, _ in good], [ref_image_stats_pil(decode_rgb(Path(p))) for _, p in good])
    ok = sample_pil(decode_rgb(srcs[0]))
    broken = Sampled(ok.width, ok.height, "L", ok.stride, ok.hists[:1], ok.crop, None)  # an L frame with RGB pixels
    res = _measured([("a", ok, None), ("b", broken, None)])
    assert res[0][::2] == ("a", None) and same(res[0][1], ref_image_stats_pil(decode_rgb(srcs[0])))
    assert res[1][:2] == ("b", None) and res[1][2].startswith("cannot compute statistics")
