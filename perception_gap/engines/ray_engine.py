"""The Ray Data engine: statistics and embeddings in `map_batches` workers, merged as Parquet shards.

The driver (the command's process, holding the catalog) asks the catalog what is missing,
exactly as the local engine does (`hashes_needing_stats`, `hashes_needing_embedding`), and
hands the list to Ray Data as tasks: statistics in stateless tasks (the same chunks and jobs
as the local pool), embeddings in a pool of actors, one model loaded per actor (one GPU each
when the cluster has GPUs). Each task writes its rows as a Parquet shard (written under a
temporary name, then renamed) into `<catalog>.shards/`; the driver merges shards into the
catalog as they come, many shards per statement (`Catalog.merge_shards`: a key already stored,
or repeated across shards, is inserted once) and deletes them. A run that dies leaves shards
behind: the next run merges them first, then computes only what is still missing, and deletes
the half-written `.tmp` files a killed task left (see `RayEngine.clean_stale`).

Tasks are large (about TASK_FRAMES frames, fewer when that would leave workers idle) because the
driver's merge is the engine's one serial part: its cost is mostly per statement and per
shard, so fewer, bigger shards merged MERGE_FRAMES frames at a time keep it small per frame.

Workers read frames by the paths in the catalog, so every node must see them at the same
paths (a shared file system), and must have this package installed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.catalog.shards import shard_dir
from perception_gap.errors import EngineError, InputError

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'perception-gap[ray]' (or pip install 'ray[data]>=2.9')"
TASK_FRAMES = 1000  # frames per Ray task (one shard each), when there are enough frames for every worker
MERGE_FRAMES = 20_000  # merge pending shards once they hold this many frames ...
MERGE_EVERY = 64  # ... or once this many shards are pending (one statement per table either way)
STALE_TMP_S = 60.0  # a `.tmp` shard untouched this long before the run started is a dead task's
CONNECT_TIMEOUT_S = 10.0  # `--address` must accept a TCP connection within this long
# The environment a local instance's processes start with (they inherit it at `ray.init`): no
# usage reporting, no metrics collection, every address the loopback one (Ray's own setting for
# single-machine platforms; no route look-up towards a public DNS server), and HTTP through a
# proxy address where nothing listens, because the dashboard process probes cloud metadata
# addresses (169.254.169.254, metadata.google.internal) whether or not usage reporting is on.
NOWHERE = "http://127.0.0.1:9"  # the discard port on the loopback: a refused connection at once
LOCAL_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DATA_USAGE_DISABLED": "1", "RAY_enable_metrics_collection": "0",
             "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "HTTP_PROXY": NOWHERE, "HTTPS_PROXY": NOWHERE,
             "http_proxy": NOWHERE, "https_proxy": NOWHERE, "NO_PROXY": "", "no_proxy": ""}
_TABLES = {"rgb_stats_job": "frame_stats", "depth_stats_job": "depth_stats", "joint_stats_job": "joint"}


def require_ray() -> Any:
    """The `ray` module with Ray Data, or a one-line InputError saying how to install it."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise InputError(f"`--engine ray` needs Ray Data, which is not installed here: {INSTALL_HINT}.") from None
    return ray


def _cluster_mode(value: bool) -> bool | None:
    """Set Ray's `ENABLE_RAY_CLUSTER` in this process (False: every address the loopback one, as on
    a single-machine platform; LOCAL_ENV sets it for Ray's own processes, which read it at import,
    as this one did). Returns the value it replaced, None when this Ray has no such setting."""
    from ray._private import ray_constants

    if not hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        return None
    old = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = value
    return old


def _restore_env(saved: dict[str, str | None]) -> None:
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def ray_data() -> Any:
    """The `ray.data` module (see `require_ray`)."""
    return require_ray().data


def _write_shard(folder: str, table: str, tbl: Any) -> str:
    """Write an Arrow table as `<folder>/<table>-<id>.parquet` (atomically: a temporary name, then
    a rename, so a killed worker leaves no half shard); '' when it has no rows."""
    import pyarrow.parquet as pq

    if tbl.num_rows == 0:
        return ""
    final = Path(folder) / f"{table}-{uuid.uuid4().hex}.parquet"
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(final.name + ".tmp")
    pq.write_table(tbl, tmp)
    os.replace(tmp, final)
    return str(final)


