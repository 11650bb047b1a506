"""Building the demo: rendering both sides, the plumbing-fault injections, and the DemoFiles manifest."""

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

from perception_gap.demo.camera import (
    REAL_BLUR_SIGMA,
    REAL_DEPTH_DROPOUT,
    REAL_EXPOSURE_STOPS,
    REAL_WB_GAINS,
    camera_model,
    encode_jpeg,
    real_depth_mm,
)
from perception_gap.demo.detector import coco_json, colour_detect, mask_boxes
from perception_gap.demo.scene import OBJECTS, Cam, episode, scene_xml, set_state

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

# The scripted expert's pre-grasp point: this far above the red cube's centre (metres).
PREGRASP_HEIGHT_M = 0.10

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



def _downscale(a: np.ndarray, size: tuple[int, int], nearest: bool) -> np.ndarray:
    im = Image.fromarray(a)
    return np.asarray(im.resize(size, Image.NEAREST if nearest else Image.LANCZOS))


def expert_action(grip: np.ndarray, yaw: float, red_cube: np.ndarray) -> list[float]:
    """The scripted expert's command at a state: reach for the red cube, square the gripper.

    The gripper's offset (x, y, z, metres) to the pre-grasp point `PREGRASP_HEIGHT_M` above the
    red cube's centre, and the yaw change (radians) that brings the gripper back to yaw 0. The
    gripper follows its own random path; the expert labels every state it visits (as DAgger
    relabels states), so each action is a function of what that one frame shows (where the
    gripper and the cube are, how the gripper is turned) and a frozen-encoder probe can read it.

    Args:
        grip: (3,) gripper position, metres.
        yaw: gripper yaw, radians.
        red_cube: (3,) red cube centre, metres.

    Returns:
        [dx, dy, dz, dyaw].
    """
    target = np.asarray(red_cube, dtype=np.float64) + np.array([0.0, 0.0, PREGRASP_HEIGHT_M])
    return [*(target - np.asarray(grip, dtype=np.float64)).tolist(), -float(yaw)]


def _obs(rgb: np.ndarray, mean_std: tuple[tuple[float, ...], tuple[float, ...]] | None, scale: float) -> np.ndarray:
    x = rgb.astype(np.float32) / 255.0 * scale
    if mean_std is not None:
        x = (rgb.astype(np.float32) / 255.0 - np.asarray(mean_std[0], np.float32)) / np.asarray(mean_std[1], np.float32)
    return np.ascontiguousarray(x, dtype=np.float32)


def build_demo(out_dir: Path, *, inject: str | None = None, n_episodes: int = 24, steps: int = 4,
               size: tuple[int, int] = (160, 120), seed: int = 0, isolate: bool = True) -> DemoFiles:
    """Render the paired demo into `out_dir` (created; existing files are overwritten).

    Rendering runs in a spawned child process by default (`isolate=True`): software OpenGL
    (Mesa llvmpipe, behind MUJOCO_GL=egl/osmesa) loads its own LLVM, and a process that later
    loads another LLVM (triton, imported by torch when an encoder runs) segfaults. The child
    keeps the GL libraries out of the caller's process; `isolate=False` renders in-process.

    Args:
        out_dir: output folder.
        inject: a plumbing code of docs/contract.md (see `INJECTIONS`), or None for the clean demo.
        n_episodes, steps: episodes and steps per episode (frames per side = their product). The
            default 24 x 4 (96 frames) gives the held-out probes enough episodes that a ridge
            trained on the others meets a new one inside the range it has seen: every encoder's
            sim->sim probe of the expert action is then above 0 (at 12 x 4 none of the
            EfficientNets' is).
        size: (width, height) of the sim frames.
        seed: trajectories and the camera model's noise are deterministic given it.

    Returns:
        DemoFiles with every path to index.

    Raises:
        ValueError: an unknown `inject` code or bad sizes.
        RuntimeError: MuJoCo cannot render here (no OpenGL backend), or the child process died.
        MissingExtraError: MuJoCo is not installed (the `demo` extra).
    """
    if inject is not None and inject not in INJECTIONS:
        raise ValueError(f"Expected `inject` in {sorted(INJECTIONS)} or None, got {inject!r}.")
    kwargs = {"inject": inject, "n_episodes": int(n_episodes), "steps": int(steps),
              "size": [int(size[0]), int(size[1])], "seed": int(seed)}
    if not isolate:
        return _build(Path(out_dir), **{**kwargs, "size": tuple(kwargs["size"])})
    import subprocess
    import sys

    code = ("import json, sys; from pathlib import Path; from perception_gap.demo.build import _build, _to_json; "
            "a = json.loads(sys.argv[1]); "
            "print(_to_json(_build(Path(a.pop('out_dir')), **a)))")
    arg = json.dumps({"out_dir": str(Path(out_dir).resolve()), **kwargs})
    pkg_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit code {proc.returncode}"
        if last.startswith("ValueError: "):
            raise ValueError(last[len("ValueError: "):])
        if last.startswith("ModuleNotFoundError: ") and "mujoco" in last:
            from perception_gap.extras import MissingExtraError, missing_message

            raise MissingExtraError(missing_message("the demo", "demo"))
        raise RuntimeError(f"MuJoCo demo rendering failed in its child process: {last}")
    return _from_json(proc.stdout.strip().splitlines()[-1])


