"""Named plumbing diagnoses: the sim/real differences that are bugs or simple sensor gaps.

`diagnose(sim, real)` runs a registry of small checks over the per-frame statistics of two
frame sets and returns `Finding`s (codes in docs/contract.md), most urgent first. Each check is one
function `check(ctx) -> Finding | None`; the arithmetic lives in tiny pure helpers next to
it, one module per family (`geometry`, `values`, `colour`, `depth`, `texture` for noise and
compression, `sharpness` for resize filters and blur, `joints`).

Two bases. With at least `MIN_PAIRS` frames matched by pair key a check compares each sim frame
with its own real frame and takes the median over pairs, so scene content cancels; otherwise it
compares the two sets' distributions, which needs larger effects and, for gaps, an effect that
clears the sets' scene-to-scene spread (`DIST_Z` standard errors) and a rank test (`DIST_ALPHA`;
unpaired sets under `DIST_MIN_FRAMES` frames a side get an `insufficient_data` info instead). Every finding's evidence says
which basis it used (`basis`, `n_pairs`).

Checks contaminate each other, so they run in order and read what already fired:
value-range or normalization mismatches put the two sides on different scales (brightness and
white balance are then skipped); a channel swap fakes a white-balance shift (skipped) and a
luminance change (brightness un-swaps the channels first); a resolution mismatch changes what
per-pixel sharpness means (the resize check then relies only on the nearest-neighbour
signature, which does not depend on scale).

Values are compared in a common [0, 1] scale only after the value encoding of each side has
been inferred (`infer_encodings`); arrays themselves are never rescaled by the statistics.

A finding's `score` is its effect in units of the threshold that made it fire (>= 1), so
findings of one severity sort by how clearly they cleared their bar.
"""

from __future__ import annotations

import logging
from typing import Callable

import numpy as np

from perception_gap.diagnoses import verdicts
from perception_gap.diagnoses.colour import check_brightness, check_channel_swap, check_white_balance
from perception_gap.diagnoses.common import DIST_ALPHA, DIST_MIN_FRAMES, HF_MIN_FRAMES, MIN_PAIRS
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.control import check_control
from perception_gap.diagnoses.depth import check_depth_dropout, check_depth_scale
from perception_gap.diagnoses.depth_invalid import check_depth_invalid
from perception_gap.diagnoses.encoding import infer_encodings
from perception_gap.diagnoses.formats import check_frame_format, check_non_finite, majority_formats
from perception_gap.diagnoses.geometry import check_resolution
from perception_gap.diagnoses.joints import check_joint_units
from perception_gap.diagnoses.motion import check_motion_blur
from perception_gap.diagnoses.registration import check_depth_registration
from perception_gap.diagnoses.sharpness import check_resize_filter, check_sharpness
from perception_gap.diagnoses.spatial import check_field_of_view, check_orientation, check_pair_sync
from perception_gap.diagnoses.texture import check_compression, check_sensor_noise
from perception_gap.diagnoses.tone import check_tone_curve, check_vignetting
from perception_gap.diagnoses.unexplained import check_unexplained, gap_maps
from perception_gap.diagnoses.values import check_normalization, check_value_range, encoding_inputs
from perception_gap.findings import Finding, order_findings
from perception_gap.statistics.records import FrameRecord, SetRecords, paired

logger = logging.getLogger(__name__)


# The registry, in the order checks contaminate each other (see the module docstring).
CHECKS: tuple[tuple[str, Callable[[Context], Finding | None]], ...] = (
    ("resolution", check_resolution),
    ("non_finite", check_non_finite),
    ("value_range", check_value_range),
    ("normalization", check_normalization),
    ("frame_format", check_frame_format),
    ("channel_swap", check_channel_swap),
    ("orientation", check_orientation),
    ("field_of_view", check_field_of_view),
    ("pair_sync", check_pair_sync),
    ("tone_curve", check_tone_curve),
    ("depth_scale", check_depth_scale),
    ("depth_invalid", check_depth_invalid),
    ("depth_registration", check_depth_registration),
    ("depth_dropout", check_depth_dropout),
    ("vignetting", check_vignetting),
    ("brightness", check_brightness),
    ("white_balance", check_white_balance),
    ("compression", check_compression),
    ("sensor_noise", check_sensor_noise),
    ("motion_blur", check_motion_blur),
    ("resize_filter", check_resize_filter),
    ("sharpness", check_sharpness),
    ("joint_units", check_joint_units),
)

