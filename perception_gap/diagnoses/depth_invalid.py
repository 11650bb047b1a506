"""`depth_invalid`: the two sides mark pixels without a depth reading differently.

Sensors and renderers mark a missing reading with 0, NaN, inf, a negative number, the dtype's
maximum (65535) or a far-clip value. When the conventions differ, a consumer that filters one
marker reads the other as a real (very near or very far) depth: a bug, not a dropout-rate gap.
Each depth map's statistics count every marker (`DepthStats.invalid`, in the order of
`INVALID_MARKERS`); a side's convention is the marker holding most of its invalid pixels.
"""

from __future__ import annotations

import numpy as np

from perception_gap.diagnoses.common import num, nums
from perception_gap.diagnoses.context import Context, basis_evidence
from perception_gap.findings import Finding
from perception_gap.statistics.depth import INVALID_MARKERS

# A side has a convention when its dominant marker covers at least this share of its pixels.
MIN_MARKED = 0.002
_WORDS = {"zero": "0", "nan": "NaN", "inf": "inf", "negative": "negative values",
          "max": "the maximum value (dtype maximum or a far-clip plane)"}


def _shares(frames) -> np.ndarray | None:
    rows = [f.depth.invalid for f in frames if f.depth is not None and f.depth.invalid is not None]
    return np.mean(np.array(rows, dtype=np.float64), axis=0) if rows else None


def check_depth_invalid(ctx: Context) -> Finding | None:
    """Different invalid-depth markers on the two sides (e.g. 65535 in sim, 0 in real)."""
    ss, sr = _shares(ctx.sim.frames), _shares(ctx.real.frames)
    if ss is None or sr is None:
        return None
    ks, kr = int(np.argmax(ss)), int(np.argmax(sr))
    if ss[ks] < MIN_MARKED or sr[kr] < MIN_MARKED or ks == kr:
        return None
    ms, mr = INVALID_MARKERS[ks], INVALID_MARKERS[kr]
    ev = basis_evidence("distribution", 0, ctx)
    ev.update({"sim_marker": ms, "real_marker": mr, "markers": list(INVALID_MARKERS),
               "sim_shares": nums(ss.tolist(), 5), "real_shares": nums(sr.tolist(), 5)})
    title = (f"Invalid depth is marked differently: sim uses {_WORDS[ms]} ({ss[ks]:.1%} of pixels), "
             f"real uses {_WORDS[mr]} ({sr[kr]:.1%}).")
    action = (f"Convert the sim depth's invalid marker to the real sensor's ({_WORDS[mr]}) in the loader, or "
              f"both to NaN, before any filtering, unit conversion or dropout modelling; a bug, not a gap.")
    return Finding("depth_invalid", "bug", title, ev, action, num(3.0))
