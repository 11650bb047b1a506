"""Small synthetic inputs for every command: the Python API's examples, and a first try without data.

`write_examples(folder)` writes a few kilobytes: a paired sim/real frame set whose real camera
stores BGR (so `stats` names `channel_swap`), a manifest of it, COCO boxes and instance masks,
a video and a robomimic HDF5 file of the same frames, and one small table or JSON file for each
check (rollouts, rank fidelity, latency, replay, reprojection, initial states).
`example_catalog(folder)` also indexes the two frame sets into a catalog; `example_policy` is a
frozen policy for `policy_check`. Nothing here needs MuJoCo (the built-in MuJoCo demo is
`perception_gap.demo`), a model's weights or the network.

Called without a folder, both write into a new temporary folder (a catalog's is about 3 MB) that
is removed when the Python process that made it exits: the docstring examples call them freely
and leave nothing behind.
"""

from __future__ import annotations

import atexit
import csv
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

SIM_SET, REAL_SET = "sim", "real"
HEIGHT, WIDTH = 24, 32

# (pid, folder) of each temporary folder made here: a forked child that inherits the list leaves
# its parent's folders alone
_TEMP_FOLDERS: list[tuple[int, Path]] = []


def _temp_folder() -> Path:
    root = Path(tempfile.mkdtemp(prefix="perception-gap-examples-"))
    _TEMP_FOLDERS.append((os.getpid(), root))
    return root


@atexit.register
def _remove_temp_folders() -> None:
    pid = os.getpid()
    for owner, root in _TEMP_FOLDERS:
        if owner == pid:
            shutil.rmtree(root, ignore_errors=True)
    _TEMP_FOLDERS[:] = [(owner, root) for owner, root in _TEMP_FOLDERS if owner != pid]


def example_frame(i: int) -> np.ndarray:
    """(HEIGHT, WIDTH, 3) uint8 RGB: colour gradients, a moving stripe and a box that shifts with `i`."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    img = np.stack([50 + 150 * x / WIDTH, 80 + 100 * y / HEIGHT, 70 + 40 * np.sin((x + 3 * i) / 4)], axis=-1)
    img[6:14, 4 + i:12 + i] = (220, 40, 40)  # a red box: what the example boxes and masks mark
    return np.clip(img, 0, 255).round().astype(np.uint8)


@dataclass(frozen=True)
class ExampleFiles:
    """The paths `write_examples` wrote (see the module docstring)."""

    root: Path
    sim: Path
    real: Path
    manifest: Path
    coco: Path
    masks: Path
    mask_categories: Path
    video: Path
    hdf5: Path
    rollouts: Path
    rates: Path
    ticks: Path
    poses: Path
    cameras: Path
    states: Path


def _table(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _frames(root: Path, n: int) -> tuple[Path, Path, list[np.ndarray]]:
    frames = [example_frame(i) for i in range(n)]
    sim, real, masks = root / "sim", root / "real", root / "masks"
    for d in (sim, real, masks):
        d.mkdir(parents=True, exist_ok=True)
    for i, rgb in enumerate(frames):
        Image.fromarray(rgb).save(sim / f"f{i:02d}.png")
        Image.fromarray(np.ascontiguousarray(rgb[..., ::-1])).save(real / f"f{i:02d}.png")  # the real camera: BGR
        mask = np.zeros((HEIGHT, WIDTH), np.uint8)
        mask[6:14, 4 + i:12 + i] = 1
        Image.fromarray(mask).save(masks / f"f{i:02d}.png")
    return sim, real, frames


def _boxes(root: Path, n: int) -> tuple[Path, Path]:
    coco = {"images": [{"id": i + 1, "file_name": f"f{i:02d}.png", "width": WIDTH, "height": HEIGHT} for i in range(n)],
            "annotations": [{"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [4 + i, 6, 8, 8], "score": 0.9}
                            for i in range(n)],
            "categories": [{"id": 1, "name": "box"}]}
    (root / "coco.json").write_text(json.dumps(coco), encoding="utf-8")
    (root / "mask_categories.json").write_text(json.dumps({"1": "box"}), encoding="utf-8")
    return root / "coco.json", root / "mask_categories.json"


def write_video(path: Path, frames: list[np.ndarray], *, codec: str = "mpeg4", pix_fmt: str = "yuv420p",
                options: dict[str, str] | None = None, fps: int = 10) -> Path:
    """Encode (H, W, 3) uint8 RGB frames with PyAV (`codec` an FFmpeg encoder name)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=fps)
        s.width, s.height, s.pix_fmt = frames[0].shape[1], frames[0].shape[0], pix_fmt
        if options:
            s.options = options
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def _hdf5(path: Path, frames: list[np.ndarray]) -> Path:
    import h5py

    with h5py.File(path, "w") as f:
        g = f.create_group("data/demo_0")
        g.create_dataset("obs/agentview_image", data=np.stack(frames))
        g.create_dataset("obs/eef_pos", data=np.linspace(0, 1, 3 * len(frames)).reshape(len(frames), 3))
        g.create_dataset("actions", data=np.linspace(-1, 1, 7 * len(frames)).reshape(len(frames), 7))
    return path


