"""`policy-check`: matched sim/real observations through a frozen policy, actions compared (docs/contract.md).

Preprocessing hook: `--preprocess module:function` is called on every batch as
`fn(images, proprio) -> (images, proprio)` (float32 numpy (N, 3, H, W) in [0, 1] and (N, D)) before
the policy; without it, the policy gets the frames as the contract says and does its own
preprocessing inside (the usual case for a TorchScript export).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.commands.output import check_outputs, finish_check, gate
from perception_gap.errors import FrameError, InputError
from perception_gap.version import __version__


def frame_array(path: str) -> np.ndarray:
    """(3, H, W) float32: 8-bit images / 255, 16-bit / 65535, `.npy` observation arrays as they are.

    Raises:
        FrameError: unreadable, inside a container, or not 1 or 3 channels.
    """
    from perception_gap.ingest.frames import decode_rgb

    if "#" in path and not Path(path).exists():
        raise FrameError("frames inside containers (video, HDF5, LeRobot) are not read by policy-check yet")
    img = decode_rgb(Path(path))
    if isinstance(img, np.ndarray):
        a = img.astype(np.float32) / {np.dtype(np.uint8): 255.0, np.dtype(np.uint16): 65535.0}.get(img.dtype, 1.0)
    else:
        a = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    if a.shape[2] != 3:
        raise FrameError(f"expected 1 or 3 channels, got {a.shape[2]}")
    return np.ascontiguousarray(a.transpose(2, 0, 1))


def _pairs(cat: Any, sim: str, real: str) -> tuple[list[str], list[dict], list[dict]]:
    rows = {name: {r["pair_key"]: r for r in cat.load_frames(name)} for name in (sim, real)}
    keys = sorted(set(rows[sim]) & set(rows[real]))
    if len(keys) < 2:
        raise InputError(f"Expected at least 2 pair keys shared by {sim!r} and {real!r}, got {len(keys)}.")
    return keys, [rows[sim][k] for k in keys], [rows[real][k] for k in keys]


def _stack(rows: list[dict], images: list[np.ndarray], domain: str) -> tuple[np.ndarray, np.ndarray]:
    shapes = {im.shape for im in images}
    if len(shapes) > 1:
        raise InputError(f"Expected one frame size across the {domain} frames, got {sorted(shapes)}.")
    dims = {len(r["proprio"] or []) for r in rows}
    if len(dims) > 1:
        raise InputError(f"Expected the same proprio length for every {domain} frame, got lengths {sorted(dims)}.")
    proprio = np.array([r["proprio"] or [] for r in rows], dtype=np.float32).reshape(len(rows), dims.pop())
    return np.stack(images), proprio


def _decode(row: dict, domain: str, bad: list[str]) -> np.ndarray | None:
    try:
        return frame_array(row["rgb_path"])
    except FrameError as e:
        bad.append(f"{domain}: {e}")
        return None


def _preprocess(prep: Any, images: np.ndarray, proprio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    try:
        images, proprio = prep(images, proprio)
        return np.asarray(images, np.float32), np.asarray(proprio, np.float32)
    except Exception as e:  # noqa: BLE001 - the user's hook failing is bad input, one line
        raise InputError(f"`--preprocess` raised or returned something else than (images, proprio): "
                         f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None


def run_policy(policy: Any, prep: Any, keys: list[str], sim: list[dict], real: list[dict],
               batch: int) -> tuple[np.ndarray, np.ndarray, list[str], list[dict[str, str]]]:
    """(sim actions, real actions, the pair keys used, skipped pairs with reasons); each frame decoded once."""
    out: dict[str, list[np.ndarray]] = {"sim": [], "real": []}
    used, skipped = [], []
    for i in range(0, len(keys), batch):
        got: dict[str, list] = {"sim": [], "real": []}
        for k, rs, rr in zip(keys[i:i + batch], sim[i:i + batch], real[i:i + batch]):
            bad: list[str] = []
            ims, imr = _decode(rs, "sim", bad), _decode(rr, "real", bad)
            if bad:
                skipped.append({"pair_key": k, "reason": "; ".join(bad)})
                continue
            used.append(k)
            got["sim"].append((rs, ims))
            got["real"].append((rr, imr))
        for dom, items in got.items():
            if items:
                images, proprio = _stack([r for r, _ in items], [im for _, im in items], dom)
                if prep is not None:
                    images, proprio = _preprocess(prep, images, proprio)
                out[dom].append(policy(np.asarray(images, np.float32), np.asarray(proprio, np.float32)))
    widths = {a.shape[1] for d in out.values() for a in d}
    if len(widths) > 1:
        raise InputError(f"Expected the policy to return the same action width for every batch, got {sorted(widths)}.")
    if len(used) < 2:
        raise InputError(f"Expected at least 2 readable pairs, got {len(used)} ({len(skipped)} skipped: "
                         f"{skipped[0]['reason'] if skipped else 'none'}).")
    return np.concatenate(out["sim"]), np.concatenate(out["real"]), used, skipped


def _exit_message(e: BaseException, stage: str, args: argparse.Namespace) -> str:
    """One line for user code (the policy or --preprocess) that tried to end the process."""
    what = f"sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"raise {type(e).__name__}"
    return (f"The user code {stage} called {what}; expected `--policy` {args.policy!r}"
            f"{f' and `--preprocess` {args.preprocess!r}' if args.preprocess else ''} to return actions, "
            "not to end the process. No results were written.")


def execute(args: argparse.Namespace) -> int:
    from encoders.errors import EncoderError
    from encoders.policy import PolicyCall, import_function, load_policy
    from perception_gap.catalog import Catalog
    from perception_gap.findings import order_findings
    from perception_gap.geometry.policy import compare_actions, policy_findings

    check_outputs(args.out, args.json)
    if args.batch_size < 1:
        raise InputError(f"Expected `--batch-size` >= 1, got {args.batch_size}.")
    with Catalog(args.db, wait=args.wait, create=False, read_only=True) as cat:
        for name, flag in ((args.sim, "--sim"), (args.real, "--real")):  # not workflows.common: it loads sklearn
            if cat.get_set(name) is None:
                raise InputError(f"Unknown set {name!r} for {flag} (known: {', '.join(map(repr, cat.list_sets()))}).")
        keys, sim_rows, real_rows = _pairs(cat, args.sim, args.real)
    stage = "loading `--policy`"
    try:
        policy = PolicyCall(load_policy(args.policy), args.policy)
        stage = "importing `--preprocess`"
        prep = import_function(args.preprocess) if args.preprocess else None
        stage = "running the policy" + (" or `--preprocess`" if args.preprocess else "")
        a_sim, a_real, used, skipped = run_policy(policy, prep, keys, sim_rows, real_rows, args.batch_size)
    except EncoderError as e:
        raise InputError(str(e)) from None
    except (Exception, KeyboardInterrupt):  # errors with their own message; Ctrl-C as the CLI reports it
        raise
    except BaseException as e:  # noqa: BLE001 - sys.exit() in user code must not end the run with exit 0
        raise InputError(_exit_message(e, stage, args)) from None
    step_of = {k: r["step"] if r["step"] is not None else rr["step"] for k, r, rr in zip(keys, sim_rows, real_rows)}
    pc = compare_actions(a_sim, a_real, used, [step_of[k] for k in used])
    section = {"policy": args.policy, **pc.to_dict(), "skipped": skipped}
    worst = max((d.paired_diff_rel for d in pc.per_dim if np.isfinite(d.paired_diff_rel)), default=None)
    section["gate"] = gate("max_paired_diff_rel", worst, args.max_rel_diff)
    findings = [f.to_dict() for f in order_findings(policy_findings(pc))]
    res = {"policy_check": section, "findings": findings, "version": __version__,
           "config": {"policy": args.policy, "sim": args.sim, "real": args.real, "preprocess": args.preprocess}}
    summary = [f"policy-check: {pc.n_pairs} pairs ({len(skipped)} skipped), {len(pc.per_dim)} action dimensions"]
    summary += [f"  dim {j}: sim std {d.sim_std:.3g}, real std {d.real_std:.3g}, paired diff {d.paired_diff_mean:.3g}"
                f" ({d.paired_diff_rel:.3g} x sim spread)" for j, d in enumerate(pc.per_dim[:16])]
    return finish_check(args, "policy_check", res, summary)