# A check is skipped once any of these fired: they explain its signal (a curve moves the mean
# luminance and the chroma ratios; a zoom resamples the frame, which changes every high-frequency
# statistic; directional blur lowers sharpness; a different invalid-depth marker fakes a dropout rate).
_HF = frozenset({"field_of_view", "motion_blur"})
SKIP_AFTER: dict[str, frozenset[str]] = {
    "brightness": frozenset({"tone_curve"}),
    "white_balance": frozenset({"tone_curve"}),
    "compression": frozenset({"field_of_view"}),
    "sensor_noise": frozenset({"field_of_view"}),
    "resize_filter": _HF,
    "sharpness": _HF,
    "depth_dropout": frozenset({"depth_invalid"}),
    # a zoom changes what the frame shows: its luminance quantiles and radial profile read content
    "tone_curve": frozenset({"field_of_view"}),
    "vignetting": frozenset({"field_of_view", "tone_curve"}),  # a curve raises the corner/centre ratio to its power
    # a different size or aspect changes what the frame covers: its own bug, named first
    "field_of_view": frozenset({"resolution"}),
}


def _infer(ctx: Context) -> None:
    inputs = encoding_inputs(ctx)
    if inputs is not None:
        basis, _, ms, mr = inputs
        ctx.enc = infer_encodings(ms, mr, basis)


_IMAGE_CHECKS = {"value_range", "normalization", "channel_swap", "compression", "sensor_noise", "resize_filter",
                 "sharpness", "brightness", "white_balance", "orientation", "field_of_view", "pair_sync",
                 "tone_curve", "vignetting", "motion_blur"}
# Codes that say nothing about appearance: `unexplained_gap` still speaks when only these fired.
_NOT_APPEARANCE = {"moving_camera", "non_finite", "joint_units", "control_dims", "control_scale", "control_sign", "depth_scale", "depth_invalid", "depth_registration",
                   "depth_dropout", "insufficient_data"}


def context(sim: SetRecords, real: SetRecords, *, cache: dict | None = None, resampled: bool = False) -> Context:
    """The check context of two sets: their pairs, majority frame formats and inferred encodings."""
    ctx = Context(sim=sim, real=real, pairs=paired(sim, real), cache={} if cache is None else cache,
                  resampled=resampled)
    ctx.formats = majority_formats(ctx)
    _infer(ctx)
    return ctx


def diagnose(sim: SetRecords, real: SetRecords, *, resamples: int = verdicts.N_RESAMPLES) -> list[Finding]:
    """Run every plumbing check on a sim set against a real set.

    Args:
        sim: the simulated frame set (`domain` "sim").
        real: the real frame set (`domain` "real").
        resamples: bootstrap resamples that settle each finding's interval, stability and
            severity (`diagnoses.verdicts`); 0 reads the full sets only (no interval, stability 1).

    Returns:
        Findings with codes from docs/contract.md (`channel_swap`, `value_range`, `normalization`,
        `depth_scale`, `depth_dropout`, `compression`, `sensor_noise`, `resize_filter`, `sharpness`,
        `brightness`, `white_balance`, `resolution`, `joint_units`, and the spatial, transfer-curve,
        depth-convention, control and format codes: `frame_format`, `orientation`, `field_of_view`,
        `pair_sync`, `tone_curve`, `vignetting`, `motion_blur`, `depth_invalid`, `control_dims`,
        `control_scale`, `control_sign`, `non_finite`, `depth_registration`, `unexplained_gap`,
        `moving_camera`), ordered by `order_findings`; empty when nothing is off.
    """
    return diagnose_with_maps(sim, real, resamples=resamples)[0]


_ALL_CODES = frozenset(code for code, _ in CHECKS)


def _run_checks(ctx: Context, skip: frozenset[str] = frozenset()) -> list[Finding]:
    findings: list[Finding] = []
    for code, check in CHECKS:
        if code in skip:
            continue
        if code in _IMAGE_CHECKS and (ctx.enc is None or ctx.memo.get("format_mismatch") == "channel count"):
            continue
        if ctx.fired & SKIP_AFTER.get(code, frozenset()):
            continue
        found = check(ctx)
        if found is not None:
            ctx.fired.add(code)
            findings.append(found)
            logger.debug("%s: %s", code, found.title)
    for found in check_control(ctx):
        ctx.fired.add(found.code)
        findings.append(found)
    if ctx.enc is not None:
        found = check_unexplained(ctx, ctx.fired - _NOT_APPEARANCE)
        if found is not None:
            findings.append(found)
    return findings


def _settle(sim: SetRecords, real: SetRecords, ctx: Context, findings: list[Finding], resamples: int,
            seed: int) -> list[Finding]:
    """`findings` settled over `resamples` resamples (`verdicts.settle`). Each resample reruns only the
    checks that fired on the full sets: what one finding's evidence holds under resampling, with the
    order in which the checks silence each other kept as the full sets decided it."""
    fired = {f.code for f in findings if f.severity != "info"}
    if not fired or resamples <= 0:
        return findings
    skip = _ALL_CODES - fired
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(resamples):
        rs, rr = verdicts.resample(sim, real, rng)
        runs.append(_run_checks(context(rs, rr, cache=ctx.cache, resampled=True), skip))
    return verdicts.settle(findings, runs)


