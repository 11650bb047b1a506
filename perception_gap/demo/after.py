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


@dataclass(frozen=True)
class AfterFiles:
    """Paths of the demo's policy (TorchScript), replay log (CSV) and camera models (JSON)."""

    policy: Path
    replay: Path
    cameras: Path


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


def build_after_inputs(root: Path, *, size: tuple[int, int] = (160, 120), n_episodes: int = 4,
                       seed: int = 0) -> AfterFiles:
    """Write the policy, the replay log and the camera models into `root/after/`."""
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
    return AfterFiles(policy, replay, cameras)
