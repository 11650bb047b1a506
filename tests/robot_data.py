"""Writers of tiny robot datasets for tests and benchmarks: videos (PyAV) and LeRobot v2.1 / v3.0.

Written from the LeRobot format's files as the `lerobot` package lays them out (meta/info.json
with `data_path`/`video_path` templates and `features`; v2.1 meta/episodes.jsonl and one
Parquet + one mp4 per episode; v3.0 meta/episodes/chunk-000/file-000.parquet with per-episode
file indices and `from_timestamp`, many episodes per data and video file).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from perception_gap import examples

FPS = 10
# codec name -> (pixel format, options): lossy yuv420p as datasets ship, and a lossless RGB H.264
CODECS = {
    "av1": ("libsvtav1", "yuv420p", {}),
    "h264": ("libx264", "yuv420p", {}),
    "h264-lossless": ("libx264rgb", "rgb24", {"qp": "0"}),
}


def smooth_frames(n: int, h: int = 48, w: int = 64, seed: int = 0) -> list[np.ndarray]:
    """n smooth RGB uint8 frames (gradients that move): lossy codecs keep them within a grey level or two."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    out = []
    for i in range(n):
        a, b, c = rng.uniform(0.5, 1.5, 3)
        img = np.stack([60 + 120 * (x / w) * a + 4 * i, 50 + 140 * (y / h) * b, 90 + 60 * np.sin((x + y + 3 * i) / 15) * c], -1)
        out.append(np.clip(img, 0, 255).round().astype(np.uint8))
    return out


def write_video(path: Path, frames: list[np.ndarray], codec: str = "h264", fps: int = FPS) -> Path:
    """Encode RGB frames with PyAV (`codec` a key of CODECS)."""
    name, pix_fmt, options = CODECS[codec]
    return examples.write_video(path, frames, codec=name, pix_fmt=pix_fmt, options=options, fps=fps)


def png_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, format="PNG")
    return buf.getvalue()


def _info(version: str, camera: str, dtype: str, h: int, w: int, n_eps: int, n_frames: int) -> dict:
    if version == "v2.1":
        data_path = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
        video_path = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
    else:
        data_path = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
        video_path = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    return {
        "codebase_version": version, "robot_type": "test", "total_episodes": n_eps, "total_frames": n_frames,
        "chunks_size": 1000, "fps": FPS, "splits": {"train": f"0:{n_eps}"},
        "data_path": data_path, "video_path": video_path if dtype == "video" else None,
        "features": {
            camera: {"dtype": dtype, "shape": [h, w, 3], "names": ["height", "width", "channels"]},
            "observation.state": {"dtype": "float32", "shape": [2], "names": ["j0", "j1"]},
            "action": {"dtype": "float32", "shape": [2], "names": ["j0", "j1"]},
            "timestamp": {"dtype": "float32", "shape": [1]}, "frame_index": {"dtype": "int64", "shape": [1]},
            "episode_index": {"dtype": "int64", "shape": [1]}, "index": {"dtype": "int64", "shape": [1]},
        },
    }


def _rows(ep: int, n: int, start: int) -> dict[str, list]:
    return {"episode_index": [ep] * n, "frame_index": list(range(n)), "timestamp": [i / FPS for i in range(n)],
            "index": list(range(start, start + n)),
            "observation.state": [[ep + 0.1 * i, -0.05 * i] for i in range(n)],
            "action": [[0.2 * i, ep - 0.01 * i] for i in range(n)]}


def write_lerobot(root: Path, episodes: list[list[np.ndarray]], *, version: str = "v2.1",
                  camera: str = "observation.images.top", dtype: str = "video", codec: str = "h264") -> Path:
    """A LeRobot dataset of the given episodes (lists of RGB frames) in layout v2.1 or v3.0.

    dtype `video` encodes each episode's frames (v2.1: one mp4 per episode; v3.0: all episodes
    in one mp4, one after the other); dtype `image` stores PNG cells in the data Parquet files.
    """
    h, w = episodes[0][0].shape[:2]
    n_total = sum(map(len, episodes))
    (root / "meta").mkdir(parents=True, exist_ok=True)
    (root / "meta" / "info.json").write_text(json.dumps(_info(version, camera, dtype, h, w, len(episodes), n_total)))
    start, all_rows, ep_meta = 0, [], []
    for ep, frames in enumerate(episodes):
        rows = _rows(ep, len(frames), start)
        if dtype == "image":
            rows[camera] = [{"bytes": png_bytes(f), "path": f"frame_{i:06d}.png"} for i, f in enumerate(frames)]
        if version == "v2.1":
            path = root / f"data/chunk-000/episode_{ep:06d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table(rows), path)
            if dtype == "video":
                write_video(root / f"videos/chunk-000/{camera}/episode_{ep:06d}.mp4", frames, codec)
        all_rows.append(rows)
        ep_meta.append({"episode_index": ep, "length": len(frames), "from": start / FPS, "to": (start + len(frames)) / FPS})
        start += len(frames)
    if version == "v2.1":
        (root / "meta" / "episodes.jsonl").write_text(
            "".join(json.dumps({"episode_index": e["episode_index"], "tasks": ["t"], "length": e["length"]}) + "\n" for e in ep_meta))
        return root
    merged = {k: [v for r in all_rows for v in r[k]] for k in all_rows[0]}
    path = root / "data/chunk-000/file-000.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(merged), path)
    if dtype == "video":
        write_video(root / f"videos/{camera}/chunk-000/file-000.mp4", [f for fr in episodes for f in fr], codec)
    v = f"videos/{camera}/"
    meta = {"episode_index": [e["episode_index"] for e in ep_meta], "length": [e["length"] for e in ep_meta],
            "data/chunk_index": [0] * len(ep_meta), "data/file_index": [0] * len(ep_meta),
            "dataset_from_index": [int(e["from"] * FPS) for e in ep_meta],
            "dataset_to_index": [int(e["to"] * FPS) for e in ep_meta]}
    if dtype == "video":
        meta.update({v + "chunk_index": [0] * len(ep_meta), v + "file_index": [0] * len(ep_meta),
                     v + "from_timestamp": [e["from"] for e in ep_meta], v + "to_timestamp": [e["to"] for e in ep_meta]})
    path = root / "meta/episodes/chunk-000/file-000.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(meta), path)
    return root
