"""Plumbing diagnoses beside the image content, end to end through the CLI: control vectors
(`control_dims`, `control_scale`, `control_sign`), `frame_format`, `depth_invalid`, `pair_sync` keyed by
a manifest's episode and step, and `unexplained_gap`.

Frames are real (PASCAL VOC JPEGs from `../shared/data`, 160x120) and identical on both sides
unless a test changes them, so that the only difference is the one injected; proprio and action
vectors go through a JSONL manifest, as a pipeline writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

try:
    import diagnosis_cases as D
    import faults as F
except ImportError:  # tests/ imported as a package
    from tests import diagnosis_cases as D
    from tests import faults as F

N = 10  # pairs per case



def _trajectory(n: int, seed: int = 0) -> np.ndarray:
    """(n, 8): 7 joint angles (radians, a smooth random walk) and a gripper opening in [0.5, 1]."""
    rng = np.random.default_rng(seed)
    return np.concatenate([F.joint_trajectory(rng, n), rng.uniform(0.5, 1.0, (n, 1))], axis=1)


def _rows(tmp: Path, frames: list[np.ndarray], sim_vec: np.ndarray | None, real_vec: np.ndarray | None,
          field: str = "proprio", *, sim_keys=None, real_keys=None, real_frames=None) -> list[dict]:
    """Manifest rows: frame i of each side with its `field` vector (row i), keys shared unless given."""
    rows = []
    for domain, fr, vec, keys in (("sim", frames, sim_vec, sim_keys), ("real", real_frames or frames, real_vec,
                                                                            real_keys)):
        keys = keys or [f"f{i:03d}" for i in range(len(fr))]
        for i, (key, a) in enumerate(zip(keys, fr)):
            path = D.save_png(tmp / domain / f"{key}.png", a)
            row = {"set": domain[0], "domain": domain, "rgb": str(path.relative_to(tmp)), "pair_key": key}
            if vec is not None:
                row[field] = json.dumps([round(float(v), 6) for v in vec[i]])
            rows.append(row)
    return rows


def _only_control(res: dict) -> None:
    """The frames are identical: nothing about appearance may be named beside the control findings."""
    assert D.named(res) <= {"control_dims", "control_scale", "control_sign"}, D.codes(res)


# --- control vectors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("basis", ["paired", "unpaired"])
def test_proprio_dims_differ(frames, tmp_path, basis):
    traj = _trajectory(2 * N)
    if basis == "paired":
        rows = _rows(tmp_path, frames[:N], traj[:N, :3], traj[:N, :7])
    else:
        rows = _rows(tmp_path, frames[:N], traj[:N, :3], traj[N:, :7], real_frames=frames[N:2 * N],
                     sim_keys=[f"s{i}" for i in range(N)], real_keys=[f"r{i}" for i in range(N)])
    res = D.run_manifest(tmp_path, rows)
    ev = D.first(res, "control_dims", "bug")
    assert (ev["field"], ev["sim_dims"], ev["real_dims"]) == ("proprio", 3, 7), ev
    if basis == "paired":
        _only_control(res)


def test_action_scaled_on_three_dims(frames, tmp_path):
    """Real actions of dims 0-2 in units 10x sim's (e.g. cm vs decimetres, or a [-1, 1] normalization)."""
    act = _trajectory(N, seed=1)
    real = act.copy()
    real[:, :3] *= 10.0
    res = D.run_manifest(tmp_path, _rows(tmp_path, frames[:N], act, real, field="action"))
    ev = D.first(res, "control_scale", "bug")
    assert ev["field"] == "action" and ev["dims"] == [0, 1, 2], ev
    assert ev["scales"] == pytest.approx([0.1] * 3, rel=0.02), ev
    ratios = ev["ratio_sim_over_real"]
    assert ratios[:3] == pytest.approx([0.1] * 3, rel=0.02) and ratios[3:] == pytest.approx([1.0] * 5, rel=0.02), ev
    assert "control_sign" not in D.named(res)
    _only_control(res)


def test_gripper_sign_flipped(frames, tmp_path):
    traj = _trajectory(N, seed=2)
    real = traj.copy()
    real[:, 7] *= -1.0
    res = D.run_manifest(tmp_path, _rows(tmp_path, frames[:N], traj, real))
    ev = D.first(res, "control_sign", "bug")
    assert ev["field"] == "proprio" and ev["dims"] == [7], ev
    assert ev["ratio_sim_over_real"][7] == pytest.approx(-1.0, rel=0.02), ev
    assert "control_scale" not in D.named(res)
    _only_control(res)


