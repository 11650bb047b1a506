"""Fault-injection cases for bench/bench_truth.py: real camera frames, one injected fault each.

A *camera* is a group of real frames from one source folder at one resolution (`discover_cameras`).
A *fault family* (`FAULTS`) says which finding code it must produce, at which magnitudes, and how
it turns the clean frames of a side into faulted ones. A case writes a sim and a real side into a
folder (`write_side`): PNG for 8-bit frames, `.npy` for float observations, JPEG where the fault
is the compression, depth under `depth/`, proprioception through a JSONL manifest.

The fault arithmetic comes from tests/faults.py (imported, not copied); only what it lacks is here
(a Gaussian blur by sigma, 4:2:0 chroma subsampling, holes added on top of a sensor's own dropout).
Every function takes its randomness as a `numpy.random.Generator`.
"""

from __future__ import annotations

import json
import shutil
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import faults as F  # tests/faults.py; bench_truth.py puts tests/ on sys.path
import numpy as np
from PIL import Image, ImageOps
from scipy.ndimage import gaussian_filter

MIN_FRAMES = 5  # a camera needs at least this many frames (2 and 3 a side when split)


# --- cameras ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Camera:
    """Real frames of one source folder at one resolution.

    Attributes:
        name: `<source>_<width>x<height>`, e.g. `simpler_320x256`.
        source: the folder below the data root.
        rgb_paths: the frame files, sorted.
        depth_paths: the matching depth files (same order), or None.
        depth_unit: units of the depth files as stored: `mm` (uint16 PNG) or `m` (EXR).
    """

    name: str
    source: str
    rgb_paths: tuple[Path, ...]
    depth_paths: tuple[Path, ...] | None = None
    depth_unit: str | None = None


def _oriented_size(path: Path) -> tuple[int, int]:
    with Image.open(path) as im:
        w, h = im.size
        return (h, w) if im.getexif().get(0x0112, 1) in (5, 6, 7, 8) else (w, h)


def _group(source: str, paths: list[Path], depth: dict[Path, Path] | None = None,
           unit: str | None = None) -> list[Camera]:
    by_size: dict[tuple[int, int], list[Path]] = {}
    for p in sorted(paths):
        by_size.setdefault(_oriented_size(p), []).append(p)
    cams = []
    for (w, h), ps in sorted(by_size.items()):
        if len(ps) < MIN_FRAMES:
            continue
        dps = tuple(depth[p] for p in ps) if depth and all(p in depth for p in ps) else None
        cams.append(Camera(f"{source.split('/')[0]}_{w}x{h}", source, tuple(ps), dps, unit if dps else None))
    return cams


def _exr_readable() -> bool:
    try:
        import OpenEXR  # noqa: F401
    except ImportError:
        return False
    return True


def discover_cameras(root: Path) -> tuple[list[Camera], list[str]]:
    """The cameras under the data root, and one note per source that is absent or skipped."""
    cams: list[Camera] = []
    notes: list[str] = []
    sr = root / "simpler" / "real"
    if sr.is_dir():  # robot cameras; masks, a debug overlay and brightness-edited copies are not frames
        ps = [p for p in sr.rglob("*.png") if not any(t in p.stem for t in ("mask", "debug", "_darker", "_brighter"))]
        cams += _group("simpler/real", ps)
    else:
        notes.append(f"{sr} absent")
    col, dep = root / "rgbd" / "color", root / "rgbd" / "depth"
    if col.is_dir():
        ps = sorted(col.glob("*.jpg"))
        cams += _group("rgbd", ps, {p: dep / f"{p.stem}.png" for p in ps if (dep / f"{p.stem}.png").is_file()}, "mm")
    else:
        notes.append(f"{col} absent")
    cg = root / "cleargrasp" / "real-val" / "d435"
    if cg.is_dir():
        ps = sorted(cg.glob("*-rgb-img.jpg"))
        depth = {p: p.with_name(p.name.replace("-rgb-img.jpg", "-depth-img.exr")) for p in ps}
        if not _exr_readable():
            notes.append("cleargrasp depth skipped: reading EXR needs the OpenEXR package")
            depth = {}
        cams += _group("cleargrasp", ps, {p: d for p, d in depth.items() if d.is_file()}, "m")
    else:
        notes.append(f"{cg} absent")
    voc = root / "detection_voc100" / "images"
    if voc.is_dir():
        cams += _group("detection_voc100", sorted(voc.glob("*.jpg")))
    else:
        notes.append(f"{voc} absent")
    return [replace(c, name=c.name.replace("detection_", "")) for c in cams], notes


