"""`replay FILE`: logged real vs open-loop sim end-effector trajectories (see docs/contract.md)."""

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
from perception_gap.version import __version__

POSE = ("x", "y", "z", "qw", "qx", "qy", "qz")
REQUIRED = ("episode", "step", "domain", *POSE)
TRUE, FALSE = {"1", "true", "yes", "1.0"}, {"0", "false", "no", "0.0", ""}
# No end-effector is a thousand kilometres from its base, and a quaternion component this large
# would overflow when squared to normalize it; steps stay exact in a float64.
MAX_POSE_ABS = 1e6
MAX_STEP = 2**53


def read_rows(path: str) -> list[dict[str, Any]]:
    """Rows of a CSV or JSONL file (JSON objects one per line).

    Raises:
        InputError: missing file, unknown suffix, unreadable, or a required column missing.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"Expected FILE to be an existing CSV or JSONL file, got {path!r} (not found).")
    ext = p.suffix.lower()
    try:
        with p.open(newline="", encoding="utf-8-sig") as f:
            if ext == ".csv":
                rows = [dict(r) for r in csv.DictReader(f)]
            elif ext in (".jsonl", ".ndjson"):
                rows = [json.loads(line) for line in f if line.strip()]
            else:
                raise InputError(f"Expected FILE to end in .csv or .jsonl, got {path!r}.")
    except (OSError, UnicodeDecodeError, ValueError, csv.Error) as e:
        raise InputError(f"Cannot read {path!r}: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    if not rows or not all(isinstance(r, dict) for r in rows):
        raise InputError(f"Expected {path!r} to hold rows of {', '.join(REQUIRED)}, got none.")
    missing = [c for c in REQUIRED if c not in rows[0]]
    if missing:
        raise InputError(f"Expected columns {', '.join(REQUIRED)} in {path!r}; missing {', '.join(missing)}.")
    return rows


def _row(r: dict[str, Any], i: int) -> tuple[str, int, str, list[float], bool | None]:
    where = f"row {i + 1}"
    missing = [c for c in REQUIRED if r.get(c) is None]
    if missing:
        raise InputError(f"Expected columns {', '.join(REQUIRED)} at {where}; missing {', '.join(missing)}.")
    dom = str(r["domain"]).strip().lower()
    if dom not in ("sim", "real"):
        raise InputError(f"Expected `domain` sim or real at {where}, got {r['domain']!r}.")
    try:
        step = float(r["step"])
        pose = [float(r[c]) for c in POSE]
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"Expected numbers for step, {', '.join(POSE)} at {where}, got "
                         f"{[r.get(c) for c in ('step', *POSE)]}.") from None
    if not (math.isfinite(step) and step.is_integer() and abs(step) <= MAX_STEP):
        raise InputError(f"Expected an integer `step` within +-2**53 at {where}, got {r['step']!r}.")
    if not all(math.isfinite(v) and abs(v) <= MAX_POSE_ABS for v in pose):
        raise InputError(f"Expected a finite pose (x, y, z in m; qw, qx, qy, qz) within +-{MAX_POSE_ABS:g} at "
                         f"{where}, got {pose}.")
    c = r.get("contact")
    contact = None if c is None else str(c).strip().lower()
    if contact is not None and contact not in TRUE | FALSE:
        raise InputError(f"Expected `contact` true/false or 1/0 at {where}, got {c!r}.")
    return str(r["episode"]), int(step), dom, pose, None if contact is None else contact in TRUE


def episodes_from_rows(rows: list[dict[str, Any]]) -> tuple[list[tuple], int]:
    """[(episode, steps, p_sim, q_sim, p_real, q_real, contact)] per episode, and the count of unmatched rows."""
    by: dict[tuple[str, int, str], tuple[list[float], bool | None]] = {}
    for i, r in enumerate(rows):
        ep, step, dom, pose, contact = _row(r, i)
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
        sim = np.array([by[(*k, "sim")][0] for k in ks])
        real = np.array([by[(*k, "real")][0] for k in ks])
        flags = [by[(*k, "real")][1] if by[(*k, "real")][1] is not None else by[(*k, "sim")][1] for k in ks]
        contact = None if all(f is None for f in flags) else np.array([bool(f) for f in flags])
        out.append((ep, np.array([k[1] for k in ks]), sim[:, :3], sim[:, 3:], real[:, :3], real[:, 3:], contact))
    return out, len(by) - 2 * len(matched)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.findings import order_findings
    from perception_gap.geometry.replay import replay_episode, replay_findings, summarize_replay

    check_outputs(args.out, args.json)
    episodes, unmatched = episodes_from_rows(read_rows(args.file))
    r = summarize_replay([replay_episode(*e) for e in episodes], unmatched)
    section = r.to_dict()
    section["gate"] = gate("translation_mean_m", r.translation_mean, args.max_translation_m)
    findings = [f.to_dict() for f in order_findings(replay_findings(r))]
    res = {"replay": section, "findings": findings, "config": {"file": str(args.file)}, "version": __version__}
    onset = "none" if r.divergence_step is None else f"step {r.divergence_step}"
    summary = [f"replay of {len(r.episodes)} episode(s), {len(r.steps)} steps ({unmatched} unmatched rows skipped)",
               (f"  translation error mean {r.translation_mean * 1000:.3g} mm, rotation error mean "
                f"{r.rotation_mean_deg:.3g} deg; divergence onset: {onset}")]
    return finish_check(args, "replay", res, summary)
