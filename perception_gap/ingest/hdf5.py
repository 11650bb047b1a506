"""robomimic-layout HDF5 sources: `data/demo_N/obs/<camera>` image arrays, `actions`, state keys.

A robomimic file holds one group per demonstration under `data/` (`demo_0`, `demo_1`, ...), each
with `obs/<key>` datasets of one row per step and an `actions` dataset. A camera is an
`obs/<key>` of shape (N, H, W, C), (N, C, H, W) or (N, H, W). Every row of the camera dataset
becomes a frame inside the file (member `hdf5:data/demo_N/obs/<key>`, see `containers`):
episode = N for `demo_N` (else the group's name), step = the row, pair key `<episode>/<step>`
(the rule of every episode-structured source, so a robomimic sim set pairs with a LeRobot real
set), action = `actions[step]`, proprio = the concatenated `obs/<key>[step]` of the `--proprio`
keys.

Only values stored in the file itself are read (`hdf5_links`): a demo, camera, `actions` or
proprio dataset behind an external link, kept in external files or virtual is a recorded skip, as
are soft-link loops, malformed demos, non-numeric actions and frames over the image size cap.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perception_gap.errors import FrameError, InputError
from perception_gap.ingest.containers import HDF5_PREFIX, ContainerFile, ContainerFrame, frame_path
from perception_gap.ingest.entries import (
    FrameEntry,
    IndexReport,
    Progress,
    index_entries,
    validate_domain,
    validate_set_name,
)
from perception_gap.ingest.frames import MAX_PIXELS, Header, array_layout, not_a_file
from perception_gap.ingest.hdf5_links import local_dataset, resolve
from perception_gap.ingest.video import pair_key

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

ACTIONS = "actions"
PROPRIO_MARK = "?proprio="
_DEMO = re.compile(r"demo_(\d+)")
MAX_ROW_VALUES = 1 << 16  # action or proprio values a row: more is not a robot's vector
MAX_VALUES = 1 << 26  # action or proprio values of one demo read at once (512 MiB as float64)
MAX_FRAMES = 10_000_000  # frames of one camera dataset: a declared shape beyond it is no recording


def _natural(name: str) -> tuple[int, str]:
    m = _DEMO.fullmatch(name)
    return (int(m.group(1)), "") if m else (1 << 62, name)


def camera_header(shape: tuple[int, ...], dtype: np.dtype) -> Header:
    """What a frame of an (N, ...) camera dataset decodes to; FrameError when it is not an image
    stack (or its frames exceed the image size cap, `MAX_PIXELS`)."""
    if len(shape) not in (3, 4):
        raise FrameError(f"expected an (N, H, W[, C]) image dataset, got shape {shape}")
    if not (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating) or dtype == np.bool_):
        raise FrameError(f"unsupported image dtype {dtype} (expected integers or floats)")
    layout = array_layout(tuple(shape[1:]))
    if layout == "HW":
        h, w, c = shape[1], shape[2], 1
    elif layout == "HWC":
        h, w, c = shape[1], shape[2], shape[3]
    else:
        h, w, c = shape[2], shape[3], shape[1]
    if int(h) * int(w) > MAX_PIXELS:
        raise FrameError(f"frames too large ({w}x{h} = {int(w) * int(h)} pixels > {MAX_PIXELS})")
    mode = {1: "L", 3: "RGB"}.get(c, layout) if dtype == np.uint8 else layout
    return Header(width=int(w), height=int(h), format="HDF5", mode=mode, dtype=np.dtype(dtype).name, channels=int(c))


def _open(path: Path):
    import h5py

    why = not_a_file(path)
    if why is not None:
        raise InputError(f"Expected `--hdf5` to be an existing HDF5 file, got {str(path)!r} ({why}).")
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError) as e:
        raise InputError(f"Cannot read `--hdf5` {str(path)!r} as HDF5: {str(e).splitlines()[0]}.") from None


def _demos(f: Any, path: Path) -> list[tuple[str, Any]]:
    """(name, group, or the FrameError text when it cannot be reached inside the file) of each
    demonstration under `data/`, in natural order (datasets under `data/` are not demos)."""
    import h5py

    try:
        data = resolve(f, "data")
    except FrameError as e:
        data, why = None, f" ({e})"
    else:
        why = ""
    if not isinstance(data, h5py.Group):
        top = ", ".join(sorted(f.keys())) or "nothing"
        raise InputError(f"Expected a robomimic HDF5 file with a `data` group (data/demo_N/obs/KEY), "
                         f"got {str(path)!r} holding: {top}{why}.")
    demos: list[tuple[str, Any]] = []
    for k in sorted(data.keys(), key=_natural):
        try:
            g = resolve(f, f"data/{k}")
        except FrameError as e:
            demos.append((k, str(e)))
            continue
        if isinstance(g, h5py.Group):
            demos.append((k, g))
    if not demos:
        raise InputError(f"HDF5 file {str(path)!r} has no demonstration group under `data/`.")
    return demos


def _obs(f: Any, demo: str) -> Any:
    """The demo's `obs` group; FrameError when it is missing, not a group or outside the file."""
    import h5py

    obs = resolve(f, f"data/{demo}/obs")
    if not isinstance(obs, h5py.Group):
        raise FrameError(f"data/{demo}/obs is a dataset, not a group")
    return obs


