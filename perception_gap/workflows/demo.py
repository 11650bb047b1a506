"""The demo as one job: build the MuJoCo data set, index it with its boxes, run the whole analysis,
then the checks after the gap hunt (policy-check, replay, reprojection) on the demo's own inputs.

`perception_gap.run_demo` and the `demo` command both call `demo_job`, so they write the same
files: `OUT/data/`, the catalog, `OUT/results.json` and `OUT/report.html`, and `OUT/after/`
(each check's JSON, their merged `results.json` and one `report.html`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from perception_gap.catalog import DEFAULT_DB, Catalog
from perception_gap.demo import DemoFiles
from perception_gap.outputs import dumps, write_files, write_outputs

# The checks after the gap hunt, in the order they run and are merged.
AFTER_CHECKS = ("policy_check", "replay", "reprojection")


@dataclass(frozen=True)
class DemoRun:
    """What one demo wrote and computed.

    Attributes:
        files: the demo's data files and set names.
        db: the catalog it indexed.
        results: the analysis (`run`) of the demo's sets, as written to OUT/results.json.
        after: each check after the gap hunt (`policy_check`, `replay`, `reprojection`) -> its results.
        after_merged: their sections and findings together, as written to OUT/after/results.json.
    """

    files: DemoFiles
    db: Path
    results: dict[str, Any]
    after: dict[str, dict[str, Any]]
    after_merged: dict[str, Any]


def demo_job(out: str | Path, *, inject: str | None = None, encoders: list[str] | None = None,
             workers: int | None = None, db: str | Path | None = None, wait: float = 0.0,
             progress: Callable[[int, int], None] | None = None, **run_options: Any) -> DemoRun:
    """Build, index and run the demo into `out` (see the module docstring).

    Args:
        out: the output folder.
        inject: one plumbing fault to add (`perception_gap.demo.INJECTIONS`), checked by the caller.
        encoders: encoder names for the run; None: every available one.
        workers: processes and decoding threads (default: all cores).
        db: the catalog file (default OUT/perception_gap.duckdb); rebuilt from scratch.
        wait: seconds to wait for another writer of the catalog.
        progress: the run's progress, called as progress(done, total).
        run_options: passed to `run_job` (`resampling`, ...).
    """
    from perception_gap.demo import build_demo
    from perception_gap.ingest import index_manifest
    from perception_gap.ingest.annotations import attach_coco, attach_masks, load_mask_categories
    from perception_gap.workflows.run import run_job

    folder = Path(out)
    db_path = Path(db) if db is not None else folder / DEFAULT_DB
    db_path.unlink(missing_ok=True)  # the demo rebuilds its data: a fresh catalog
    files = build_demo(folder / "data", inject=inject)
    with Catalog(db_path, wait=wait) as cat:
        index_manifest(cat, files.manifest, workers=workers)
        attach_masks(cat, files.sim_masks, files.sim_set, categories=load_mask_categories(files.mask_categories))
        for path, set_name, source in ((files.sim_coco, files.sim_set, "colour-detector"),
                                       (files.real_coco, files.real_set, "colour-detector"),
                                       (files.real_gt_coco, files.real_set, "gt")):
            if path is not None:
                attach_coco(cat, path, set_name, source)
        res = run_job(cat, files.sim_set, files.real_set, encoder_names=encoders, workers=workers,
                      progress=progress, **run_options)
        write_outputs(res, folder, None)
        after = after_checks(cat, files, folder)
    merged = merge_after(after)
    return DemoRun(files, db_path, res, after, merged)


def after_checks(catalog: Catalog, files: DemoFiles, out: Path) -> dict[str, dict[str, Any]]:
    """policy-check, replay and reprojection on the demo's own inputs (`demo.after`): each one's results,
    written as OUT/after/<check>.json, and their merged report OUT/after/report.html and results.json."""
    from perception_gap.demo.after import build_after_inputs
    from perception_gap.reports.geometry import render_geometry_report
    from perception_gap.workflows.checks import replay_job, reprojection_job
    from perception_gap.workflows.policy_check import policy_check_job

    inputs = build_after_inputs(files.root)
    dest = Path(out) / "after"
    jobs = {"policy_check": lambda: policy_check_job(catalog, files.sim_set, files.real_set, str(inputs.policy)),
            "replay": lambda: replay_job(inputs.replay),
            "reprojection": lambda: reprojection_job(inputs.cameras, initial_states=inputs.initial_states)}
    done: dict[str, dict[str, Any]] = {}
    for section in AFTER_CHECKS:
        text = dumps(jobs[section]())
        write_files([(dest / f"{section}.json", text)])
        done[section] = json.loads(text)  # as written: the sanitized form the report reads
    merged = merge_after(done)
    text = dumps(merged)
    write_files([(dest / "report.html", render_geometry_report(json.loads(text))), (dest / "results.json", text)])
    return done


def merge_after(after: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The checks' sections, their findings in order and the version, as one results structure."""
    merged: dict[str, Any] = {"findings": []}
    for section, res in after.items():
        merged[section] = res[section]
        merged["findings"] += res["findings"]
        merged["version"] = res["version"]
    return merged
