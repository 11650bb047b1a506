"""`policy-check`: matched sim/real observations through a frozen policy, actions compared (docs/contract.md).

The work (pairing, decoding every source the catalog indexes, calling the policy) is
`perception_gap.workflows.policy_check.policy_check_job`; this module adds the gate and the text.
Preprocessing hook: `--preprocess module:function` is called on every batch as
`fn(images, proprio) -> (images, proprio)` (float32 numpy (N, 3, H, W) in [0, 1] and (N, D)) before
the policy; without it, the policy gets the frames as the contract says and does its own
preprocessing inside (the usual case for a TorchScript export).
"""

from __future__ import annotations

import argparse
import math

from perception_gap.commands.output import check_outputs, finish_check, gate
from perception_gap.errors import InputError


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.workflows.policy_check import policy_check_job

    check_outputs(args.out, args.json)
    if args.batch_size < 1:
        raise InputError(f"Expected `--batch-size` >= 1, got {args.batch_size}.")
    with Catalog(args.db, wait=args.wait, create=False, read_only=True) as cat:
        res = policy_check_job(cat, args.sim, args.real, args.policy, preprocess=args.preprocess,
                               batch_size=args.batch_size)
    section = res["policy_check"]
    rel = [d["paired_diff_rel"] for d in section["per_dim"]]
    worst = max((r for r in rel if r is not None and math.isfinite(r)), default=None)
    section["gate"] = gate("max_paired_diff_rel", worst, args.max_rel_diff)
    summary = [f"policy-check: {section['n_pairs']} pairs ({len(section['skipped'])} skipped), "
               f"{len(section['per_dim'])} action dimensions"]
    summary += [f"  dim {j}: sim std {d['sim_std']:.3g}, real std {d['real_std']:.3g}, paired diff "
                f"{d['paired_diff_mean']:.3g} ({d['paired_diff_rel'] if d['paired_diff_rel'] is not None else math.nan:.3g}"
                " x sim spread)" for j, d in enumerate(section["per_dim"][:16])]
    return finish_check(args, "policy_check", res, summary)
