"""robomimic-layout HDF5 sources: `data/demo_N/obs/<camera>` image arrays, `actions`, state keys.

A robomimic file holds one group per demonstration under `data/` (`demo_0`, `demo_1`, ...), each
with `obs/<key>` datasets of one row per step and an `actions` dataset. A camera is an
`obs/<key>` of shape (N, H, W, C), (N, C, H, W) or (N, H, W). Every row of the camera dataset
becomes a frame inside the file (member `hdf5:data/demo_N/obs/<key>`, see `containers`):
episode = N for `demo_N` (else the group's name), step = the row, pair key `<episode>/<step>`
(the rule of every episode-structured source, so a robomimic sim set pairs with a LeRobot real
set), action = `actions[step]`, proprio = the concatenated `obs/<key>[step]` of the `--proprio`
keys.
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
from perception_gap.ingest.frames import Header, array_layout
from perception_gap.ingest.video import pair_key

if TYPE_CHECKING:  # annotations only: ingest does not import the catalog at run time
    from perception_gap.catalog import Catalog

ACTIONS = "actions"
PROPRIO_MARK = "?proprio="
_DEMO = re.compile(r"demo_(\d+)")


def _natural(name: str) -> tuple[int, str]:
    m = _DEMO.fullmatch(name)
    return (int(m.group(1)), "") if m else (1 << 62, name)


def camera_header(shape: tuple[int, ...], dtype: np.dtype) -> Header:
    """What a frame of an (N, ...) camera dataset decodes to; FrameError when it is not an image stack."""
    if len(shape) not in (3, 4):
        raise FrameError(f"expected an (N, H, W[, C]) image dataset, got shape {shape}")
    if not (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating) or dtype == np.bool_):
        raise FrameError(f"unsupported image dtype {dtype} (expected integers or floats)")
    layout = array_layout(tuple(shape[1:]))
    h, w, c = {"HW": (shape[1], shape[2], 1), "HWC": shape[1:], "CHW": (shape[2], shape[3], shape[1])}[layout]
    mode = {1: "L", 3: "RGB"}.get(c, layout) if dtype == np.uint8 else layout
    return Header(width=int(w), height=int(h), format="HDF5", mode=mode, dtype=np.dtype(dtype).name, channels=int(c))


def _open(path: Path):
    import h5py

    if not path.exists():
        raise InputError(f"Expected `--hdf5` to be an existing HDF5 file, got {str(path)!r} (not found).")
    if not path.is_file():
        raise InputError(f"Expected `--hdf5` to be an HDF5 file, got {str(path)!r} (not a regular file).")
    try:
        return h5py.File(path, "r")
    except (OSError, ValueError) as e:
        raise InputError(f"Cannot read `--hdf5` {str(path)!r} as HDF5: {str(e).splitlines()[0]}.") from None


def _demos(f: Any, path: Path) -> list[str]:
    import h5py

    data = f.get("data")
    if not isinstance(data, h5py.Group):
        top = ", ".join(sorted(f.keys())) or "nothing"
        raise InputError(f"Expected a robomimic HDF5 file with a `data` group (data/demo_N/obs/KEY), "
                         f"got {str(path)!r} holding: {top}.")
    demos = sorted((k for k in data if isinstance(data[k], h5py.Group)), key=_natural)
    if not demos:
        raise InputError(f"HDF5 file {str(path)!r} has no demonstration group under `data/`.")
    return demos


def _obs_keys(f: Any, demos: list[str]) -> list[str]:
    keys: set[str] = set()
    for d in demos:
        obs = f["data"][d].get("obs")
        if obs is not None:
            keys.update(obs.keys())
    return sorted(keys)


def _check_keys(f: Any, demos: list[str], camera: str, proprio: list[str]) -> None:
    keys = _obs_keys(f, demos)
    for flag, key in [("--camera", camera)] + [("--proprio", k) for k in proprio]:
        if key not in keys:
            raise InputError(f"Unknown {flag} key {key!r}; the demos' obs/ hold: {', '.join(keys) or 'nothing'}.")


def _vectors(group: Any, keys: list[str], n: int) -> list[np.ndarray | None]:
    """Per key, its (n, d) float64 rows (None when the demo lacks it or its length differs)."""
    out = []
    for k in keys:
        ds = group.get(k)
        if ds is None or len(ds.shape) == 0 or ds.shape[0] != n:
            out.append(None)
        else:
            out.append(np.asarray(ds[()], np.float64).reshape(n, -1))
    return out


def _demo_entries(path: Path, file: ContainerFile, demo: str, g: Any, camera: str, proprio: list[str]) -> list[FrameEntry]:
    m = _DEMO.fullmatch(demo)
    episode = m.group(1) if m else demo
    obs = g.get("obs")
    ds = obs.get(camera) if obs is not None else None
    member = f"{HDF5_PREFIX}data/{demo}/obs/{camera}"
    if ds is None:
        return [FrameEntry(rgb_path=Path(f"{path}#data/{demo}"), pair_key=pair_key(episode, 0), episode=episode,
                           step=0, error=f"demo {demo} has no obs/{camera}")]
    try:
        header = camera_header(tuple(ds.shape), ds.dtype)
    except FrameError as e:
        return [FrameEntry(rgb_path=Path(f"{path}#{member[len(HDF5_PREFIX):]}"), pair_key=pair_key(episode, 0),
                           episode=episode, step=0, error=str(e))]
    n = int(ds.shape[0])
    act = _vectors(g, [ACTIONS], n)[0] if ACTIONS in g else None
    state = _vectors(obs, proprio, n) if proprio else []
    entries = []
    for i in range(n):
        entry = FrameEntry(rgb_path=Path(frame_path(path, member, i)), pair_key=pair_key(episode, i), episode=episode,
                           step=i, container=ContainerFrame(file, member, i, header),
                           action=None if act is None else act[i].tolist())
        if proprio:
            if any(v is None for v in state):
                bad = [k for k, v in zip(proprio, state) if v is None]
                entry.error = f"demo {demo}: obs/{bad[0]} is missing or has not {n} rows (one per frame)"
            else:
                entry.proprio = np.concatenate([v[i] for v in state]).tolist()
        entries.append(entry)
    return entries


def scan_hdf5(path: Path, camera: str, *, proprio: list[str] | None = None) -> list[FrameEntry]:
    """List one camera's frames of a robomimic-layout HDF5 file (see the module docstring).

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
        return [e for d in demos for e in _demo_entries(path, file, d, f["data"][d], camera, proprio)]


def index_hdf5(catalog: Catalog, path: Path, camera: str, set_name: str, domain: str, *,
               proprio: list[str] | None = None, tags: list[str] | None = None, workers: int | None = None,
               progress: Progress | None = None) -> IndexReport:
    """Catalogue one camera of a robomimic-layout HDF5 file as one set (see `scan_hdf5`)."""
    validate_set_name(set_name)
    validate_domain(domain)
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
