"""`policy-check`: matched sim/real observations through a frozen policy, actions compared (docs/contract.md).

The work (pairing, decoding every source the catalog indexes, calling the policy, the gate) is
`perception_gap.workflows.policy_check.policy_check_job`; this module adds the text.
Preprocessing hook: `--preprocess module:function` is called on every batch as
`fn(images, proprio) -> (images, proprio)` (float32 numpy (N, 3, H, W) in [0, 1] and (N, D)) before
the policy; without it, the policy gets the frames as the contract says and does its own
preprocessing inside (the usual case for a TorchScript export).
"""

from __future__ import annotations

import argparse

from perception_gap.commands.output import check_outputs, finish_check, fmt


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.workflows.policy_check import check_batch_size, policy_check_job

    check_outputs(args.out, args.json)
    check_batch_size(args.batch_size)
    with Catalog(args.db, wait=args.wait, create=False, read_only=True) as cat:
        res = policy_check_job(cat, args.sim, args.real, args.policy, preprocess=args.preprocess,
                               batch_size=args.batch_size, max_rel_diff=args.max_rel_diff)
    section = res["policy_check"]
    summary = [f"policy-check: {section['n_pairs']} pairs ({len(section['skipped'])} skipped), "
               f"{len(section['per_dim'])} action dimensions"]
    summary += [f"  dim {j}: sim std {fmt(d['sim_std'])}, real std {fmt(d['real_std'])}, paired diff "
                f"{fmt(d['paired_diff_mean'])} ({fmt(d['paired_diff_rel'])} x sim spread)"
                for j, d in enumerate(section["per_dim"][:16])]
    return finish_check(args, "policy_check", res, summary)
