"""Geometry diagnosis: frame resolution and aspect-ratio mismatch (`resolution`).

A set that mixes sizes (a renderer writing several resolutions, a few frames rotated to
portrait) is read first: pairs whose two frames differ in size or orientation are counted and the
mix named (unpaired, one set mixing sizes while the other has one is an info). Otherwise the
sets' most common sizes are compared."""

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
# Mixed sizes: a bug when at least this share of the pairs has frames of different sizes; below it,
# a few stray frames, listed as an info. Unpaired, one side mixing sizes is always an info: a few
# frames of a photo collection can all share one size by chance while the other few do not.
MIX_BUG_SHARE = 0.05
MIX_LISTED = 6  # sizes named in a title, most common first


def _modal_size(frames: Sequence[FrameRecord]) -> tuple[tuple[int, int], float]:
    sizes = Counter((f.image.width, f.image.height) for f in frames)
    size, n = sizes.most_common(1)[0]
    return size, n / len(frames)


def _aspect_name(w: int, h: int) -> str:
    g = math.gcd(w, h)
    a, b = w // g, h // g
    return f"{a}:{b}" if a <= 64 else f"{w / h:.3f}:1"


def _orientation(w: int, h: int) -> str:
    return "portrait" if h > w else "landscape" if w > h else "square"


def _size_mix(frames: Sequence[FrameRecord]) -> Counter:
    return Counter((f.image.width, f.image.height) for f in frames)


def _mix_words(mix: Counter) -> str:
    """`640x480 (3), 480x640 (1, portrait)`: sizes by count, orientation named where it is not the modal one."""
    modal = _orientation(*mix.most_common(1)[0][0])
    parts = []
    for (w, h), n in mix.most_common(MIX_LISTED):
        o = _orientation(w, h)
        parts.append(f"{w}x{h} ({n}{', ' + o if o != modal else ''})")
    rest = len(mix) - MIX_LISTED
    return ", ".join(parts) + (f" and {rest} more size(s)" if rest > 0 else "")


def _side_words(side: str, mix: Counter) -> str:
    if len(mix) == 1:
        (w, h), _ = mix.most_common(1)[0]
        return f"{side} is {w}x{h} throughout"
    return f"{side} mixes {len(mix)} sizes: {_mix_words(mix)}"


def check_mixed_sizes(ctx: Context) -> Finding | None:
    """A side that mixes frame sizes: pairs whose two frames differ in size or orientation, or
    (unpaired) one side's frames off the size the other side has throughout. None when no side
    mixes sizes, when every pair agrees, or when both unpaired sides mix (photo collections)."""
    mix_s, mix_r = _size_mix(ctx.images("sim")), _size_mix(ctx.images("real"))
    if len(mix_s) <= 1 and len(mix_r) <= 1:
        return None
    pairs = ctx.image_pairs()
    # the size to write every frame at: the real camera's (the uniform side's when unpaired)
    modal = (mix_s if len(mix_r) > 1 and len(mix_s) == 1 and not pairs else mix_r).most_common(1)[0][0]
    ev = basis_evidence("pairs" if pairs else "distribution", len(pairs), ctx)
    ev.update({"sim_sizes": {f"{w}x{h}": n for (w, h), n in mix_s.most_common()},
               "real_sizes": {f"{w}x{h}": n for (w, h), n in mix_r.most_common()}})
    if pairs:
        size = lambda f: (f.image.width, f.image.height)  # noqa: E731
        n_size = sum(size(s) != size(r) for s, r in pairs)
        n_turn = sum(_orientation(*size(s)) != _orientation(*size(r)) for s, r in pairs)
        if not n_size:
            return None
        share = n_size / len(pairs)
        ev.update({"n_pairs_size_differs": n_size, "n_pairs_orientation_differs": n_turn, "share": num(share)})
        title = (f"Frame sizes differ in {n_size} of {len(pairs)} pairs: {_side_words('sim', mix_s)}; "
                 f"{_side_words('real', mix_r)}"
                 + (f"; {n_turn} pair(s) differ in orientation" if n_turn else "") + ".")
    else:
        if len(mix_s) > 1 and len(mix_r) > 1:
            return None  # both sides mix sizes (photo collections): the modal sizes speak for them
        mixed, mix = ("sim", mix_s) if len(mix_s) > 1 else ("real", mix_r)
        n_size = sum(n for sz, n in mix.items() if sz != modal)
        n_turn = sum(n for sz, n in mix.items() if _orientation(*sz) != _orientation(*modal))
        share = n_size / sum(mix.values())
        ev.update({"mixed_side": mixed, "n_frames_off_size": n_size, "n_frames_orientation_differs": n_turn,
                   "share": num(share)})
        title = (f"Frame sizes mix on one side: {n_size} of {sum(mix.values())} {mixed} frames are not "
                 f"{modal[0]}x{modal[1]}; {_side_words('sim', mix_s)}; {_side_words('real', mix_r)}"
                 + (f"; {n_turn} frame(s) in the other orientation" if n_turn else "") + ".")
    action = (f"Write every frame at one size (the real camera's {modal[0]}x{modal[1]}), resized with one filter "
              f"and none rotated: a frame whose size or orientation differs from its twin's reaches the encoder "
              f"as a different image, and each check reads the two at different scales.")
    severity = "bug" if pairs and share >= MIX_BUG_SHARE else "info"
    return Finding("resolution", severity, title, ev, action, num(1.0 + share))


def check_resolution(ctx: Context) -> Finding | None:
    """Modal frame size (and aspect ratio) differ between the sets, or sizes mix within them."""
    fs, fr = ctx.images("sim"), ctx.images("real")
    if not fs or not fr:
        return None
    mixed = check_mixed_sizes(ctx)
    if mixed is not None:
        return mixed
    (ws, hs), share_s = _modal_size(fs)
    (wr, hr), share_r = _modal_size(fr)
    if (ws, hs) == (wr, hr) or (ctx.image_pairs() and (len(_size_mix(fs)) > 1 or len(_size_mix(fr)) > 1)):
        return None  # every pair agrees in size though a side mixes sizes (checked above)
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
