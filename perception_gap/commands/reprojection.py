"""`reprojection FILE`: sim vs real camera models over a workspace grid (see docs/contract.md)."""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.commands.output import check_outputs, finish_check, gate
from perception_gap.errors import InputError
from perception_gap.geometry.reprojection import MAX_COORD_M
from perception_gap.version import __version__

MAX_PIXEL = 1e9  # an observed pixel this far outside any image is a typo
MAX_STATES = 5_000_000
_TRUE, _FALSE = {"1", "true", "yes", "success", "1.0"}, {"0", "false", "no", "failure", "0.0"}


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


def _number(row: dict[str, str], key: str, line: int, path: str) -> float:
    try:
        v = float(row[key])
    except (TypeError, ValueError):
        raise InputError(f"Expected `{key}` on line {line} of {path!r} to be a number of metres, got {row[key]!r}.") from None
    if not math.isfinite(v) or abs(v) > MAX_COORD_M:
        raise InputError(f"Expected `{key}` on line {line} of {path!r} finite and within +-{MAX_COORD_M:g} m, got {v!r}.")
    return v


def load_states(path: str) -> tuple[np.ndarray, np.ndarray]:
    """(M, 3) initial states in metres and (M,) outcomes (1, 0, NaN for none) from a CSV file.

    Columns `x`, `y`, `z` (metres, robot base frame) and optional `success` (1/0, true/false,
    empty for a state without an outcome).

    Raises:
        InputError: missing or unreadable file, missing columns, a bad value (naming its line).
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"Expected `--initial-states` to be an existing CSV file, got {path!r} (not found).")
    xyz, success = [], []
    try:
        with p.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            cols = {c.strip().lower(): c for c in reader.fieldnames or [] if c}
            if not {"x", "y", "z"} <= set(cols):
                raise InputError(f"Expected `--initial-states` {path!r} to have columns x, y, z (and optional success), "
                                 f"got {sorted(cols)}.")
            for line, raw in enumerate(reader, start=2):
                if len(xyz) >= MAX_STATES:
                    raise InputError(f"Expected at most {MAX_STATES} initial states in {path!r}.")
                row = {k: (raw.get(c) or "").strip() for k, c in cols.items()}
                xyz.append([_number(row, k, line, path) for k in ("x", "y", "z")])
                s = row.get("success", "").lower()
                if s in _TRUE or s in _FALSE or s == "":
                    success.append(1.0 if s in _TRUE else 0.0 if s in _FALSE else math.nan)
                else:
                    raise InputError(f"Expected `success` on line {line} of {path!r} to be 1/0, true/false or empty, "
                                     f"got {row['success']!r}.")
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"Cannot read `--initial-states` {path!r} as CSV: {str(e).splitlines()[0]}.") from None
    if not xyz:
        raise InputError(f"Expected at least one initial state in {path!r}, got none.")
    return np.asarray(xyz, dtype=np.float64), np.asarray(success, dtype=np.float64)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.findings import order_findings
    from perception_gap.geometry.camera import parse_camera
    from perception_gap.geometry.coverage import coverage_findings, coverage_on_grid
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
    states = load_states(args.initial_states) if getattr(args, "initial_states", None) else None
    r = reprojection_error(sim, real, pts, known_xyz=xyz, known_px=px)
    section = r.to_dict()
    section["grid"].update(min=grid["min"], max=grid["max"], step=grid["step"])
    section["gate"] = gate("mean_px", section["mean"], args.max_mean_px)
    found = reprojection_findings(r)
    cov = None
    if states is not None:
        cov = coverage_on_grid(pts, float(grid["step"]), r.error_px, states[0], states[1], r.mean)
        section["coverage"] = cov.to_dict()
        found = coverage_findings(found, cov)
    findings = [f.to_dict() for f in order_findings(found)]
    res = {"reprojection": section, "findings": findings, "config": {"file": str(args.file), "initial_states": getattr(args, "initial_states", None)}, "version": __version__}
    summary = [(f"reprojection over {section['n_valid']} of {section['n_points']} grid points "
                f"({section['n_behind']} behind a camera, {section['n_outside']} outside an image)"),
               (f"  error px: mean {r.mean:.3g}, median {r.median:.3g}, max {r.max:.3g}; "
                f"slope {r.slope_px_per_m:.3g} px/m ({'structured' if r.structured else 'flat'})")]
    if r.fit is not None:
        summary.append(f"  camera fit: {', '.join(r.fit.named) or 'nothing'} named ({r.fit.chosen} model, residual "
                       f"{r.fit.fits[r.fit.chosen].residual_rms_px:.2g} px of {r.fit.error_rms_px:.3g} px RMS)")
    if cov is not None:
        summary.append(f"  initial states: {cov.n_states} ({cov.n_outside} outside the grid), {cov.n_failures} failures "
                       f"of {cov.n_outcomes} outcomes; verdict {cov.verdict}")
    return finish_check(args, "reprojection", res, summary)
