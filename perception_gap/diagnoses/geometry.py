"""Geometry diagnosis: frame resolution and aspect-ratio mismatch (`resolution`)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

from perception_gap.diagnoses.common import num
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.findings import Finding
from perception_gap.statistics.records import FrameRecord

# Resolution: aspect ratios closer than this (relative) count as the same aspect.
ASPECT_TOL = 0.01


def _modal_size(frames: Sequence[FrameRecord]) -> tuple[tuple[int, int], float]:
    sizes = Counter((f.image.width, f.image.height) for f in frames)
    size, n = sizes.most_common(1)[0]
    return size, n / len(frames)


def _aspect_name(w: int, h: int) -> str:
    g = math.gcd(w, h)
    a, b = w // g, h // g
    return f"{a}:{b}" if a <= 64 else f"{w / h:.3f}:1"


def check_resolution(ctx: Context) -> Finding | None:
    """Modal frame size (and aspect ratio) differ between the sets."""
    fs, fr = ctx.images("sim"), ctx.images("real")
    if not fs or not fr:
        return None
    (ws, hs), share_s = _modal_size(fs)
    (wr, hr), share_r = _modal_size(fr)
    if (ws, hs) == (wr, hr):
        return None
    asp_s, asp_r = ws / hs, wr / hr
    aspect_diff = abs(math.log(asp_s / asp_r))
    aspect_mismatch = aspect_diff > math.log1p(ASPECT_TOL)
    scale = math.sqrt((ws * hs) / (wr * hr))
    ev = basis_evidence("distribution", 0, ctx)  # modal sizes of each set
    ev.update({
        "sim_size": [ws, hs], "real_size": [wr, hr],
        "sim_aspect": num(asp_s), "real_aspect": num(asp_r),
        "sim_aspect_name": _aspect_name(ws, hs), "real_aspect_name": _aspect_name(wr, hr),
        "aspect_mismatch": aspect_mismatch, "area_scale_sim_over_real": num(scale),
        "sim_modal_share": num(share_s), "real_modal_share": num(share_r),
    })
    if aspect_mismatch:
        title = (f"Frame aspect differs: sim {ws}x{hs} ({_aspect_name(ws, hs)}) vs real {wr}x{hr} "
                 f"({_aspect_name(wr, hr)}).")
        action = (f"Crop (do not stretch) the real stream to the sim's {_aspect_name(ws, hs)} field of "
                  f"view and resize it to {ws}x{hs} with the sim's filter, or render the sim at "
                  f"{wr}x{hr}; check that both cameras' intrinsics match.")
        score = 2.0 + aspect_diff
    else:
        title = f"Frame size differs: sim {ws}x{hs} vs real {wr}x{hr} (same {_aspect_name(ws, hs)} aspect)."
        action = (f"Resize the real stream to {ws}x{hs} with the same filter the sim uses (or render "
                  f"the sim at {wr}x{hr}) so both reach the encoder at one resolution.")
        score = 1.0 + abs(math.log(scale))
    return Finding("resolution", "bug", title, ev, action, num(score))
