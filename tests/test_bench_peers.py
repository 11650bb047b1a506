"""bench/bench_peers.py: our numbers against the peers' own code, on tiny inputs.

cleanvision (image properties) is in the `test` extra, so this runs wherever the tests do.
alibi-detect (MMD) cannot be: it pins numpy<2, which this project's torch needs. Its cross-check
lives in the bench only (`python bench/bench_peers.py --alibi-site DIR`, with
`pip install --no-deps --target DIR alibi-detect`; bench/README.md has the command and the
figures); in the tests, MMD is checked against a closed form (tests/test_compare.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "bench") not in sys.path:
    sys.path.insert(0, str(ROOT / "bench"))

import bench_peers as P

from perception_gap.statistics.image import image_stats_pil


def _grey_frames() -> list[Image.Image]:
    """Grey (R = G = B) frames, where cleanvision's brightness and our BT.601 luma are the same value."""
    rng = np.random.default_rng(3)
    frames = []
    for lo, hi, size in ((0, 40, (64, 48)), (200, 256, (64, 48)), (0, 256, (48, 64)), (60, 180, (96, 24))):
        v = rng.integers(lo, hi, (size[1], size[0]), dtype=np.uint8)
        frames.append(Image.fromarray(np.repeat(v[..., None], 3, axis=2)))
    return frames


def test_brightness_and_aspect_match_cleanvision():
    from cleanvision.issue_managers import image_property  # the `test` extra installs it: no skip
    for img in _grey_frames():
        stats = image_stats_pil(img)
        assert stats.stride == 1  # small frames: every pixel sampled, so percentiles are comparable
        theirs = image_property.BrightnessProperty("dark").calculate(img)
        # cleanvision scales to [0, 1] and interpolates percentiles linearly; ours are 0-255 histogram
        # levels: within one level
        assert abs(stats.lum_percentiles[4] - 255 * theirs["brightness_perc_99"]) <= 1.0
        assert abs(stats.lum_percentiles[1] - 255 * theirs["brightness_perc_5"]) <= 1.0
        ours = P.our_scores({"lum": stats.lum_percentiles, "width": stats.width, "height": stats.height,
                             "sharpness": stats.sharpness, "hist": stats.hist, "grad_ratio": stats.grad_ratio,
                             "std": stats.std})
        aspect = image_property.AspectRatioProperty().calculate(img)["aspect_ratio"]
        assert ours["odd_aspect_ratio"] == pytest.approx(aspect, rel=1e-12)