@pytest.mark.parametrize("kind", ["scale", "sign"])
def test_unpaired_control_scale_and_sign(frames, tmp_path, kind):
    """Different stretches of one trajectory a side (no shared keys): real dims 0-2 x10, or the
    gripper's sign flipped."""
    traj = _trajectory(2 * N, seed=5)
    sim, real = traj[:N], traj[N:].copy()
    if kind == "scale":
        real[:, :3] *= 10.0
    else:
        real[:, 7] *= -1.0
    rows = _rows(tmp_path, frames[:N], sim, real, real_frames=frames[N:2 * N],
                 sim_keys=[f"s{i}" for i in range(N)], real_keys=[f"r{i}" for i in range(N)])
    res = D.run_manifest(tmp_path, rows)
    ev = D.first(res, f"control_{kind}", "bug")
    assert ev["basis"] == "distribution", ev
    if kind == "scale":  # unpaired the ratio is of RMS values over different stretches: dims 0-2 only, < 1
        assert ev["dims"] and set(ev["dims"]) <= {0, 1, 2}, ev
        assert all(v < 0.35 for v in ev["scales"]), ev
        assert "control_sign" not in D.named(res), D.codes(res)
    else:
        assert ev["dims"] == [7], ev
        assert "control_scale" not in D.named(res), D.codes(res)


def test_unpaired_sign_needs_five_frames_a_side(frames, tmp_path):
    """Two and three frames of different stretches of a joint that crosses zero can sit on opposite
    sides of it by chance: no flip is read from so few (the rule needs SIGN_MIN_FRAMES a side); the
    same values repeated to five frames a side, all of one sign each, are a flip."""
    from perception_gap.diagnoses.control import SIGN_MIN_FRAMES

    assert SIGN_MIN_FRAMES == 5
    traj = _trajectory(6, seed=7)
    for k, (n_s, n_r) in enumerate(((2, 3), (5, 5))):
        sim, real = traj[:n_s].copy(), traj[:n_r].copy()
        sim[:, 0] = np.resize([0.31, 0.29, 0.33], n_s)
        real[:, 0] = np.resize([-0.30, -0.32, -0.28], n_r)
        case = tmp_path / f"c{k}"
        case.mkdir()
        rows = _rows(case, frames[:n_s], sim, real, real_frames=frames[N:N + n_r],
                     sim_keys=[f"s{i}" for i in range(n_s)], real_keys=[f"r{i}" for i in range(n_r)])
        res = D.run_manifest(case, rows)
        if n_s < SIGN_MIN_FRAMES:
            assert "control_sign" not in D.named(res), D.codes(res)
        else:
            assert D.first(res, "control_sign", "bug")["dims"] == [0]


def test_same_control_vectors_are_quiet(frames, tmp_path):
    traj = _trajectory(N, seed=3)
    rows = _rows(tmp_path, frames[:N], traj, traj + np.random.default_rng(4).normal(0, 0.005, traj.shape))
    res = D.run_manifest(tmp_path, rows)
    D.assert_quiet(res)


# --- pair sync through a manifest's episode and step -------------------------------------------------

def test_pair_sync_from_manifest_episode_and_step(frames, tmp_path):
    """Two episodes, each a sequence of different views; pair keys carry no order, the manifest's
    `episode` / `step` do. Real step k holds the view of step k + 1 (keyed one step early)."""
    steps, rows = 6, []
    for domain, shift in (("sim", 0), ("real", 1)):
        for e in range(2):
            for k in range(steps):
                view = e * (steps + 1) + k + shift
                path = D.save_png(tmp_path / domain / f"ep{e}_{k}.png", frames[view])
                rows.append({"set": domain[0], "domain": domain, "rgb": str(path.relative_to(tmp_path)),
                             "pair_key": f"take{e}-{'abcdef'[k]}", "episode": f"ep{e}", "step": k})
    res = D.run_manifest(tmp_path, rows)
    ev = D.first(res, "pair_sync", "bug")
    # sim step k shows the view real holds at step k - 1: its match is one step earlier
    assert ev["offset_steps"] == -1, ev
    assert ev["pairs_at_offset"] == 2 * (steps - 1), ev


# --- frame format, depth invalid -----------------------------------------------------------------------

