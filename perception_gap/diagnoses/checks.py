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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from perception_gap.codes import Code
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


@dataclass(frozen=True)
class Check:
    """One plumbing diagnosis: its code, its function and how it sits among the others.

    Attributes:
        code: the finding code it raises.
        function: `check(ctx) -> Finding | None`.
        reads: what it reads: `image` (colour frames: skipped when the value encodings could not be
            inferred or the channel counts differ), `frames` (sizes, formats, values per frame),
            `depth`, or `proprio`.
        skip_after: codes that, when already fired, explain its signal: it is then not run.
        appearance: whether it names an appearance factor; `unexplained_gap` speaks when only
            non-appearance codes fired.
        fact: its finding counts particular frames (this frame is 16-bit grey, these hold NaN): a
            fact, not an estimate, so not resampled (`verdicts.settle`).
        labels: evidence key -> the label the report shows for it (`reports.evidence`).
    """

    code: Code
    function: Callable[[Context], Finding | None]
    reads: str = "image"
    skip_after: frozenset[Code] = frozenset()
    appearance: bool = True
    fact: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)


C = Code
# A different value scale, normalization or frame format puts the two sides on different scales: a
# check that reads pixel levels is not run after them.
_SCALES = frozenset({C.VALUE_RANGE, C.NORMALIZATION})
_LEVELS = _SCALES | {C.FRAME_FORMAT}
# A zoom resamples the frame, which changes every high-frequency statistic; directional blur lowers
# sharpness; compression removes noise (the compressed side is the quieter one).
_HF = frozenset({C.FIELD_OF_VIEW, C.MOTION_BLUR})
_TEXTURE = frozenset({C.COMPRESSION, C.SENSOR_NOISE})

# The registry, in the order checks contaminate each other (see the module docstring).
CHECKS: tuple[Check, ...] = (
    Check(C.RESOLUTION, check_resolution, reads="frames", fact=True),
    Check(C.NON_FINITE, check_non_finite, reads="frames", appearance=False, fact=True),
    Check(C.VALUE_RANGE, check_value_range),
    Check(C.NORMALIZATION, check_normalization),
    # a bit depth that value_range or normalization already named stays theirs (decided inside: a
    # channel-count mismatch is still named)
    Check(C.FRAME_FORMAT, check_frame_format, reads="frames", fact=True),
    Check(C.CHANNEL_SWAP, check_channel_swap),
    Check(C.ORIENTATION, check_orientation),
    # a different size or aspect changes what the frame covers: its own bug, named first
    Check(C.FIELD_OF_VIEW, check_field_of_view, skip_after=frozenset({C.RESOLUTION})),
    Check(C.PAIR_SYNC, check_pair_sync),
    # a zoom changes what the frame shows: its luminance quantiles read content
    Check(C.TONE_CURVE, check_tone_curve, skip_after=_LEVELS | {C.FIELD_OF_VIEW}),
    Check(C.DEPTH_SCALE, check_depth_scale, reads="depth", appearance=False,
          labels={"ratio_sim_over_real": "depth, sim / real (ratio)",
                  "sim_median_depth": "sim median depth (native unit)",
                  "real_median_depth": "real median depth (native unit)"}),
    Check(C.DEPTH_INVALID, check_depth_invalid, reads="depth", appearance=False),
    Check(C.DEPTH_REGISTRATION, check_depth_registration, reads="depth", appearance=False),
    # a different invalid-depth marker fakes a dropout rate
    Check(C.DEPTH_DROPOUT, check_depth_dropout, reads="depth", appearance=False,
          skip_after=frozenset({C.DEPTH_INVALID}),
          labels={"sim_dropout": "sim invalid depth (fraction of pixels)",
                  "real_dropout": "real invalid depth (fraction of pixels)",
                  "dropout_diff_real_minus_sim": "invalid depth, real \u2212 sim (fraction of pixels)"}),
    # a zoom or a flip moves the radial profile; a curve raises the corner/centre ratio to its power
    Check(C.VIGNETTING, check_vignetting, skip_after=_LEVELS | {C.ORIENTATION, C.FIELD_OF_VIEW, C.TONE_CURVE}),
    # a curve moves the mean luminance and the chroma ratios
    Check(C.BRIGHTNESS, check_brightness, skip_after=_SCALES | {C.TONE_CURVE},
          labels={"stops_sim_minus_real": "exposure, sim \u2212 real (stops)",
                  "luminance_ratio_sim_over_real": "luminance, sim / real (ratio)",
                  "stops_iqr": "exposure per pair, interquartile range (stops)"}),
    # a channel swap fakes a white-balance shift
    Check(C.WHITE_BALANCE, check_white_balance, skip_after=_SCALES | {C.TONE_CURVE, C.CHANNEL_SWAP}),
    Check(C.COMPRESSION, check_compression, skip_after=frozenset({C.FIELD_OF_VIEW})),
    Check(C.SENSOR_NOISE, check_sensor_noise, skip_after=frozenset({C.FIELD_OF_VIEW, C.COMPRESSION})),
    Check(C.MOTION_BLUR, check_motion_blur, skip_after=_LEVELS | {C.ORIENTATION}),
    Check(C.RESIZE_FILTER, check_resize_filter, skip_after=_HF | _TEXTURE),
    # a resize, a different scale or a texture difference explains a high-frequency loss first
    Check(C.SHARPNESS, check_sharpness, skip_after=_HF | _TEXTURE | _SCALES | {C.RESIZE_FILTER, C.RESOLUTION}),
    Check(C.JOINT_UNITS, check_joint_units, reads="proprio", appearance=False),
)
del C

