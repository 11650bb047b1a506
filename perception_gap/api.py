"""The Python API: every command of the command line as a typed function, in the order of the pipeline.

Each function is a thin front on the same jobs the command line runs (`COMMANDS` names the
function of each command) and returns a typed report, or its results.json as `perception_gap.schema.Results`
(docs/contract.md): typed sections (`res.encoders[0].rank`), `res.to_dict()` the JSON form, a read-only
mapping of it (`res["findings"]`), exactly what `load_results` reads back from the file. Nothing here
prints; errors are `perception_gap.errors.PerceptionGapError` subclasses with a one-line message. A gate
asked for (`max_drop=`, `baseline=`, ...) is in the results (`passed`); the command line turns a failed
one into exit code 1.

The container sources, boxes and set housekeeping live in `perception_gap.api_sources`, the checks before and
after the gap hunt in `perception_gap.api_checks`; both are exported here and from
`perception_gap`. `perception_gap.examples` writes small inputs for every function.

Examples:
    >>> import perception_gap as pg
    >>> pg.COMMANDS["rank-fidelity"]
    'rank_fidelity'
    >>> from perception_gap.examples import write_examples
    >>> pg.rank_fidelity(write_examples().rates).rank_fidelity.passed
    True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from perception_gap.api_camera import camera_model
from perception_gap.api_checks import latency, policy_check, rank_fidelity, replay, reprojection, rollouts
from perception_gap.api_sources import (
    attach_coco,
    attach_masks,
    drop_set,
    index_hdf5,
    index_lerobot,
    index_rosbag,
    index_video,
    list_sets,
    rename_set,
)
from perception_gap.camera.model import apply_camera_model, load_camera_model
from perception_gap.catalog import DEFAULT_DB, Catalog
from perception_gap.embed import EmbedReport
from perception_gap.errors import InputError
from perception_gap.ingest import IndexReport
from perception_gap.ingest import index_folder as _index_folder
from perception_gap.ingest import index_manifest as _index_manifest
from perception_gap.outputs import as_results

if TYPE_CHECKING:  # annotations only: the settings load with the workflows
    from perception_gap.metrics.settings import Resampling
    from perception_gap.schema import Results

PathLike = str | os.PathLike[str]
Progress = Callable[[int, int], None]

# The function of each command of the command line (`perception-gap COMMAND`). `index` has one
# function per source: index_folder, index_manifest, index_video, index_lerobot, index_hdf5,
# index_rosbag, and attach_coco / attach_masks for boxes.
COMMANDS = {"index": "index_folder", "stats": "stats", "encoders": "list_encoders", "embed": "embed_sets", "run": "run",
            "screen": "screen", "drift": "drift", "rollouts": "rollouts", "rank-fidelity": "rank_fidelity",
            "latency": "latency", "sets": "list_sets", "drop": "drop_set", "rename": "rename_set", "demo": "run_demo",
            "policy-check": "policy_check", "replay": "replay", "reprojection": "reprojection",
            "camera-model": "camera_model"}

__all__ = ["COMMANDS", "open_catalog", "index_folder", "index_manifest", "index_video", "index_lerobot", "index_hdf5",
           "index_rosbag", "attach_coco", "attach_masks", "list_sets", "rename_set", "drop_set", "stats",
           "list_encoders", "embed_sets", "run", "screen", "drift", "drift_history", "run_demo", "rollouts", "rank_fidelity",
           "latency", "policy_check", "replay", "reprojection", "load_results", "write_outputs",
           "camera_model", "apply_camera_model", "load_camera_model"]


def open_catalog(path: PathLike = DEFAULT_DB, *, read_only: bool = False, wait: float = 0.0) -> Catalog:
    """Open (or, unless `read_only`, create) a DuckDB catalog file.

    Args:
        path: the catalog file (default `perception_gap.duckdb` in the working folder).
        read_only: open for queries only; the file must exist.
        wait: seconds to wait for another process that is writing the catalog (0: fail at once).

    Returns:
        A `Catalog`; use it as a context manager (`with open_catalog(...) as cat:`).

    Examples:
        >>> import tempfile, pathlib
        >>> import perception_gap as pg
        >>> with pg.open_catalog(pathlib.Path(tempfile.mkdtemp()) / "gap.duckdb") as cat:
        ...     pg.list_sets(cat)
        []
    """
    return Catalog(Path(path), read_only=read_only, wait=wait)


def index_folder(catalog: Catalog, root: PathLike, set_name: str, domain: str, *, pair_regex: str | None = None,
                 depth_unit: str | None = None, tags: list[str] | None = None, workers: int | None = None,
                 progress: Progress | None = None) -> IndexReport:
    """Index a folder of frames as set `set_name` of `domain` (`sim` or `real`), incrementally.

    Pair key = the relative path without its extension (or the first group of `pair_regex`);
    depth from `depth/` or `<stem>_depth.*`; episode = the sub-folder. Only new or changed files
    are read.

    Args:
        catalog: an open, writable catalog.
        root: the folder.
        set_name: the set to (re)index.
        domain: `sim` or `real`.
        pair_regex: a regex on the relative path whose first group (or group `key`) is the pair key.
        depth_unit: the declared depth unit: `m`, `mm`, `cm`, `tum` (1/5000 m) or units per metre.
        tags: tags for the set.
        workers: reading processes (default: all cores).
        progress: called as progress(done, total).

    Returns:
        The `IndexReport` (listed, new, changed, unchanged, vanished, usable, skipped).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()
        >>> with pg.open_catalog(files.root / "gap.duckdb") as cat:
        ...     r = pg.index_folder(cat, files.sim, "sim", "sim", workers=1)
        >>> r.new, r.usable
        (8, 8)
    """
    return _index_folder(catalog, Path(root), set_name, domain, pair_regex=pair_regex, depth_unit=depth_unit,
                         tags=tags, workers=workers, progress=progress)


def index_manifest(catalog: Catalog, manifest: PathLike, *, root: PathLike | None = None, tags: list[str] | None = None,
                   workers: int | None = None, progress: Progress | None = None, set_name: str | None = None,
                   domain: str | None = None) -> list[IndexReport]:
    """Index the sets of a CSV, JSONL or Parquet manifest (columns in docs/contract.md).

    Args:
        catalog: an open, writable catalog.
        manifest: the manifest file.
        root: the folder relative paths start from (default: the manifest's folder).
        tags: tags for the sets.
        workers: reading processes (default: all cores).
        progress: called as progress(done, total).
        set_name: the set of rows whose manifest has no `set` (no column, or an empty cell).
        domain: the domain of rows whose manifest has no `domain`.

    Returns:
        One `IndexReport` per set.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()
        >>> with pg.open_catalog(files.root / "gap.duckdb") as cat:
        ...     [(r.set_name, r.usable) for r in pg.index_manifest(cat, files.manifest, workers=1)]
        [('sim', 8), ('real', 8)]
    """
    return _index_manifest(catalog, Path(manifest), root=None if root is None else Path(root), tags=tags,
                           workers=workers, progress=progress, set_name=set_name, domain=domain)


def stats(catalog: Catalog, sim: str, real: str, *, workers: int | None = None,
          progress: Progress | None = None) -> Results:
    """Raw statistics of a sim and a real set and the plumbing diagnoses.

    Args:
        catalog: an open, writable catalog (statistics are cached in it).
        sim: the sim set's name.
        real: the real set's name.
        workers: processes (default: all cores).
        progress: called as progress(done, total).

    Returns:
        `Results` with `sets`, `stats` (per set), `pairs`, `findings` (most urgent first), `maps`,
        `config`, `version`.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog()) as cat:
        ...     res = pg.stats(cat, "sim", "real", workers=1)
        >>> res.pairs.n_pairs, res.findings[0].code
        (8, 'channel_swap')
    """
    from perception_gap.workflows.stats import stats_job

    return as_results(stats_job(catalog, sim, real, workers=workers, progress=progress))


def list_encoders() -> list[dict[str, Any]]:
    """Registered encoders with their width, preprocessing and whether their weights are here (loads no model).

    Returns:
        One dict per encoder: `name`, `family`, `dim`, `preprocessing`, `weights_available`, `weights`.

    Examples:
        >>> import perception_gap as pg
        >>> pixel = next(e for e in pg.list_encoders() if e["name"] == "pixel")
        >>> pixel["family"], pixel["weights_available"]
        ('pixel', True)
    """
    from perception_gap import encoders

    return [i.to_dict() for i in encoders.describe_encoders()]


def embed_sets(catalog: Catalog, encoders: list[str], sets: list[str] | None = None, *, device: str = "auto",
          batch_size: int | str = 32, workers: int | None = None, progress: Progress | None = None,
          precision: str = "fp32") -> list[EmbedReport]:
    """Embed every usable frame through each encoder, cached by (content hash, encoder fingerprint).

    Only frames without a cached embedding are embedded; a rerun is free.

    Args:
        catalog: an open, writable catalog.
        encoders: encoder names (see `list_encoders()`) or `open_clip:ARCH:PRETRAINED`.
        sets: the sets to embed; None: every set.
        device: `auto`, `cpu` or `cuda`.
        batch_size: frames per model call, or `auto` (from free GPU memory on CUDA, 32 on the CPU).
        workers: decoding threads feeding the model (default 2).
        progress: called as progress(done, total).
        precision: `fp32`, `fp16` (CUDA) or `bf16`.

    Returns:
        One `EmbedReport` per encoder.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog()) as cat:
        ...     [(r.encoder, r.embedded) for r in pg.embed_sets(cat, ["pixel"], workers=1)]
        [('pixel', 16)]
    """
    from perception_gap.embed import embed_sets as _embed

    return _embed(catalog, encoders, sets, device=device, batch_size=batch_size, workers=workers or 2,
                      progress=progress, precision=precision)


def run(catalog: Catalog, sim: str, real: str, *, encoders: list[str] | None = None, out: PathLike | None = None,
        device: str = "auto", batch_size: int | str = 32, workers: int | None = None,
        progress: Progress | None = None, precision: str = "fp32",
        inception_weights: PathLike | None = None, attribution: bool = True,
        resampling: Resampling | None = None) -> Results:
    """The whole analysis of `sim` against `real`: statistics, embeddings, gap metrics, probes, ranking, findings.

    Args:
        catalog: an open, writable catalog.
        sim: the sim set's name.
        real: the real set's name.
        encoders: encoder names (see `list_encoders()`); None = every encoder whose weights are here.
        out: when given, write `results.json` and `report.html` into this folder.
        device: `auto`, `cpu` or `cuda`.
        batch_size: frames per model call, or `auto`.
        workers: processes and decoding threads (default: all cores).
        progress: called as progress(done, total).
        precision: `fp32`, `fp16` (CUDA) or `bf16`.
        inception_weights: a local FID Inception v3 state dict (pytorch-fid's file): adds `res.fid`,
            the FID and KID of the reference implementations.
        attribution: fit the real camera (`res.camera_model`, written as camera_model.json with
            `out`) and measure the share of each encoder's gap its factors close
            (`res.encoders[i].attribution`).
        resampling: bootstrap replicates, interval level and seed (`metrics.settings.Resampling`); None: defaults.

    Returns:
        `Results` (the results.json, typed): `sets`, `findings`, `encoders`, `detection` (when boxes
        exist), ..., and `run_id`, the run's row in the catalog.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog()) as cat:
        ...     res = pg.run(cat, "sim", "real", encoders=["pixel"], workers=1)
        >>> res.findings[0].code, [e.name for e in res.encoders]
        ('channel_swap', ['pixel'])
    """
    from perception_gap.workflows.run import run_job

    res = as_results(run_job(catalog, sim, real, encoder_names=encoders, device=device, batch_size=batch_size,
                  workers=workers, progress=progress, precision=precision,
                  inception_weights=None if inception_weights is None else str(inception_weights),
                  attribution=attribution, resampling=resampling))
    if out is not None:
        write_outputs(res, out)
    return res



def screen(catalog: Catalog, sims: list[str], real: str, *, encoders: list[str] | None = None,
           baseline: str | None = None, out: PathLike | None = None, n_boot: int = 1000, device: str = "auto",
           batch_size: int | str = 32, workers: int | None = None, progress: Progress | None = None,
           precision: str = "fp32", resampling: Resampling | None = None) -> Results:
    """Which of several sim renderings (`sims`, sets of the same scenes) is closest to `real`, with a paired bootstrap.

    Args:
        catalog: an open, writable catalog.
        sims: two or more sim set names.
        real: the real set's name.
        encoders: encoder names; None: every available one; `[]`: raw statistics only.
        baseline: one of `sims`; `res.screen.passed` is False when another is significantly worse.
        out: when given, write `results.json` and `report.html` into this folder.
        n_boot: bootstrap replicates over scenes (`resampling.replicates`, when set, wins).
        device: `auto`, `cpu` or `cuda`.
        batch_size: frames per model call, or `auto`.
        workers: processes and decoding threads (default: all cores).
        progress: called as progress(done, total).
        precision: `fp32`, `fp16` (CUDA) or `bf16`.
        resampling: bootstrap replicates, interval level and seed (`metrics.settings.Resampling`); None: defaults.

    Returns:
        `Results` with `screen` (`ranking`, `pairwise`, `closest`, ...).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> db = example_catalog()
        >>> with pg.open_catalog(db) as cat:  # a second rendering: the real camera's own frames
        ...     _ = pg.index_folder(cat, db.parent / "real", "sim_bgr", "sim", workers=1)
        ...     res = pg.screen(cat, ["sim", "sim_bgr"], "real", encoders=[], n_boot=200, workers=1)
        >>> [r.set for r in res.screen.ranking]
        ['sim_bgr', 'sim']
    """
    from perception_gap.workflows.screen import screen_job

    res = as_results(screen_job(catalog, sims, real, encoder_names=encoders, baseline=baseline, device=device,
                                batch_size=batch_size, workers=workers, n_boot=n_boot, progress=progress,
                                precision=precision, resampling=resampling))
    if out is not None:
        write_outputs(res, out)
    return res


def drift(catalog: Catalog, baseline: str, current: str, *, encoders: list[str] | None = None,
          config: PathLike | dict[str, dict[str, Any]] | None = None, out: PathLike | None = None,
          device: str = "auto", batch_size: int | str = 32, workers: int | None = None,
          progress: Progress | None = None, precision: str = "fp32",
          resampling: Resampling | None = None) -> Results:
    """Gate the frames of set `current` against the stored `baseline` set.

    Args:
        catalog: an open, writable catalog (the check is recorded for `drift_history`).
        baseline: the reference set.
        current: the new set.
        encoders: encoder names; None: every available one; `[]`: statistics gates only.
        config: gate thresholds: a TOML file, a dict of tables as in the docs, or None for the defaults.
        out: when given, write `results.json` and `report.html` into this folder.
        device: `auto`, `cpu` or `cuda`.
        batch_size: frames per model call, or `auto`.
        workers: processes and decoding threads (default: all cores).
        progress: called as progress(done, total).
        precision: `fp32`, `fp16` (CUDA) or `bf16`.
        resampling: bootstrap replicates, interval level and seed (`metrics.settings.Resampling`); None: the defaults (drift: its config's [bootstrap]).

    Returns:
        `Results` with `drift` (`gates`, `passed`, `history`).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog()) as cat:
        ...     res = pg.drift(cat, "sim", "real", encoders=[], workers=1)
        >>> res.drift.passed
        False
    """
    from perception_gap.workflows.drift import drift_job
    from perception_gap.workflows.drift_gates import load_config

    cfg = config if isinstance(config, dict) else load_config(None if config is None else str(config))
    res = as_results(drift_job(catalog, baseline, current, encoder_names=encoders, config=cfg, device=device,
                               batch_size=batch_size, workers=workers, progress=progress, precision=precision,
                               resampling=resampling))
    if out is not None:
        write_outputs(res, out)
    return res


def drift_history(catalog: Catalog, baseline: str | None = None) -> list[dict[str, Any]]:
    """Earlier drift checks (against `baseline`, or all), oldest first (`drift --history`).

    Args:
        catalog: an open catalog.
        baseline: only the checks against this set; None: all.

    Returns:
        One dict per check: `run_id`, `started_at`, `baseline`, `current`, `passed`, `failed` (gate names), ...

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import example_catalog
        >>> with pg.open_catalog(example_catalog(), read_only=True) as cat:  # no drift check yet
        ...     pg.drift_history(cat, baseline="real")
        []
    """
    from perception_gap.workflows.drift import drift_history as _history

    return _history(catalog, baseline)


def run_demo(out: PathLike, *, inject: str | None = None, encoders: list[str] | None = None,
         workers: int | None = None) -> Results:
    """Build the built-in paired MuJoCo demo (sim renders and the same states through a camera model), run it.

    Writes the data under `out/data`, the catalog `out/perception_gap.duckdb` (rebuilt each time),
    `out/results.json` and `out/report.html`, then runs the checks after the gap hunt (policy-check,
    replay, reprojection) on the demo's own inputs into `out/after/`, as the `demo` command does.
    Needs MuJoCo; takes tens of seconds.

    Args:
        out: the output folder.
        inject: one plumbing fault to add (a finding code, e.g. `channel_swap`; see `perception_gap.demo.INJECTIONS`).
        encoders: encoder names for the run; None: every available one.
        workers: processes and decoding threads (default: all cores).

    Returns:
        `Results` of `run` on the demo's sets (as written to `out/results.json`), with their boxes
        (detection) attached; the checks after the gap hunt are in `out/after/results.json`.

    Examples:
        >>> from perception_gap.demo import INJECTIONS
        >>> "channel_swap" in INJECTIONS
        True
        >>> import perception_gap as pg
        >>> res = pg.run_demo("demo_out", inject="channel_swap", encoders=["pixel"])  # doctest: +SKIP
        >>> res.findings[0].code  # doctest: +SKIP
        'channel_swap'
    """
    from perception_gap.demo import INJECTIONS
    from perception_gap.workflows.demo import demo_job

    if inject is not None and inject not in INJECTIONS:
        raise InputError(f"Expected `inject` in {', '.join(INJECTIONS)}, got {inject!r}.")
    return as_results(demo_job(out, inject=inject, encoders=encoders, workers=workers).results)


def load_results(path: PathLike) -> Results:
    """A `results.json` written by any command or by `write_outputs` (a file, or the folder holding it), typed.

    Args:
        path: the file, or its folder.

    Returns:
        A `perception_gap.schema.Results`: typed sections (`res.encoders[0].rank`), `res.to_dict()` the JSON
        form (unknown keys kept), and a read-only mapping of that form (`res["findings"]`, `res.get("fid")`).

    Raises:
        InputError: no such file, not JSON, or a section without a key it must have (named).

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()
        >>> _ = pg.latency(files.ticks, fps=20, out=files.root / "latency")
        >>> pg.load_results(files.root / "latency")["latency"]["n_ticks"]
        40
    """
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"No results file at {str(p)!r}.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"Expected a results.json file at {str(p)!r}: {e}.") from None
    from perception_gap.schema import Results  # on use: building its classes takes a tenth of a second

    return Results.from_dict(data, where="results.json")


def write_outputs(results: Results | Mapping[str, Any], out: PathLike) -> Path:
    """Write `results.json` and `report.html` into folder `out`, all or nothing; also re-renders a report.

    The report is the one of the results' kind (analysis, evaluation check, geometry check),
    rendered from the JSON form.

    Args:
        results: `Results` as a function here returns them or `load_results` reads them, or their
            JSON form (a dict).
        out: the folder (created if needed).

    Returns:
        The report's path.

    Examples:
        >>> import perception_gap as pg
        >>> from perception_gap.examples import write_examples
        >>> files = write_examples()
        >>> _ = pg.replay(files.poses, out=files.root / "replay")
        >>> again = pg.write_outputs(pg.load_results(files.root / "replay"), files.root / "again")
        >>> again.name, (files.root / "again" / "results.json").exists()
        ('report.html', True)
    """
    from perception_gap.outputs import render_for
    from perception_gap.outputs import write_outputs as _write

    _write(results, Path(out), None, render_for(results))
    return Path(out) / "report.html"