def _obs_keys(f: Any, demos: list[tuple[str, Any]]) -> list[str]:
    keys: set[str] = set()
    for d, g in demos:
        try:
            keys.update(_obs(f, d).keys())
        except FrameError:
            continue  # the demo is a recorded skip (`_demo_entries` says why)
    return sorted(keys)


def _check_keys(f: Any, demos: list[tuple[str, Any]], camera: str, proprio: list[str]) -> None:
    keys = _obs_keys(f, demos)
    for flag, key in [("--camera", camera)] + [("--proprio", k) for k in proprio]:
        if key not in keys:
            raise InputError(f"Unknown {flag} key {key!r}; the demos' obs/ hold: {', '.join(keys) or 'nothing'}.")


def _rows(f: Any, path: str, n: int) -> np.ndarray:
    """The (n, d) float64 rows of the dataset at `path`; FrameError when it is missing, outside
    the file, not numbers, not n rows or over MAX_ROW_VALUES values a row."""
    ds = local_dataset(f, path)
    dt = ds.dtype
    if not (np.issubdtype(dt, np.integer) or np.issubdtype(dt, np.floating) or dt == np.bool_):
        raise FrameError(f"{path} holds {dt} values, not numbers")
    if len(ds.shape) == 0 or ds.shape[0] != n:
        raise FrameError(f"{path} has shape {ds.shape}, not {n} rows (one per frame)")
    width = int(np.prod(ds.shape[1:], dtype=np.int64)) if len(ds.shape) > 1 else 1
    if width > MAX_ROW_VALUES or width * n > MAX_VALUES:
        raise FrameError(f"{path} has {width} values a row for {n} rows (at most {MAX_ROW_VALUES} a row and "
                         f"{MAX_VALUES} in all)")
    try:
        return np.asarray(ds[()], np.float64).reshape(n, -1)
    except (OSError, ValueError, TypeError) as e:
        raise FrameError(f"cannot read {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


def _skip(path: Path, where: str, episode: str, error: str) -> list[FrameEntry]:
    return [FrameEntry(rgb_path=Path(f"{path}#{where}"), pair_key=pair_key(episode, 0), episode=episode, step=0,
                       error=error)]


def _demo_entries(path: Path, f: Any, file: ContainerFile, demo: str, g: Any, camera: str,
                  proprio: list[str]) -> list[FrameEntry]:
    m = _DEMO.fullmatch(demo)
    episode = m.group(1) if m else demo
    member = f"{HDF5_PREFIX}data/{demo}/obs/{camera}"
    if isinstance(g, str):
        return _skip(path, f"data/{demo}", episode, f"demo {demo}: {g}")
    try:
        obs = _obs(f, demo)
    except FrameError as e:
        return _skip(path, f"data/{demo}", episode, f"demo {demo} has no obs/{camera}: {e}")
    if not _has(obs, camera):
        return _skip(path, f"data/{demo}", episode, f"demo {demo} has no obs/{camera}")
    try:
        ds = local_dataset(f, member[len(HDF5_PREFIX):])
        header = camera_header(tuple(ds.shape), ds.dtype)
        n = int(ds.shape[0])
        if n > MAX_FRAMES:
            raise FrameError(f"{member[len(HDF5_PREFIX):]} declares {n} frames (at most {MAX_FRAMES})")
        act = _rows(f, f"data/{demo}/{ACTIONS}", n) if _has(g, ACTIONS) else None
        state = [_rows(f, f"data/{demo}/obs/{k}", n) for k in proprio]
    except FrameError as e:
        return _skip(path, member[len(HDF5_PREFIX):], episode, f"demo {demo}: {e}")
    return [FrameEntry(rgb_path=Path(frame_path(path, member, i)), pair_key=pair_key(episode, i), episode=episode,
                       step=i, container=ContainerFrame(file, member, i, header),
                       action=None if act is None else act[i].tolist(),
                       proprio=np.concatenate([v[i] for v in state]).tolist() if proprio else None)
            for i in range(n)]


def _has(g: Any, name: str) -> bool:
    """Whether group `g` has a link `name` (not following it)."""
    try:
        return g.get(name, getlink=True) is not None
    except (KeyError, RuntimeError, ValueError, OSError):
        return False


def scan_hdf5(path: Path, camera: str, *, proprio: list[str] | None = None) -> list[FrameEntry]:
    """List one camera's frames of a robomimic-layout HDF5 file (see the module docstring).

    Only what the file itself stores is read: a camera, `actions` or proprio dataset reached
    through an external link, stored in external files or virtual, a demo behind a soft-link
    loop, or a malformed demo is a recorded skip naming why (`hdf5_links`).

    Raises:
        InputError: not an HDF5 file, no `data/` group or no demo in it, an unknown camera or
            proprio key (the message lists the obs keys there are).
    """
    path = Path(os.path.abspath(path))
    proprio = list(proprio or [])
    file = ContainerFile(path)
    with _open(path) as f:
        demos = _demos(f, path)
        _check_keys(f, demos, camera, proprio)
        return [e for d, g in demos for e in _demo_entries(path, f, file, d, g, camera, proprio)]


def index_hdf5(catalog: Catalog, path: Path, camera: str, set_name: str, domain: str, *,
               proprio: list[str] | None = None, tags: list[str] | None = None, workers: int | None = None,
               progress: Progress | None = None) -> IndexReport:
    """Catalogue one camera of a robomimic-layout HDF5 file as one set (see `scan_hdf5`)."""
    validate_set_name(set_name)
    validate_domain(domain)
    for flag, key in [("--camera", camera)] + [("--proprio", k) for k in proprio or []]:
        if "#" in key or "?" in key or (flag == "--proprio" and "," in key):
            raise InputError(f"Expected `{flag}` without '#', '?' or ',' (they delimit the set's recorded source), "
                             f"got {key!r}.")
    entries = scan_hdf5(path, camera, proprio=proprio)
    root = Path(os.path.abspath(path))
    return index_entries(catalog, set_name, domain, entries, source=hdf5_source(root, camera, proprio), tags=tags,
                         root=str(root.parent), workers=workers, progress=progress)


def hdf5_source(path: Path, camera: str, proprio: list[str] | None = None) -> str:
    """The set's recorded source, all that listing it again takes: `hdf5:<file>#<camera>[?proprio=k1,k2]`."""
    return f"hdf5:{path}#{camera}" + (f"{PROPRIO_MARK}{','.join(proprio)}" if proprio else "")


def parse_hdf5_source(where: str) -> tuple[Path, str, list[str]]:
    """(file, camera, proprio keys) of a source written by `hdf5_source`, without its `hdf5:` prefix."""
    keys = ""
    if PROPRIO_MARK in where:
        where, _, keys = where.rpartition(PROPRIO_MARK)
    root, _, camera = where.rpartition("#")
    return Path(root), camera, [k for k in keys.split(",") if k]
