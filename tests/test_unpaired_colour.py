"""Unpaired red/blue channel swap vs white balance on low-chroma scenes: the engine names the cause
only when the sets can tell it, and otherwise says so (`info`), never a different cause."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from perception_gap.diagnoses.colour import SWAP_TIE, swap_costs
from tests.test_plumbing import assert_clean, assert_top, codes, image_set, run


def _warm_scenes(seed: int, n: int, gains=(1.0, 1.0, 1.0)) -> list[np.ndarray]:
    """`n` different 96x128 scenes, slightly warm (ln R/B ~ 0.15 in 8-bit values): one smooth
    luminance texture times a per-scene colour, so every channel has the same relative contrast and
    only the channel means carry the red/blue order; `gains` multiply R, G, B afterwards."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:96, 0:128] / 32.0
    out = []
    for _ in range(n):
        f = rng.uniform(0.5, 2.0, 4)
        tex = 1.0 + 0.3 * np.sin(f[0] * xx + f[1] * yy) * np.cos(f[2] * xx - f[3] * yy)
        lrb = rng.normal(0.15, 0.02)
        colour = rng.uniform(90, 150) * np.array([np.exp(lrb / 2), 1.0, np.exp(-lrb / 2)]) * np.asarray(gains)
        out.append(np.clip(tex[..., None] * colour, 0, 255).astype(np.uint8))
    return out


def _sets(sim_images, real_images):
    return (image_set("s", "sim", sim_images, keys=[f"s{i}" for i in range(len(sim_images))]),
            image_set("r", "real", real_images, keys=[f"r{i}" for i in range(len(real_images))]))


def test_swap_of_low_chroma_scenes_is_not_named_white_balance():
    """A swap on different, faintly warm scenes: the swapped model explains the sets better than
    gains do, but not by the swap check's margin, so the answer is `info` (cannot tell), no gap."""
    sim, real = _sets([np.ascontiguousarray(a[..., ::-1]) for a in _warm_scenes(1, 8)], _warm_scenes(2, 8))
    findings = run(sim, real)
    assert_clean(findings)
    info = findings[0]
    assert (info.code, info.severity) == ("channel_swap", "info"), [(f.code, f.title) for f in findings]
    assert "cannot tell a white-balance shift from a red/blue channel swap" in info.title
    ev = info.evidence
    assert ev["swapped_cost"] < ev["identity_cost"]  # the swap fits these sets better: it is one
    assert ev["log2_r_over_g_sim_minus_real"] < -0.1 < 0.1 < ev["log2_b_over_g_sim_minus_real"]


def test_warm_cast_on_warm_scenes_stays_a_white_balance_gap():
    """Sim warmer than real by R x1.3, B /1.3: a swap would make sim bluer, so the swapped model
    costs over SWAP_TIE x the gains model and the white-balance gap is named, as before."""
    sim, real = _sets(_warm_scenes(1, 8, gains=(1.3, 1.0, 1 / 1.3)), _warm_scenes(2, 8))
    findings = run(sim, real)
    wb = assert_top(findings, "white_balance", "gap")
    assert wb.evidence["sim_tone"] == "warmer (redder)"
    assert "channel_swap" not in codes(findings)
    # independent reading of the two models on the 8-bit channel means
    lm = [np.log(np.array([f.image.mean[:3] for f in s.frames]) / 255.0) for s in (sim, real)]
    cv = [np.log(np.array([f.image.std[:3] for f in s.frames]) / np.array([f.image.mean[:3] for f in s.frames]))
          for s in (sim, real)]
    c_id, c_sw, _ = swap_costs(lm[0], cv[0], lm[1], cv[1], paired_rows=False)
    assert c_sw > SWAP_TIE * c_id
    # the gain terms alone (cv equal across channels): identity ~ 0.5 x ln 1.3, swapped ~ that + ln R/B
    assert c_id == pytest.approx(0.5 * np.log(1.3), abs=0.04)
    assert c_sw == pytest.approx(0.5 * (np.log(1.3) + 0.15), abs=0.05)


def test_paired_swap_of_low_chroma_scenes_is_still_a_bug():
    """With pairs the same scenes decide it: the bug, unchanged by the unpaired tie rule."""
    real = _warm_scenes(3, 6)
    sim = [np.ascontiguousarray(a[..., ::-1]) for a in real]
    assert_top(run(image_set("s", "sim", sim), image_set("r", "real", real)), "channel_swap", "bug")


@pytest.fixture(scope="module")
def voc_500x375(shared_data):
    def rgb(p):
        with Image.open(p) as im:
            return np.asarray(im.convert("RGB")) if im.size == (500, 375) else None

    out = [a for a in map(rgb, sorted((shared_data / "detection_voc100" / "images").glob("*.jpg"))) if a is not None]
    if len(out) < 16:
        pytest.skip("too few 500x375 VOC photos")
    return out[:16]


def test_voc_photo_swap_is_not_named_white_balance(voc_500x375):
    """The issue's case: 8 VOC photos with R and B swapped against 8 others, unpaired. Before, this
    split (seed 0) read `white_balance` gap (R/G x0.75, B/G x1.40); now `info` that it cannot tell."""
    idx = np.random.default_rng(0).permutation(16)
    sim, real = _sets([np.ascontiguousarray(voc_500x375[i][..., ::-1]) for i in idx[:8]],
                      [voc_500x375[i] for i in idx[8:]])
    findings = run(sim, real)
    assert "white_balance" not in codes(findings)
    assert (findings[0].code, findings[0].severity) == ("channel_swap", "info")
    # the same split without the swap: nothing of either
    assert not {"channel_swap", "white_balance"} & set(codes(run(*_sets([voc_500x375[i] for i in idx[:8]],
                                                                        [voc_500x375[i] for i in idx[8:]]))))