BY_CODE: dict[Code, Check] = {c.code: c for c in CHECKS}
# Codes raised outside the registry that say nothing about appearance (control vectors, bookkeeping).
_OTHER_NOT_APPEARANCE = frozenset({Code.CONTROL_DIMS, Code.CONTROL_SCALE, Code.CONTROL_SIGN, Code.MOVING_CAMERA,
                                   Code.INSUFFICIENT_DATA})
# Codes that say nothing about appearance: `unexplained_gap` still speaks when only these fired.
NOT_APPEARANCE = frozenset(c.code for c in CHECKS if not c.appearance) | _OTHER_NOT_APPEARANCE
# Findings that count particular frames, not resampled (`verdicts.settle`); `control_dims` counts vectors.
FACTS = frozenset(c.code for c in CHECKS if c.fact) | {Code.CONTROL_DIMS}


def evidence_labels() -> dict[str, str]:
    """Every check's evidence labels in one table (evidence key -> label), for the report."""
    out: dict[str, str] = {}
    for c in CHECKS:
        for key, text in c.labels.items():
            if out.setdefault(key, text) != text:
                raise ValueError(f"Expected one label for evidence key {key!r}, got {out[key]!r} and {text!r}.")
    return out


def _infer(ctx: Context) -> None:
    inputs = encoding_inputs(ctx)
    if inputs is not None:
        basis, _, ms, mr = inputs
        ctx.enc = infer_encodings(ms, mr, basis)


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


_ALL_CODES = frozenset(BY_CODE)


def _run_checks(ctx: Context, skip: frozenset[str] = frozenset()) -> list[Finding]:
    findings: list[Finding] = []
    for check in CHECKS:
        if check.code in skip or ctx.fired & check.skip_after:
            continue
        if check.reads == "image" and (ctx.enc is None or ctx.memo.get("format_mismatch") == "channel count"):
            continue
        found = check.function(ctx)
        if found is not None:
            ctx.fired.add(check.code.value)
            findings.append(found)
            logger.debug("%s: %s", check.code, found.title)
    for found in check_control(ctx):
        ctx.fired.add(found.code)
        findings.append(found)
    if ctx.enc is not None:
        found = check_unexplained(ctx, ctx.fired - NOT_APPEARANCE)
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
    return verdicts.settle(findings, runs, facts=FACTS)


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
