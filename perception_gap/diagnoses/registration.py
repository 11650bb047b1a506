"""`depth_registration`: depth shifted against its own RGB frame, differently in sim and in real.

Each frame's statistics carry where its edges lie across the width and the height
(`edge_profiles`): luma edges for the RGB frame, jumps in log depth for its depth map. Where the
two are registered, depth discontinuities sit on colour edges and the two profiles correlate best
at lag 0; a depth map shifted by d pixels moves its profile by d. The lag of the best correlation
(parabolic peak, within +-`MAX_LAG_BINS` bins) is each frame's offset; a side's offset is the
median over its frames, and a bug when sim and real disagree by `MIN_SHIFT_PX` or more.

Paired frames are read a second, sharper way: the lag of the sim depth profile against its real
partner's, minus the lag of the sim colour profile against the real colour profile. Both depth
maps see the same scene, so their profiles correlate far better than depth does with colour, and
whatever offsets both sides alike (a depth camera's holes gathered along object edges bias the
depth-to-colour lag by tens of pixels) cancels. Each axis is read on its own: a frame whose
columns say nothing (few vertical edges) still gives its rows.
"""

from __future__ import annotations

import numpy as np

from perception_gap.diagnoses.common import dist_clear, excludes_zero, median_ci, num
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.findings import Finding
from perception_gap.statistics.records import FrameRecord
from perception_gap.statistics.sampling import EDGE_BINS

MAX_LAG_BINS = 6
MIN_SHIFT_PX = 6.0
MIN_FRAMES = 3
# a frame whose best correlation is below this says nothing about where its depth lies
MIN_CORR = 0.3


def _lag(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(lag of b against a in bins with a parabolic peak, correlation at the peak): b[i + lag] ~ a[i]."""
    a = a - a.mean()
    b = b - b.mean()
    den = float(np.sqrt((a @ a) * (b @ b)))
    if den <= 1e-12:
        return float("nan"), 0.0
    lags = np.arange(-MAX_LAG_BINS, MAX_LAG_BINS + 1)
    c = np.array([float(a[max(0, -k):len(a) - max(0, k)] @ b[max(0, k):len(b) - max(0, -k)]) for k in lags]) / den
    k = int(np.argmax(c))
    frac = 0.0
    if 0 < k < len(c) - 1:
        den2 = c[k - 1] - 2 * c[k] + c[k + 1]
        frac = 0.5 * (c[k - 1] - c[k + 1]) / den2 if den2 < 0 else 0.0
    return float(lags[k] + frac), float(c[k])


# a pair's depth-to-depth and colour-to-colour profiles must correlate this well to be read
PAIR_MIN_CORR = 0.5


def _axes(f: FrameRecord) -> tuple[tuple[slice, int], tuple[slice, int]]:
    return ((slice(0, EDGE_BINS), f.image.width), (slice(EDGE_BINS, 2 * EDGE_BINS), f.image.height))


def _has_edges(f: FrameRecord) -> bool:
    return f.image is not None and f.depth is not None and f.image.edges is not None and f.depth.edges is not None


def pair_offset(fs: FrameRecord, fr: FrameRecord) -> list[float | None]:
    """[dx, dy] in pixels that the sim depth lies from its RGB, relative to the real pair's (None
    for an axis whose profiles do not correlate): depth-to-depth lag minus colour-to-colour lag."""
    if not (_has_edges(fs) and _has_edges(fr)):
        return [None, None]
    out: list[float | None] = []
    for sl, size in _axes(fs):
        lag_d, c_d = _lag(np.asarray(fr.depth.edges)[sl], np.asarray(fs.depth.edges)[sl])
        lag_i, c_i = _lag(np.asarray(fr.image.edges)[sl], np.asarray(fs.image.edges)[sl])
        ok = np.isfinite(lag_d) and np.isfinite(lag_i) and min(c_d, c_i) >= PAIR_MIN_CORR
        out.append((lag_d - lag_i) * size / EDGE_BINS if ok else None)
    return out


def frame_offset(f: FrameRecord) -> tuple[float, float] | None:
    """(dx, dy) in pixels that the frame's depth edges lie from its RGB edges, None when unclear."""
    if not _has_edges(f):
        return None
    ri, di = np.asarray(f.image.edges), np.asarray(f.depth.edges)
    out = []
    for sl, size in _axes(f):
        lag, corr = _lag(ri[sl], di[sl])
        if not np.isfinite(lag) or corr < MIN_CORR:
            return None
        out.append(lag * size / EDGE_BINS)
    return out[0], out[1]