def diagnose_with_maps(sim: SetRecords, real: SetRecords, *, resamples: int = verdicts.N_RESAMPLES,
                       seed: int = 0) -> tuple[list[Finding], dict | None]:
    """`diagnose`, and the spatial gap maps of the two sets (`unexplained.gap_maps`; None without
    thumbnails), drawn with the orientation the checks found.

    A borderline finding (`verdicts.STABLE`) does not silence the checks it would skip: they run again
    on the full sets without it, and what they find is settled and added.
    """
    ctx = context(sim, real)
    findings = _settle(sim, real, ctx, _run_checks(ctx), resamples, seed)
    shaky = frozenset(f.code for f in findings if f.evidence.get("borderline"))
    if shaky:
        again = context(sim, real, cache=ctx.cache)
        new = [f for f in _run_checks(again, shaky) if f.code not in {g.code for g in findings}]
        for f in _settle(sim, real, again, new, resamples, seed + 1):
            findings.append(Finding(f.code, f.severity, f.title, {**f.evidence, "read_without": sorted(shaky)},
                                    f.action, f.score))
        ctx.memo.setdefault("skipped_for_moving_camera", []).extend(again.memo.get("skipped_for_moving_camera", []))
    moving = _moving_camera(ctx)
    if moving is not None:
        findings.append(moving)
    few = _too_few_unpaired(ctx)
    if few is not None:
        findings.append(few)
    logger.info("plumbing: %d finding(s) for %s vs %s", len(findings), sim.name, real.name)
    maps = gap_maps(ctx) if ctx.enc is not None else None
    return order_findings(findings), maps


def _moving_camera(ctx: Context) -> Finding | None:
    """The unpaired set-level spatial readings that did not run because the frames show no fixed
    camera: say which, and the test's values (`info`)."""
    codes = sorted(set(ctx.memo.get("skipped_for_moving_camera", ())))
    fixed = ctx.memo.get("fixed_camera")
    if not codes or fixed is None:
        return None
    ev = basis_evidence("distribution", 0, ctx)
    ev.update({"codes": codes, "fixed_camera": fixed})
    vals = " / ".join("n/a" if fixed[k] is None else f"{fixed[k]:.2f}" for k in ("sim", "real"))
    return Finding("moving_camera", "info",
                   f"Unpaired {', '.join(c.replace('_', ' ') for c in codes)} not read: the frames do not show one "
                   f"fixed camera (edge agreement between frames {vals} sim / real, bar {fixed['bar']}), so their "
                   f"mean images have no common layout to compare.",
                   ev, f"Index matched pairs (shared pair keys) to read {', '.join(codes)} frame by frame.", 0.0)


def _few_for_high_frequency(ctx: Context, fs: list[FrameRecord], fr: list[FrameRecord]) -> Finding:
    """Unpaired sets of DIST_MIN_FRAMES to HF_MIN_FRAMES - 1 frames a side that name no resize filter or blur."""
    ev = basis_evidence("distribution", 0, ctx)
    ev.update({"sim_frames": len(fs), "real_frames": len(fr), "min_frames_a_side": HF_MIN_FRAMES,
               "rank_test_alpha": DIST_ALPHA, "codes": ["resize_filter", "sharpness"]})
    return Finding("insufficient_data", "info",
                   f"Only {len(fs)} sim and {len(fr)} real frames, unpaired: a resize-filter or sharpness "
                   f"difference is named only when nearly every frame's high-frequency signature separates; "
                   f"with fewer than {HF_MIN_FRAMES} frames a side about a third of them go unnamed.",
                   ev, f"Index at least {HF_MIN_FRAMES} frames a side, or {MIN_PAIRS} matched pairs (shared pair "
                       f"keys), before reading the absence of these two findings as no gap.", 0.0)


def _too_few_unpaired(ctx: Context) -> Finding | None:
    """Unpaired sets too small for the distribution basis' rank test: say so (`info`) instead of
    letting silence read as "no gap"."""
    if ctx.enc is None:
        return None
    basis, fs, fr = ctx.image_sides()
    n = min(len(fs), len(fr))
    if basis != "distribution" or n == 0 or n >= HF_MIN_FRAMES:
        return None
    if n >= DIST_MIN_FRAMES:
        return None if ctx.fired & {"resize_filter", "sharpness"} else _few_for_high_frequency(ctx, fs, fr)
    ev = basis_evidence(basis, 0, ctx)
    ev.update({"sim_frames": len(fs), "real_frames": len(fr), "min_frames_a_side": DIST_MIN_FRAMES,
               "rank_test_alpha": DIST_ALPHA})
    return Finding("insufficient_data", "info",
                   f"Only {len(fs)} sim and {len(fr)} real frames, unpaired: appearance gaps (brightness, white "
                   f"balance, noise, compression, sharpness, resize filter, depth dropout) are named only when "
                   f"every frame of one side lies far beyond every frame of the other; smaller gaps cannot be "
                   f"told from scene-to-scene variation with fewer than {DIST_MIN_FRAMES} frames a side.",
                   ev, f"Index at least {DIST_MIN_FRAMES} frames a side, or {MIN_PAIRS} matched pairs (shared pair "
                       f"keys), before reading the absence of these findings as no gap.", 0.0)
