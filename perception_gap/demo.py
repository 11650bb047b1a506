"""A built-in paired demo: a MuJoCo tabletop rendered as "sim" and through a camera model as "real".

`build_demo(out_dir)` writes a small, deterministic paired data set that exercises every part
of the engine without any data on disk:

- a MuJoCo scene (a checkered wooden table plane, a red cube, a green cylinder and a blue cube,
  a key light, a fixed camera and a mocap "gripper"), scripted per episode along smooth random
  paths; per step it records an action (gripper position delta and yaw delta) and proprio
  (gripper position, yaw and pitch in radians, then each object's position);
- sim frames: the render itself (RGB PNG, depth float32 `.npy` in metres, an instance-id mask
  PNG per frame and a mask-categories JSON);
- "real" frames: the same states through a physically motivated camera model (lens blur,
  +0.15 stop exposure, a mild white-balance shift, vignetting, shot + read noise, JPEG q90;
  depth as uint16 millimetres with multiplicative noise and ~8% dropout at object edges and
  random blobs, so the demo shows a `depth_dropout` gap: a gap, not a bug);
- a colour-segmentation detector ("colour") run on both sides, and ground truth for both (the
  sim's instance masks; for "real" the same states' segmentation at the real camera's size),
  as COCO files keyed by the file names the manifest indexes;
- a JSONL manifest naming both sets (`demo_sim`, `demo_real`).

`inject=CODE` adds one plumbing fault (a code of CONTRACT.md) so that it is the top finding of
`stats`; see `INJECTIONS`. Everything is pure file generation: no catalog, no printing.
"""

from __future__ import annotations

import io
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

__all__ = ["DemoFiles", "INJECTIONS", "SIM_SET", "REAL_SET", "OBJECTS", "build_demo", "colour_detect",
           "camera_model"]

SIM_SET = "demo_sim"
REAL_SET = "demo_real"

# What each injection does (all on the real side unless said otherwise).
INJECTIONS: dict[str, str] = {
    "channel_swap": "real RGB written in BGR order",
    "value_range": "both sides written as float32 .npy observations: sim in [0, 255], real in [0, 1]",
    "normalization": "both sides written as float32 .npy observations: sim ImageNet-normalized, real CLIP-normalized",
    "depth_scale": "real depth written in millimetres but declared `m`",
    "resize_filter": "both rendered at 2x and downscaled: sim with an antialiasing filter, real with nearest",
    "brightness": "real exposure 1.5 stops lower",
    "white_balance": "real white-balance gains R x1.45, B x0.70",
    "resolution": "real camera at 16:9 (1.25x wider) instead of the sim's size",
    "joint_units": "real proprio angles (yaw, pitch) and the yaw action in degrees",
    "depth_dropout": "real depth with ~40% holes",
}

# name, MuJoCo geom type, half sizes, rgba, detector hue (PIL HSV hue, 0-255)
OBJECTS: tuple[tuple[str, str, str, tuple[float, float, float, float], int], ...] = (
    ("red_cube", "box", ".03 .03 .03", (0.85, 0.08, 0.08, 1.0), 0),
    ("green_cylinder", "cylinder", ".028 .03", (0.10, 0.70, 0.15, 1.0), 88),
    ("blue_cube", "box", ".025 .025 .025", (0.10, 0.20, 0.85, 1.0), 162),
)
_HALF_HEIGHT = (0.03, 0.03, 0.025)
_ANCHORS = ((-0.12, 0.02), (0.0, 0.12), (0.12, -0.02))

# Camera model of the "real" side (each below its plumbing threshold; see plumbing.py).
REAL_EXPOSURE_STOPS = 0.15      # BRIGHTNESS_STOPS = 0.3
REAL_WB_GAINS = (1.03, 1.0, 0.97)  # WB_LOG2 = 0.1 -> log2 1.03 = 0.043
REAL_BLUR_SIGMA = 0.35          # pixels; SHARPNESS_STOPS = 1.0 (pairs)
REAL_VIGNETTE = 0.2             # relative fall-off at the corners
REAL_FULL_WELL = 4000.0         # electrons at linear 1.0 (shot noise ~2/255 at mid grey)
REAL_READ_NOISE = 3.0           # electrons
REAL_JPEG_QUALITY = 90
REAL_DEPTH_REL_NOISE = 0.004
REAL_DEPTH_DROPOUT = 0.08       # DROPOUT_DIFF = 0.05: fires as a gap, score 1.6

_IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
_CLIP = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))


@dataclass(frozen=True)
class DemoFiles:
    """Paths of a built demo (all inside `root`).

    Attributes:
        root: the output folder.
        manifest: JSONL manifest of both sets (`index --manifest`).
        sim_masks: folder of sim instance-id masks `<pair key>.png` (`index --masks`).
        mask_categories: JSON instance id -> object name (`--mask-categories`).
        sim_coco, real_coco: colour-detector output on sim / real frames (`--source colour`).
        real_gt_coco: ground-truth boxes of the real frames (`--source gt`).
        sim_set, real_set: the set names.
        inject: the injected fault code, or None.
        n_frames: frames per side.
    """

    root: Path
    manifest: Path
    sim_masks: Path
    mask_categories: Path
    sim_coco: Path
    real_coco: Path
    real_gt_coco: Path
    sim_set: str = SIM_SET
    real_set: str = REAL_SET
    inject: str | None = None
    n_frames: int = 0


# --------------------------------------------------------------------------------------------
# Scene
# --------------------------------------------------------------------------------------------

def _scene_xml() -> str:
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


def _episode(rng: np.random.Generator, n: int) -> _Episode:
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


def _set_state(model: Any, data: Any, ep: _Episode, i: int) -> None:
    import mujoco

    data.mocap_pos[0] = ep.grip[i]
    data.mocap_quat[0] = _quat_zy(float(ep.yaw[i]), float(ep.pitch[i]))
    for j, (name, *_rest) in enumerate(OBJECTS):
        adr = model.jnt_qposadr[model.body(name).jntadr[0]]
        data.qpos[adr:adr + 3] = ep.objs[i, j]
        data.qpos[adr + 3:adr + 7] = _quat_z(float(ep.obj_yaw[i, j]))
    mujoco.mj_forward(model, data)


class _Cam:
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


# --------------------------------------------------------------------------------------------
# Camera model of the "real" side
# --------------------------------------------------------------------------------------------

def _srgb_to_linear(a: np.ndarray) -> np.ndarray:
    v = np.asarray(a, dtype=np.float64) / 255.0
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def _linear_to_srgb_u8(lin: np.ndarray) -> np.ndarray:
    v = np.clip(lin, 0.0, 1.0)
    s = np.where(v <= 0.0031308, v * 12.92, 1.055 * v ** (1 / 2.4) - 0.055)
    return np.clip(np.round(s * 255.0), 0, 255).astype(np.uint8)


def camera_model(rgb: np.ndarray, rng: np.random.Generator, *, exposure_stops: float = REAL_EXPOSURE_STOPS,
                 wb_gains: tuple[float, float, float] = REAL_WB_GAINS, blur_sigma: float = REAL_BLUR_SIGMA,
                 vignette: float = REAL_VIGNETTE, noise: bool = True) -> np.ndarray:
    """A rendered uint8 sRGB frame as a camera would deliver it (before JPEG), uint8 sRGB.

    In linear light: lens blur (Gaussian), exposure (stops), white-balance gains, vignetting
    (1 - v r^2, r = 1 at the corners), shot noise (Poisson as Gaussian, REAL_FULL_WELL e- at
    1.0) and read noise (REAL_READ_NOISE e-); then sRGB encoding and 8-bit quantization.
    """
    from scipy.ndimage import gaussian_filter

    lin = _srgb_to_linear(rgb)
    if blur_sigma > 0:
        lin = gaussian_filter(lin, sigma=(blur_sigma, blur_sigma, 0), mode="nearest")
    h, w = lin.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    r2 = ((xx - (w - 1) / 2) / (w / 2)) ** 2 + ((yy - (h - 1) / 2) / (h / 2)) ** 2
    gain = (2.0 ** exposure_stops) * (1.0 - vignette * r2 / 2.0)
    lin = lin * gain[..., None] * np.asarray(wb_gains)
    if noise:
        e = np.clip(lin, 0, None) * REAL_FULL_WELL
        e = e + rng.normal(0.0, 1.0, e.shape) * np.sqrt(e + REAL_READ_NOISE ** 2)
        lin = e / REAL_FULL_WELL
    return _linear_to_srgb_u8(lin)