@lru_cache(maxsize=512)
def load_rgb(path: Path) -> np.ndarray:
    """(H, W, 3) uint8, EXIF orientation applied and alpha dropped, as the ingest decodes it."""
    with Image.open(path) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


@lru_cache(maxsize=512)
def load_depth_m(path: Path, unit: str) -> np.ndarray:
    """(H, W) float32 depth in metres; 0 where the sensor gave nothing (0, NaN or inf)."""
    from perception_gap.ingest import decode_depth  # the product's own decoder (EXR included)

    d = decode_depth(path).astype(np.float64) / (1000.0 if unit == "mm" else 1.0)
    return np.where(np.isfinite(d) & (d > 0), d, 0.0).astype(np.float32)


# --- sides -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Side:
    """What one side of a case writes.

    Attributes:
        keys: pair keys (file stems); equal keys on both sides make pairs.
        rgb: per frame an (H, W, 3) uint8 image or a float32 observation array.
        fmt: `png`, `npy`, `jpg<quality>` or `copy` (the source file's own bytes).
        sources: the source files (for `copy`).
        depth_sources: the source depth files (for `depth_fmt` `copy`).
        depth: per frame depth in metres (float32, 0 = invalid), or None.
        depth_fmt: `mm` (uint16 PNG), `mm_max` (the same, invalid pixels 65535), `m` (float32 .npy), `tum` (uint16 PNG, 5000 per metre),
            `copy` (the source depth file).
        depth_unit: the unit declared when indexing (None: the engine infers it).
        proprio: per frame joint angles (written through a manifest), or None.
    """

    keys: tuple[str, ...]
    rgb: tuple[np.ndarray, ...]
    fmt: str = "png"
    sources: tuple[Path, ...] = ()
    depth_sources: tuple[Path, ...] = ()
    depth: tuple[np.ndarray, ...] | None = None
    depth_fmt: str = "mm"
    depth_unit: str | None = None
    proprio: tuple[tuple[float, ...], ...] | None = None


def clean_side(cam: Camera, idx: list[int], prefix: str, *, depth: bool) -> Side:
    """The camera's frames `idx` as they are, keys `<prefix>000`, ...; depth in its own encoding."""
    dep, dsrc = None, ()
    if depth and cam.depth_paths is not None:
        dsrc = tuple(cam.depth_paths[i] for i in idx)
        dep = tuple(load_depth_m(p, cam.depth_unit) for p in dsrc)
    return Side(keys=tuple(f"{prefix}{j:03d}" for j in range(len(idx))),
                rgb=tuple(load_rgb(cam.rgb_paths[i]) for i in idx), sources=tuple(cam.rgb_paths[i] for i in idx),
                depth_sources=dsrc, depth=dep, depth_fmt=cam.depth_unit or "mm")


def _median_se(x: np.ndarray) -> float:
    """Standard error of a sample median (normal approximation, MAD spread; as the engine's `dist_z`)."""
    mad = 1.4826 * float(np.median(np.abs(x - np.median(x))))
    sd = max(mad, 0.5 * float(np.std(x, ddof=1)))
    return 1.2533 * sd / np.sqrt(x.size)