def _to_json(files: DemoFiles) -> str:
    return json.dumps({k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(files).items()})


def _from_json(text: str) -> DemoFiles:
    raw = json.loads(text)
    paths = {"root", "manifest", "sim_masks", "mask_categories", "sim_coco", "real_coco", "real_gt_coco"}
    return DemoFiles(**{k: (Path(v) if k in paths else v) for k, v in raw.items()})


def _write_rgb(root: Path, key: str, inject: str | None, sim_rgb: np.ndarray, real_rgb: np.ndarray,
               real_seen: np.ndarray, jpeg: bytes) -> tuple[str, str]:
    """Write one pair's RGB (PNG and the camera's JPEG, or the observation arrays of the `value_range`
    and `normalization` faults); (sim path, real path) relative to `root`."""
    if inject in ("value_range", "normalization"):
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
            (root / real_rel).write_bytes(encode_jpeg(np.ascontiguousarray(real_rgb[..., ::-1])))
        else:
            (root / real_rel).write_bytes(jpeg)
    return sim_rel, real_rel


def _state_rows(key: str, e: int, s: int, ep: Any, proprio_rng: np.random.Generator, inject: str | None,
                sim_rel: str, real_rel: str) -> list[dict[str, Any]]:
    """The manifest rows of one pair: the state's proprioception and expert action, the real side's
    with its sensor noise (and, for `joint_units`, its angles in degrees)."""
    yaw, pitch = float(ep.yaw[s]), float(ep.pitch[s])
    proprio = [*ep.grip[s].tolist(), yaw, pitch, *ep.objs[s].reshape(-1).tolist()]
    action = expert_action(ep.grip[s], yaw, ep.objs[s, 0])
    real_proprio = (np.asarray(proprio) + proprio_rng.normal(0.0, 5e-4, len(proprio))).tolist()
    real_action = list(action)
    if inject == "joint_units":
        real_proprio[3] = math.degrees(real_proprio[3])
        real_proprio[4] = math.degrees(real_proprio[4])
        real_action[3] = math.degrees(real_action[3])
    base = {"pair_key": key, "episode": f"ep{e}", "step": s}
    sim_row = {"set": SIM_SET, "domain": "sim", "rgb": sim_rel, **base,
               "depth": f"depth/sim/{key}.npy", "depth_unit": "m",
               "action": [round(v, 6) for v in action], "proprio": [round(v, 6) for v in proprio]}
    real_row = {"set": REAL_SET, "domain": "real", "rgb": real_rel, **base,
                "depth": f"depth/real/{key}.png", "depth_unit": "m" if inject == "depth_scale" else "mm",
                "action": [round(v, 6) for v in real_action],
                "proprio": [round(v, 6) for v in real_proprio]}
    return [sim_row, real_row]


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

    model = mujoco.MjModel.from_xml_string(scene_xml())
    data = mujoco.MjData(model)
    lut = {model.geom(o[0]).id: i + 1 for i, o in enumerate(OBJECTS)}
    # Every view renders its RGB at 2x and downscales it with an antialiasing filter
    # (supersampling: the renderer's own texture sampling aliases at the target size); depth and
    # instance ids render at the target size.
    real_size = (int(round(w * 1.25)), int(round(w * 1.25 * 9 / 16))) if inject == "resolution" else (w, h)
    cams = {"sim_hi": Cam(model, 2 * w, 2 * h, lut), "sim_lo": Cam(model, w, h, lut)}
    if real_size != (w, h):
        cams["real_hi"] = Cam(model, 2 * real_size[0], 2 * real_size[1], lut)
        cams["real_lo"] = Cam(model, *real_size, lut)

    traj_rng = np.random.default_rng([seed, 0])
    cam_rng = np.random.default_rng([seed, 1])
    proprio_rng = np.random.default_rng([seed, 2])
    exposure = REAL_EXPOSURE_STOPS + (-1.5 if inject == "brightness" else 0.0)
    wb = (1.45, 1.0, 0.70) if inject == "white_balance" else REAL_WB_GAINS
    dropout = 0.40 if inject == "depth_dropout" else REAL_DEPTH_DROPOUT

    rows: list[dict[str, Any]] = []
    coco_sim, coco_real, gt_real = [], [], []
    try:
        for e in range(n_episodes):
            ep = episode(traj_rng, steps)
            for s in range(steps):
                key = f"ep{e}_{s:03d}"
                set_state(model, data, ep, s)
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
                jpeg = encode_jpeg(real_rgb)
                real_seen = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGB"))
                sim_rel, real_rel = _write_rgb(root, key, inject, sim_rgb, real_rgb, real_seen, jpeg)
                # ---- depth and masks
                np.save(root / f"depth/sim/{key}.npy", depth_s.astype(np.float32))
                depth_mm = real_depth_mm(r_depth, r_ids, cam_rng, dropout)
                Image.fromarray(depth_mm).save(root / f"depth/real/{key}.png")
                Image.fromarray(ids).save(root / f"masks/sim/{key}.png")
                # ---- detector and ground truth
                rw, rh = real_seen.shape[1], real_seen.shape[0]
                coco_sim.append((sim_rel, w, h, colour_detect(sim_rgb)))
                seen = real_seen[..., ::-1] if inject == "channel_swap" else real_seen
                coco_real.append((real_rel, rw, rh, colour_detect(seen)))
                gt_real.append((real_rel, rw, rh, mask_boxes(r_ids)))
                rows += _state_rows(key, e, s, ep, proprio_rng, inject, sim_rel, real_rel)
    finally:
        for c in cams.values():
            c.close()

    manifest = root / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cats_path = root / "mask_categories.json"
    cats_path.write_text(json.dumps({str(i + 1): o[0] for i, o in enumerate(OBJECTS)}, indent=1), encoding="utf-8")
    paths = {"sim_coco": root / "coco/sim_colour.json", "real_coco": root / "coco/real_colour.json",
             "real_gt_coco": root / "coco/real_gt.json"}
    paths["sim_coco"].write_text(json.dumps(coco_json(coco_sim, "det")), encoding="utf-8")
    paths["real_coco"].write_text(json.dumps(coco_json(coco_real, "det")), encoding="utf-8")
    paths["real_gt_coco"].write_text(json.dumps(coco_json(gt_real, "gt")), encoding="utf-8")
    return DemoFiles(root=root, manifest=manifest, sim_masks=dirs["masks/sim"], mask_categories=cats_path,
                     inject=inject, n_frames=n_episodes * steps, **paths)
