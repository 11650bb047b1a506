"""What the spatial checks share: per-frame luma thumbnails as arrays, their alignment and similarity.

Every frame's statistics carry a `THUMB` x `THUMB` luma thumbnail of the whole frame
(`ImageStats.thumb`). The spatial checks (orientation, field of view, pair sync, vignetting,
tone curve, the gap maps and `unexplained_gap`) compare these, pair by pair or as set means.
Pure numpy; nothing here reads the catalog.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from perception_gap.diagnoses.common import srgb_to_linear
from perception_gap.diagnoses.context import Context
from perception_gap.statistics.image import THUMB, thumb_array
from perception_gap.statistics.records import FrameRecord

# The eight ways a frame can be flipped or rotated (the dihedral group of the square), each as a
# map of a (..., H, W) stack; a transposed H x W frame is `transpose` (thumbnails are square).
DIHEDRAL: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "identity": lambda a: a,
    "flip_vertical": lambda a: a[..., ::-1, :],
    "flip_horizontal": lambda a: a[..., :, ::-1],
    "rotate_180": lambda a: a[..., ::-1, ::-1],
    "transpose": lambda a: np.swapaxes(a, -1, -2),
    "rotate_90_cw": lambda a: np.swapaxes(a, -1, -2)[..., :, ::-1],
    "rotate_90_ccw": lambda a: np.swapaxes(a, -1, -2)[..., ::-1, :],
    "anti_transpose": lambda a: np.swapaxes(a, -1, -2)[..., ::-1, ::-1],
}
# The transform that undoes each one (rotations by 90 degrees undo each other; the rest are involutions).
INVERSE = {"rotate_90_cw": "rotate_90_ccw", "rotate_90_ccw": "rotate_90_cw"}

# Normalized radius (0 at the centre, 1 at a corner) of each thumbnail pixel.
_yy, _xx = np.mgrid[0:THUMB, 0:THUMB].astype(np.float64)
_c = (THUMB - 1) / 2.0
RADIUS = np.hypot(_yy - _c, _xx - _c) / math.hypot(_c, _c)
# Rings of the radial profile, by normalized radius.
RING_EDGES = (0.0, 0.3, 0.5, 0.7, 0.85, 1.0001)
RING_INDEX = np.digitize(RADIUS, RING_EDGES[1:-1])  # (THUMB, THUMB) ring of each pixel
CENTRE = RADIUS < RING_EDGES[1]
CORNERS = RADIUS >= RING_EDGES[-2]


def thumbs01(ctx: Context, side: str, frames: list[FrameRecord]) -> np.ndarray | None:
    """(n, THUMB, THUMB) luma thumbnails of `frames` in [0, 1] of full scale (sRGB-encoded values).

    Frames with a nominal scale (8/16-bit) are already there; float observation arrays go
    through the side's inferred value encoding (`ctx.enc`, channel-averaged constants). None when
    a frame has no thumbnail or no scale is known.
    """
    if not frames or any(f.image is None or f.image.thumb is None for f in frames):
        return None
    out = np.stack([thumb_array(f.image.thumb) for f in frames])
    floats = np.array([f.image.nominal_max is None for f in frames])
    if floats.any():
        if ctx.enc is None:
            return None
        enc = ctx.enc.sim if side == "sim" else ctx.enc.real
        off, sc = (float(np.mean(v)) for v in (enc.offset, enc.scale))
        out[floats] = out[floats] * sc + off
    return out


def set_thumbs(ctx: Context, min_frames: int = 1) -> tuple[np.ndarray, np.ndarray] | None:
    """(sim, real) thumbnails of every usable frame of each side (`thumbs01`), for the distribution
    basis; None when a side has fewer than `min_frames` or no thumbnails."""
    fs, fr = ctx.images("sim"), ctx.images("real")
    if min(len(fs), len(fr)) < max(min_frames, 1):
        return None
    ts, tr = thumbs01(ctx, "sim", fs), thumbs01(ctx, "real", fr)
    return None if ts is None or tr is None else (ts, tr)


# A fixed camera: the edges of its static scene sit at the same pixels in every frame, so any two
# frames' high-pass thumbnails correlate; a moving camera's agree only with their time neighbours and
# different photos not at all. The median over frame pairs is what `fixed_view` reads (at most
# FIXED_MAX_FRAMES frames, evenly spread). Measured on 32 x 32 thumbnails (bench/README.md, "Fixed
# camera test"): one view jittered by 5 px of 160 reads 0.76; panning and forward-moving cameras over
# real photos 0.0-0.26; different photos about 0; a mixed set of robot views 0-0.05.
FIXED_EDGE_NCC = 0.4
FIXED_HIGHPASS_SIGMA = 1.5
FIXED_MAX_FRAMES = 64


def fixed_view(t: np.ndarray) -> float:
    """Median normalized cross-correlation over all pairs of distinct frames of their high-pass
    thumbnails (the thumbnail minus its Gaussian blur of FIXED_HIGHPASS_SIGMA pixels).

    Args:
        t: (n, THUMB, THUMB) thumbnails of one side, duplicates allowed (a resample): each distinct
            frame counts once.

    Returns:
        The median agreement in [-1, 1]; NaN with fewer than 3 distinct frames.
    """
    from scipy.ndimage import gaussian_filter  # scipy only when a set-level spatial check runs

    t = np.nan_to_num(np.asarray(t, dtype=np.float64))
    t = np.unique(t.reshape(len(t), -1), axis=0).reshape(-1, *t.shape[1:])
    if len(t) < 3:
        return math.nan
    if len(t) > FIXED_MAX_FRAMES:
        t = t[np.linspace(0, len(t) - 1, FIXED_MAX_FRAMES).round().astype(int)]
    h = t - gaussian_filter(t, sigma=(0, FIXED_HIGHPASS_SIGMA, FIXED_HIGHPASS_SIGMA), mode="nearest")
    h = h.reshape(len(h), -1)
    h = h - h.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(h, axis=1)
    keep = norm > 1e-9
    if keep.sum() < 3:
        return math.nan
    h = h[keep] / norm[keep, None]
    c = h @ h.T
    return float(np.median(c[np.triu_indices(len(h), k=1)]))


def fixed_camera(ctx: Context, ts: np.ndarray, tr: np.ndarray) -> dict:
    """Whether both sides look like one fixed camera (`fixed_view` >= FIXED_EDGE_NCC on each), as the
    evidence of a set-level spatial reading states it: {"test", "sim", "real", "bar", "passed"}."""
    key = "fixed_camera"
    if key not in ctx.memo:
        vs, vr = fixed_view(ts), fixed_view(tr)
        ctx.memo[key] = {"test": "median edge agreement (high-pass thumbnail correlation) over frame pairs, each side",
                         "sim": round(vs, 3) if math.isfinite(vs) else None,
                         "real": round(vr, 3) if math.isfinite(vr) else None, "bar": FIXED_EDGE_NCC,
                         "passed": bool(math.isfinite(vs) and math.isfinite(vr) and min(vs, vr) >= FIXED_EDGE_NCC)}
    return ctx.memo[key]


def linear(t: np.ndarray) -> np.ndarray:
    """sRGB-encoded thumbnails in [0, 1] -> linear light (float64)."""
    return srgb_to_linear(np.nan_to_num(t, nan=0.0))


def ncc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Normalized cross-correlation of matching (..., H, W) stacks over their last two axes.

    NaN pixels (of either) are left out; a constant frame gives 0.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    m = np.isfinite(a) & np.isfinite(b)
    n = np.maximum(m.sum(axis=(-2, -1)), 1)
    a = np.where(m, a, 0.0)
    b = np.where(m, b, 0.0)
    am = a.sum(axis=(-2, -1)) / n
    bm = b.sum(axis=(-2, -1)) / n
    ac = np.where(m, a - am[..., None, None], 0.0)
    bc = np.where(m, b - bm[..., None, None], 0.0)
    den = np.sqrt((ac * ac).sum(axis=(-2, -1)) * (bc * bc).sum(axis=(-2, -1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12, (ac * bc).sum(axis=(-2, -1)) / np.maximum(den, 1e-300), 0.0)


def radial_profile(t: np.ndarray) -> np.ndarray:
    """Mean of a (..., THUMB, THUMB) stack in each ring of `RING_EDGES`: shape (..., n_rings).

    NaN pixels are left out; a ring with none left (a black frame's ratio) is NaN.
    """
    out = []
    for k in range(len(RING_EDGES) - 1):
        ring = t[..., RING_INDEX == k]
        seen = ~np.isnan(ring)
        n = seen.sum(axis=-1)
        # np.nanmean's own sum-then-divide, without its warning on an all-NaN ring
        out.append(np.where(n > 0, np.where(seen, ring, 0.0).sum(axis=-1) / np.maximum(n, 1), np.nan))
    return np.stack(out, axis=-1)


def aligned_pairs(ctx: Context) -> tuple[list[tuple[FrameRecord, FrameRecord]], np.ndarray, np.ndarray] | None:
    """(pairs, sim thumbnails, real thumbnails) of the usable image pairs, real frames turned the way
    the orientation check found sim frames to be (so that pixel (i, j) shows the same place).

    None with fewer than two pairs or without thumbnails.
    """
    key = "aligned_pairs"
    if key not in ctx.memo:
        pairs = ctx.image_pairs()
        ts = thumbs01(ctx, "sim", [s for s, _ in pairs]) if len(pairs) >= 2 else None
        tr = thumbs01(ctx, "real", [r for _, r in pairs]) if ts is not None else None
        if ts is None or tr is None:
            ctx.memo[key] = None
        else:
            turn = ctx.memo.get("orientation")
            ctx.memo[key] = (pairs, ts, DIHEDRAL[turn](tr) if turn else tr)
    return ctx.memo[key]


def zoom_stack(t: np.ndarray, zooms: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """A (THUMB, THUMB) thumbnail magnified by each zoom about its centre and moved by each shift.

    Args:
        t: (THUMB, THUMB) image.
        zooms: (K,) magnifications (> 1 shows a narrower field of view).
        shifts: (K, 2) (dy, dx) in thumbnail pixels, applied after the zoom.

    Returns:
        (K, THUMB, THUMB), bilinear, NaN where the source lies outside the frame.
    """
    idx, w, outside = _bilinear_taps(zooms, shifts)
    flat = np.nan_to_num(t.astype(np.float64)).ravel()
    out = (flat[idx] * w).sum(axis=0).reshape(len(zooms), THUMB, THUMB)
    out[outside] = np.nan
    return out


def zoom_operator(zooms: np.ndarray, shifts: np.ndarray) -> tuple[Any, np.ndarray]:
    """`zoom_stack` as one sparse (K*THUMB^2, THUMB^2) matrix, its rows of samples from outside the
    frame empty, and the (K, THUMB^2) 0/1 mask of samples inside: `op @ t.ravel()` warps a
    thumbnail by every zoom and shift at once (zeros outside), a sparse product instead of four
    gathers."""
    from scipy import sparse

    key = b"op" + np.asarray(zooms, np.float64).tobytes() + np.asarray(shifts, np.float64).tobytes()
    got = _OPS.get(key)
    if got is None:
        idx, w, outside = _bilinear_taps(zooms, shifts)
        inside = ~outside.reshape(len(zooms), -1)
        rows = np.broadcast_to(np.arange(idx.shape[1]), idx.shape)
        keep = np.broadcast_to(inside.ravel(), idx.shape)
        op = sparse.csr_matrix((w[keep], (rows[keep], idx[keep])), shape=(idx.shape[1], THUMB * THUMB))
        if len(_OPS) >= 4:
            _OPS.clear()
        got = _OPS[key] = (op, inside.astype(np.float64))
    return got


_OPS: dict[bytes, tuple[Any, np.ndarray]] = {}
_TAPS: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _bilinear_taps(zooms: np.ndarray, shifts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(4, K*THUMB^2) source indices and weights of the bilinear warp, and the (K, THUMB, THUMB) mask of
    samples from outside the frame: the same for every thumbnail, so computed once per grid (the field
    of view search warps every pair on one grid)."""
    key = np.asarray(zooms, np.float64).tobytes() + np.asarray(shifts, np.float64).tobytes()
    got = _TAPS.get(key)
    if got is None:
        ys = _c + (_yy[None] - _c - shifts[:, 0, None, None]) / zooms[:, None, None]
        xs = _c + (_xx[None] - _c - shifts[:, 1, None, None]) / zooms[:, None, None]
        outside = (ys < 0) | (ys > THUMB - 1) | (xs < 0) | (xs > THUMB - 1)
        y0 = np.clip(np.floor(ys), 0, THUMB - 1)
        x0 = np.clip(np.floor(xs), 0, THUMB - 1)
        fy, fx = (ys - y0).ravel(), (xs - x0).ravel()
        y0, x0 = y0.astype(np.intp).ravel(), x0.astype(np.intp).ravel()
        y1, x1 = np.minimum(y0 + 1, THUMB - 1), np.minimum(x0 + 1, THUMB - 1)
        idx = np.stack([y0 * THUMB + x0, y0 * THUMB + x1, y1 * THUMB + x0, y1 * THUMB + x1])
        w = np.stack([(1 - fy) * (1 - fx), (1 - fy) * fx, fy * (1 - fx), fy * fx])
        if len(_TAPS) >= 8:
            _TAPS.clear()
        got = _TAPS[key] = (idx, w, outside)
    return got


def region_name(y: float, x: float) -> str:
    """Where a thumbnail position lies, in words (`top left`, `centre`, `bottom edge`, ...)."""
    third = THUMB / 3.0
    row = ("top", "middle", "bottom")[min(int(y // third), 2)]
    col = ("left", "centre", "right")[min(int(x // third), 2)]
    if row == "middle" and col == "centre":
        return "centre"
    if row == "middle":
        return f"{col} edge"
    if col == "centre":
        return f"{row} edge"
    return f"{row} {col}"
