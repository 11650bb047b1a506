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
from typing import TYPE_CHECKING

from perception_gap.commands.flags import non_negative
from perception_gap.commands.output import as_results, check_outputs, finish_check, fmt
from perception_gap.commands.parsing import Parents

if TYPE_CHECKING:
    from perception_gap.schema import Results


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `policy-check` subparser."""
    pc = sub.add_parser("policy-check", parents=[parents.common], help="matched sim/real observations through a frozen policy",
                        description="Push paired sim and real frames (with their proprio) through a frozen policy "
                                    "(TorchScript file, torch.export .pt2 program, or module:function) called as "
                                    "policy(images float32 N x 3 x H x W in [0, 1], proprio float32 N x D) -> (N, A) "
                                    "actions; compare the actions per dimension. Exit 1 when --max-rel-diff is crossed.")
    pc.add_argument("--policy", required=True, metavar="SPEC", help="policy.pt (TorchScript), program.pt2, or "
                                                                    "module:function / file.py:function")
    pc.add_argument("--preprocess", metavar="module:function", help="the policy's own preprocessing: called as "
                                                                    "fn(images, proprio) -> (images, proprio), numpy in and out")
    pc.add_argument("--sim", required=True, help="sim set name")
    pc.add_argument("--real", required=True, help="real set name")
    pc.add_argument("--batch-size", type=int, default=32, help="frames per policy call (default 32)")
    pc.add_argument("--max-rel-diff", type=non_negative, metavar="R", help="gate: exit 1 when any dimension's "
                                                                    "|real - sim| / sim std exceeds R")
    pc.add_argument("--out", help="output folder (results.json, report.html)")
    pc.add_argument("--json", help="write the results to this JSON file")
    pc.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.workflows.policy_check import check_batch_size, policy_check_job

    check_outputs(args.out, args.json)
    check_batch_size(args.batch_size)
    with Catalog(args.db, wait=args.wait, create=False, read_only=True) as cat:
        res = as_results(policy_check_job(cat, args.sim, args.real, args.policy, preprocess=args.preprocess,
                                          batch_size=args.batch_size, max_rel_diff=args.max_rel_diff))
    return finish_check(args, "policy_check", res, summary(res))


def summary(res: Results) -> list[str]:
    """The text summary of a policy check's results."""
    section = res.policy_check
    lines = [f"policy-check: {section.n_pairs} pairs ({len(section.skipped or [])} skipped), "
             f"{len(section.per_dim)} action dimensions"]
    lines += [f"  dim {j}: sim std {fmt(d['sim_std'])}, real std {fmt(d['real_std'])}, paired diff "
              f"{fmt(d['paired_diff_mean'])} ({fmt(d['paired_diff_rel'])} x sim spread)"
              for j, d in enumerate(section.per_dim[:16])]
    return lines
