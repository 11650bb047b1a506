"""Unpaired normalization mismatch read from the sets' extremes: different scenes move the channel
moments more than ImageNet vs CLIP constants do, but a camera's frames reach black and white
somewhere, and only the right constants map both sides' extremes onto the same [0, 1] points."""

from __future__ import annotations

import numpy as np
import pytest

from perception_gap.diagnoses.encoding import (
    _FLOAT_CANDIDATES,
    ENC_EXT_MARGIN,
    IMAGENET,
    OPENAI_CLIP,
    ChannelMoments,
    extremes_distance,
)
from tests import faults as F
from tests.test_plumbing import assert_top, codes, image_set, run


def _scenes(seed: int, n: int, level: float, contrast: float) -> list[np.ndarray]:
    """`n` different 64x80 scenes around `level` (8-bit) with relative `contrast`, each holding a
    black and a white speck (shadow, highlight) as real camera frames do."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = level * (1 + contrast * rng.standard_normal((64, 80, 1))) * rng.uniform(0.85, 1.15, 3)
        a = np.clip(base, 1, 254).astype(np.uint8)
        a[:2, :2] = 0
        a[-2:, -2:] = 255
        out.append(a)
    return out


def _sets(sim_images, real_images):
    return (image_set("s", "sim", sim_images, keys=[f"s{i}" for i in range(len(sim_images))]),
            image_set("r", "real", real_images, keys=[f"r{i}" for i in range(len(real_images))]))


def test_extremes_distance_closed_form():
    """ImageNet-normalized black and white read back as exactly 0 and 1; the same values read as
    CLIP land at (v * std_clip + mean_clip), a hand-computable distance."""
    black = (np.zeros(3) - IMAGENET.offset) / IMAGENET.scale
    white = (np.ones(3) - IMAGENET.offset) / IMAGENET.scale
    m = ChannelMoments(np.zeros((1, 3)), np.ones((1, 3)), black[None], white[None], "float32")
    assert extremes_distance(IMAGENET, m, IMAGENET, m) == pytest.approx(0.0, abs=1e-12)
    off, sc = np.asarray(OPENAI_CLIP.offset), np.asarray(OPENAI_CLIP.scale)
    span_clip = (white - black) * sc
    expected = np.mean(np.abs(black * sc + off) + np.abs(white * sc + off - 1)) / np.mean(0.5 * (1 + span_clip))
    assert extremes_distance(IMAGENET, m, OPENAI_CLIP, m) == pytest.approx(expected, rel=1e-12)
    assert expected > ENC_EXT_MARGIN  # the constants' own effect clears the margin
    # one common scale leaves the relative distance as it is: both sides read as [0, 255] floats
    f255 = next(e for e in _FLOAT_CANDIDATES if e.name == "float_0_255")
    m2 = ChannelMoments(np.zeros((1, 3)), np.ones((1, 3)), (black * sc + off)[None], (white * sc + off)[None], "float32")
    # (to 2%: ImageNet's per-channel scales differ by up to 2.2%, the [0, 255] scale is one)
    assert extremes_distance(f255, m, f255, m2) == pytest.approx(extremes_distance(IMAGENET, m, IMAGENET, m2), rel=0.02)


def test_imagenet_vs_clip_on_different_scenes_is_named():
    """Dim low-contrast sim scenes vs bright contrasty real ones, ImageNet vs CLIP constants: the
    moments cannot tell (scene content dominates), the extremes can."""
    sim_u8, real_u8 = _scenes(1, 8, 70, 0.15), _scenes(2, 8, 160, 0.35)
    sim, real = _sets([F.normalize(a, F.IMAGENET_MEAN, F.IMAGENET_STD) for a in sim_u8],
                      [F.normalize(a, F.CLIP_MEAN, F.CLIP_STD) for a in real_u8])
    f = assert_top(run(sim, real), "normalization", "bug")
    ev = f.evidence
    assert (ev["sim_encoding"], ev["real_encoding"]) == ("imagenet", "openai_clip")
    assert ev["matched_distance"] > 0.5 * ev["raw_distance"]  # the moment test alone would not fire
    assert ev["extremes_distance_matched"] == pytest.approx(0.0, abs=0.01)
    assert ev["extremes_distance_common"] > ENC_EXT_MARGIN


@pytest.mark.parametrize("norm", ["imagenet", "openai_clip"])
def test_same_constants_on_different_scenes_stay_quiet(norm):
    """The same sets with the same constants on both sides: no encoding finding of either kind."""
    mean, std = (F.IMAGENET_MEAN, F.IMAGENET_STD) if norm == "imagenet" else (F.CLIP_MEAN, F.CLIP_STD)
    sim_u8, real_u8 = _scenes(1, 8, 70, 0.15), _scenes(2, 8, 160, 0.35)
    findings = run(*_sets([F.normalize(a, mean, std) for a in sim_u8], [F.normalize(a, mean, std) for a in real_u8]))
    assert not {"normalization", "value_range"} & set(codes(findings)), [(f.code, f.title) for f in findings]


def test_sets_without_black_or_white_are_not_decided_by_extremes():
    """Extremes say nothing when one side never reaches black or white (dim, clipped-free frames):
    no normalization bug from the extremes rule."""
    sim_u8 = [np.clip(a, 40, 200) for a in _scenes(1, 8, 70, 0.15)]
    real_u8 = _scenes(2, 8, 160, 0.35)
    sim, real = _sets([F.normalize(a, F.IMAGENET_MEAN, F.IMAGENET_STD) for a in sim_u8],
                      [F.normalize(a, F.IMAGENET_MEAN, F.IMAGENET_STD) for a in real_u8])
    assert "normalization" not in codes(run(sim, real))
