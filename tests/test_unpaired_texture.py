"""Unpaired (distribution-basis) high-frequency diagnoses on sets whose frames are each a different
scene: what tells added sensor noise from aliasing when nothing cancels the scene content."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perception_gap.diagnoses.highfreq import CORNER
from perception_gap.diagnoses.texture import NOISE_CORNER_MAX
from perception_gap.statistics.texture import texture_features
from tests import faults as F
from tests.test_plumbing import codes, image_set, run


@pytest.fixture(scope="module")
def scenes_unpaired():
    """Two disjoint sets of 6 synthetic scenes (320x240): different scenes on each side."""
    imgs = [rgb for rgb, _ in F.scene_set(11, 12)]
    return imgs[:6], imgs[6:]


def test_white_noise_corner_power_equals_its_variance():
    """Known answer: on white noise the corner band holds the noise variance, log10 ratio ~ 0."""
    rng = np.random.default_rng(0)
    for sigma in (2.0, 5.0, 10.0):
        crop = 128.0 + rng.normal(0.0, sigma, (128, 128))
        t = texture_features(crop, 255.0)
        ratio = math.log10(10 ** t["spectrum"][CORNER] / t["noise_sigma"] ** 2)
        assert abs(ratio) < 0.1, (sigma, ratio)
        assert ratio < NOISE_CORNER_MAX


def test_unpaired_noise_is_named(scenes_unpaired):
    """sigma-5 noise on the real side of different scenes: sensor_noise, on the real side."""
    sim_imgs, real_imgs = scenes_unpaired
    rng = np.random.default_rng(1)
    real = [F.add_sensor_noise(a, rng, 5.0) for a in real_imgs]
    found = codes(run(image_set("s", "sim", sim_imgs), image_set("r", "real", real, keys=[f"q{i}" for i in range(6)])))
    assert "sensor_noise" in found, list(found)
    assert found["sensor_noise"].evidence["noisier_side"] == "real"
    assert found["sensor_noise"].evidence["basis"] == "distribution"


@pytest.fixture(scope="module")
def voc_photos(shared_data):
    """12 VOC photos at 500x375, each a different scene (RGB uint8)."""
    from PIL import Image

    out = []
    for p in sorted((shared_data / "detection_voc100" / "images").glob("*.jpg")):
        with Image.open(p) as im:
            if im.size == (500, 375) and im.mode == "RGB":
                out.append(np.asarray(im))
        if len(out) == 12:
            break
    if len(out) < 12:
        pytest.skip("too few 500x375 VOC photos")
    return out


def _down3(images, kind: str):
    from PIL import Image

    def size(a):
        return round(a.shape[1] / 3), round(a.shape[0] / 3)

    if kind == "antialiased":
        return [F.resize_pil(a, size(a), Image.BILINEAR) for a in images]
    down = F.resize_nearest if kind == "nearest" else F.resize_bilinear_no_aa
    return [down(a, size(a)) for a in images]


@pytest.mark.parametrize("kind", ["nearest", "bilinear_no_aa"])
def test_unpaired_aliased_downscale_is_a_resize_bug(voc_photos, kind):
    """A 3x downscale without antialiasing against an antialiased one, different photos on each side:
    named resize_filter (the sim aliased), never sensor_noise though the aliased side reads ~3x the
    flat-region noise."""
    sim, real = _down3(voc_photos[:6], kind), _down3(voc_photos[6:], "antialiased")
    findings = run(image_set("s", "sim", sim), image_set("r", "real", real, keys=[f"q{i}" for i in range(6)]))
    found = codes(findings)
    assert "sensor_noise" not in found, [(f.code, f.title) for f in findings]
    assert "resize_filter" in found and found["resize_filter"].severity == "bug", [(f.code, f.title) for f in findings]
    assert found["resize_filter"].evidence["sim_filter_family"].startswith("aliased")
    assert found["resize_filter"].evidence["top_slope_sim_minus_real"] >= 0.4


def test_unpaired_same_filter_and_blur_are_not_resize(voc_photos):
    """Known negatives of the slope route: the same antialiased downscale on both sides raises nothing
    high-frequency; a sigma-2 blur of one side is a sharpness gap, never a resize_filter bug."""
    from PIL import Image, ImageFilter

    same = run(image_set("s", "sim", _down3(voc_photos[:6], "antialiased")),
               image_set("r", "real", _down3(voc_photos[6:], "antialiased"), keys=[f"q{i}" for i in range(6)]))
    assert not {"resize_filter", "sharpness", "sensor_noise"} & set(codes(same)), [(f.code, f.title) for f in same]
    blurred = [np.asarray(Image.fromarray(a).filter(ImageFilter.GaussianBlur(2.0))) for a in voc_photos[6:]]
    found = codes(run(image_set("s", "sim", voc_photos[:6]),
                      image_set("r", "real", blurred, keys=[f"q{i}" for i in range(6)])))
    assert "resize_filter" not in found, list(found)
    assert "sharpness" in found and found["sharpness"].evidence["sharper_side"] == "sim"


def _jpeg_frames(images, quality: int, keys, subsampling: int = -1):
    """FrameRecords of `images` stored as JPEG files at `quality` (statistics read the quantization tables)."""
    import io

    from PIL import Image

    from perception_gap.statistics.image import image_stats_pil
    from perception_gap.statistics.records import FrameRecord, SetRecords

    frames = []
    for k, a in zip(keys, images):
        buf = io.BytesIO()
        Image.fromarray(a).save(buf, format="JPEG", quality=quality, subsampling=subsampling)
        buf.seek(0)
        with Image.open(buf) as im:
            frames.append(FrameRecord(pair_key=k, image=image_stats_pil(im)))
    return SetRecords("r", "real", tuple(frames))


@pytest.mark.parametrize("quality, named", [(30, True), (90, False)])
def test_unpaired_low_quality_jpeg_against_lossless(scenes_unpaired, quality, named):
    """Only the real side is JPEG files (4:4:4, so chroma subsampling plays no part): q30 (the estimate reads
    the quantization tables) is named compression on the real side with its quality; q90 is not named."""
    sim_imgs, real_imgs = scenes_unpaired
    real = _jpeg_frames(real_imgs, quality, [f"q{i}" for i in range(6)], subsampling=0)
    found = codes(run(image_set("s", "sim", sim_imgs), real))
    assert ("compression" in found) == named, list(found)
    if named:
        ev = found["compression"].evidence
        assert ev["compressed_side"] == "real" and ev["jpeg_quality_sim"] is None
        assert ev["signature"] == "jpeg_quality"
        assert abs(ev["jpeg_quality_real"] - quality) <= 3
        assert "sensor_noise" not in found
