"""Frames, faults and CLI runs shared by tests/test_diagnoses_spatial.py and test_diagnoses_control.py.

Real frames (PASCAL VOC JPEGs from `../shared/data`) resized small; each fault is a small pure
function of a uint8 RGB frame; `run_folders` / `run_manifest` write the frames into a temporary
folder, index them and return `stats --json`'s results through `cli.main`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image
from scipy.ndimage import uniform_filter1d

from perception_gap import cli

W, H = 160, 120
N_FRAMES = 32
VOC = ("detection_voc100", "images")


def voc_sources(shared_data: Path, n: int = N_FRAMES) -> list[Path]:
    return sorted(shared_data.joinpath(*VOC).glob("*.jpg"))[:n]


def load_frames(paths: list[Path], size: tuple[int, int] = (W, H)) -> list[np.ndarray]:
    """uint8 RGB frames (H x W x 3) resized to `size` (w, h)."""
    return [np.asarray(Image.open(p).convert("RGB").resize(size, Image.LANCZOS)) for p in paths]


# --- faults (uint8 RGB in, uint8 RGB out) ---------------------------------------------------------

def to_linear(a: np.ndarray) -> np.ndarray:
    """uint8 sRGB -> linear light in [0, 1] (IEC 61966-2-1)."""
    v = a.astype(np.float64) / 255.0
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def to_srgb8(lin: np.ndarray) -> np.ndarray:
    """Linear light in [0, 1] -> uint8 sRGB."""
    v = np.clip(lin, 0.0, 1.0)
    e = np.where(v <= 0.0031308, v * 12.92, 1.055 * v ** (1 / 2.4) - 0.055)
    return np.round(e * 255.0).astype(np.uint8)


def expose(a: np.ndarray, stops: float) -> np.ndarray:
    """An exposure change: linear light times 2**stops (clipped)."""
    return to_srgb8(to_linear(a) * 2.0 ** stops)


def missing_encode(a: np.ndarray) -> np.ndarray:
    """A renderer that stores linear light as 8-bit (the sRGB encode missing)."""
    return np.round(to_linear(a) * 255.0).astype(np.uint8)


def double_encode(a: np.ndarray) -> np.ndarray:
    """The sRGB encode applied twice (encoded values encoded again as if they were linear light)."""
    return to_srgb8(a.astype(np.float64) / 255.0)


def vignette(a: np.ndarray, strength: float = 0.5) -> np.ndarray:
    """Linear light times 1 - strength * r^2 (r = 1 at the corners): corners `strength` darker."""
    h, w = a.shape[:2]
    y, x = np.mgrid[0:h, 0:w]
    r2 = (((y - (h - 1) / 2) / ((h - 1) / 2)) ** 2 + ((x - (w - 1) / 2) / ((w - 1) / 2)) ** 2) / 2
    return to_srgb8(to_linear(a) * (1.0 - strength * r2)[..., None])


def zoom(a: np.ndarray, factor: float) -> np.ndarray:
    """The centre 1/factor of the frame resized back to full size: a `factor` times longer focal length."""
    h, w = a.shape[:2]
    ch, cw = round(h / factor), round(w / factor)
    top, left = (h - ch) // 2, (w - cw) // 2
    return np.asarray(Image.fromarray(a[top:top + ch, left:left + cw]).resize((w, h), Image.BICUBIC))


def motion_blur(a: np.ndarray, length: int, axis: int) -> np.ndarray:
    """A box blur of `length` pixels along `axis` (1: horizontal, 0: vertical)."""
    out = uniform_filter1d(a.astype(np.float64), size=length, axis=axis, mode="reflect")
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def readout_noise(a: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    """Gaussian sensor noise of `sigma` 8-bit levels, rounded and clipped (a camera adds it at readout,
    after any blur of the exposure)."""
    noisy = a.astype(np.float64) + np.random.default_rng(seed).normal(0.0, sigma, a.shape)
    return np.clip(np.round(noisy), 0, 255).astype(np.uint8)


def grey16(a: np.ndarray) -> np.ndarray:
    """The frame's luma as a 1-channel 16-bit image (a depth or IR topic's format)."""
    return np.asarray(Image.fromarray(a).convert("L"), dtype=np.uint16) * 257


# --- splits ------------------------------------------------------------------------------------------

def paired(frames: list[np.ndarray], sim_fn=None, real_fn=None, n: int = 10):
    """(sim, real) frames by pair key: the same `n` views a side, `sim_fn` / `real_fn` applied."""
    sim = {f"f{i:03d}": (sim_fn(a) if sim_fn else a) for i, a in enumerate(frames[:n])}
    real = {f"f{i:03d}": (real_fn(a) if real_fn else a) for i, a in enumerate(frames[:n])}
    return sim, real


def unpaired(frames: list[np.ndarray], sim_fn=None, real_fn=None, n: int = 16):
    """(sim, real) frames of different views (frames[:n] and frames[n:2n]), no shared pair key."""
    sim = {f"s{i:03d}": (sim_fn(a) if sim_fn else a) for i, a in enumerate(frames[:n])}
    real = {f"r{i:03d}": (real_fn(a) if real_fn else a) for i, a in enumerate(frames[n:2 * n])}
    return sim, real


# --- writing and running -----------------------------------------------------------------------------

def save_png(path: Path, a: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(a).save(path, compress_level=1)
    return path


def write_set(folder: Path, frames: dict[str, np.ndarray], ext: str = ".png") -> Path:
    """Frames by pair key (a relative path without extension) into `folder`; `.webp` is lossless."""
    for key, a in frames.items():
        path = folder / f"{key}{ext}"
        if ext == ".webp":
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(a).save(path, lossless=True)
        else:
            save_png(path, a)
    return folder


def index(db: Path, *args: str) -> None:
    rc = cli.main(["index", *args, "--db", str(db), "--quiet", "--workers", "1"])
    assert rc == 0, f"index {args} exited {rc}"


def stats(tmp: Path, sim: str = "s", real: str = "r") -> dict:
    out = tmp / "results.json"
    rc = cli.main(["stats", "--sim", sim, "--real", real, "--db", str(tmp / "c.duckdb"), "--quiet",
                   "--workers", "1", "--json", str(out)])
    assert rc == 0, f"stats exited {rc}"
    return json.loads(out.read_text(encoding="utf-8"))


def run_folders(tmp: Path, sim: dict[str, np.ndarray], real: dict[str, np.ndarray], *, sim_ext: str = ".png",
                real_ext: str = ".png", extra: tuple[str, ...] = ()) -> dict:
    """Index `sim` and `real` (frames by pair key) as two folder sets; returns results.json."""
    db = tmp / "c.duckdb"
    index(db, str(write_set(tmp / "sim", sim, sim_ext)), "--set", "s", "--domain", "sim", *extra)
    index(db, str(write_set(tmp / "real", real, real_ext)), "--set", "r", "--domain", "real", *extra)
    return stats(tmp)


def run_manifest(tmp: Path, rows: list[dict]) -> dict:
    """Index a JSONL manifest of `rows` (sets `s` and `r`); returns results.json."""
    manifest = tmp / "frames.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    index(tmp / "c.duckdb", "--manifest", str(manifest))
    return stats(tmp)


# --- reading results ---------------------------------------------------------------------------------

def codes(res: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["severity"]) for f in res["findings"]]


def named(res: dict) -> set[str]:
    return {f["code"] for f in res["findings"]}


def first(res: dict, code: str, severity: str) -> dict:
    """The first finding, checked to be `code` with `severity`; returns its evidence."""
    assert res["findings"], f"nothing named; expected {code}"
    f = res["findings"][0]
    assert (f["code"], f["severity"]) == (code, severity), codes(res)
    return f["evidence"]


def assert_quiet(res: dict) -> None:
    """No bug and no gap (an info may remain)."""
    loud = [c for c in codes(res) if c[1] in ("bug", "gap")]
    assert not loud, loud
