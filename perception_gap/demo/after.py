"""The demo's inputs for the checks after the gap hunt: a policy, a replay log, two camera models.

- `policy.pt`: a TorchScript linear policy on the frames' channel means and the proprio
  (`perception_gap.encoders.policy.save_linear_policy`, fixed random weights), for `policy-check`.
- `replay.csv`: per episode, the demo gripper's path as the open-loop sim pose and a "real" pose
  that tracks it within ~0.5 mm until the gripper touches an object at a drawn step, is knocked
  3 mm off there and then slips 2 mm per step (a contact-model gap), for `replay`.
- `cameras.json`: the sim camera read from the MuJoCo scene (pose and vertical field of view,
  converted from MuJoCo's camera axes to OpenCV's) and a "real" calibration of it that agrees at
  the workspace centre but orbits it by 2° about the vertical, with mild barrel distortion, over
  the table's workspace, for `reprojection`.
- `initial_states.csv` (x, y, z, success): the training initial states of the gripper, spread
  evenly over the grid's x-y extent at grasp height (no outcome), and real rollouts from starts
  drawn the same way, each a failure when the miscalibrated camera puts its start farther off than the
  gripper's tolerance (about 4 mm: the 2° orbit moves a point r from the centre by 2 r sin 1°),
  for `reprojection --initial-states`: the failures ring the workspace where the error grows, so
  the demo's verdict is to recalibrate, not to collect more data.
Pure file generation: no catalog, no printing.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perception_gap.demo.scene import OBJECTS, _quat_zy, episode, scene_xml

REPLAY_STEPS = 40
IMPACT_M = 0.003
SLIP_M_PER_STEP = 0.002
ORBIT_DEG = 2.0
GRID_CENTRE = (0.0, 0.0, 0.1)
N_TRAINING_STATES = 320
N_ROLLOUTS = 160
# where starts are drawn, metres: the reprojection grid's whole x-y extent (so no start is thinly covered for
# lying at the rim of the training data) at grasp height, in one layer of the grid (cells at z 0.125 m span
# 0.1125-0.1375 m)
STATE_BOX = ((-0.2, -0.15, 0.115), (0.2, 0.15, 0.135))
TOLERANCE_M = 0.004  # the gripper's mean lateral tolerance; each rollout draws its own (sd TOLERANCE_SD_M)
TOLERANCE_SD_M = 0.0005


@dataclass(frozen=True)
class AfterFiles:
    """Paths of the demo's policy (TorchScript), replay log (CSV), camera models (JSON) and initial states (CSV)."""

    policy: Path
    replay: Path
    cameras: Path
    initial_states: Path


