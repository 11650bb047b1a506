"""`stats`: raw statistics and plumbing diagnoses of a sim and a real set, and their text form."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from perception_gap.commands.output import (
    as_results,
    atomic_write_text,
    check_outputs,
    dumps,
    fmt,
    progress_bar,
    skip_lines,
)
from perception_gap.commands.parsing import Parents

if TYPE_CHECKING:
    from perception_gap.schema import Results


def _extreme(pick, values):
    """min or max of the finite values (None when there is none: an all-NaN set)."""
    finite = [v for v in values or () if v is not None]
    return pick(finite) if finite else None


def _print_stats(res: Results) -> None:
    stats = res.stats or {}
    for name, info in (res.sets or {}).items():
        print(f"{info.role} set {name!r} ({info.domain}): {info.n_usable} usable of {info.n_frames} frames, {info.n_skipped} skipped")
        for line in skip_lines(info.skipped, "--json"):
            print(f"    {line}")
        if info.reindexed:
            print(f"    re-indexed {len(info.reindexed)} frame(s) whose file changed since `index` (measured "
                  f"under the new content), e.g. {info.reindexed[0]}")
        s = stats.get(name)
        if s is None:
            continue
        if s.n_images:
            print(f"    size {fmt(s.sizes)}  dtype {fmt(s.dtypes)}  jpeg {fmt(s.jpeg_fraction)}")
            print(f"    channel mean {fmt(s.channel_mean)}  std {fmt(s.channel_std)}  range [{fmt(_extreme(min, s.channel_min))}, {fmt(_extreme(max, s.channel_max))}]")
            lp = s.lum_percentiles or {}
            print(f"    luma p1/p50/p99 {fmt(lp['p1'])}/{fmt(lp['p50'])}/{fmt(lp['p99'])}  sharpness {fmt(s.sharpness)}  hf ratio {fmt(s.hf_ratio)}")
        d = s.depth
        if d:
            p = d["percentiles"] or {}
            print(f"    depth {fmt(d['dtypes'])} unit {fmt(d['inferred_units'])} p1/p50/p99 {fmt(p.get('p1'))}/{fmt(p.get('p50'))}/{fmt(p.get('p99'))}  dropout {fmt(d['dropout_mean'])}")
        for vec, v in (("action", s.action), ("proprio", s.proprio)):
            if v:
                print(f"    {vec} ({v['dim']}-d) min {fmt(v['min'])} max {fmt(v['max'])}")
    p = res.pairs
    print(f"pairs: {p.n_pairs} matched, {p.n_unpaired_sim} sim and {p.n_unpaired_real} real frames unpaired")
    findings = res.findings
    if not findings:
        print("findings: none (no plumbing bug and no appearance gap found in the raw statistics)")
    for i, f in enumerate(findings, 1):
        print(f"{i}. [{f.severity}] {f.code}: {f.title}")
        if f.action:
            print(f"   action: {f.action}")


def add_parser(sub: argparse._SubParsersAction, parents: Parents) -> None:
    """The `stats` subparser."""
    st = sub.add_parser("stats", parents=[parents.common, parents.engine], help="raw statistics and plumbing diagnoses, sim vs real",
                        description="Raw statistics per set and named plumbing diagnoses (sim set vs real set).")
    st.add_argument("--sim", required=True, help="sim set name")
    st.add_argument("--real", required=True, help="real set name")
    st.add_argument("--json", help="write the results (sets, stats, pairs, findings) to this JSON file")
    st.set_defaults(func=execute)


def execute(args: argparse.Namespace) -> int:
    from perception_gap.catalog import Catalog
    from perception_gap.engines import open_engine
    from perception_gap.workflows.stats import stats_job

    check_outputs(json_path=args.json)
    progress, close = progress_bar(args, "stats")
    with Catalog(args.db, wait=args.wait, create=False) as cat, \
            open_engine(cat, args.engine, address=args.address, workers=args.workers) as eng:
        try:
            raw = stats_job(cat, args.sim, args.real, workers=args.workers, progress=progress,
                            runner=eng.stats_runner if eng else None)
        finally:
            close()
    res = as_results(raw)
    if args.json:
        atomic_write_text(Path(args.json), dumps(res.to_dict()))
    if not args.quiet:
        _print_stats(res)
    return 0
