"""`frame_format`: the frames' channel count or bit depth differs, between the sets or within one.

A 1-channel 16-bit stream indexed as the colour camera, against 3-channel 8-bit frames, makes every
appearance statistic meaningless; a few grey 16-bit frames among 8-bit colour ones shift a set's
medians. The format of a side is the (channels, dtype) most of its frames have
(`majority_formats`); frames of another format are left out of the image checks and counted here.
"""

from __future__ import annotations

from collections import Counter

from perception_gap.diagnoses.common import num
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.context import format_key as _fmt
from perception_gap.findings import Finding


def _label(fmt: tuple[str, str]) -> str:
    kind, dtype = fmt
    return f"{kind} {dtype}"


def majority_formats(ctx: Context) -> dict[str, tuple[str, str]]:
    """Per side, the (grey or colour, dtype) of most of its usable frames (absent for a side without any)."""
    out = {}
    for side in ("sim", "real"):
        frames = [f for f in (ctx.sim.frames if side == "sim" else ctx.real.frames) if f.image is not None]
        if frames:
            out[side] = Counter(_fmt(f) for f in frames).most_common(1)[0][0]
    return out


def check_frame_format(ctx: Context) -> Finding | None:
    """Channel count or bit depth that differs between the sets, or mixed formats within one."""
    fmts = ctx.formats
    if len(fmts) < 2:
        return None
    counts = {side: Counter(_fmt(f) for f in (ctx.sim.frames if side == "sim" else ctx.real.frames)
                            if f.image is not None) for side in ("sim", "real")}
    odd = {side: sum(n for k, n in counts[side].items() if k != fmts[side]) for side in counts}
    ev = basis_evidence("distribution", 0, ctx)
    ev.update({"sim_format": _label(fmts["sim"]), "real_format": _label(fmts["real"]),
               "sim_formats": {_label(k): n for k, n in counts["sim"].items()},
               "real_formats": {_label(k): n for k, n in counts["real"].items()},
               "frames_left_out": odd})
    s, r = fmts["sim"], fmts["real"]
    # a bit depth that value_range or normalization already named stays theirs
    depth_only = s[0] == r[0] and s[1] != r[1] and not ctx.fired & {"value_range", "normalization"}
    if s[0] != r[0] or (depth_only and "float" not in s[1] + r[1]):
        what = "channel count" if s[0] != r[0] else "bit depth"
        ctx.memo["format_mismatch"] = what
        title = f"Sim frames are {_label(s)}, real frames {_label(r)}: the {what} differs."
        hint = (" A 1-channel 16-bit stream is usually a depth or infrared topic indexed as the colour camera."
                if "grey" in (s[0], r[0]) and "uint16" in (s[1], r[1]) else "")
        action = (f"Index the same kind of stream on both sides (camera topic, encoding, bit depth) before reading "
                  f"any appearance finding.{hint}")
        # before value_range and the rest: with another kind of stream indexed, those follow from it
        return Finding("frame_format", "bug", title, ev, action, num(1000.0))
    if not any(odd.values()):
        return None
    side = "sim" if odd["sim"] >= odd["real"] else "real"
    others = [f"{n}x {_label(k)}" for k, n in counts[side].items() if k != fmts[side]]
    title = (f"{odd[side]} {side} frame(s) ({', '.join(others)}) differ in format from the set's "
             f"{_label(fmts[side])} frames: left out of the image checks.")
    action = (f"Remove or re-export the odd {side} frames (one camera stream, one encoding per set); the image "
              f"findings are computed without them.")
    return Finding("frame_format", "bug", title, ev, action, num(1.0 + odd[side]))


def check_non_finite(ctx: Context) -> Finding | None:
    """NaN or infinite values inside frames (float observation arrays): a pipeline bug, never measured.

    Frames whose sampled values are all non-finite are left out of every image check (they have
    no mean); partly non-finite frames are measured on their finite values. Either way the values
    are named here, with the share of frames and of their pixels.
    """
    rows = {}
    for side in ("sim", "real"):
        frames = [f for f in (ctx.sim.frames if side == "sim" else ctx.real.frames) if f.image is not None]
        bad = [f.image.nonfinite_frac for f in frames if f.image.nonfinite_frac > 0]
        if bad:
            rows[side] = {"frames": len(bad), "of": len(frames), "all_non_finite": sum(b >= 1.0 for b in bad),
                          "mean_pixel_share": num(sum(bad) / len(bad), 4)}
    if not rows:
        return None
    ev = basis_evidence("distribution", 0, ctx)
    ev.update({"non_finite": rows})
    side = max(rows, key=lambda k: rows[k]["frames"])
    r = rows[side]
    whole = f", {r['all_non_finite']} of them entirely" if r["all_non_finite"] else ""
    title = (f"{r['frames']} of {r['of']} {side} frames hold NaN or infinite values "
             f"({r['mean_pixel_share']:.0%} of their pixels on average{whole}).")
    action = ("Find where the non-finite values enter the observation (a division by a zero std or range, invalid "
              "depth fused into the image, an uninitialized buffer) and fix it; a policy fed NaN acts on garbage.")
    return Finding("non_finite", "bug", title, ev, action, num(100.0 + r["frames"]))