def _tasks(batch: dict[str, Any]) -> list[list[list[tuple]]]:
    """Each row's task: its chunks (statistics) or batches (embeddings), each a list of items."""
    return [[[tuple(i) for i in group] for group in json.loads(t)] for t in batch["task"]]


def group_tasks(groups: list[list[tuple]], workers: int, target: int = TASK_FRAMES) -> list[list[list[tuple]]]:
    """Consecutive chunks (or batches) gathered into tasks of at most `target` frames, or of an
    even share of the frames when that is smaller (so that every worker gets a task); a chunk is
    never split (the frames of one container stay in one pass: a larger chunk is a task alone)."""
    n = sum(len(g) for g in groups)
    size = max(1, min(target, math.ceil(n / max(1, workers))))
    tasks: list[list[list[tuple]]] = []
    frames = 0
    for g in groups:
        if not tasks or (frames and frames + len(g) > size):
            tasks.append([])
            frames = 0
        tasks[-1].append(g)
        frames += len(g)
    return tasks


def stats_task(batch: dict[str, Any], *, table: str, folder: str) -> dict[str, list]:
    """Ray task: each row's chunks through the local engine's statistics job, one chunk at a
    time, the rows of all of them to one shard.

    Returns per row: the shard path(s, one a line), the paths that changed since `index` (JSON),
    frames done. Table `joint`: `joint_stats_job`'s rows, a shard per table they go to.
    """
    from perception_gap.catalog.stats_cache import stats_table
    from perception_gap.statistics.workers import DEPTH, RGB, depth_stats_job, joint_stats_job, rgb_stats_job

    job = {"frame_stats": rgb_stats_job, "depth_stats": depth_stats_job, "joint": joint_stats_job}[table]
    out: dict[str, list] = {"shard": [], "changed": [], "n": [], "skipped": [], "error": []}
    for chunks in _tasks(batch):
        paths = {i[0]: i[1] for items in chunks for i in items}
        res = [r for items in chunks for r in job(items)]
        done = [r for r in res if not (r[-2] is None and r[-1] is None)]
        if table == "joint":
            shards = [_write_shard(folder, t, stats_table(t, [r[1:] for r in done if r[0] == kind]))
                      for t, kind in (("frame_stats", RGB), ("depth_stats", DEPTH))]
            out["shard"].append("\n".join(s for s in shards if s))
        else:
            out["shard"].append(_write_shard(folder, table, stats_table(table, done)))
        out["changed"].append(json.dumps([paths[r[-3]] for r in res if r[-2] is None and r[-1] is None]))
        out["n"].append(len(done))
        out["skipped"].append(0)
        out["error"].append("")
    return out


class EncoderActor:
    """Ray actor: one encoder loaded once; each row's batch decoded, embedded and written as shards."""

    def __init__(self, name: str, fingerprint: str, device: str, folder: str, precision: str = "fp32") -> None:
        from perception_gap.embed import load_encoder

        self.enc = load_encoder(name, device=device, precision=precision)
        if self.enc.fingerprint != fingerprint:
            raise RuntimeError(f"encoder {name!r} has fingerprint {self.enc.fingerprint} on this node, "
                               f"{fingerprint} on the driver")
        self.enc.load()
        self.name, self.folder = name, folder

    def __call__(self, batch: dict[str, Any]) -> dict[str, list]:
        from perception_gap.catalog.embeddings import embedding_tables
        from perception_gap.embed import _Containers, _load_batch
        from perception_gap.encoders.base import output_problem

        enc = self.enc
        out: dict[str, list] = {"shard": [], "changed": [], "n": [], "skipped": [], "error": []}
        for batches in _tasks(batch):
            hashes: list[str] = []
            vectors: list[np.ndarray] = []
            skips: list = []
            moved: list[str] = []
            error = ""
            for items in batches:  # a task is several batches, its rows one shard per table
                h, x, sk, mv = _load_batch(enc, items, None, _Containers(items))
                v = enc.encode(x) if x is not None else np.zeros((0, enc.dim), np.float32)
                moved += mv
                problem = output_problem(self.name, v, len(h), enc.dim)
                if problem is not None:
                    error = error or problem
                    continue
                hashes += h
                vectors.append(v)
                skips += sk
            vec = np.concatenate(vectors) if vectors else np.zeros((0, enc.dim), np.float32)
            emb, sk_tbl = embedding_tables(self.name, enc.fingerprint, hashes, vec, skips)
            shards = [_write_shard(self.folder, "embeddings", emb), _write_shard(self.folder, "embedding_skips", sk_tbl)]
            out["shard"].append("\n".join(s for s in shards if s))
            out["changed"].append(json.dumps(moved))
            out["n"].append(len(hashes))
            out["skipped"].append(len(skips))
            out["error"].append(error)
        return out