def demo_cameras(size: tuple[int, int]) -> dict:
    """Sim camera from the MuJoCo scene and a slightly miscalibrated real one, as `reprojection` reads them."""
    import mujoco

    model = mujoco.MjModel.from_xml_string(scene_xml())
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    R_mj = data.cam_xmat[0].reshape(3, 3)
    T = np.eye(4)
    T[:3, :3] = R_mj @ np.diag([1.0, -1.0, -1.0])  # MuJoCo looks along -z with y up; OpenCV along +z, y down
    T[:3, 3] = data.cam_xpos[0]
    w, h = size
    f = (h / 2) / math.tan(math.radians(float(model.cam_fovy[0])) / 2)
    K = [[f, 0.0, w / 2], [0.0, f, h / 2], [0.0, 0.0, 1.0]]
    # a hand-eye calibration that is right at its target (the workspace centre) but orbits it by
    # ORBIT_DEG about the vertical: errors vanish at the centre and grow away from it
    c, s = math.cos(math.radians(ORBIT_DEG)), math.sin(math.radians(ORBIT_DEG))
    orbit = np.eye(4)
    orbit[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
    orbit[:3, 3] = np.asarray(GRID_CENTRE) - orbit[:3, :3] @ np.asarray(GRID_CENTRE)
    T_real = orbit @ T
    return {"sim": {"width": w, "height": h, "K": K, "dist": [0, 0, 0, 0, 0], "T_base_cam": T.tolist()},
            "real": {"width": w, "height": h, "K": K, "dist": [-0.04, 0.01, 0, 0, 0], "T_base_cam": T_real.tolist()},
            "grid": {"min": [-0.2, -0.15, 0.0], "max": [0.2, 0.15, 0.2], "step": 0.025}}  # centre GRID_CENTRE


def _replay_rows(rng: np.random.Generator, n_episodes: int) -> list[dict]:
    rows = []
    for e in range(n_episodes):
        ep = episode(rng, REPLAY_STEPS)
        contact = int(rng.integers(12, REPLAY_STEPS - 12))
        slip = np.zeros((REPLAY_STEPS, 3))
        slip[contact:, 0] = IMPACT_M + SLIP_M_PER_STEP * np.arange(REPLAY_STEPS - contact)
        real = ep.grip + slip + rng.normal(0, 0.0005 / math.sqrt(3), (REPLAY_STEPS, 3))
        for s in range(REPLAY_STEPS):
            q = _quat_zy(float(ep.yaw[s]), float(ep.pitch[s]))
            for dom, p in (("sim", ep.grip[s]), ("real", real[s])):
                rows.append({"episode": f"ep{e}", "step": s, "domain": dom, "x": round(float(p[0]), 6),
                             "y": round(float(p[1]), 6), "z": round(float(p[2]), 6),
                             **{k: round(float(v), 8) for k, v in zip(("qw", "qx", "qy", "qz"), q)},
                             "contact": int(s >= contact)})
    return rows


def calibration_offset_m(xyz: np.ndarray) -> np.ndarray:
    """(M,) distance in metres between where the sim and the "real" calibration put each (M, 3) point:
    the 2° orbit about the vertical through GRID_CENTRE moves a point r from that axis by 2 r sin 1°."""
    r = np.hypot(xyz[:, 0] - GRID_CENTRE[0], xyz[:, 1] - GRID_CENTRE[1])
    return 2.0 * r * math.sin(math.radians(ORBIT_DEG) / 2)


def _initial_state_rows(rng: np.random.Generator) -> list[dict]:
    """Training starts (no outcome) and rollouts that fail where the calibration error exceeds the tolerance."""
    lo, hi = np.asarray(STATE_BOX[0]), np.asarray(STATE_BOX[1])
    train = rng.uniform(lo, hi, (N_TRAINING_STATES, 3))
    starts = rng.uniform(lo, hi, (N_ROLLOUTS, 3))
    success = calibration_offset_m(starts) < rng.normal(TOLERANCE_M, TOLERANCE_SD_M, N_ROLLOUTS)
    rows = [{"x": round(float(p[0]), 4), "y": round(float(p[1]), 4), "z": round(float(p[2]), 4), "success": ""}
            for p in train]
    return rows + [{"x": round(float(p[0]), 4), "y": round(float(p[1]), 4), "z": round(float(p[2]), 4),
                    "success": int(ok)} for p, ok in zip(starts, success)]


def build_after_inputs(root: Path, *, size: tuple[int, int] = (160, 120), n_episodes: int = 4,
                       seed: int = 0) -> AfterFiles:
    """Write the policy, the replay log, the camera models and the initial states into `root/after/`."""
    from perception_gap.encoders.policy import save_linear_policy

    out = Path(root) / "after"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, 7])
    d = 5 + 3 * len(OBJECTS)  # proprio: gripper xyz, yaw, pitch, then each object's xyz
    weight = rng.normal(0, 1.0, (4, 3 + d)) * np.r_[np.full(3, 0.5), np.full(d, 0.05)]
    policy = Path(save_linear_policy(str(out / "policy.pt"), weight, np.zeros(4)))
    rows = _replay_rows(rng, n_episodes)
    replay = out / "replay.csv"
    with replay.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    cameras = out / "cameras.json"
    cameras.write_text(json.dumps(demo_cameras(size), indent=1), encoding="utf-8")
    states = out / "initial_states.csv"
    with states.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["x", "y", "z", "success"])
        w.writeheader()
        w.writerows(_initial_state_rows(rng))
    return AfterFiles(policy, replay, cameras, states)
