"""Embedding stage: every usable frame through each encoder, batched and cached by content.

Frames are decoded and preprocessed in background threads while the model runs on the
previous batch (Pillow, numpy and torch release the GIL for the heavy work), so the model is
rarely idle. Each batch is written in one transaction keyed by (content hash, encoder
fingerprint): a killed run loses at most the batch in flight, never duplicates a row, and the
rerun embeds only what is missing. The model is not even loaded when nothing is missing.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from perception_gap.candidates import Candidate, as_candidates
from perception_gap.catalog import Catalog
from perception_gap.catalog.pacing import WritePacer
from perception_gap.errors import FrameError, InputError
from perception_gap.ingest.changes import ROUNDS, reread_frames, skip_frames

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
# (catalog, encoder name, encoder, todo, batch size, workers, progress) -> (embedded, skipped, changed paths)
ItemsRunner = Callable[[Catalog, str, Any, list[tuple], int, int, "Progress | None"], tuple[int, int, list[str]]]
PREFETCH = 2  # batches decoded ahead of the model: bounds memory to ~3 batches
# Vectors stored per catalog write: whole batches, at least EMBED_WRITE_EVERY frames, then once
# EMBED_WRITE_INTERVAL_S have passed or EMBED_WRITE_MAX frames are pending; whatever is left at the
# end or when a batch fails. Each write opens and closes the catalog file, and that costs with its
# size, not the batch's: ~70 ms a write next to a 10^6-frame baseline (3.7 GiB), so 32-frame
# writes made 10,000 new frames pay 22 s (bench/README.md, "Drift against a large baseline"); see
# `perception_gap.catalog.pacing`.
EMBED_WRITE_EVERY = 512
EMBED_WRITE_INTERVAL_S = 3.0
EMBED_WRITE_MAX = 8192
SWITCH_INTERVAL_S = 0.0005  # the GIL switch interval while a stage's threads decode and embed


@dataclass(frozen=True)
class EmbedReport:
    """What one encoder's embedding pass did.

    Attributes:
        encoder: requested name; fingerprint: weights + preprocessing hash; dim: width.
        todo: frames that lacked an embedding; embedded: vectors written now;
        skipped: frames that cannot be fed to this encoder, with reasons;
        seconds: wall time of the pass; model_loaded: whether the model had to be loaded;
        reindexed: frames whose file changed since `index`: re-indexed, then embedded under
            their new content hash (nothing was stored under the old one).
        precision: "fp32", "fp16" or "bf16": what the vectors were computed at (part of the
            fingerprint unless fp32); batch_size: frames per model call actually used (0 when
            nothing needed embedding and `auto` was not resolved).
        label: the display name (a candidate's `label`; the encoder name when none was given).
    """

    encoder: str
    fingerprint: str
    dim: int
    todo: int
    embedded: int
    skipped: int
    seconds: float
    model_loaded: bool
    reindexed: tuple[str, ...] = ()
    precision: str = "fp32"
    batch_size: int = 0
    label: str = ""


@dataclass(frozen=True)
class SweepStatus:
    """Where a pass over several encoders stands, for a progress display.

    Attributes:
        label: the encoder being embedded; index: its 1-based position; count: encoders in the pass.
        done, total: frames of this encoder's pass handled so far / to handle.
        sweep_done, sweep_total: the same over every encoder of the pass (frames each lacked when
            the pass started).
        elapsed_s: seconds since the pass started (model loads included).
        eta_s: estimated seconds left over the whole pass: the elapsed time per frame so far times
            the frames left (None before the first frame).
    """

    label: str
    index: int
    count: int
    done: int
    total: int
    sweep_done: int
    sweep_total: int
    elapsed_s: float
    eta_s: float | None


class _SweepClock:
    """Turns each encoder's (done, total) into a `SweepStatus` for `progress.sweep`."""

    def __init__(self, report: Callable[[SweepStatus], None], todo: list[int]) -> None:
        self.report, self.todo, self.t0 = report, todo, time.perf_counter()

    def encoder(self, index: int, label: str, progress: Progress | None) -> Progress:
        """The (done, total) callback of encoder `index` (0-based); also forwards to `progress`."""
        before = sum(self.todo[:index])  # frames of the encoders earlier in the pass

        def update(done: int, total: int) -> None:
            # a re-indexed file adds a round: its frames join this encoder's share of the pass
            sweep_total = max(sum(self.todo), before + total)
            sweep_done = min(before + done, sweep_total)
            elapsed = time.perf_counter() - self.t0
            eta = elapsed * (sweep_total - sweep_done) / sweep_done if sweep_done else None
            self.report(SweepStatus(label=label, index=index + 1, count=len(self.todo), done=done, total=total,
                                    sweep_done=sweep_done, sweep_total=sweep_total, elapsed_s=elapsed, eta_s=eta))
            if progress is not None:
                progress(done, total)

        update(0, self.todo[index])
        return update


def default_encoders() -> list[str]:
    """Every registered encoder that can run here: its weights available and its modules installed
    (without torch, the pixel baseline alone)."""
    from perception_gap import encoders
    from perception_gap.extras import MODULE_EXTRAS, install_command

    encs = [encoders.get_encoder(name) for name in encoders.list_encoders()]
    missing = {e.name: e.missing_modules() for e in encs}
    left_out = [name for name, mods in missing.items() if mods]
    if left_out:
        mods = sorted({m for name in left_out for m in missing[name]})
        extras = sorted({MODULE_EXTRAS.get(m, "encoders") for m in mods})
        log.warning("%s not installed: left out %s; %s adds them.", ", ".join(mods), ", ".join(left_out),
                    " and ".join(install_command(x) for x in extras))
    return [e.name for e in encs if not missing[e.name] and e.weights_available()]


def load_encoder(name: str, *, device: str = "auto", precision: str = "fp32") -> Any:
    """An encoder by name, with engine errors (one line) for unknown names, missing weights, a
    CUDA request without CUDA, or a precision the device cannot run (checked here, before any
    work, whenever the request is not the plain `auto`/fp32)."""
    from perception_gap import encoders
    from perception_gap.extras import MODULE_EXTRAS, MissingExtraError, extra_of, missing_message

    try:
        enc = encoders.get_encoder(name, device=device, precision=precision)
        missing = enc.missing_modules()
        if missing:
            raise MissingExtraError(missing_message(name, MODULE_EXTRAS.get(missing[0], "encoders")))
        if device == "cuda" or precision != "fp32":
            enc.device  # noqa: B018 (resolves the device and checks the precision on it)
        if not enc.weights_available():
            raise InputError(f"Weights for encoder {name!r} are not available here: {enc.weights_source() or 'unknown source'}.")
        return enc
    except encoders.EncoderError as e:
        raise InputError(str(e).splitlines()[0]) from None
    except ModuleNotFoundError as e:  # a prefixed name's resolver imports its library (open_clip:, timm:, ...)
        if extra_of(e) is None:
            raise
        raise MissingExtraError(missing_message(name, extra_of(e) or "encoders")) from None


def parse_encoder_list(spec: str | list[str] | None) -> list[str]:
    """`a,b` or ['a', 'b'] -> ['a', 'b'] (open_clip names keep their colons)."""
    if spec is None:
        return []
    items = spec if isinstance(spec, list) else [spec]
    names = [n.strip() for item in items for n in item.split(",") if n.strip()]
    if not names:
        raise InputError("Expected at least one encoder name in `--encoder`, got none.")
    return names


def _frame_to_uint8(path: str, content_hash: str | None = None) -> np.ndarray | None:
    """Decode a frame file into the HxWx3 uint8 RGB an image encoder takes (see `_to_uint8`).

    With `content_hash`, the bytes read must hash to it (what `index` catalogued) and are the
    bytes decoded; None when they do not (the file changed since).
    """
    from perception_gap.ingest.entries import content_hash as hash_of
    from perception_gap.ingest.frames import decode_rgb, read_bytes

    try:
        data = read_bytes(Path(path))
    except FrameError:
        if content_hash is None:
            raise
        return None  # unreadable now, readable at `index`: changed since (re-indexing says why)
    if content_hash is not None and hash_of(data) != content_hash:
        return None
    return _to_uint8(decode_rgb(Path(path), data))


def _to_uint8(img: Any) -> np.ndarray:
    """A decoded frame as the HxWx3 uint8 RGB an image encoder takes.

    16-bit images map their full scale to 8-bit full scale (v / 257, rounded); grayscale is
    repeated to three channels. Float or otherwise scaled observation arrays are refused: the
    normalization they carry cannot be inverted without its constants, and guessing them would
    hide exactly the plumbing bug this tool looks for.
    """
    if isinstance(img, FrameError):
        raise img
    if not isinstance(img, np.ndarray):
        a = np.asarray(img.convert("RGB") if img.mode != "RGB" else img)
    else:
        a = img
        if a.dtype == np.uint16:
            a = ((a.astype(np.uint32) + 128) // 257).astype(np.uint8)
        elif a.dtype != np.uint8:
            raise FrameError(
                f"observation array of dtype {a.dtype} (already scaled or normalized): an image encoder "
                "needs uint8 RGB and its constants are not declared; embed the raw frames instead")
        if a.shape[2] == 1:
            a = np.repeat(a, 3, axis=2)
        elif a.shape[2] == 4:
            a = a[..., :3]
        elif a.shape[2] != 3:
            raise FrameError(f"expected 1, 3 or 4 channels for an image encoder, got {a.shape[2]}")
    return np.ascontiguousarray(a)


class _Containers:
    """One sequential decode per container across batches: the todo list is sorted by container
    and frame index, so each batch takes the next frames of the same open pass (no seeks). The
    container's hash is verified before its pass (`verified_group`): a frame of a container
    changed since `index` comes back as (hash, None, None), to be re-indexed."""

    def __init__(self, todo: list[tuple]) -> None:
        from perception_gap.ingest.containers import group_sources

        _, self._groups = group_sources(todo)
        self._open: dict[tuple[str, str], Iterator[tuple[str, Any]]] = {}

    def next_frame(self, item: tuple) -> tuple[str, np.ndarray | None, str | None]:
        from perception_gap.ingest.containers import verified_group

        key = (item[1], item[2])
        if key not in self._open:
            self._open[key] = verified_group(key[0], key[1], self._groups[key])
        h, img = next(self._open[key])
        assert h == item[0], "container frames out of order"  # the todo list is sorted (see catalog)
        if img is None:
            return h, None, None  # its container changed since `index`
        try:
            return h, _to_uint8(img), None
        except FrameError as e:
            return h, None, str(e)
        except (ValueError, MemoryError) as e:
            return h, None, f"cannot decode: {e}"


def _load_batch(enc: Any, items: list[tuple], pool: ThreadPoolExecutor | None,
                containers: _Containers | None = None) -> tuple[list[str], Any, list[tuple[str, str]], list[str]]:
    """Decode and preprocess one batch: (hashes, (N,3,H,W) tensor or None, [(hash, skip reason)],
    [paths changed since `index`: files, or containers]).

    Files decode in the pool's threads, from the bytes that hash to their content hash;
    container frames come from their container's verified sequential pass (in this thread,
    while the pool works on the files). The batch is preprocessed here, at once (one resize per
    frame size: `preprocess_images`).
    """
    def one(item: tuple) -> tuple[str, np.ndarray | None, str | None]:
        h, path = item[0], item[1]
        try:
            return h, _frame_to_uint8(path, h), None
        except FrameError as e:
            return h, None, str(e)
        except (ValueError, MemoryError, OSError) as e:
            return h, None, f"cannot decode: {e}"

    files = [i for i in items if len(i) < 3 or i[2] is None]
    decoded = pool.map(one, files) if pool is not None else map(one, files)
    inside = {i[0]: containers.next_frame(i) for i in items if len(i) > 2 and i[2] is not None} if containers else {}
    by_hash = {r[0]: r for r in decoded} | inside
    results = [by_hash[i[0]] for i in items]
    paths = {i[0]: i[1] for i in items}
    hashes = [h for h, a, _ in results if a is not None]
    arrays = [a for _, a, _ in results if a is not None]
    skips = [(h, err) for h, a, err in results if a is None and err is not None]
    changed = [paths[h] for h, a, err in results if a is None and err is None]
    batch = enc.stage(enc.preprocess(arrays)) if arrays else None  # pinned when on CUDA
    return hashes, batch, skips, changed


def embed_sets(catalog: Catalog, encoder_names: list[str | Candidate], set_names: list[str] | None = None, *,
               device: str = "auto", batch_size: int | str = 32, workers: int = 2,
               progress: Progress | None = None, precision: str = "fp32",
               runner: ItemsRunner | None = None, built: Sequence[Any] | None = None) -> list[EmbedReport]:
    """Embed every usable frame of the sets (all sets when None) through each encoder.

    Args:
        catalog: open catalog.
        encoder_names: registered names or `open_clip:ARCH:PRETRAINED`, or `Candidate`s
            (`perception_gap.candidates`): a candidate's own batch size and precision override
            `batch_size` and `precision` for that encoder.
        set_names: sets to embed; None for every indexed set.
        device: "auto", "cpu" or "cuda".
        batch_size: frames per model call (and per database transaction), or "auto": chosen
            from free memory on CUDA (`perception_gap.encoders.memory.auto_batch_size`), 32 on the CPU.
        workers: decoding threads feeding the model.
        precision: "fp32", "fp16" (CUDA) or "bf16" autocast; stored under its own fingerprint.
        runner: embeds and stores a todo list elsewhere (the Ray engine, `perception_gap.engines`),
            taking and returning what `_embed_items` does; it loads the model where it runs, so
            this process does not. Default: here, batch by batch.
        built: the encoders of `encoder_names`, already made by `load_encoder` (in that order): a
            caller that goes on to use them (`run`'s camera stage) loads each model once.
        progress: called as progress(done, total) for each encoder's pass. When it also has a
            `sweep` attribute, that is called with a `SweepStatus` (which encoder of how many, and
            the time left over the whole pass) at the start of each encoder and with each batch.

    Returns:
        One report per encoder, in the order given.
    """
    if batch_size != "auto" and (not isinstance(batch_size, int) or batch_size < 1):
        raise InputError(f"Expected `--batch-size` >= 1 or 'auto', got {batch_size!r}.")
    if set_names is not None:
        with catalog.session():
            for s in set_names:
                if catalog.get_set(s) is None:
                    known = ", ".join(repr(x) for x in catalog.list_sets()) or "none indexed yet"
                    raise InputError(f"Unknown set {s!r} (known: {known}).")
    cands = as_candidates(encoder_names)
    encs = list(built) if built is not None else [load_encoder(c.name, device=device, precision=c.precision or precision)
                                                   for c in cands]
    if len(encs) != len(cands):
        raise ValueError(f"Expected one built encoder per name ({len(cands)}), got {len(encs)}.")
    sweep = getattr(progress, "sweep", None)
    clock = None
    if callable(sweep):  # what each encoder lacks, counted up front for the time left over the pass
        clock = _SweepClock(sweep, [len(catalog.hashes_needing_embedding(set_names, e.fingerprint)) for e in encs])
    reports = []
    for k, (cand, enc) in enumerate(zip(cands, encs)):
        name, wanted = cand.name, cand.batch_size or batch_size
        step = clock.encoder(k, cand.label, progress) if clock is not None else progress
        t0 = time.perf_counter()
        embedded = skipped = n_todo = 0
        loaded = False
        size = 0
        reindexed: set[str] = set()
        for round_ in range(ROUNDS + 1):  # a file (container) changed since `index` is re-indexed, then embedded
            todo = [r[:5] for r in catalog.hashes_needing_embedding(set_names, enc.fingerprint)]
            if not todo:
                break
            if not loaded:
                loaded = True
                if runner is None:
                    enc.load()
                    size = _resolve_batch_size(enc, wanted)
                else:  # the model loads where the runner runs: no probe batch here
                    size = wanted if isinstance(wanted, int) else 32
            n_todo += len(todo)
            e, s, changed = (runner or _embed_items)(catalog, name, enc, todo, size, workers, step)
            embedded, skipped = embedded + e, skipped + s
            if not changed:
                break
            if round_ == ROUNDS:
                reindexed -= set(skip_frames(catalog, changed))
                break
            reindexed.update(reread_frames(catalog, changed))
        reports.append(EmbedReport(encoder=name, fingerprint=enc.fingerprint, dim=enc.dim, todo=n_todo,
                                   embedded=embedded, skipped=skipped, seconds=time.perf_counter() - t0,
                                   model_loaded=loaded, reindexed=tuple(sorted(reindexed)),
                                   precision=enc.precision, batch_size=size, label=cand.label))
        log.info("%s: %d embedded, %d skipped in %.1fs", name, embedded, skipped, reports[-1].seconds)
    return reports


def _resolve_batch_size(enc: Any, batch_size: int | str) -> int:
    if batch_size != "auto":
        return int(batch_size)
    from perception_gap.encoders.memory import auto_batch_size

    choice = auto_batch_size(enc)
    log.info("%s: batch size %d (%s, %d MiB free, %.1f MiB per frame)", enc.name, choice.batch_size,
             choice.device, choice.free_bytes >> 20, choice.per_frame_bytes / 2**20)
    return choice.batch_size


def _embed_items(catalog: Catalog, name: str, enc: Any, todo: list[tuple], batch_size: int,
                 workers: int, progress: Progress | None) -> tuple[int, int, list[str]]:
    switch = sys.getswitchinterval()
    # The loader's and the model's short torch calls each take the GIL back from decode threads
    # that run Python (file reads, Pillow's header parsing); at the default 5 ms switch interval
    # each such hand-over can wait that long (10,000 small frames: 16-17 s, 14-16 s at 0.5 ms).
    sys.setswitchinterval(min(switch, SWITCH_INTERVAL_S))
    try:
        with enc.stage_threads():  # a light encoder's own thread count (`Encoder.cpu_threads`)
            return _embed_batches(catalog, name, enc, todo, batch_size, workers, progress)
    finally:
        sys.setswitchinterval(switch)


def _embed_batches(catalog: Catalog, name: str, enc: Any, todo: list[tuple], batch_size: int,
                   workers: int, progress: Progress | None) -> tuple[int, int, list[str]]:
    from perception_gap.encoders.base import output_problem

    batches = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
    embedded = skipped = done = 0
    changed: list[str] = []
    containers = _Containers(todo)
    # One loader thread assembles batches in order; `workers` threads decode inside a batch.
    with ThreadPoolExecutor(max_workers=1) as loader, ThreadPoolExecutor(max_workers=max(1, workers)) as decoders:
        queue: deque[Future] = deque()
        it = iter(batches)
        for b in it:
            queue.append(loader.submit(_load_batch, enc, b, decoders, containers))
            if len(queue) >= PREFETCH:
                break
        pending: list[tuple[list[str], np.ndarray, list]] = []  # encoded batches not yet stored
        pacer = WritePacer(EMBED_WRITE_EVERY, EMBED_WRITE_INTERVAL_S, EMBED_WRITE_MAX)

        def store() -> None:
            if pending:
                hs, vs, sk = [h for b in pending for h in b[0]], np.concatenate([b[1] for b in pending]), \
                    [k for b in pending for k in b[2]]
                pending.clear()
                catalog.write_embeddings(name, enc.fingerprint, hs, vs, sk)
                pacer.wrote()

        try:
            while queue:
                hashes, batch, skips, moved = queue.popleft().result()
                changed.extend(moved)
                nxt = next(it, None)
                if nxt is not None:
                    queue.append(loader.submit(_load_batch, enc, nxt, decoders, containers))
                vectors = enc.encode(batch) if batch is not None else np.zeros((0, enc.dim), np.float32)
                problem = output_problem(name, vectors, len(hashes), enc.dim)
                if problem is not None:
                    raise InputError(problem)
                pending.append((list(hashes), vectors, list(skips)))
                if pacer.due(sum(len(b[0]) + len(b[2]) for b in pending)):
                    store()
                embedded += len(hashes)
                skipped += len(skips)
                done += len(hashes) + len(skips) + len(moved)
                if progress:
                    progress(done, len(todo))
            store()
        except BaseException:
            # the batches finished before the failure are kept, as when each was stored at once;
            # the failure itself is what propagates
            try:
                store()
            except Exception:  # noqa: BLE001 (a second failure, e.g. the same full disk)
                log.warning("could not store the batches embedded before the failure", exc_info=True)
            raise
    return embedded, skipped, changed


def decode_frames(items: list[tuple]) -> dict[str, np.ndarray | str]:
    """Decode frames as image encoders take them: {content hash: HxWx3 uint8, or why not (a string)}.

    Args:
        items: (content_hash, path, member, frame_index, container_hash) as the catalog lists
            them (member None for a file); files are read from the bytes that hash to their
            content hash, container frames in one verified sequential pass per container.
    """
    files = [i for i in items if len(i) < 3 or i[2] is None]
    inside = sorted((i for i in items if len(i) > 2 and i[2] is not None), key=lambda i: (i[1], i[2], i[3]))
    out: dict[str, np.ndarray | str] = {}

    def one(item: tuple) -> tuple[str, np.ndarray | str]:
        try:
            a = _frame_to_uint8(item[1], item[0])
        except FrameError as e:
            return item[0], str(e)
        except (ValueError, MemoryError, OSError) as e:
            return item[0], f"cannot decode: {e}"
        return item[0], a if a is not None else "changed since `index`"

    with ThreadPoolExecutor(max_workers=2) as pool:
        out.update(pool.map(one, files))
    if inside:
        containers = _Containers(inside)
        for item in inside:
            h, a, err = containers.next_frame(item)
            out[h] = a if a is not None else (err or "changed since `index`")
    return out
