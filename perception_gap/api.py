"""The Python API: what a notebook needs, in the order of the pipeline.

Every function here is a thin, typed front on the library (the same code the command line
runs) and returns the results.json structure as a dict (see docs/contract.md). Nothing here
prints; errors are `perception_gap.errors.PerceptionGapError` subclasses with a one-line message.

    import perception_gap as pg

    with pg.open_catalog("gap.duckdb") as cat:
        pg.index_folder(cat, "frames/sim", "sim", "sim")
        pg.index_folder(cat, "frames/real", "real", "real", depth_unit="mm")
        res = pg.run(cat, "sim", "real", encoders=["pixel"], out="out/")
    res["findings"][0]["code"]
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from perception_gap.catalog import DEFAULT_DB, Catalog
from perception_gap.errors import InputError
from perception_gap.ingest import IndexReport
from perception_gap.ingest import index_folder as _index_folder
from perception_gap.ingest import index_manifest as _index_manifest

PathLike = str | os.PathLike[str]
Progress = Callable[[int, int], None]


def open_catalog(path: PathLike = DEFAULT_DB, *, read_only: bool = False, wait: float = 0.0) -> Catalog:
    """Open (or, unless `read_only`, create) a DuckDB catalog file.

    Args:
        path: the catalog file (default `perception_gap.duckdb` in the working folder).
        read_only: open for queries only; the file must exist.
        wait: seconds to wait for another process that is writing the catalog (0: fail at once).

    Returns:
        A `Catalog`; use it as a context manager (`with open_catalog(...) as cat:`).
    """
    return Catalog(Path(path), read_only=read_only, wait=wait)


def index_folder(catalog: Catalog, root: PathLike, set_name: str, domain: str, *, pair_regex: str | None = None,
                 depth_unit: str | None = None, tags: list[str] | None = None, workers: int | None = None,
                 progress: Progress | None = None) -> IndexReport:
    """Index a folder of frames as set `set_name` of `domain` (`sim` or `real`), incrementally.

    Pair key = the relative path without its extension (or the first group of `pair_regex`);
    depth from `depth/` or `<stem>_depth.*`; episode = the sub-folder. Only new or changed files
    are read. Returns the `IndexReport` (listed, new, changed, unchanged, vanished, usable, skipped).
    """
    return _index_folder(catalog, Path(root), set_name, domain, pair_regex=pair_regex, depth_unit=depth_unit,
                         tags=tags, workers=workers, progress=progress)


def index_manifest(catalog: Catalog, manifest: PathLike, *, root: PathLike | None = None, tags: list[str] | None = None,
                   workers: int | None = None, progress: Progress | None = None) -> list[IndexReport]:
    """Index the sets of a CSV, JSONL or Parquet manifest (columns in docs/contract.md); one report per set.

    Paths are absolute, or relative to `root` (default: the manifest's folder).
    """
    return _index_manifest(catalog, Path(manifest), root=None if root is None else Path(root), tags=tags,
                           workers=workers, progress=progress)


def stats(catalog: Catalog, sim: str, real: str, *, workers: int | None = None,
          progress: Progress | None = None) -> dict[str, Any]:
    """Raw statistics of a sim and a real set and the plumbing diagnoses.

    Returns:
        `sets`, `stats` (per set), `pairs`, `findings` (most urgent first), `config`, `version`.
    """
    from perception_gap.workflows.stats import stats_job

    return stats_job(catalog, sim, real, workers=workers, progress=progress)


def run(catalog: Catalog, sim: str, real: str, *, encoders: list[str] | None = None, out: PathLike | None = None,
        device: str = "auto", batch_size: int | str = 32, workers: int | None = None,
        progress: Progress | None = None, precision: str = "fp32",
        inception_weights: PathLike | None = None) -> dict[str, Any]:
    """The whole analysis of `sim` against `real`: statistics, embeddings, gap metrics, probes, ranking, findings.

    Args:
        encoders: encoder names (see `list_encoders()`); None = every encoder whose weights are here.
        out: when given, write `results.json` and `report.html` into this folder.
        inception_weights: a local FID Inception v3 state dict (pytorch-fid's file): adds `res["fid"]`,
            the FID and KID of the reference implementations.

    Returns:
        The results.json structure: `sets`, `findings`, `encoders`, `detection` (when boxes exist), ...
    """
    from perception_gap.workflows.run import run_job

    res = run_job(catalog, sim, real, encoder_names=encoders, device=device, batch_size=batch_size,
                  workers=workers, progress=progress, precision=precision,
                  inception_weights=None if inception_weights is None else str(inception_weights))
    if out is not None:
        write_outputs(res, out)
    return res


def screen(catalog: Catalog, sims: list[str], real: str, *, encoders: list[str] | None = None,
           baseline: str | None = None, out: PathLike | None = None, n_boot: int = 1000, device: str = "auto",
           workers: int | None = None, progress: Progress | None = None, precision: str = "fp32") -> dict[str, Any]:
    """Which of several sim renderings (`sims`) is closest to `real`, with a paired bootstrap.

    Args:
        baseline: one of `sims`; `res["screen"]["passed"]` is False when another is significantly worse.
        out: when given, write `results.json` and `report.html` into this folder.

    Returns:
        The results.json structure with `screen` (`ranking`, `pairwise`, `closest`, ...).
    """
    from perception_gap.workflows.screen import screen_job

    res = screen_job(catalog, sims, real, encoder_names=encoders, baseline=baseline, device=device,
                     workers=workers, n_boot=n_boot, progress=progress, precision=precision)
    if out is not None:
        write_outputs(res, out)
    return res


def drift(catalog: Catalog, baseline: str, current: str, *, encoders: list[str] | None = None,
          config: PathLike | dict[str, dict[str, Any]] | None = None, out: PathLike | None = None,
          device: str = "auto", workers: int | None = None, progress: Progress | None = None,
          precision: str = "fp32") -> dict[str, Any]:
    """Gate the frames of set `current` against the stored `baseline` set.

    Args:
        config: gate thresholds: a TOML file, a dict of tables as in the README, or None for the defaults.
        out: when given, write `results.json` and `report.html` into this folder.

    Returns:
        The results.json structure with `drift` (`gates`, `passed`, `history`).
    """
    from perception_gap.workflows.drift import drift_job
    from perception_gap.workflows.drift_gates import load_config

    cfg = config if isinstance(config, dict) else load_config(config)
    res = drift_job(catalog, baseline, current, encoder_names=encoders, config=cfg, device=device,
                    workers=workers, progress=progress, precision=precision)
    if out is not None:
        write_outputs(res, out)
    return res


def policy_check(catalog: Catalog, sim: str, real: str, policy: str, *, preprocess: str | None = None,
                 batch_size: int = 32) -> dict[str, Any]:
    """Push the paired frames of sets `sim` and `real` (any source the catalog indexes) through a frozen policy.

    Args:
        policy: a TorchScript file, a `torch.export` `.pt2` program, or `module:function`.
        preprocess: optional `module:function` called on each batch as fn(images, proprio).
        batch_size: frames per policy call.

    Returns:
        The results.json structure with `policy_check` (`per_dim`, `n_pairs`, `skipped`, ...) and `findings`.
    """
    from perception_gap.workflows.policy_check import policy_check_job

    return policy_check_job(catalog, sim, real, policy, preprocess=preprocess, batch_size=batch_size)


def list_encoders() -> list[dict[str, Any]]:
    """Registered encoders: `name`, `family`, `dim`, `weights_available` (loads no model)."""
    from perception_gap import encoders

    return [{"name": i.name, "family": i.family, "dim": i.dim, "weights_available": i.weights_available}
            for i in encoders.describe_encoders()]


def load_results(path: PathLike) -> dict[str, Any]:
    """A `results.json` written by `run`, `screen`, `drift` or `stats --json` (a file, or the folder holding it)."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"No results file at {str(p)!r}.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"Expected a results.json file at {str(p)!r}: {e}.") from None


def write_outputs(results: dict[str, Any], out: PathLike) -> Path:
    """Write `results.json` and `report.html` into folder `out` (each atomically); returns the report's path."""
    from perception_gap.commands.output import write_outputs as _write

    _write(results, Path(out), None)
    return Path(out) / "report.html"
