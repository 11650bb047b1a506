"""The statistics stage: per-frame statistics for a catalog's sets, and the `stats` job.

Combines the catalog (what is new, what is cached) with the worker pool of
`perception_gap.statistics.workers`, loads a set's records for the diagnoses, and runs the
`stats` command: statistics of a sim and a real set, then the plumbing diagnoses.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from perception_gap.catalog import Catalog
from perception_gap.catalog.pacing import WritePacer
from perception_gap.errors import InputError
from perception_gap.ingest.changes import ROUNDS, reread_frames, skip_frames
from perception_gap.statistics.columns import from_row
from perception_gap.statistics.depth import DepthStats, parse_depth_unit
from perception_gap.statistics.image import ImageStats
from perception_gap.statistics.records import FrameRecord, SetRecords
from perception_gap.statistics.summary import summarize_set
from perception_gap.statistics.texture import fft_module
from perception_gap.statistics.workers import DEPTH, RGB, depth_stats_job, joint_stats_job, rgb_stats_job, worker_init
from perception_gap.version import __version__

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
# (job, items, write, workers, progress, done_offset, total) -> (done, changed paths): see `_run_jobs`
Runner = Callable[[Callable, list[tuple], Callable, int, "Progress | None", int, int], tuple[int, list[str]]]
CHUNK = 32  # frames per worker task: amortizes inter-process traffic
# Catalog writes: at least WRITE_EVERY frames a transaction, and then one when WRITE_INTERVAL_S
# have passed or WRITE_MAX frames are pending (`perception_gap.catalog.pacing`)
WRITE_EVERY = 512
WRITE_INTERVAL_S = 3.0
WRITE_MAX = 16384


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _pool_context() -> multiprocessing.context.BaseContext:
    """`fork` on Linux, `forkserver` elsewhere.

    A forked worker starts in ~15 ms with numpy and Pillow already imported; a forkserver or
    spawned one re-imports them (~0.2 s per pool, an eighth of a 1,500-frame statistics run).
    Forking a process that has DuckDB threads is safe here because the workers never touch
    DuckDB (or torch): they decode files and run numpy/Pillow, and glibc's malloc is fork-safe.
    """
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver")


@dataclass(frozen=True)
class StatsPass:
    """What one `compute_stats` call did.

    Attributes:
        computed: files (RGB and depth) whose statistics were computed and cached now.
        reindexed: RGB paths of frames whose file (or container) changed since `index`: re-indexed
            (new content hash) and measured under it; nothing was cached under the old hash.
        skipped: RGB paths of frames whose file kept changing while read: marked skipped.
    """

    computed: int
    reindexed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()


def _chunks(items: list[tuple]) -> list[list[tuple]]:
    """Worker tasks: files CHUNK at a time; the frames of one container always in one task, so each
    container is decoded in one sequential pass (items come sorted by container and index; the
    items of `joint_stats_job`, tagged with their kind, by container alone)."""
    chunks: list[list[tuple]] = []
    files: list[tuple] = []
    for item in items:
        if len(item) > 2 and item[2] is not None:
            key = 2 if len(item) > 5 else 3  # a joint item: all members of its container together
            if not (chunks and chunks[-1][0][1:key] == item[1:key] and len(chunks[-1][0]) == len(item)):
                chunks.append([])
            chunks[-1].append(item)
        else:
            files.append(item)
    return [files[i : i + CHUNK] for i in range(0, len(files), CHUNK)] + chunks


def joint_items(rgb: list[tuple], depth: list[tuple]) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """(joint items, other colour items, other depth items): the colour frames and depth maps of the
    containers that hold both (a ROS bag's colour and depth topics), in different members, go to
    `joint_stats_job` tagged `RGB` or `DEPTH` and sorted by container then index, so each such
    container is hashed once and read in one pass for both."""
    def members(items: list[tuple]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for item in items:
            if len(item) > 2 and item[2] is not None:
                out.setdefault(item[1], set()).add(item[2])
        return out

    m_rgb, m_depth = members(rgb), members(depth)
    both = {p for p in m_rgb.keys() & m_depth.keys() if not m_rgb[p] & m_depth[p]}
    if not both:
        return [], rgb, depth
    joint = [i + (RGB,) for i in rgb if i[1] in both] + [i + (DEPTH,) for i in depth if i[1] in both]
    joint.sort(key=lambda i: (i[1], i[3], i[2], i[0]))
    return joint, [i for i in rgb if i[1] not in both], [i for i in depth if i[1] not in both]


def _joint_writer(catalog: Catalog) -> Callable[[list[tuple]], None]:
    """Write `joint_stats_job`'s (kind, hash, stats, error) rows to the table of their kind."""
    def write(rows: list[tuple]) -> None:
        catalog.write_image_stats([r[1:] for r in rows if r[0] == RGB])
        catalog.write_depth_stats([r[1:] for r in rows if r[0] == DEPTH])

    return write


def _run_jobs(job: Callable, items: list[tuple], write: Callable, workers: int,
              progress: Progress | None, done_offset: int, total: int) -> tuple[int, list[str]]:
    """Map `job` over items in chunks (in worker processes when it pays), writing as results come.

    Returns:
        (files done so far, paths whose bytes no longer match their content hash: the file, or
        for a frame inside a container, the container).
    """
    chunks = _chunks(items)
    paths = {item[0]: item[1] for item in items}
    pending: list = []
    changed: list[str] = []
    done = done_offset
    pacer = WritePacer(WRITE_EVERY, WRITE_INTERVAL_S, WRITE_MAX)

    def flush() -> None:
        nonlocal done
        if pending:
            write(pending)
            pacer.wrote()
            done += len(pending)
            pending.clear()

    small = len(items) < 2 * CHUNK and all(len(c[0]) == 2 or c[0][2] is None for c in chunks)
    if workers <= 1 or len(chunks) < 2 or small:
        results = map(job, chunks)
        pool = None
    else:
        fft_module()  # imported here once, inherited by the forked workers
        # each worker decodes its own videos: their decoders share the cores, not take them all each
        share = max(1, default_workers() // min(workers, len(chunks)))
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context(), initializer=worker_init,
                                   initargs=(share,))
        results = pool.map(job, chunks)
    try:
        for res in results:
            for row in res:  # (h, st, err), or (kind, h, st, err) from `joint_stats_job`
                h, st, err = row[-3:]
                if st is None and err is None:  # changed since `index`: nothing cached under h
                    changed.append(paths[h])
                else:
                    pending.append(row)
            if pacer.due(len(pending)):
                flush()
            if progress:
                progress(done + len(pending), total)
        flush()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return done, changed


def compute_stats(catalog: Catalog, set_names: list[str], *, workers: int | None = None,
                  progress: Progress | None = None, runner: Runner | None = None) -> StatsPass:
    """Compute and cache statistics of every usable frame of the sets that lacks them.

    The workers hash the bytes they decode (a container's file before its sequential decode): a
    file or container changed since `index` is re-indexed and measured under its new content
    hash (see `perception_gap.ingest.changes`). `runner` runs the jobs elsewhere (the Ray engine,
    `perception_gap.engines`); it takes and returns what `_run_jobs` does and must have stored
    the results when it returns. The default runs them in this machine's process pool.
    """
    workers = workers or default_workers()
    _run_jobs_ = runner or _run_jobs
    computed = 0
    reindexed: set[str] = set()
    for round_ in range(ROUNDS + 1):
        with catalog.session():  # one open of the file for both
            rgb = catalog.hashes_needing_stats(set_names)
            depth = catalog.hashes_needing_depth_stats(set_names)
        total = len(rgb) + len(depth)
        if not total:
            break
        joint, rgb, depth = joint_items(rgb, depth)
        done, changed = _run_jobs_(joint_stats_job, joint, _joint_writer(catalog), workers, progress, 0, total)
        done, changed_rgb = _run_jobs_(rgb_stats_job, rgb, catalog.write_image_stats, workers, progress, done, total)
        done, changed_depth = _run_jobs_(depth_stats_job, depth, catalog.write_depth_stats, workers, progress, done, total)
        changed += changed_rgb + changed_depth
        computed += total - len(changed)
        if not changed:
            break
        if round_ == ROUNDS:
            skipped = skip_frames(catalog, changed)
            log.warning("%d frames kept changing while read: skipped", len(skipped))
            return StatsPass(computed, tuple(sorted(reindexed - set(skipped))), skipped)
        again = reread_frames(catalog, changed)
        log.info("%d frames changed since `index`: re-indexed", len(again))
        reindexed.update(again)
    return StatsPass(computed, tuple(sorted(reindexed)))


def _image_from_row(row: dict[str, Any]) -> ImageStats | None:
    if row.get("img_error") is not None or row.get("img_width") is None:
        return None
    return from_row(ImageStats, row, "img_")


def _depth_from_row(row: dict[str, Any]) -> DepthStats | None:
    if row.get("dep_error") is not None or row.get("dep_width") is None:
        return None
    return from_row(DepthStats, row, "dep_")


def load_set_records(catalog: Catalog, name: str, *, domain: str | None = None,
                     paths: tuple[str, ...] | None = None) -> SetRecords:
    """A set's usable frames with their cached statistics (only those at `paths` when given).

    Raises:
        InputError: unknown set, wrong domain, or a set with no usable frame.
    """
    info = catalog.get_set(name)
    if info is None:
        known = ", ".join(repr(s) for s in catalog.list_sets()) or "none indexed yet"
        raise InputError(f"Unknown set {name!r} (known: {known}).")
    if domain is not None and info["domain"] != domain:
        raise InputError(f"Expected set {name!r} to be a {domain} set, but it was indexed as {info['domain']!r}.")
    frames = []
    for row in catalog.load_frames(name, paths):
        image = _image_from_row(row)
        if image is None:
            continue  # unreadable content: reported among the skipped frames
        unit = row["depth_unit"]
        frames.append(FrameRecord(
            pair_key=row["pair_key"], episode=row["episode"], step=row["step"], timestamp=row["timestamp"],
            image=image,
            depth=_depth_from_row(row), depth_units_per_m=parse_depth_unit(unit) if unit else None,
            action=tuple(row["action"]) if row["action"] is not None else None,
            proprio=tuple(row["proprio"]) if row["proprio"] is not None else None,
            is_jpeg=row["format"] in ("JPEG", "MPO"),
        ))
    if not frames:
        raise InputError(f"Set {name!r} has no usable frame ({_skip_digest(catalog, name)}).")
    return SetRecords(name=name, domain=info["domain"], frames=tuple(frames))


def _skip_digest(catalog: Catalog, name: str) -> str:
    skipped = catalog.skipped_frames(name)
    if not skipped:
        return "it is empty"
    reasons: dict[str, int] = {}
    for s in skipped:
        reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
    return f"{len(skipped)} skipped: " + "; ".join(f"{n}x {r}" for r, n in top)


def set_info(catalog: Catalog, name: str) -> dict[str, Any]:
    """The `sets[NAME]` entry of results.json: domain, counts, skipped frames with reasons."""
    info = catalog.get_set(name) or {"name": name, "domain": None}
    counts = catalog.set_counts(name)
    skipped = catalog.skipped_frames(name)
    # a file listed N more times by a manifest: one entry, counted N times (frames listed = rows)
    repeats = [{**r, "status": "skipped"} for r in catalog.listing_repeats(name)]
    n_again = sum(r["repeats"] for r in repeats)
    return {
        "name": name, "domain": info["domain"], "tags": info.get("tags"),
        "n_frames": counts["total"] + n_again, "n_usable": counts["ok"],  # `ok` already excludes unreadable
        "n_skipped": len(skipped) + n_again, "skipped": skipped + repeats,
    }


def _in_set(catalog: Catalog, name: str, paths: tuple[str, ...]) -> list[str]:
    """The paths of `paths` that are frames of set `name` (re-indexed frames, per set)."""
    return sorted(set(paths) & set(catalog.existing_frames(name))) if paths else []


def pairing(sim: SetRecords, real: SetRecords) -> dict[str, Any]:
    """How the two sets pair up by pair key; unpaired keys are listed (first 50 of each)."""
    sk = {f.pair_key for f in sim.frames}
    rk = {f.pair_key for f in real.frames}
    only_sim, only_real = sorted(sk - rk), sorted(rk - sk)
    return {"n_pairs": len(sk & rk), "n_unpaired_sim": len(only_sim), "n_unpaired_real": len(only_real),
            "unpaired_sim": only_sim[:50], "unpaired_real": only_real[:50]}


def stats_job(catalog: Catalog, sim: str, real: str, *, workers: int | None = None,
              progress: Progress | None = None, runner: Runner | None = None) -> dict[str, Any]:
    """Raw statistics and plumbing diagnoses of a sim set against a real set.

    Returns:
        The `sets`, `stats`, `pairs` and `findings` parts of results.json, plus `config` and
        `version`. `sets[NAME]["reindexed"]` lists the frames whose file changed since `index`
        (re-indexed and measured under their new content hash).
    """
    from perception_gap.diagnoses.checks import diagnose_with_maps
    from perception_gap.findings import order_findings
    from perception_gap.workflows.common import check_sets
    from perception_gap.workflows.set_notes import role_findings, step_notes

    if sim == real:
        raise InputError(f"Expected two different sets for --sim and --real, got {sim!r} twice.")
    check_sets(catalog, [sim, real], {sim: "--sim", real: "--real"})
    done = compute_stats(catalog, [sim, real], workers=workers, progress=progress, runner=runner)
    roles = {sim: "sim", real: "real"}
    with catalog.session():  # the reads in one open of the file (each open reads its metadata); none while diagnosing
        sim_rec = load_set_records(catalog, sim)
        real_rec = load_set_records(catalog, real)
        given = {n: catalog.get_set(n) or {} for n in roles}
        sets = {name: {**set_info(catalog, name), "role": role, "reindexed": _in_set(catalog, name, done.reindexed)}
                for name, role in roles.items()}
    found, maps = diagnose_with_maps(sim_rec, real_rec)
    notes, step_findings = step_notes({sim: sim_rec, real: real_rec}, roles, {n: g.get("source") for n, g in given.items()})
    findings = order_findings(found + role_findings(roles, {n: g.get("domain") for n, g in given.items()}) + step_findings)
    pairs = pairing(sim_rec, real_rec)
    if pairs["n_unpaired_sim"] or pairs["n_unpaired_real"]:
        log.info("%d sim and %d real frames have no partner", pairs["n_unpaired_sim"], pairs["n_unpaired_real"])
    return {
        "version": __version__,
        "config": {"sim": sim, "real": real},
        "sets": {name: {**sets[name], **notes[name]} for name in roles},
        "pairs": pairs,
        "stats": {sim: summarize_set(sim_rec).to_dict(), real: summarize_set(real_rec).to_dict()},
        "findings": [f.to_dict() for f in findings],
        "maps": maps,
    }