def wavelet_noise_sigma(rgb: np.ndarray) -> float:
    """Luma noise sigma (8-bit levels) by the wavelet MAD rule: median |HH| of the finest Haar level / 0.6745."""
    y = np.asarray(rgb, np.float64)[..., :3] @ np.array([0.299, 0.587, 0.114])
    h, w = (y.shape[0] // 2) * 2, (y.shape[1] // 2) * 2
    y = y[:h, :w]
    hh = (y[0::2, 0::2] - y[0::2, 1::2] - y[1::2, 0::2] + y[1::2, 1::2]) / 2.0  # orthonormal 2-D Haar diagonal
    return max(float(np.median(np.abs(hh))) / 0.6745, 1e-3)


FIXED_NCC = 0.4


def fixed_camera(side: Side, size: int = 32) -> bool:
    """Whether the side's frames come from one fixed view: the median over pairs of frames of the
    correlation of their gradient magnitudes (grey, area-downsampled to `size` x `size`) is at least
    FIXED_NCC. A fixed camera's static edges sit at the same pixels in every frame; a moving camera's
    only in its time neighbours, different photos' nowhere. Computed here independently of the
    engine's test (which high-passes with a Gaussian): what an unpaired mean-image reading (field of
    view) needs."""
    def grad(a: np.ndarray) -> np.ndarray:
        g = np.asarray(Image.fromarray(np.asarray(a)[..., :3].astype(np.uint8)).convert("L")
                       .resize((size, size), Image.BOX), np.float64)
        gy, gx = np.gradient(g)
        m = np.hypot(gx, gy).ravel()
        m = m - m.mean()
        n = np.linalg.norm(m)
        return m / n if n > 0 else m

    if len(side.rgb) < 4 or any(np.asarray(a).dtype != np.uint8 for a in side.rgb):
        return False
    gs = np.stack([grad(a) for a in side.rgb])
    c = gs @ gs.T
    return float(np.median(c[np.triu_indices(len(gs), k=1)])) >= FIXED_NCC


def scene_spread_clear(family: str, sim: Side, real: Side, z: float = 3.0, alpha: float = 0.01) -> bool:
    """Whether the faulted unpaired sets differ clearly by the documented distribution bar.

    Without pairs a brightness, white-balance, channel-swap, sensor-noise or depth-dropout change is
    named only when it stands out of the cameras' own scene-to-scene spread: the difference of set
    medians clears `z` standard errors and a two-sided Mann-Whitney test rejects equal
    distributions at `alpha` (the engine's DIST_Z and DIST_ALPHA; README, detection limits).
    Computed here from the frames as written, independently of the engine's statistics:
    brightness on log2 Rec.709 luminance of linear channel means; white balance and a red/blue
    swap on log2 R/G and B/G (either; a swap of scenes whose red and blue balance alike moves
    neither); sensor noise on log2 of each frame's luma noise sigma by the wavelet MAD estimator
    (median |finest diagonal Haar coefficient| / 0.6745, Donoho and Johnstone 1994; the engine
    uses a different one); depth dropout on the per-frame share of invalid depth pixels (points).
    Field of view, unpaired, is read from the set mean images: only a fixed camera's count
    (`fixed_camera`). True for other families (their fixed limits apply).
    """
    from scipy.stats import mannwhitneyu

    def lin(side: Side) -> np.ndarray:
        a = np.stack([np.asarray(x, np.float64)[..., :3].reshape(-1, 3).mean(0) for x in side.rgb]) / 255.0
        return np.clip(np.where(a <= 0.04045, a / 12.92, ((a + 0.055) / 1.055) ** 2.4), 1e-6, None)

    def clear(a: np.ndarray, b: np.ndarray) -> bool:
        se = np.hypot(_median_se(a), _median_se(b))
        if abs(np.median(a) - np.median(b)) < z * se:
            return False
        return float(mannwhitneyu(a, b, alternative="two-sided").pvalue) <= alpha

    if family == "field_of_view":
        return fixed_camera(real)
    if family == "depth_dropout" and sim.depth is not None and real.depth is not None:
        return clear(np.array([100.0 * np.mean(d <= 0) for d in sim.depth]),
                     np.array([100.0 * np.mean(d <= 0) for d in real.depth]))
    if (family not in ("brightness", "white_balance", "channel_swap", "sensor_noise")
            or any(np.asarray(x).dtype != np.uint8 for x in sim.rgb + real.rgb)):
        return True
    if family == "sensor_noise":
        return clear(np.log2([wavelet_noise_sigma(x) for x in sim.rgb]), np.log2([wavelet_noise_sigma(x) for x in real.rgb]))
    ls, lr = lin(sim), lin(real)
    if family == "brightness":
        rec = np.array([0.2126, 0.7152, 0.0722])
        return clear(np.log2(ls @ rec), np.log2(lr @ rec))
    return any(clear(np.log2(ls[:, c] / ls[:, 1]), np.log2(lr[:, c] / lr[:, 1])) for c in (0, 2))


def _encode_depth(d: np.ndarray, fmt: str) -> tuple[np.ndarray, str]:
    if fmt == "mm":
        return F.depth_to_mm_u16(d), ".png"
    if fmt == "mm_max":  # invalid pixels marked with the dtype's maximum instead of 0
        mm = F.depth_to_mm_u16(d)
        return np.where(mm == 0, np.uint16(65535), mm), ".png"
    if fmt == "tum":
        return F.depth_to_tum_u16(d), ".png"
    return d.astype(np.float32), ".npy"


def _save(a: np.ndarray, path: Path, fmt: str) -> None:
    if fmt == "npy":
        np.save(path.with_suffix(".npy"), a)
    elif fmt.startswith("jpg"):
        Image.fromarray(a).save(path.with_suffix(".jpg"), quality=int(fmt[3:]))
    else:  # uint8 RGB, or uint16 depth (mode I;16)
        Image.fromarray(a).save(path.with_suffix(".png"), compress_level=1)


def write_side(side: Side, folder: Path) -> list[dict]:
    """Write the side's files into `folder`; returns the manifest rows (paths relative to `folder`'s parent)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, key in enumerate(side.keys):
        if side.fmt == "copy":
            rgb = folder / f"{key}{side.sources[i].suffix.lower()}"
            shutil.copyfile(side.sources[i], rgb)
        else:
            _save(side.rgb[i], folder / key, side.fmt)
            rgb = next(folder.glob(f"{key}.*"))
        row = {"rgb": f"{folder.name}/{rgb.name}", "pair_key": key}
        if side.depth is not None:
            (folder / "depth").mkdir(exist_ok=True)
            if side.depth_fmt == "copy":
                src = side.depth_sources[i]
                shutil.copyfile(src, folder / "depth" / f"{key}{src.suffix.lower()}")
            else:
                enc, ext = _encode_depth(side.depth[i], side.depth_fmt)
                _save(enc, folder / "depth" / key, "npy" if ext == ".npy" else "png")
        if side.proprio is not None:
            row["proprio"] = json.dumps([round(v, 6) for v in side.proprio[i]])
        rows.append(row)
    return rows


# --- faults not in tests/faults.py -----------------------------------------------------------

def pointwise(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """`fn` (a per-value, per-channel map of uint8 RGB, e.g. `F.expose`) as a lookup table: the
    same output, computed once on the 256 levels instead of on every pixel."""
    lut = fn(np.repeat(np.arange(256, dtype=np.uint8)[:, None, None], 3, axis=2))[:, 0, :]  # (256, 3)
    return lambda a: lut[a, np.arange(3)]


def gaussian_blur(a: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur of standard deviation `sigma` pixels over rows and columns, uint8 out."""
    out = gaussian_filter(a.astype(np.float32), sigma=(sigma, sigma, 0), mode="reflect")
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def chroma_420(a: np.ndarray) -> np.ndarray:
    """4:2:0 chroma subsampling as a video codec does: Cb/Cr averaged over 2x2, upsampled bilinearly."""
    h, w = a.shape[:2]
    y, cb, cr = Image.fromarray(a).convert("YCbCr").split()
    half = ((w + 1) // 2, (h + 1) // 2)
    cb, cr = (c.resize(half, Image.BOX).resize((w, h), Image.BILINEAR) for c in (cb, cr))
    return np.asarray(Image.merge("YCbCr", (y, cb, cr)).convert("RGB"))


def chroma_subsampled(cam: "Camera") -> bool:
    """Whether a camera's frames are JPEGs stored with 4:2:0 chroma (a 4:2:0 fault is then a no-op)."""
    from PIL import JpegImagePlugin

    with Image.open(cam.rgb_paths[0]) as im:
        return im.format == "JPEG" and JpegImagePlugin.get_sampling(im) == 2


def add_holes(depth: np.ndarray, rng: np.random.Generator, points: float) -> np.ndarray:
    """`points` percentage points more invalid pixels (within 0.2 points), in blobs, on top of the existing holes.

    `F.depth_holes` punches a share of all pixels, some of them holes already: its share is
    bisected on one random field (the same generator state each try) until the added share fits.
    """
    target = points / 100.0
    state = rng.bit_generator.state
    lo, hi, out = 0.0, 1.0, depth
    for _ in range(12):
        frac = (lo + hi) / 2
        rng.bit_generator.state = state
        out = F.depth_holes(depth, rng, frac)
        added = float(np.mean(depth > 0) - np.mean(out > 0))
        if abs(added - target) < 0.002:
            break
        lo, hi = (frac, hi) if added < target else (lo, frac)
    return out


def dropout_points(before: tuple[np.ndarray, ...], after: tuple[np.ndarray, ...]) -> float:
    """Mean added invalid-pixel share, in percentage points."""
    return float(np.mean([np.mean(b > 0) - np.mean(a > 0) for b, a in zip(before, after)]) * 100.0)


# --- fault families ----------------------------------------------------------------------------

Transform = Callable[[Side, Side, float, np.random.Generator], tuple[Side, Side]]


def _map(side: Side, fn: Callable[[np.ndarray], np.ndarray], fmt: str = "png") -> Side:
    return replace(side, rgb=tuple(fn(a) for a in side.rgb), fmt=fmt)


def _scaled(a: np.ndarray, factor: float) -> tuple[int, int]:
    return max(8, round(a.shape[1] / factor)), max(8, round(a.shape[0] / factor))


def _resize(kind: str) -> Transform:
    down = F.resize_nearest if kind == "nearest" else F.resize_bilinear_no_aa

    def t(s: Side, r: Side, m: float, rng: np.random.Generator) -> tuple[Side, Side]:
        return (_map(s, lambda a: down(a, _scaled(a, m))),
                _map(r, lambda a: F.resize_pil(a, _scaled(a, m), Image.BILINEAR)))
    return t


def _aspect(a: np.ndarray) -> np.ndarray:
    h, w = a.shape[:2]
    return F.centre_crop_to_aspect(a, 16 / 9 if w / h < 1.6 else 4 / 3)


def _holes(s: Side, r: Side, m: float, rng: np.random.Generator) -> tuple[Side, Side]:
    return s, replace(r, depth=tuple(add_holes(d, rng, m) for d in r.depth))


def _depth_enc(sim_fmt: str, real_fmt: str, unit: str | None = None) -> Transform:
    return lambda s, r, m, rng: (replace(s, depth_fmt=sim_fmt, depth_unit=unit),
                                 replace(r, depth_fmt=real_fmt, depth_unit=unit))


def _wb_gains(m: float) -> tuple[float, float, float]:
    return (2.0 ** (m / 2), 1.0, 2.0 ** (-m / 2))


def _proprio(side: Side, rows: np.ndarray, scale: float) -> Side:
    return replace(side, proprio=tuple(tuple(float(v) * scale for v in row) for row in rows))


def _joints(real_scale: float) -> Transform:
    """Joint angles through a manifest: sim in radians, real times `real_scale` (deg: 180/pi).
    One robot trajectory: paired sides share its rows, unpaired sides take consecutive stretches."""
    def t(s: Side, r: Side, m: float, rng: np.random.Generator) -> tuple[Side, Side]:
        n_s = len(s.keys)
        traj = F.joint_trajectory(rng, n_s if s.keys == r.keys else n_s + len(r.keys))
        return _proprio(s, traj[:n_s], 1.0), _proprio(r, traj[-len(r.keys):], real_scale)
    return t


@dataclass(frozen=True)
class Fault:
    """One fault family: what it must be named, at which magnitudes, and how it is made.

    Attributes:
        family: the name (`brightness`, `resize_filter/nearest`, ...); `control/...` for clean controls.
        code: the finding code it must produce first (`none` for controls).
        severity: `bug` or `gap` (`none` for controls).
        unit: what `magnitudes` measure; their absolute value is compared with the detection limit.
        magnitudes: the full run's magnitudes; `quick` those of `--quick`.
        transform: (clean sim, clean real, magnitude, rng) -> (sim, real).
        needs: `rgb` (frames only), `rgb+depth` (with depth where the camera has it), `depth`
            (cameras with depth only) or `rgb444` (cameras whose frames are not 4:2:0 JPEGs).
        bases: `paired` and/or `unpaired`.
    """

    family: str
    code: str
    severity: str
    unit: str
    magnitudes: tuple[float, ...]
    quick: tuple[float, ...]
    transform: Transform
    needs: str = "rgb"
    bases: tuple[str, ...] = ("paired", "unpaired")
    label: Callable[[float], str] = field(default=lambda m: f"{m:g}")


def _real(fn: Callable[[np.ndarray, float, np.random.Generator], np.ndarray], fmt: str = "png") -> Transform:
    return lambda s, r, m, rng: (s, _map(r, lambda a: fn(a, m, rng), fmt))


def _sim(fn: Callable[[np.ndarray], np.ndarray], fmt: str = "png") -> Transform:
    return lambda s, r, m, rng: (_map(s, fn, fmt), r)


def _both(fs: Callable[[np.ndarray], np.ndarray], fr: Callable[[np.ndarray], np.ndarray], fmt: str) -> Transform:
    return lambda s, r, m, rng: (_map(s, fs, fmt), _map(r, fr, fmt))


def _identity(s: Side, r: Side, m: float, rng: np.random.Generator) -> tuple[Side, Side]:
    return s, r


def _reencode(s: Side, r: Side, m: float, rng: np.random.Generator) -> tuple[Side, Side]:
    """Real side: the source files' own bytes (JPEG, RGBA PNG; EXR depth), sim: PNG of the same pixels."""
    return s, replace(r, fmt="copy", depth_fmt="copy")


def _imagenet(a: np.ndarray) -> np.ndarray:
    return F.normalize(a, F.IMAGENET_MEAN, F.IMAGENET_STD)


_STOPS = (-1.0, -0.5, -0.3, -0.2, -0.15, 0.15, 0.2, 0.3, 0.5, 1.0)
_ONE = (1.0,)

FAULTS: tuple[Fault, ...] = (
    # clean controls: any bug or gap finding on them is a false finding
    Fault("control/split", "none", "none", "-", _ONE, _ONE, _identity, needs="rgb+depth", bases=("unpaired",)),
    Fault("control/reencode", "none", "none", "-", _ONE, _ONE, _reencode, needs="rgb+depth", bases=("paired",)),
    Fault("control/downscale", "none", "none", "factor", (2.0,), (2.0,),
          _both(lambda a: F.resize_pil(a, _scaled(a, 2.0)), lambda a: F.resize_pil(a, _scaled(a, 2.0)), "png")),
    Fault("control/npy_imagenet", "none", "none", "-", _ONE, _ONE, _both(_imagenet, _imagenet, "npy")),
    Fault("control/proprio_rad", "none", "none", "-", _ONE, _ONE, _joints(1.0)),
    # plumbing bugs
    Fault("channel_swap", "channel_swap", "bug", "-", _ONE, _ONE, _sim(F.swap_rb)),
    Fault("value_range/float01_vs_uint8", "value_range", "bug", "-", _ONE, _ONE, _sim(F.to_float01, "npy")),
    Fault("value_range/float01_vs_float255", "value_range", "bug", "-", _ONE, _ONE,
          _both(F.to_float01, F.to_float255, "npy")),
    Fault("normalization", "normalization", "bug", "-", _ONE, _ONE,
          _both(_imagenet, lambda a: F.normalize(a, F.CLIP_MEAN, F.CLIP_STD), "npy")),
    Fault("resize_filter/nearest", "resize_filter", "bug", "downscale factor", (2.0, 3.0), (2.0,), _resize("nearest")),
    Fault("resize_filter/bilinear_no_aa", "resize_filter", "bug", "downscale factor", (2.5, 3.5), (2.5,),
          _resize("bilinear")),
    Fault("resolution/scale", "resolution", "bug", "1/scale", (1.25, 2.0), (2.0,),
          _real(lambda a, m, rng: F.resize_pil(a, _scaled(a, m), Image.LANCZOS))),
    Fault("resolution/aspect", "resolution", "bug", "-", _ONE, _ONE, _real(lambda a, m, rng: _aspect(a))),
    Fault("depth_scale/m_vs_mm", "depth_scale", "bug", "-", _ONE, _ONE, _depth_enc("m", "mm"), needs="depth"),
    Fault("depth_scale/tum_vs_mm", "depth_scale", "bug", "-", _ONE, _ONE, _depth_enc("tum", "mm"), needs="depth"),
    Fault("depth_scale/m_declared_mm", "depth_scale", "bug", "-", _ONE, _ONE, _depth_enc("m", "mm", "mm"),
          needs="depth"),
    Fault("joint_units", "joint_units", "bug", "-", _ONE, _ONE, _joints(F.DEG_PER_RAD)),
    # appearance and sensor gaps (faults on the real side)
    Fault("brightness", "brightness", "gap", "stops", _STOPS, (-0.5, -0.2, 0.3, 1.0),
          lambda s, r, m, rng: (s, _map(r, pointwise(lambda a: F.expose(a, m)))), label=lambda m: f"{m:+g}stop"),
    Fault("white_balance", "white_balance", "gap", "log2(gain R / gain B)", (-0.6, -0.3, -0.15, 0.15, 0.3, 0.6),
          (-0.3, 0.6), lambda s, r, m, rng: (s, _map(r, pointwise(lambda a: F.white_balance(a, _wb_gains(m))))),
          label=lambda m: "gains " + "/".join(f"{g:.3f}" for g in _wb_gains(m))),
    Fault("sharpness", "sharpness", "gap", "blur sigma px", (0.7, 1.0, 2.0), (1.0, 2.0),
          _real(lambda a, m, rng: gaussian_blur(a, m)), label=lambda m: f"sigma{m:g}"),
    Fault("sensor_noise", "sensor_noise", "gap", "sigma 8-bit levels", (2.0, 5.0, 8.0), (2.0, 5.0),
          _real(lambda a, m, rng: F.add_sensor_noise(a, rng, m)), label=lambda m: f"sigma{m:g}"),
    Fault("compression/jpeg", "compression", "gap", "100 - JPEG quality", (30.0, 50.0, 70.0), (30.0, 70.0),
          lambda s, r, m, rng: (s, replace(r, fmt=f"jpg{100 - int(m)}")), label=lambda m: f"q{100 - int(m)}"),
    Fault("compression/chroma420", "compression", "gap", "-", _ONE, _ONE, _real(lambda a, m, rng: chroma_420(a)),
          needs="rgb444"),
    Fault("depth_dropout", "depth_dropout", "gap", "added invalid points", (5.0, 9.0, 20.0), (5.0, 20.0), _holes,
          needs="depth", label=lambda m: f"+{m:g}pts"),
)


def case_rng(seed: int, case_id: str) -> np.random.Generator:
    """A generator fixed by the seed and the case's name (reproducible, independent across cases)."""
    return np.random.default_rng([seed, zlib.crc32(case_id.encode())])


def split_indices(n_frames: int, n_use: int, seed: int) -> tuple[list[int], list[int], list[int]]:
    """(all, half A, half B): `n_use` frames drawn by the seed, and a random disjoint split of them."""
    order = [int(i) for i in np.random.default_rng(seed).permutation(n_frames)[: min(n_use, n_frames)]]
    half = len(order) // 2
    return sorted(order), sorted(order[:half]), sorted(order[half:])