def _jpeg(rgb: np.ndarray, quality: int = REAL_JPEG_QUALITY) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _edges(ids: np.ndarray) -> np.ndarray:
    """Pixels within one pixel of an instance boundary."""
    e = np.zeros(ids.shape, dtype=bool)
    e[:, 1:] |= ids[:, 1:] != ids[:, :-1]
    e[:, :-1] |= ids[:, 1:] != ids[:, :-1]
    e[1:, :] |= ids[1:, :] != ids[:-1, :]
    e[:-1, :] |= ids[1:, :] != ids[:-1, :]
    return e


def _real_depth_mm(depth_m: np.ndarray, ids: np.ndarray, rng: np.random.Generator, dropout: float) -> np.ndarray:
    """Structured-light style depth: uint16 mm, multiplicative noise, holes at object edges and
    in smooth random blobs until about `dropout` of the pixels are 0."""
    d = depth_m.astype(np.float64) * 1000.0 * (1.0 + rng.normal(0.0, REAL_DEPTH_REL_NOISE, depth_m.shape))
    out = np.clip(np.round(d), 0, 65535).astype(np.uint16)
    holes = _edges(ids) & (rng.random(ids.shape) < 0.7)
    need = dropout - holes.mean()
    if need > 0:
        h, w = ids.shape
        small = rng.random((max(2, h // 8), max(2, w // 8))).astype(np.float32)
        field = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), dtype=np.float64)
        field[holes] = -np.inf
        thr = np.quantile(field[~holes], 1.0 - need / max(1e-9, 1.0 - holes.mean()))
        holes |= field >= thr
    out[holes] = 0
    return out


# --------------------------------------------------------------------------------------------
# Colour-segmentation detector
# --------------------------------------------------------------------------------------------

def colour_detect(rgb: np.ndarray, *, min_pixels: int = 12, sat_min: int = 110, val_min: int = 40,
                  hue_tol: int = 20) -> list[tuple[str, tuple[float, float, float, float], float]]:
    """Boxes of each demo object by its colour: (name, (x, y, w, h), score).

    Threshold each object's hue (PIL HSV, saturation >= sat_min, value >= val_min), keep the
    largest connected component, box it; the score is the component's share of its box.
    """
    from scipy.ndimage import find_objects, label

    hsv = np.asarray(Image.fromarray(np.ascontiguousarray(rgb)).convert("HSV"), dtype=np.int32)
    hue, sat, val = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    vivid = (sat >= sat_min) & (val >= val_min)
    out = []
    for name, _t, _s, _c, target in OBJECTS:
        dh = np.abs(hue - target)
        dh = np.minimum(dh, 256 - dh)
        lab, n = label(vivid & (dh <= hue_tol))
        if n == 0:
            continue
        counts = np.bincount(lab.ravel())[1:]
        best = int(np.argmax(counts))
        if counts[best] < min_pixels:
            continue
        sl = find_objects(lab)[best]
        y0, y1, x0, x1 = sl[0].start, sl[0].stop, sl[1].start, sl[1].stop
        score = float(counts[best]) / float((y1 - y0) * (x1 - x0))
        out.append((name, (float(x0), float(y0), float(x1 - x0), float(y1 - y0)), round(min(1.0, score), 4)))
    return out


def _mask_boxes(ids: np.ndarray) -> list[tuple[str, tuple[float, float, float, float], float]]:
    from perception_gap.detection import mask_to_boxes

    cats = {i + 1: o[0] for i, o in enumerate(OBJECTS)}
    return [(b.category, tuple(float(v) for v in b.bbox), float(b.area)) for b in mask_to_boxes(ids, categories=cats)]


def _coco(images: list[tuple[str, int, int, list]], kind: str) -> dict[str, Any]:
    cats = [{"id": i + 1, "name": o[0]} for i, o in enumerate(OBJECTS)]
    cid = {c["name"]: c["id"] for c in cats}
    imgs, anns = [], []
    for iid, (name, w, h, boxes) in enumerate(images, 1):
        imgs.append({"id": iid, "file_name": name, "width": w, "height": h})
        for cat, bbox, extra in boxes:
            a = {"id": len(anns) + 1, "image_id": iid, "category_id": cid[cat], "bbox": list(bbox)}
            if kind == "det":
                a["score"] = extra
                a["area"] = bbox[2] * bbox[3]
            else:
                a["area"] = extra
                a["iscrowd"] = 0
            anns.append(a)
    return {"images": imgs, "annotations": anns, "categories": cats}


# --------------------------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------------------------

def _downscale(a: np.ndarray, size: tuple[int, int], nearest: bool) -> np.ndarray:
    im = Image.fromarray(a)
    return np.asarray(im.resize(size, Image.NEAREST if nearest else Image.LANCZOS))


def _obs(rgb: np.ndarray, mean_std: tuple[tuple[float, ...], tuple[float, ...]] | None, scale: float) -> np.ndarray:
    x = rgb.astype(np.float32) / 255.0 * scale
    if mean_std is not None:
        x = (rgb.astype(np.float32) / 255.0 - np.asarray(mean_std[0], np.float32)) / np.asarray(mean_std[1], np.float32)
    return np.ascontiguousarray(x, dtype=np.float32)


def build_demo(out_dir: Path, *, inject: str | None = None, n_episodes: int = 4, steps: int = 12,
               size: tuple[int, int] = (160, 120), seed: int = 0, isolate: bool = True) -> DemoFiles:
    """Render the paired demo into `out_dir` (created; existing files are overwritten).

    Rendering runs in a spawned child process by default (`isolate=True`): software OpenGL
    (Mesa llvmpipe, behind MUJOCO_GL=egl/osmesa) loads its own LLVM, and a process that later
    loads another LLVM (triton, imported by torch when an encoder runs) segfaults. The child
    keeps the GL libraries out of the caller's process; `isolate=False` renders in-process.

    Args:
        out_dir: output folder.
        inject: a plumbing code of CONTRACT.md (see `INJECTIONS`), or None for the clean demo.
        n_episodes, steps: episodes and steps per episode (frames per side = their product).
        size: (width, height) of the sim frames.
        seed: trajectories and the camera model's noise are deterministic given it.

    Returns:
        DemoFiles with every path to index.

    Raises:
        ValueError: an unknown `inject` code or bad sizes.
        RuntimeError: MuJoCo cannot render here (no OpenGL backend), or the child process died.
    """
    if inject is not None and inject not in INJECTIONS:
        raise ValueError(f"Expected `inject` in {sorted(INJECTIONS)} or None, got {inject!r}.")
    kwargs = {"inject": inject, "n_episodes": int(n_episodes), "steps": int(steps),
              "size": [int(size[0]), int(size[1])], "seed": int(seed)}
    if not isolate:
        return _build(Path(out_dir), **{**kwargs, "size": tuple(kwargs["size"])})
    import subprocess
    import sys

    code = ("import json, sys; from pathlib import Path; from perception_gap.demo import _build, _to_json; "
            "a = json.loads(sys.argv[1]); "
            "print(_to_json(_build(Path(a.pop('out_dir')), **a)))")
    arg = json.dumps({"out_dir": str(Path(out_dir).resolve()), **kwargs})
    pkg_root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit code {proc.returncode}"
        if last.startswith("ValueError: "):
            raise ValueError(last[len("ValueError: "):])
        raise RuntimeError(f"MuJoCo demo rendering failed in its child process: {last}")
    return _from_json(proc.stdout.strip().splitlines()[-1])


def _to_json(files: DemoFiles) -> str:
    return json.dumps({k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(files).items()})


def _from_json(text: str) -> DemoFiles:
    raw = json.loads(text)
    paths = {"root", "manifest", "sim_masks", "mask_categories", "sim_coco", "real_coco", "real_gt_coco"}
    return DemoFiles(**{k: (Path(v) if k in paths else v) for k, v in raw.items()})


def _build(out_dir: Path, *, inject: str | None, n_episodes: int, steps: int, size: tuple[int, int],
           seed: int) -> DemoFiles:
    os.environ.setdefault("MUJOCO_GL", "egl")
    import mujoco

    if inject is not None and inject not in INJECTIONS:
        raise ValueError(f"Expected `inject` in {sorted(INJECTIONS)} or None, got {inject!r}.")
    w, h = int(size[0]), int(size[1])
    if not (16 <= w <= 512 and 16 <= h <= 512) or n_episodes < 1 or steps < 2:
        raise ValueError(f"Expected 16 <= size <= 512, n_episodes >= 1, steps >= 2; got {size}, {n_episodes}, {steps}.")
    root = Path(out_dir)
    dirs = {k: root / k for k in ("sim", "real", "depth/sim", "depth/real", "masks/sim", "coco")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)

    model = mujoco.MjModel.from_xml_string(_scene_xml())
    data = mujoco.MjData(model)
    lut = {model.geom(o[0]).id: i + 1 for i, o in enumerate(OBJECTS)}
    # Every view renders its RGB at 2x and downscales it with an antialiasing filter
    # (supersampling: the renderer's own texture sampling aliases at the target size); depth and
    # instance ids render at the target size.
    real_size = (int(round(w * 1.25)), int(round(w * 1.25 * 9 / 16))) if inject == "resolution" else (w, h)
    cams = {"sim_hi": _Cam(model, 2 * w, 2 * h, lut), "sim_lo": _Cam(model, w, h, lut)}
    if real_size != (w, h):
        cams["real_hi"] = _Cam(model, 2 * real_size[0], 2 * real_size[1], lut)
        cams["real_lo"] = _Cam(model, *real_size, lut)

    traj_rng = np.random.default_rng([seed, 0])
    cam_rng = np.random.default_rng([seed, 1])
    proprio_rng = np.random.default_rng([seed, 2])
    npy_rgb = inject in ("value_range", "normalization")
    exposure = REAL_EXPOSURE_STOPS + (-1.5 if inject == "brightness" else 0.0)
    wb = (1.45, 1.0, 0.70) if inject == "white_balance" else REAL_WB_GAINS
    dropout = 0.40 if inject == "depth_dropout" else REAL_DEPTH_DROPOUT

    rows: list[dict[str, Any]] = []
    coco_sim, coco_real, gt_real = [], [], []
    try:
        for e in range(n_episodes):
            ep = _episode(traj_rng, steps + 1)  # one extra state for the last action
            for s in range(steps):
                key = f"ep{e}_{s:03d}"
                _set_state(model, data, ep, s)
                sim_hi = cams["sim_hi"].render(data, rgb_only=True)[0]
                sim_rgb = _downscale(sim_hi, (w, h), nearest=False)
                _, depth_s, ids = cams["sim_lo"].render(data, rgb=False)
                # ---- real side: the same state through the camera model
                if "real_hi" in cams:
                    r_hi = cams["real_hi"].render(data, rgb_only=True)[0]
                    _, r_depth, r_ids = cams["real_lo"].render(data, rgb=False)
                else:
                    r_hi, r_depth, r_ids = sim_hi, depth_s, ids
                rs = (r_depth.shape[1], r_depth.shape[0])
                if inject == "resize_filter":
                    # camera model at sensor resolution (2x), then a nearest-neighbour downscale
                    cam = camera_model(r_hi, cam_rng, exposure_stops=exposure, wb_gains=wb,
                                       blur_sigma=REAL_BLUR_SIGMA)
                    real_rgb = _downscale(cam, rs, nearest=True)
                else:
                    real_rgb = camera_model(_downscale(r_hi, rs, nearest=False), cam_rng,
                                            exposure_stops=exposure, wb_gains=wb)
                jpeg = _jpeg(real_rgb)
                real_seen = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
                # ---- write RGB
                if npy_rgb:
                    sim_rel, real_rel = f"sim/{key}.npy", f"real/{key}.npy"
                    if inject == "value_range":
                        np.save(root / sim_rel, _obs(sim_rgb, None, 255.0))
                        np.save(root / real_rel, _obs(real_seen, None, 1.0))
                    else:
                        np.save(root / sim_rel, _obs(sim_rgb, _IMAGENET, 1.0))
                        np.save(root / real_rel, _obs(real_seen, _CLIP, 1.0))
                else:
                    sim_rel, real_rel = f"sim/{key}.png", f"real/{key}.jpg"
                    Image.fromarray(sim_rgb).save(root / sim_rel)
                    if inject == "channel_swap":
                        (root / real_rel).write_bytes(_jpeg(np.ascontiguousarray(real_rgb[..., ::-1])))
                    else:
                        (root / real_rel).write_bytes(jpeg)
                # ---- depth and masks
                np.save(root / f"depth/sim/{key}.npy", depth_s.astype(np.float32))
                depth_mm = _real_depth_mm(r_depth, r_ids, cam_rng, dropout)
                Image.fromarray(depth_mm).save(root / f"depth/real/{key}.png")
                Image.fromarray(ids).save(root / f"masks/sim/{key}.png")
                # ---- detector and ground truth
                rw, rh = real_seen.shape[1], real_seen.shape[0]
                coco_sim.append((sim_rel, w, h, colour_detect(sim_rgb)))
                seen = real_seen[..., ::-1] if inject == "channel_swap" else real_seen
                coco_real.append((real_rel, rw, rh, colour_detect(seen)))
                gt_real.append((real_rel, rw, rh, _mask_boxes(r_ids)))
                # ---- proprio and action
                yaw, pitch = float(ep.yaw[s]), float(ep.pitch[s])
                proprio = [*ep.grip[s].tolist(), yaw, pitch, *ep.objs[s].reshape(-1).tolist()]
                action = [*(ep.grip[s + 1] - ep.grip[s]).tolist(), float(ep.yaw[s + 1] - ep.yaw[s])]
                real_proprio = (np.asarray(proprio) + proprio_rng.normal(0.0, 5e-4, len(proprio))).tolist()
                real_action = list(action)
                if inject == "joint_units":
                    real_proprio[3] = math.degrees(real_proprio[3])
                    real_proprio[4] = math.degrees(real_proprio[4])
                    real_action[3] = math.degrees(real_action[3])
                base = {"pair_key": key, "episode": f"ep{e}", "step": s}
                rows.append({"set": SIM_SET, "domain": "sim", "rgb": sim_rel, **base,
                             "depth": f"depth/sim/{key}.npy", "depth_unit": "m",
                             "action": [round(v, 6) for v in action], "proprio": [round(v, 6) for v in proprio]})
                real_row = {"set": REAL_SET, "domain": "real", "rgb": real_rel, **base,
                            "depth": f"depth/real/{key}.png", "depth_unit": "m" if inject == "depth_scale" else "mm",
                            "action": [round(v, 6) for v in real_action],
                            "proprio": [round(v, 6) for v in real_proprio]}
                rows.append(real_row)
    finally:
        for c in cams.values():
            c.close()

    manifest = root / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cats_path = root / "mask_categories.json"
    cats_path.write_text(json.dumps({str(i + 1): o[0] for i, o in enumerate(OBJECTS)}, indent=1), encoding="utf-8")
    paths = {"sim_coco": root / "coco/sim_colour.json", "real_coco": root / "coco/real_colour.json",
             "real_gt_coco": root / "coco/real_gt.json"}
    paths["sim_coco"].write_text(json.dumps(_coco(coco_sim, "det")), encoding="utf-8")
    paths["real_coco"].write_text(json.dumps(_coco(coco_real, "det")), encoding="utf-8")
    paths["real_gt_coco"].write_text(json.dumps(_coco(gt_real, "gt")), encoding="utf-8")
    return DemoFiles(root=root, manifest=manifest, sim_masks=dirs["masks/sim"], mask_categories=cats_path,
                     inject=inject, n_frames=n_episodes * steps, **paths)