def _rows(ds: Any) -> Any:
    """The dataset's result rows; a failure in Ray (a task that raised, workers lost beyond
    Ray's retries, the cluster gone) as a one-line EngineError. Shards merged so far stay."""
    ray = require_ray()
    try:
        yield from ds.iter_rows()
    except ray.exceptions.RayError as e:
        cause = getattr(e, "cause", None) or e
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[-1]
        raise EngineError(f"The Ray engine failed ({type(cause).__name__}: {first}); what finished is kept in the "
                          "catalog, rerun to complete.") from None


def check_address(address: str | None, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast on a `--address` nothing listens at: Ray itself retries an unreachable head for
    a minute or more. `host:port` and `ray://host:port` must accept a TCP connection within
    `timeout` seconds; `auto` and None are left to Ray (it fails at once when no local cluster
    is running).

    Raises:
        InputError: a malformed address, or one that does not answer within `timeout`.
    """
    if not address or address == "auto":
        return
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = hostport.rstrip("/").rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit():
        raise InputError(f"Expected `--address` as host:port, ray://host:port or auto, got {address!r}.")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        why = "no answer" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__)
        raise InputError(f"Cannot connect to the Ray cluster at `--address` {address!r} within {timeout:g} s "
                         f"({why}).") from None


class RayEngine:
    """The ray engine for one command: a context manager that connects to Ray (or starts a local
    instance, stopped again at exit) and gives the stages their runners.

    Args:
        catalog: the open catalog (shards go to `<catalog file>.shards/`).
        address: a Ray cluster address (`ray://host:10001`, `host:6379`, `auto`); None starts a
            local instance (or uses the one this process already started).
        workers: parallel statistics tasks and encoder actors (default: the cluster's CPUs;
            encoder actors: its GPUs when it has any).
        device: `auto` (a GPU per actor when the cluster has GPUs), `cpu` or `cuda`.
    """

    def __init__(self, catalog: Any, *, address: str | None = None, workers: int | None = None,
                 device: str = "auto") -> None:
        if workers is not None and workers < 1:
            raise InputError(f"Expected `--workers` >= 1, got {workers}.")
        self.catalog, self.address, self.device = catalog, address, device
        self.folder = shard_dir(catalog.path)
        self._workers, self._started = workers, False
        self.merged = 0  # rows merged from shards a previous run left behind
        self.removed = 0  # stale `.tmp` shards of killed tasks deleted at start
        self.started_at = time.time()

    def __enter__(self) -> RayEngine:
        ray = require_ray()
        self.started_at = time.time()
        check_address(self.address)
        if not ray.is_initialized():
            local = not self.address
            saved = {k: os.environ.get(k) for k in LOCAL_ENV}
            mode = None
            if local:
                os.environ.update(LOCAL_ENV)
                mode = _cluster_mode(False)
            try:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.ERROR, configure_logging=True,
                         **({"num_cpus": self._workers} if local else {}))
            except Exception as e:  # noqa: BLE001 - whatever stops Ray from starting is one line
                why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                if local:
                    raise EngineError(f"Cannot start a local Ray instance for `--engine ray`: {why}.") from None
                raise InputError(f"Cannot connect to the Ray cluster at `--address` {self.address!r}: {why}.") from None
            finally:
                _restore_env(saved)  # Ray's processes have started with it; this one goes on as it was
                if mode is not None:
                    _cluster_mode(mode)
            self._started = True
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # Ray Data's per-dataset lines; errors still raise
        res = ray.cluster_resources()
        self.cpus, self.gpus = max(1, int(res.get("CPU", 1))), int(res.get("GPU", 0))
        self.workers = self._workers or self.cpus
        self.removed = self.clean_stale()
        if self.removed:
            log.info("deleted %d unfinished shard files killed tasks left in %s", self.removed, self.folder)
        self.merged = self.merge_leftovers()
        if self.merged:
            log.info("merged %d rows from shards an earlier run left in %s", self.merged, self.folder)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._started:
            require_ray().shutdown()

    def clean_stale(self) -> int:
        """Delete the `.tmp` shards killed tasks left (a shard is written as `.tmp`, then renamed).

        Only files untouched for STALE_TMP_S before this run started: the command holds the
        catalog's writer lock (`catalog.locking`) for its whole run, so no other run on this
        catalog can be writing shards now; the margin spares a task that outlived a killed
        driver and is still finishing its write. Returns the files deleted.
        """
        if not self.folder.is_dir():
            return 0
        removed = 0
        for f in self.folder.glob("*.tmp"):
            try:
                if f.stat().st_mtime < self.started_at - STALE_TMP_S:
                    f.unlink()
                    removed += 1
            except FileNotFoundError:  # renamed or removed meanwhile
                continue
        return removed

    def merge_leftovers(self) -> int:
        """Merge (then delete) the shards an interrupted run left in the shard folder."""
        files = sorted(self.folder.glob("*.parquet")) if self.folder.is_dir() else []
        return self._merge([str(f) for f in files])

    def _merge(self, files: list[str]) -> int:
        if not files:
            return 0
        added = self.catalog.merge_shards(files)
        for f in files:  # after the commit: a crash before this only means a harmless re-merge
            Path(f).unlink(missing_ok=True)
        return added

    def _collect(self, ds: Any, progress: Callable | None, done: int, total: int) -> tuple[int, int, int, list[str]]:
        """Stream task results, merging pending shards once they hold MERGE_FRAMES frames (or
        MERGE_EVERY shards): (done, embedded or measured, skipped, changed paths)."""
        pending: list[str] = []
        changed: list[str] = []
        n = skipped = frames = 0
        for row in _rows(ds):
            pending += [p for p in row["shard"].split("\n") if p]
            if row["error"]:
                self._merge(pending)
                raise InputError(row["error"])
            moved = json.loads(row["changed"])
            changed += moved
            n, skipped = n + row["n"], skipped + row["skipped"]
            frames += row["n"] + row["skipped"]
            done += row["n"] + row["skipped"] + len(moved)
            if frames >= MERGE_FRAMES or len(pending) >= MERGE_EVERY:
                self._merge(pending)
                pending, frames = [], 0
            if progress:
                progress(done, total)
        self._merge(pending)
        return done, n, skipped, changed

    def _dataset(self, tasks: list[list[tuple]]) -> Any:
        ray = require_ray()
        return ray.data.from_items([{"task": json.dumps(t)} for t in tasks], override_num_blocks=max(1, len(tasks)))

    def stats_runner(self, job: Callable, items: list[tuple], write: Callable, workers: int,
                     progress: Callable | None, done_offset: int, total: int) -> tuple[int, list[str]]:
        """`compute_stats`'s runner: the local engine's chunks and jobs, as Ray tasks."""
        from perception_gap.workflows.stats import _chunks

        tasks = group_tasks(_chunks(items), self.workers)
        if not tasks:
            return done_offset, []
        ds = self._dataset(tasks).map_batches(
            stats_task, fn_kwargs={"table": _TABLES[job.__name__], "folder": str(self.folder)},
            batch_size=1, num_cpus=1, compute=ray_data().TaskPoolStrategy(size=min(self.workers, len(tasks))))
        done, _, _, changed = self._collect(ds, progress, done_offset, total)
        return done, changed

    def embed_runner(self, catalog: Any, name: str, enc: Any, todo: list[tuple], batch_size: int,
                     workers: int, progress: Callable | None) -> tuple[int, int, list[str]]:
        """`embed_sets`'s runner: batches of `batch_size` frames, gathered into tasks of about
        TASK_FRAMES frames (one shard each), through a pool of encoder actors."""
        batches = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
        gpu = self.gpus > 0 and self.device != "cpu"
        if self.device == "cuda" and not gpu:
            raise InputError("`--device cuda` with `--engine ray`, but the Ray cluster has no GPU.")
        actors = max(1, min(self.gpus if gpu else self.workers, len(batches)))
        tasks = group_tasks(batches, actors)
        ds = self._dataset(tasks).map_batches(
            EncoderActor, fn_constructor_kwargs={"name": name, "fingerprint": enc.fingerprint,
                                                 "device": "cuda" if gpu else "cpu", "folder": str(self.folder),
                                                 "precision": getattr(enc, "precision", "fp32")},
            batch_size=1, compute=ray_data().ActorPoolStrategy(size=actors), num_gpus=1 if gpu else 0, num_cpus=1)
        _, embedded, skipped, changed = self._collect(ds, progress, 0, len(todo))
        return embedded, skipped, changed