def check_depth_registration(ctx: Context) -> Finding | None:
    """Depth offset against its RGB that differs between sim and real (pixels, x and y)."""
    off = {side: [(f, o) for f in (ctx.sim.frames if side == "sim" else ctx.real.frames)
                  if (o := frame_offset(f)) is not None] for side in ("sim", "real")}
    s = np.array([o for _, o in off["sim"]]).reshape(-1, 2)
    r = np.array([o for _, o in off["real"]]).reshape(-1, 2)
    measured = _paired_offsets(ctx)
    if measured is not None:
        basis, n_pairs = "pairs", measured[2]
        diff = np.array([float(np.median(v)) if len(v) >= MIN_FRAMES else 0.0 for v in measured[:2]])
        clear = [len(v) >= MIN_FRAMES and excludes_zero(median_ci(v)) for v in measured[:2]]
        frames = {"x": len(measured[0]), "y": len(measured[1])}
    elif min(len(s), len(r)) >= MIN_FRAMES:
        basis, n_pairs = "distribution", 0
        diff = np.median(s, axis=0) - np.median(r, axis=0)
        clear = [dist_clear(s[:, k], r[:, k], MIN_SHIFT_PX) for k in (0, 1)]
        frames = {"sim": len(s), "real": len(r)}
    else:
        return None
    hit = [k for k in (0, 1) if clear[k] and abs(diff[k]) >= MIN_SHIFT_PX]
    if not hit:
        return None
    med_s = np.median(s, axis=0) if len(s) else np.full(2, np.nan)
    med_r = np.median(r, axis=0) if len(r) else np.full(2, np.nan)
    if len(s) and len(r):
        side = "sim" if np.abs(med_s).max() >= np.abs(med_r).max() else "real"
    else:
        side = "sim or real"
    read = [measured is None or len(measured[k]) >= MIN_FRAMES for k in (0, 1)]
    ev = basis_evidence(basis, n_pairs, ctx)
    ev.update({"offset_px_sim": [num(v, 1) for v in med_s],
               "offset_px_real": [num(v, 1) for v in med_r],
               "offset_px_sim_minus_real": [num(v, 1) if ok else None for v, ok in zip(diff, read)], "threshold_px": MIN_SHIFT_PX,
               "frames_measured": frames, "shifted_side": side})
    dx, dy = (float(v) for v in diff)
    where = ", ".join(f"{v:+.0f} px ({axis})" if ok else f"not read ({axis})"
                      for v, ok, axis in ((dx, read[0], "x"), (dy, read[1], "y")))
    title = (f"{side.capitalize()} depth is shifted against its own RGB: depth edges lie {where} "
             "from the colour edges, sim relative to real.")
    side = "sim" if side == "sim or real" else side  # for the wording only; the evidence keeps the doubt
    action = (f"Register the {side} depth to its colour camera (the depth-to-colour extrinsics, or the aligned "
              "depth stream) before fusing or cropping; a bug, not a randomization budget.")
    return Finding("depth_registration", "bug", title, ev, action,
                   num(max(abs(dx), abs(dy)) / MIN_SHIFT_PX))


def _paired_offsets(ctx: Context) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Per axis, the pair offsets (`pair_offset`) that could be read, and the number of pairs that
    gave either; None when fewer than `MIN_FRAMES` pairs give either axis."""
    xs: list[float] = []
    ys: list[float] = []
    n = 0
    for f, partner in ctx.pairs:
        dx, dy = pair_offset(f, partner)
        n += dx is not None or dy is not None
        if dx is not None:
            xs.append(dx)
        if dy is not None:
            ys.append(dy)
    if max(len(xs), len(ys)) < MIN_FRAMES:
        return None
    return np.array(xs), np.array(ys), n
