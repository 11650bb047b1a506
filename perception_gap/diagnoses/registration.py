"""`depth_registration`: depth shifted against its own RGB frame, differently in sim and in real.

Each frame's statistics carry where its edges lie across the width and the height
(`edge_profiles`): luma edges for the RGB frame, jumps in log depth for its depth map. Where the
two are registered, depth discontinuities sit on colour edges and the two profiles correlate best
at lag 0; a depth map shifted by d pixels moves its profile by d. The lag of the best correlation
(parabolic peak, within +-`MAX_LAG_BINS` bins) is each frame's offset; a side's offset is the
median over its frames, and a bug when sim and real disagree by `MIN_SHIFT_PX` or more.
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


def frame_offset(f: FrameRecord) -> tuple[float, float] | None:
    """(dx, dy) in pixels that the frame's depth edges lie from its RGB edges, None when unclear."""
    if f.image is None or f.depth is None or f.image.edges is None or f.depth.edges is None:
        return None
    ri, di = np.asarray(f.image.edges), np.asarray(f.depth.edges)
    out = []
    for sl, size in ((slice(0, EDGE_BINS), f.image.width), (slice(EDGE_BINS, 2 * EDGE_BINS), f.image.height)):
        lag, corr = _lag(ri[sl], di[sl])
        if not np.isfinite(lag) or corr < MIN_CORR:
            return None
        out.append(lag * size / EDGE_BINS)
    return out[0], out[1]


def check_depth_registration(ctx: Context) -> Finding | None:
    """Depth offset against its RGB that differs between sim and real (pixels, x and y)."""
    off = {side: [(f, o) for f in (ctx.sim.frames if side == "sim" else ctx.real.frames)
                  if (o := frame_offset(f)) is not None] for side in ("sim", "real")}
    if min(len(off["sim"]), len(off["real"])) < MIN_FRAMES:
        return None
    s = np.array([o for _, o in off["sim"]])
    r = np.array([o for _, o in off["real"]])
    by_key = {f.pair_key: o for f, o in off["real"]}
    pairs = [(o, by_key[f.pair_key]) for f, o in off["sim"] if f.pair_key in by_key]
    if len(pairs) >= MIN_FRAMES:
        basis = "pairs"
        d = np.array([np.subtract(a, b) for a, b in pairs])
        diff = np.median(d, axis=0)
        clear = [excludes_zero(median_ci(d[:, k])) for k in (0, 1)]
    else:
        basis = "distribution"
        diff = np.median(s, axis=0) - np.median(r, axis=0)
        clear = [dist_clear(s[:, k], r[:, k], MIN_SHIFT_PX) for k in (0, 1)]
    hit = [k for k in (0, 1) if clear[k] and abs(diff[k]) >= MIN_SHIFT_PX]
    if not hit:
        return None
    side = "sim" if np.abs(np.median(s, axis=0)).max() >= np.abs(np.median(r, axis=0)).max() else "real"
    ev = basis_evidence(basis, len(pairs) if basis == "pairs" else 0, ctx)
    ev.update({"offset_px_sim": [num(v, 1) for v in np.median(s, axis=0)],
               "offset_px_real": [num(v, 1) for v in np.median(r, axis=0)],
               "offset_px_sim_minus_real": [num(v, 1) for v in diff], "threshold_px": MIN_SHIFT_PX,
               "frames_measured": {"sim": len(s), "real": len(r)}, "shifted_side": side})
    dx, dy = (float(v) for v in diff)
    title = (f"{side.capitalize()} depth is shifted against its own RGB: depth edges lie {dx:+.0f} px (x), "
             f"{dy:+.0f} px (y) from the colour edges, sim relative to real.")
    action = (f"Register the {side} depth to its colour camera (the depth-to-colour extrinsics, or the aligned "
              "depth stream) before fusing or cropping; a bug, not a randomization budget.")
    return Finding("depth_registration", "bug", title, ev, action,
                   num(max(abs(dx), abs(dy)) / MIN_SHIFT_PX))
