"""perception-gap: measure the gap between simulated and real camera frames, offline.

The Python API (see `perception_gap.api` and the README's "Python API" section):

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

_API = ("open_catalog", "index_folder", "index_manifest", "stats", "run", "screen", "drift", "policy_check",
        "list_encoders", "load_results", "write_outputs")

__all__ = ["__version__", *_API]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names load lazily below
    from perception_gap.api import (  # noqa: F401
        drift,
        index_folder,
        index_manifest,
        list_encoders,
        load_results,
        open_catalog,
        policy_check,
        run,
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
