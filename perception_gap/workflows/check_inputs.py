"""The input files of the checks after the gap hunt, read and checked at the boundary.

`read_replay_log` turns a pose log (CSV, JSONL or Parquet, through `perception_gap.ingest.tables`)
into per-episode arrays of matched sim and real steps; `read_cameras` reads the reprojection
input (a JSON object of two cameras, a grid and optional observed points); `read_initial_states`
reads training initial states (a table of x, y, z and optional success). Every bad value is one
`InputError` naming where it is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.errors import InputError
from perception_gap.geometry.camera import Camera, parse_camera
from perception_gap.geometry.reprojection import MAX_COORD_M, grid_points
from perception_gap.ingest.tables import number, read_table, require

POSE = ("x", "y", "z", "qw", "qx", "qy", "qz")
REPLAY_COLUMNS = ("episode", "step", "domain", *POSE)
TRUE, FALSE = {"1", "true", "yes", "1.0"}, {"0", "false", "no", "0.0", ""}
# No end-effector is a thousand kilometres from its base, and a quaternion component this large
# would overflow when squared to normalize it; steps stay exact in a float64.
MAX_POSE_ABS = 1e6
MAX_STEP = 2**53
MAX_PIXEL = 1e9  # an observed pixel this far outside any image is a typo
MAX_STATES = 5_000_000
_SUCCESS, _FAILURE = {"1", "true", "yes", "success", "1.0"}, {"0", "false", "no", "failure", "0.0"}


@dataclass(frozen=True)
class ReplayEpisode:
    """One episode's matched steps: (T,) `steps`, (T, 3) positions in m, (T, 4) quaternions (w, x, y, z),
    and (T,) contact flags (None when the log has none)."""

    episode: str
    steps: np.ndarray
    p_sim: np.ndarray
    q_sim: np.ndarray
    p_real: np.ndarray
    q_real: np.ndarray
    contact: np.ndarray | None


def _pose_row(r: dict[str, Any], row: int) -> tuple[str, int, str, list[float], bool | None]:
    missing = [c for c in REPLAY_COLUMNS if r.get(c) is None]
    if missing:
        raise InputError(f"Row {row}: expected columns {', '.join(REPLAY_COLUMNS)}; missing {', '.join(missing)}.")
    dom = str(r["domain"]).strip().lower()
    if dom not in ("sim", "real"):
        raise InputError(f"Row {row}: expected `domain` sim or real, got {r['domain']!r}.")
    step = number(r["step"], "step", row, low=-MAX_STEP, high=MAX_STEP)
    if not step.is_integer():
        raise InputError(f"Row {row}: expected `step` to be a whole number, got {r['step']!r}.")
    pose = [number(r[c], c, row, low=-MAX_POSE_ABS, high=MAX_POSE_ABS) for c in POSE]
    c = r.get("contact")
    contact = None if c is None else str(c).strip().lower()
    if contact is not None and contact not in TRUE | FALSE:
        raise InputError(f"Row {row}: expected `contact` true/false or 1/0, got {c!r}.")
    return str(r["episode"]), int(step), dom, pose, None if contact is None else contact in TRUE


def replay_episodes(rows: list[dict[str, Any]]) -> tuple[list[ReplayEpisode], int]:
    """Rows of a pose log matched by (episode, step): one `ReplayEpisode` each, and the count of unmatched rows.

    Raises:
        InputError: a bad row (naming it), a repeated (episode, step, domain), or no step logged on both sides.
    """
    by: dict[tuple[str, int, str], tuple[list[float], bool | None]] = {}
    for i, r in enumerate(rows):
        ep, step, dom, pose, contact = _pose_row(r, i + 1)
        if (ep, step, dom) in by:
            raise InputError(f"Expected one row per (episode, step, domain), got {ep!r} step {step} {dom} twice.")
        by[(ep, step, dom)] = (pose, contact)
    keys = sorted({(ep, s) for ep, s, _ in by}, key=lambda k: (k[0], k[1]))
    matched = [k for k in keys if (*k, "sim") in by and (*k, "real") in by]
    if not matched:
        raise InputError("Expected sim and real rows with the same (episode, step), got none in common.")
    out = []
    for ep in dict.fromkeys(k[0] for k in matched):
        ks = [k for k in matched if k[0] == ep]
        sim = np.array([by[k + ("sim",)][0] for k in ks])
        real = np.array([by[k + ("real",)][0] for k in ks])
        flags = [by[k + ("real",)][1] if by[k + ("real",)][1] is not None else by[k + ("sim",)][1] for k in ks]
        contact = None if all(f is None for f in flags) else np.array([bool(f) for f in flags])
        out.append(ReplayEpisode(ep, np.array([k[1] for k in ks]), sim[:, :3], sim[:, 3:], real[:, :3], real[:, 3:],
                                 contact))
    return out, len(by) - 2 * len(matched)


def read_replay_log(path: str | Path) -> tuple[list[ReplayEpisode], int]:
    """A pose log (CSV, JSONL or Parquet; columns in `REPLAY_COLUMNS`, optional `contact`) as matched episodes.

    Returns:
        (episodes, the count of rows without a partner on the other side).
    """
    table = read_table(path, "FILE")
    table.require(REPLAY_COLUMNS)
    return replay_episodes(table.rows())


def load_spec(path: str | Path) -> dict[str, Any]:
    """The parsed JSON object of a geometry input file.

    Raises:
        InputError: missing, unreadable, not JSON, or not an object.
    """
    from perception_gap.ingest.frames import not_a_file

    p = Path(path)
    why = not_a_file(p)
    if why is not None:
        raise InputError(f"Expected `FILE` to be an existing regular file, got {str(p)!r} ({why}).")
    try:
        obj = json.loads(p.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise InputError(f"Cannot read {str(p)!r} as JSON: {str(e).splitlines()[0]}.") from None
    if not isinstance(obj, dict):
        raise InputError(f"Expected {str(p)!r} to hold a JSON object, got {type(obj).__name__}.")
    return obj


def known_points(obj: Any) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
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


@dataclass(frozen=True)
class CameraSpec:
    """The reprojection input: both cameras, the workspace grid ((N, 3) points in m, `grid` as given)
    and optional observed points ((K, 3) xyz in m with (K, 2) real pixels)."""

    sim: Camera
    real: Camera
    grid: dict[str, Any]
    points: np.ndarray
    known_xyz: np.ndarray | None
    known_px: np.ndarray | None


def cameras_from_spec(spec: dict[str, Any], source: str = "FILE") -> CameraSpec:
    """A parsed reprojection input: `{"sim": CAM, "real": CAM, "grid": {"min", "max", "step"}, "points": [...]}`.

    Raises:
        InputError: a key missing, a bad camera, grid or point.
    """
    for key in ("sim", "real", "grid"):
        if key not in spec:
            raise InputError(f"Expected {source!r} to have `sim`, `real` and `grid`, got keys {sorted(spec)}.")
    sim, real = parse_camera(spec["sim"], "sim"), parse_camera(spec["real"], "real")
    grid = spec["grid"]
    if not isinstance(grid, dict) or not {"min", "max", "step"} <= set(grid):
        raise InputError('Expected `grid` as {"min": [x, y, z], "max": [x, y, z], "step": metres}.')
    pts = grid_points(grid["min"], grid["max"], grid["step"])
    xyz, px = known_points(spec.get("points"))
    return CameraSpec(sim, real, grid, pts, xyz, px)


def read_cameras(path: str | Path) -> CameraSpec:
    """The reprojection input file (JSON; see `cameras_from_spec`)."""
    return cameras_from_spec(load_spec(path), str(path))


def read_initial_states(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(M, 3) initial states in metres and (M,) outcomes (1, 0, NaN for none) from a table.

    Columns `x`, `y`, `z` (metres, robot base frame) and optional `success` (1/0, true/false,
    empty for a state without an outcome), in a CSV, JSONL or Parquet file of at most MAX_STATES
    rows. Column names are matched without case or surrounding spaces, so `x` and `X ` are the
    same column: a table naming one twice is refused.

    Raises:
        InputError: an empty path, a missing or unreadable file, more than MAX_STATES rows,
            missing or repeated columns, a bad value (naming its row).
    """
    if isinstance(path, str) and not path.strip():
        raise InputError(f"Expected `--initial-states` to name a CSV, JSONL or Parquet file, got {path!r}.")
    table = read_table(path, "--initial-states", max_rows=MAX_STATES)
    cols: dict[str, list[Any]] = {}
    given: dict[str, str] = {}
    for c, v in table.columns.items():
        key = str(c).strip().lower()
        if key in given:
            raise InputError(f"--initial-states {str(path)!r} has columns {given[key]!r} and {str(c)!r}, which both "
                             f"read as `{key}`; rename or remove one.")
        given[key], cols[key] = str(c), v
    require(cols, ("x", "y", "z"), path, "--initial-states")
    xyz = np.array([[number(cols[k][i], k, i + 1, low=-MAX_COORD_M, high=MAX_COORD_M) for k in ("x", "y", "z")]
                    for i in range(table.n_rows)], dtype=np.float64)
    success = []
    for i, v in enumerate(cols.get("success", [None] * table.n_rows)):
        s = "" if v is None else str(v).strip().lower()
        if s not in _SUCCESS | _FAILURE | {""}:
            raise InputError(f"Row {i + 1}: expected `success` to be 1/0, true/false or empty, got {v!r}.")
        success.append(1.0 if s in _SUCCESS else 0.0 if s in _FAILURE else math.nan)
    return xyz, np.asarray(success, dtype=np.float64)
