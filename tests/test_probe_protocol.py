"""The probe protocol: sim->real held out like sim->sim, the transfer drop with its CI, R^2 in words."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perception_gap.probes import R2_DISPLAY_FLOOR, below_display_floor, describe_r2, probe


def blob_images(n_ep=10, per=12, size=16, noise=0.03, seed=0):
    """Frames showing one bright blob moving along a path per episode (plus pixel noise); the label
    is its (x, y).

    Returns (flattened images (N, size*size), labels (N, 2), episode ids (N,)).
    """
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    frames, labels = [], []
    for _ in range(n_ep):
        start, step = rng.uniform(3, size - 4, 2), rng.normal(0, 0.4, 2)
        for t in range(per):
            cx, cy = np.clip(start + t * step, 2, size - 3)
            frames.append(np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 4.0).ravel())
            labels.append((cx, cy))
    frames = np.asarray(frames)
    return frames + rng.normal(0, noise, frames.shape), np.asarray(labels), np.repeat(np.arange(n_ep), per)


def test_identical_frames_give_sim_to_real_equal_to_sim_to_sim():
    x, y, ep = blob_images()
    res = probe(x, y, x.copy(), y.copy(), episodes_sim=ep, episodes_real=ep)
    assert res.sim_to_real.r2 == res.sim_to_sim.r2  # exactly: the same ridges on the same held-out frames
    assert res.sim_to_real.r2_per_dim == res.sim_to_sim.r2_per_dim
    assert res.transfer_drop == 0.0
    assert res.n_shared_groups == 10 and res.sim_to_real.n_splits == res.sim_to_sim.n_splits == 5
    # Shared episodes are drawn together for both sides: every replicate's drop is exactly 0.
    assert res.transfer_drop_ci.clusters == "shared episodes"
    assert res.transfer_drop_ci.low == res.transfer_drop_ci.high == 0.0
    assert 0.5 < res.sim_to_sim.r2 < 1.0  # held out: informative, not in-sample perfect


def test_identical_frames_with_unknown_episodes_paired_by_group():
    # Frames without episode ids but with shared pair groups (what `run` passes) behave the same.
    x, y, _ = blob_images(seed=1)
    groups = [("pair", i // 6) for i in range(len(x))]
    res = probe(x, y, x.copy(), y.copy(), episodes_sim=groups, episodes_real=groups)
    assert res.sim_to_real.r2 == res.sim_to_sim.r2


def test_an_image_derived_label_transfers_and_a_flip_does_not():
    x, y, ep = blob_images(n_ep=12, seed=2)
    rng = np.random.default_rng(3)
    x_real = x + rng.normal(0, 0.03, x.shape)  # more sensor noise: the same scenes, slightly different pixels
    res = probe(x, y, x_real, y, episodes_sim=ep, episodes_real=ep)
    assert res.sim_to_sim.r2 > 0.7 and res.sim_to_real.r2 > 0.6
    assert res.transfer_drop_ci.low <= res.transfer_drop <= res.transfer_drop_ci.high
    assert abs(res.transfer_drop) < 0.15
    # Real camera mounted mirrored: the blob's x reads backwards; the drop is large and its CI excludes 0.
    flipped = x_real.reshape(-1, 16, 16)[:, :, ::-1].reshape(len(x), -1)
    bad = probe(x, y, flipped, y, episodes_sim=ep, episodes_real=ep)
    assert bad.sim_to_real.r2 < 0.3 and bad.transfer_drop > 0.4
    assert bad.transfer_drop_ci.low > 0
    assert bad.real_to_real.r2 > 0.7  # the real frames still show the label


def test_in_sample_memorization_does_not_pass_as_transfer():
    # Each episode is one static scene with its own random label: a probe that has seen an
    # episode (in sim) would "transfer" it to its real twin by memory. Held out, it cannot.
    rng = np.random.default_rng(4)
    centres, targets = rng.normal(size=(20, 40)), rng.normal(size=(20, 2))
    ep = np.repeat(np.arange(20), 8)
    xs = centres[ep] + 0.01 * rng.normal(size=(160, 40))
    xr = centres[ep] + 0.01 * rng.normal(size=(160, 40))
    res = probe(xs, targets[ep], xr, targets[ep], episodes_sim=ep, episodes_real=ep)
    assert res.sim_to_sim.r2 < 0.3 and res.sim_to_real.r2 < 0.3
    assert abs(res.transfer_drop) < 0.1


def test_real_episodes_without_sim_twins_are_all_scored():
    x, y, ep = blob_images(seed=5)
    xr, yr, er = blob_images(n_ep=7, seed=6)
    res = probe(x, y, xr, yr, episodes_sim=ep, episodes_real=[f"real-{e}" for e in er])
    assert res.n_shared_groups == 0 and res.sim_to_real.n_test == len(xr)
    assert res.sim_to_real.r2 > 0.5
    assert res.transfer_drop_ci is not None and res.transfer_drop_ci.clusters == "episodes"


def test_r2_far_below_zero_reads_as_words_and_keeps_its_number():
    assert R2_DISPLAY_FLOOR == -1.0
    assert describe_r2(-4317743.2) == "worse than predicting the mean"
    assert describe_r2(-0.42) == "-0.42" and describe_r2(0.8) == "0.80" and describe_r2(None) == "-"
    assert below_display_floor(-1.5) and not below_display_floor(-1.0) and not below_display_floor(None)
    # A probe whose real frames sit far outside the sim range extrapolates wildly.
    x, y, ep = blob_images(seed=7)
    res = probe(x, y, x * 200.0 + 50.0, y, episodes_sim=ep, episodes_real=ep)
    out = res.to_dict()
    json.dumps(out, allow_nan=False)
    assert out["sim_to_real"] < -1 and out["r2_below_floor"]["sim_to_real"] is True
    assert out["r2_below_floor"]["sim_to_sim"] is False and out["r2_display_floor"] == -1.0
    assert out["transfer_drop"] == pytest.approx(out["sim_to_sim"] - out["sim_to_real"])
    assert set(out["transfer_drop_ci"]) >= {"low", "high", "level", "clusters"}


def test_ranking_reads_transfer_below_zero_as_no_transfer():
    # Two encoders whose held-out read-out fails on real frames (R^2 -0.8 and -4e6) are told apart
    # by the gap alone; a positive transfer still outranks a closer encoder that has none.
    from perception_gap.ranking import EncoderScore, rank_encoders

    fails_close = EncoderScore("fails-close", gap=0.05, probe=-4.0e6)
    fails_far = EncoderScore("fails-far", gap=0.08, probe=-0.8)
    transfers = EncoderScore("transfers", gap=0.12, probe=0.4)
    ranked = rank_encoders([fails_far, transfers, fails_close])
    assert [(r.name, r.layer) for r in ranked] == [("fails-close", 0), ("transfers", 0), ("fails-far", 1)]


def test_few_episodes_resample_matched_pairs_in_blocks():
    # Three episodes are too few to resample whole; with matched pairs the transfer-drop bootstrap
    # draws blocks of pairs for both sides at once (identical frames: every replicate's drop is 0).
    x, y, _ = blob_images(n_ep=3, per=16, seed=8)
    ep = np.repeat(np.arange(3), 16)
    pairs = np.stack([np.arange(len(x)), np.arange(len(x))], axis=1)
    res = probe(x, y, x.copy(), y.copy(), episodes_sim=ep, episodes_real=ep, pairs=pairs)
    assert res.sim_to_real.r2 == res.sim_to_sim.r2 and res.sim_to_sim.n_splits == 3
    assert res.transfer_drop_ci.clusters == "paired blocks"
    assert res.transfer_drop_ci.low == res.transfer_drop_ci.high == 0.0
    unpaired = probe(x, y, x + 0.05, y, episodes_sim=ep, episodes_real=ep)
    assert unpaired.transfer_drop_ci.clusters == "episode blocks"
    assert unpaired.transfer_drop_ci.low <= unpaired.transfer_drop <= unpaired.transfer_drop_ci.high