def _checks(root: Path) -> dict[str, Path]:
    """One input of each check: small, with an answer worth reading."""
    rollouts = [{"policy": "p", "task": "pick", "domain": d, "success": int(k < s)}
                for d, s in (("sim", 18), ("real", 9)) for k in range(20)]
    rates = [{"policy": p, "task": "pick", "sim": s, "real": r}
             for p, s, r in (("ckpt1", 0.9, 0.6), ("ckpt2", 0.7, 0.5), ("ckpt3", 0.5, 0.4), ("ckpt4", 0.3, 0.35))]
    ticks = [{"tick": t, "capture": 0.05 * t, "inferred": 0.05 * t + 0.02 + 0.001 * (t % 3),
              "actuated": 0.05 * t + 0.03 + 0.001 * (t % 5)} for t in range(40)]
    poses = [{"episode": "e0", "step": s, "domain": d, "x": 0.3 + 0.01 * s + (0.008 if d == "real" else 0.0),
              "y": 0.0, "z": 0.2, "qw": 1.0, "qx": 0.0, "qy": 0.0, "qz": 0.0} for s in range(12) for d in ("sim", "real")]
    states = [{"x": 0.3 + 0.05 * (k % 5), "y": -0.1 + 0.05 * (k // 5), "z": 0.05, "success": int(k % 3 != 0)}
              for k in range(20)]
    def camera(cx: float) -> dict:  # 1 m above the workspace, looking down
        return {"width": 64, "height": 48, "K": [[150.0, 0, cx], [0, 150.0, 24.0], [0, 0, 1]],
                "T_base_cam": [[1, 0, 0, 0.4], [0, -1, 0, 0.0], [0, 0, -1, 1.0], [0, 0, 0, 1]]}

    cameras = {"sim": camera(32.0), "real": camera(33.5),  # the real principal point 1.5 px off
               "grid": {"min": [0.3, -0.1, 0.0], "max": [0.5, 0.1, 0.1], "step": 0.05}}
    (root / "cameras.json").write_text(json.dumps(cameras), encoding="utf-8")
    return {"rollouts": _table(root / "rollouts.csv", rollouts), "rates": _table(root / "rates.csv", rates),
            "ticks": _table(root / "ticks.csv", ticks), "poses": _table(root / "poses.csv", poses),
            "cameras": root / "cameras.json", "states": _table(root / "states.csv", states)}


def write_examples(folder: str | Path | None = None, *, n: int = 8) -> ExampleFiles:
    """Write every example input into `folder` (created if needed); see the module docstring.

    Args:
        folder: where to write; None: a new temporary folder, removed when this process exits.
        n: frames per set, 2 to 16.

    Returns:
        The paths written.
    """
    if not 2 <= n <= 16:
        raise ValueError(f"Expected `n` in [2, 16], got {n}.")
    root = _temp_folder() if folder is None else Path(folder)
    sim, real, frames = _frames(root, n)
    manifest = _table(root / "manifest.csv", [{"set": name, "domain": name, "rgb": f"{name}/f{i:02d}.png",
                                               "pair_key": f"f{i:02d}", "proprio": json.dumps([i / n, 1 - i / n])}
                                              for name in (SIM_SET, REAL_SET) for i in range(n)])
    coco, categories = _boxes(root, n)
    return ExampleFiles(root, sim, real, manifest, coco, root / "masks", categories, write_video(root / "sim.mp4", frames),
                        _hdf5(root / "sim.hdf5", frames), **_checks(root))


def example_catalog(folder: str | Path | None = None, *, n: int = 8) -> Path:
    """Write the examples into `folder` (None: a new temporary one, removed when this process exits)
    and index them into `gap.duckdb` there.

    Returns:
        The catalog file, holding sets `sim` and `real` (`n` paired frames each, with proprio);
        the other example inputs lie beside it.
    """
    from perception_gap.catalog import Catalog
    from perception_gap.ingest import index_manifest

    files = write_examples(folder, n=n)
    db = files.root / "gap.duckdb"
    with Catalog(db) as cat:
        index_manifest(cat, files.manifest, workers=1)
    return db


def example_policy(images: np.ndarray, proprio: np.ndarray) -> np.ndarray:
    """A frozen policy: (N, 3, H, W) images and (N, D) proprio -> (N, 3) actions, each channel's mean."""
    return images.mean(axis=(2, 3))
