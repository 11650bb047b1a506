"""`reprojection FILE`: sim vs real camera models over a workspace grid (see docs/contract.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.commands.output import check_outputs, finish_check, gate
from perception_gap.errors import InputError
from perception_gap.geometry.reprojection import MAX_COORD_M
from perception_gap.version import __version__

MAX_PIXEL = 1e9  # an observed pixel this far outside any image is a typo


def load_spec(path: str) -> dict[str, Any]:
    """The parsed JSON object of a geometry input file.

    Raises:
        InputError: missing, unreadable, not JSON, or not an object.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"Expected FILE to be an existing JSON file, got {path!r} (not found).")
    try:
        obj = json.loads(p.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"Cannot read {path!r} as JSON: {str(e).splitlines()[0]}.") from None
    if not isinstance(obj, dict):
        raise InputError(f"Expected {path!r} to hold a JSON object, got {type(obj).__name__}.")
    return obj


def _known_points(obj: Any) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """`points`: [{"xyz": [x, y, z], "pixel": [u, v]}, ...], pixels observed in the real image."""
    if obj is None:
        return None, None
    try:
        xyz = np.asarray([p["xyz"] for p in obj], dtype=np.float64)
        px = np.asarray([p["pixel"] for p in obj], dtype=np.float64)
    except (TypeError, KeyError, ValueError):
        raise InputError('Expected `points` as [{"xyz": [x, y, z], "pixel": [u, v]}, ...].') from None
    if xyz.ndim != 2 or xyz.shape[1:] != (3,) or px.shape != (len(xyz), 2) or not (
            np.isfinite(xyz).all() and np.isfinite(px).all()):
        raise InputError(f"Expected `points` as finite xyz triples with pixel pairs, got shapes {xyz.shape} and {px.shape}.")
    if (np.abs(xyz) > MAX_COORD_M).any() or (np.abs(px) > MAX_PIXEL).any():
        raise InputError(f"Expected `points` xyz within +-{MAX_COORD_M:g} m and pixels within +-{MAX_PIXEL:g}, got "
                         f"{float(np.abs(xyz).max()):g} m and {float(np.abs(px).max()):g} px at the largest.")
    return xyz, px


def execute(args: argparse.Namespace) -> int:
    from perception_gap.findings import order_findings
    from perception_gap.geometry.camera import parse_camera
    from perception_gap.geometry.reprojection import grid_points, reprojection_error, reprojection_findings

    check_outputs(args.out, args.json)
    spec = load_spec(args.file)
    for key in ("sim", "real", "grid"):
        if key not in spec:
            raise InputError(f"Expected {args.file!r} to have `sim`, `real` and `grid`, got keys {sorted(spec)}.")
    sim, real = parse_camera(spec["sim"], "sim"), parse_camera(spec["real"], "real")
    grid = spec["grid"]
    if not isinstance(grid, dict) or not {"min", "max", "step"} <= set(grid):
        raise InputError('Expected `grid` as {"min": [x, y, z], "max": [x, y, z], "step": metres}.')
    pts = grid_points(grid["min"], grid["max"], grid["step"])
    xyz, px = _known_points(spec.get("points"))
    r = reprojection_error(sim, real, pts, known_xyz=xyz, known_px=px)
    section = r.to_dict()
    section["grid"].update(min=grid["min"], max=grid["max"], step=grid["step"])
    section["gate"] = gate("mean_px", section["mean"], args.max_mean_px)
    findings = [f.to_dict() for f in order_findings(reprojection_findings(r))]
    res = {"reprojection": section, "findings": findings, "config": {"file": str(args.file)}, "version": __version__}
    summary = [(f"reprojection over {section['n_valid']} of {section['n_points']} grid points "
                f"({section['n_behind']} behind a camera, {section['n_outside']} outside an image)"),
               (f"  error px: mean {r.mean:.3g}, median {r.median:.3g}, max {r.max:.3g}; "
                f"slope {r.slope_px_per_m:.3g} px/m ({'structured' if r.structured else 'flat'})")]
    return finish_check(args, "reprojection", res, summary)
