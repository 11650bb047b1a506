"""Execution engines for the statistics and embedding stages.

Owns where those stages run: `local` (this machine's process pool and model, the default, in
`perception_gap.workflows.stats` and `perception_gap.embed`) or `ray` (`ray_engine`: Ray Data
`map_batches` workers on a cluster, results written as Parquet shards beside the catalog and
merged into it). `open_engine` picks one for a command; Ray is imported only when asked for.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from perception_gap.errors import InputError

ENGINES = ("local", "ray")


def open_engine(catalog: Any, engine: str = "local", *, address: str | None = None, workers: int | None = None,
                device: str = "auto") -> AbstractContextManager[Any]:
    """A context giving the engine object to pass to the stages: None for `local`, else a
    `RayEngine` (connected to `address`, or a local Ray instance when None) for `ray`.

    Raises:
        InputError: an unknown engine, `address` without the ray engine, or Ray not installed.
    """
    if engine not in ENGINES:
        raise InputError(f"Expected `--engine` to be one of {', '.join(ENGINES)}, got {engine!r}.")
    if engine == "local":
        if address:
            raise InputError("`--address` names a Ray cluster: it needs `--engine ray`.")
        return nullcontext(None)
    from perception_gap.engines.ray_engine import RayEngine

    return RayEngine(catalog, address=address, workers=workers, device=device)
