"""Paths inside an HDF5 file resolved without leaving it.

An HDF5 file can point elsewhere: an external link names an object of another file, a dataset
with external storage keeps its bytes in other (raw) files, a virtual dataset maps the datasets
of other files. Ingest reads only what is stored in the file itself, so `resolve` walks a path
one link at a time (hard links, and soft links inside the file, at most MAX_SOFT_HOPS of them:
a loop is an error, not a hang) and refuses an external link before HDF5 opens its file, and
`local_dataset` refuses a dataset whose values live outside the file. Nothing here reads values.
"""

from __future__ import annotations

from typing import Any

from perception_gap.errors import FrameError

MAX_SOFT_HOPS = 32  # soft links followed for one path: more is a loop or a chain no writer makes


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p and p != "."]  # HDF5's own reading: `.` is the group itself


def _walk(root: Any, path: str, hops: list[int]) -> Any:
    import h5py

    node, where = root, ""
    for name in _parts(path):
        if not isinstance(node, h5py.Group):
            raise FrameError(f"{where or '/'} is a dataset, not a group (looking up {path!r})")
        try:
            link = node.get(name, getlink=True)
        except (KeyError, RuntimeError, ValueError, OSError) as e:
            raise FrameError(f"cannot look up {where}/{name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
                             ) from None
        if link is None:
            raise FrameError(f"{where}/{name} is missing")
        if isinstance(link, h5py.ExternalLink):
            raise FrameError(f"{where}/{name} is an external link to {link.filename!r} (another file: never read)")
        if isinstance(link, h5py.SoftLink):
            hops[0] += 1
            if hops[0] > MAX_SOFT_HOPS:
                raise FrameError(f"soft links loop at {where}/{name} (more than {MAX_SOFT_HOPS} followed)")
            target = str(link.path)
            node = _walk(root, target if target.startswith("/") else f"{where}/{target}", hops)
        elif isinstance(link, h5py.HardLink):
            try:
                node = node[name]
            except (KeyError, RuntimeError, ValueError, OSError) as e:
                raise FrameError(f"cannot open {where}/{name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
                                 ) from None
        else:
            raise FrameError(f"{where}/{name} is a {type(link).__name__} (not followed)")
        where = f"{where}/{name}"
    return node


def resolve(f: Any, path: str) -> Any:
    """The group or dataset at `path` ('/'-separated, from the file's root), reached through hard
    links and through soft links inside the file only.

    Raises:
        FrameError: a component is missing or not a group, an external link, a soft-link loop.
    """
    return _walk(f["/"], path, [0])


def check_local(ds: Any, where: str) -> Any:
    """`ds` when its values are stored in its own file; FrameError for external storage or a
    virtual dataset (both map values from other files)."""
    if ds.external:
        files = sorted({str(e[0]) for e in ds.external})
        raise FrameError(f"{where} keeps its values in external file(s) {', '.join(files)} (outside this file: "
                         "never read)")
    if ds.is_virtual:
        raise FrameError(f"{where} is a virtual dataset (its values map other datasets or files: never read)")
    return ds


def local_dataset(f: Any, path: str) -> Any:
    """The dataset at `path` (see `resolve`) whose values are stored in this file.

    Raises:
        FrameError: not found, not a dataset, or reaching outside the file (see `resolve`, `check_local`).
    """
    import h5py

    node = resolve(f, path)
    if not isinstance(node, h5py.Dataset):
        raise FrameError(f"/{'/'.join(_parts(path))} is a group, not a dataset")
    return check_local(node, "/" + "/".join(_parts(path)))
