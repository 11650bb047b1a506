"""perception-gap: measure the gap between simulated and real camera frames, offline.

The Python API: every command as a typed function (see `perception_gap.api` and the README's
"Python API" section):

    import perception_gap as pg
    with pg.open_catalog("gap.duckdb") as cat:
        pg.index_folder(cat, "frames/sim", "sim", "sim")
        pg.index_folder(cat, "frames/real", "real", "real")
        res = pg.run(cat, "sim", "real", out="out/")

The package reads as the pipeline: `ingest` (sources into the catalog), `catalog` (the DuckDB
file), `statistics` (per-frame numbers), `diagnoses` (named plumbing causes), `embed` (cached
embeddings through `encoders`), `metrics`, `probes` and `ranking` (the gap and what an encoder
keeps), `detection` (detector vs ground truth), `workflows` (run, screen, drift), `commands`
(the command line's commands) and `demo`. The API names below load on first use, so
`import perception_gap` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from perception_gap.version import __version__

_API = ("COMMANDS", "open_catalog", "index_folder", "index_manifest", "index_video", "index_lerobot", "index_hdf5",
        "index_rosbag", "attach_coco", "attach_masks", "list_sets", "rename_set", "drop_set", "stats",
        "list_encoders", "embed_sets", "run", "screen", "drift", "drift_history", "run_demo", "rollouts", "rank_fidelity",
        "latency", "policy_check", "replay", "reprojection", "load_results", "write_outputs", "camera_model",
        "apply_camera_model", "load_camera_model")

__all__ = ["__version__", *_API]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load lazily below
    from perception_gap.api import (  # noqa: F401
        COMMANDS,
        apply_camera_model,
        attach_coco,
        attach_masks,
        camera_model,
        drift,
        drift_history,
        drop_set,
        embed_sets,
        index_folder,
        index_hdf5,
        index_lerobot,
        index_manifest,
        index_rosbag,
        index_video,
        latency,
        list_encoders,
        list_sets,
        load_camera_model,
        load_results,
        open_catalog,
        policy_check,
        rank_fidelity,
        rename_set,
        replay,
        reprojection,
        rollouts,
        run,
        run_demo,
        screen,
        stats,
        write_outputs,
    )


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module("perception_gap.api"), name)
    raise AttributeError(f"module 'perception_gap' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