def test_one_grey16_frame_among_rgb8_is_frame_format_not_brightness(frames, tmp_path):
    sim, real = D.paired(frames)
    real["f003"] = D.grey16(real["f003"])
    res = D.run_folders(tmp_path, sim, real)
    ev = D.first(res, "frame_format", "bug")
    assert ev["frames_left_out"] == {"sim": 0, "real": 1}, ev
    assert ev["real_format"].endswith("uint8") and ev["sim_format"] == ev["real_format"], ev
    assert "brightness" not in D.named(res), D.codes(res)


def test_grey16_set_against_rgb8_is_frame_format_first(frames, tmp_path):
    sim, real = D.paired(frames, real_fn=D.grey16)
    res = D.run_folders(tmp_path, sim, real)
    ev = D.first(res, "frame_format", "bug")
    assert ev["sim_format"].endswith("uint8") and ev["real_format"].endswith("uint16"), ev
    assert ev["sim_format"].split()[0] != ev["real_format"].split()[0], ev  # the channel kind differs too
    assert "depth" in res["findings"][0]["action"]
    assert not {"brightness", "compression", "white_balance"} & D.named(res), D.codes(res)


def _depth_mm(a: np.ndarray) -> np.ndarray:
    """A smooth uint16 depth map in millimetres (0.6 - 3 m) derived from the frame's blurred luma."""
    lum = np.asarray(Image.fromarray(a).convert("L").resize((20, 15)).resize((a.shape[1], a.shape[0]), Image.BILINEAR))
    return (600 + lum.astype(np.float64) * 9.4).astype(np.uint16)


def _holes(shape: tuple[int, int], rng: np.random.Generator, share: float = 0.06) -> np.ndarray:
    """Boolean mask of a few rectangular holes covering about `share` of the map."""
    mask = np.zeros(shape, dtype=bool)
    h, w = shape
    while mask.mean() < share:
        y, x = rng.integers(0, h - 8), rng.integers(0, w - 8)
        mask[y:y + rng.integers(4, 12), x:x + rng.integers(4, 16)] = True
    return mask


@pytest.mark.parametrize("basis", ["paired", "unpaired"])
def test_depth_invalid_markers_differ(frames, tmp_path, basis):
    rng = np.random.default_rng(0)
    sim, real = D.paired(frames) if basis == "paired" else D.unpaired(frames, n=8)
    for side, marker in ((sim, 65535), (real, 0)):
        for key, a in side.items():
            d = _depth_mm(a)
            d[_holes(d.shape, rng)] = marker
            folder = tmp_path / ("sim" if side is sim else "real") / "depth"
            D.save_png(folder / f"{key}.png", d)
    res = D.run_folders(tmp_path, sim, real, extra=("--depth-unit", "mm"))
    ev = D.first(res, "depth_invalid", "bug")
    assert (ev["sim_marker"], ev["real_marker"]) == ("max", "zero"), ev
    sim_shares = dict(zip(ev["markers"], ev["sim_shares"]))
    real_shares = dict(zip(ev["markers"], ev["real_shares"]))
    assert 0.04 < sim_shares["max"] < 0.12 and sim_shares["zero"] == 0, ev
    assert 0.04 < real_shares["zero"] < 0.12 and real_shares["max"] == 0, ev
    assert not {"depth_dropout", "depth_scale"} & D.named(res), D.codes(res)


# --- unexplained gap -------------------------------------------------------------------------------------

def test_local_difference_is_unexplained_gap(frames, tmp_path):
    """A dark object on the real side's left edge (a robot arm or fixture missing in sim): no named
    code fits; the finding says where it is and that sim is brighter there."""
    def with_object(a):
        b = a.copy()
        b[45:85, 4:52] = (28, 30, 34)
        return b
    res = D.run_folders(tmp_path, *D.paired(frames, real_fn=with_object, n=16))
    ev = D.first(res, "unexplained_gap", "gap")
    assert ev["where"] == "left edge", ev
    assert ev["mean_diff_in_area"] > 0, ev
    # the object covers 40 x 48 of 120 x 160 pixels (10%)
    assert 0.05 <= ev["area_share"] <= 0.15, ev
    assert D.named(res) == {"unexplained_gap"}, D.codes(res)
    diff = np.asarray(res["maps"]["paired"]["mean_signed_diff"])
    assert diff[13:20, 2:8].min() > 0.02, diff  # inside the object (thumbnail rows 12-22, columns 1-10)
    assert np.abs(diff[13:20, 24:30]).max() < 1e-3, diff  # the same place on the right: untouched
