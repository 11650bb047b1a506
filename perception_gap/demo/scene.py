"""The demo's MuJoCo scene: the MJCF tabletop, scripted episodes, and the offscreen renderer.

A checkered wooden table plane, a red cube, a green cylinder and a blue cube, a key light, a
fixed camera and a mocap "gripper", moved per episode along smooth random paths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# name, MuJoCo geom type, half sizes, rgba, detector hue (PIL HSV hue, 0-255)
OBJECTS: tuple[tuple[str, str, str, tuple[float, float, float, float], int], ...] = (
    ("red_cube", "box", ".03 .03 .03", (0.85, 0.08, 0.08, 1.0), 0),
    ("green_cylinder", "cylinder", ".028 .03", (0.10, 0.70, 0.15, 1.0), 88),
    ("blue_cube", "box", ".025 .025 .025", (0.10, 0.20, 0.85, 1.0), 162),
)
_HALF_HEIGHT = (0.03, 0.03, 0.025)
_ANCHORS = ((-0.12, 0.02), (0.0, 0.12), (0.12, -0.02))


def scene_xml() -> str:
    bodies = []
    for (name, gtype, size, rgba, _), (ax, ay), hz in zip(OBJECTS, _ANCHORS, _HALF_HEIGHT):
        bodies.append(
            f'<body name="{name}" pos="{ax} {ay} {hz}"><freejoint/>'
            f'<geom name="{name}" type="{gtype}" size="{size}" rgba="{" ".join(map(str, rgba))}"/></body>')
    return f"""
<mujoco model="perception_gap_demo">
  <visual>
    <global offwidth="1024" offheight="1024"/>
    <quality shadowsize="1024"/>
    <headlight ambient=".35 .35 .35" diffuse=".35 .35 .35" specular="0 0 0"/>
  </visual>
  <asset>
    <texture name="wood" type="2d" builtin="checker" rgb1=".60 .52 .43" rgb2=".50 .43 .35"
             width="256" height="256" mark="edge" markrgb=".45 .38 .30"/>
    <material name="table" texture="wood" texrepeat="12 12" reflectance="0"/>
  </asset>
  <worldbody>
    <light name="key" pos=".3 -.3 1.5" dir="-.2 .2 -1" diffuse=".6 .6 .6" castshadow="true"/>
    <geom name="table" type="plane" size="2 2 .01" material="table"/>
    <camera name="cam" pos="0 -.38 .4" xyaxes="1 0 0 0 .707 .707" fovy="45"/>
    <body name="gripper" mocap="true" pos="0 0 .2">
      <geom name="palm" type="box" size=".012 .045 .015" rgba=".22 .22 .24 1" contype="0" conaffinity="0"/>
      <geom name="finger_l" type="box" size=".008 .006 .03" pos="0 .035 -.04" rgba=".3 .3 .32 1" contype="0" conaffinity="0"/>
      <geom name="finger_r" type="box" size=".008 .006 .03" pos="0 -.035 -.04" rgba=".3 .3 .32 1" contype="0" conaffinity="0"/>
    </body>
    {''.join(bodies)}
  </worldbody>
</mujoco>"""


def _smooth_path(rng: np.random.Generator, n: int, amp: float, dims: int = 1) -> np.ndarray:
    """(n, dims) smooth random path: a sum of three low-frequency sinusoids per dim."""
    t = np.linspace(0.0, 1.0, n)[:, None]
    out = np.zeros((n, dims))
    for k in (1.0, 2.0, 3.0):
        ph = rng.uniform(0, 2 * math.pi, dims)
        a = rng.normal(0, amp / k, dims)
        f = rng.uniform(0.3, 0.7, dims) * k
        out += a * np.sin(2 * math.pi * f * t + ph)
    return out


def _quat_z(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


def _quat_zy(yaw: float, pitch: float) -> np.ndarray:
    qz, qy = _quat_z(yaw), np.array([math.cos(pitch / 2), 0.0, math.sin(pitch / 2), 0.0])
    w1, x1, y1, z1 = qz
    w2, x2, y2, z2 = qy
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


@dataclass
class _Episode:
    grip: np.ndarray    # (n, 3)
    yaw: np.ndarray     # (n,)
    pitch: np.ndarray   # (n,)
    objs: np.ndarray    # (n, k, 3)
    obj_yaw: np.ndarray  # (n, k)


def episode(rng: np.random.Generator, n: int) -> _Episode:
    k = len(OBJECTS)
    start = rng.uniform(-0.1, 0.1, 2)
    grip = np.zeros((n, 3))
    grip[:, :2] = start + _smooth_path(rng, n, 0.08, 2)
    grip[:, 2] = 0.16 + _smooth_path(rng, n, 0.03, 1)[:, 0]
    yaw = rng.uniform(-0.8, 0.8) + _smooth_path(rng, n, 0.6, 1)[:, 0]
    pitch = rng.uniform(-0.3, 0.3) + _smooth_path(rng, n, 0.25, 1)[:, 0]
    objs = np.zeros((n, k, 3))
    obj_yaw = np.zeros((n, k))
    for j, ((ax, ay), hz) in enumerate(zip(_ANCHORS, _HALF_HEIGHT)):
        objs[:, j, :2] = np.array([ax, ay]) + rng.uniform(-0.03, 0.03, 2) + _smooth_path(rng, n, 0.025, 2)
        objs[:, j, 2] = hz
        obj_yaw[:, j] = rng.uniform(-math.pi, math.pi) + _smooth_path(rng, n, 0.4, 1)[:, 0]
    return _Episode(grip, yaw, pitch, objs, obj_yaw)


def set_state(model: Any, data: Any, ep: _Episode, i: int) -> None:
    import mujoco

    data.mocap_pos[0] = ep.grip[i]
    data.mocap_quat[0] = _quat_zy(float(ep.yaw[i]), float(ep.pitch[i]))
    for j, (name, *_rest) in enumerate(OBJECTS):
        adr = model.jnt_qposadr[model.body(name).jntadr[0]]
        data.qpos[adr:adr + 3] = ep.objs[i, j]
        data.qpos[adr + 3:adr + 7] = _quat_z(float(ep.obj_yaw[i, j]))
    mujoco.mj_forward(model, data)


class Cam:
    """One offscreen renderer: RGB uint8, depth metres float32, instance ids uint8."""

    def __init__(self, model: Any, width: int, height: int, geom_to_instance: dict[int, int]):
        import mujoco

        self.r = mujoco.Renderer(model, height, width)
        self.lut = geom_to_instance

    def render(self, data: Any, *, rgb: bool = True, rgb_only: bool = False) -> tuple[Any, Any, Any]:
        r = self.r
        r.update_scene(data, camera="cam")
        colour = r.render().copy() if rgb else None
        if rgb_only:
            return colour, None, None
        r.enable_depth_rendering()
        r.update_scene(data, camera="cam")
        depth = r.render().astype(np.float32)
        r.disable_depth_rendering()
        r.enable_segmentation_rendering()
        r.update_scene(data, camera="cam")
        seg = r.render()
        r.disable_segmentation_rendering()
        ids = np.zeros(seg.shape[:2], dtype=np.uint8)
        geom_type = 5  # mjOBJ_GEOM
        for gid, inst in self.lut.items():
            ids[(seg[..., 0] == gid) & (seg[..., 1] == geom_type)] = inst
        return colour, depth, ids

    def close(self) -> None:
        self.r.close()

