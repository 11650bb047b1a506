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

from perception_gap.diagnoses.colour import check_brightness, check_channel_swap, check_white_balance
from perception_gap.diagnoses.common import DIST_ALPHA, DIST_MIN_FRAMES, HF_MIN_FRAMES, MIN_PAIRS
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.diagnoses.depth import check_depth_dropout, check_depth_scale
from perception_gap.diagnoses.encoding import infer_encodings
from perception_gap.diagnoses.geometry import check_resolution
from perception_gap.diagnoses.joints import check_joint_units
from perception_gap.diagnoses.sharpness import check_resize_filter, check_sharpness
from perception_gap.diagnoses.texture import check_compression, check_sensor_noise
from perception_gap.diagnoses.values import check_normalization, check_value_range, encoding_inputs
from perception_gap.findings import Finding, order_findings
from perception_gap.statistics.records import FrameRecord, SetRecords, paired

logger = logging.getLogger(__name__)


# The registry, in the order checks contaminate each other (see the module docstring).
CHECKS: tuple[tuple[str, Callable[[Context], Finding | None]], ...] = (
    ("resolution", check_resolution),
    ("value_range", check_value_range),
    ("normalization", check_normalization),
    ("channel_swap", check_channel_swap),
    ("depth_scale", check_depth_scale),
    ("depth_dropout", check_depth_dropout),
    ("brightness", check_brightness),
    ("white_balance", check_white_balance),
    ("compression", check_compression),
    ("sensor_noise", check_sensor_noise),
    ("resize_filter", check_resize_filter),
    ("sharpness", check_sharpness),
    ("joint_units", check_joint_units),
)


def _infer(ctx: Context) -> None:
    inputs = encoding_inputs(ctx)
    if inputs is not None:
        basis, _, ms, mr = inputs
        ctx.enc = infer_encodings(ms, mr, basis)


_IMAGE_CHECKS = {"value_range", "normalization", "channel_swap", "compression", "sensor_noise", "resize_filter",
                 "sharpness", "brightness", "white_balance"}


def diagnose(sim: SetRecords, real: SetRecords) -> list[Finding]:
    """Run every plumbing check on a sim set against a real set.

    Args:
        sim: the simulated frame set (`domain` "sim").
        real: the real frame set (`domain` "real").

    Returns:
        Findings with codes from docs/contract.md (`channel_swap`, `value_range`, `normalization`,
        `depth_scale`, `depth_dropout`, `compression`, `sensor_noise`, `resize_filter`, `sharpness`,
        `brightness`, `white_balance`, `resolution`, `joint_units`), ordered by `order_findings`;
        empty when nothing is off.
    """
    ctx = Context(sim=sim, real=real, pairs=paired(sim, real))
    _infer(ctx)
    findings: list[Finding] = []
    for code, check in CHECKS:
        if code in _IMAGE_CHECKS and ctx.enc is None:
            continue
        found = check(ctx)
        if found is not None:
            ctx.fired.add(code)
            findings.append(found)
            logger.debug("%s: %s", code, found.title)
    few = _too_few_unpaired(ctx)
    if few is not None:
        findings.append(few)
    logger.info("plumbing: %d finding(s) for %s vs %s", len(findings), sim.name, real.name)
    return order_findings(findings)


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
