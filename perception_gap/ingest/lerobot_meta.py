"""A LeRobot dataset's metadata read as untrusted input: `meta/info.json`, the episode lists and
the path templates they fill.

Every file is opened as a regular file (`open_regular`: a FIFO or device never blocks or is
read). Path templates (`data_path`, `video_path`) take only the fields the format defines, each
as `{name}` or `{name:0Nd}`; a path they give (and a camera key placed in one) must stay inside
the dataset folder, compared as written, so metadata never makes ingest read elsewhere. Values
are checked where they are read: a wrong type is an InputError naming the file, the key and
what it holds.
"""

from __future__ import annotations

import json
import math
import os
import re
import string
from pathlib import Path
from typing import Any

from perception_gap.errors import FrameError, InputError
from perception_gap.ingest.frames import not_a_folder, open_regular

CAMERA_DTYPES = ("video", "image")
V2_FIELDS = ("episode_chunk", "episode_index")
V3_FIELDS = ("chunk_index", "file_index")
_SPEC = re.compile(r"0?\d{0,2}d?")  # `{x}`, `{x:03d}`: a zero-padded integer, at most 99 wide


def regular(path: Path, what: str) -> Any:
    """`path` opened for binary reading if it is a regular file; InputError naming `what` else."""
    try:
        fd = open_regular(path)
    except FrameError as e:
        raise InputError(f"Cannot read {what} {str(path)!r}: {e}.") from None
    return open(fd, "rb", closefd=True)


def read_parquet(path: Path, columns: list[str]) -> dict[str, list[Any]]:
    """The listed columns a Parquet file has (the others absent), as Python lists."""
    import pyarrow.parquet as pq

    if not path.exists():
        raise InputError(f"LeRobot file {str(path)!r} not found.")
    with regular(path, "LeRobot file") as fh:
        try:
            f = pq.ParquetFile(fh)  # not pq.read_table: it imports pyarrow.dataset (~0.3 s)
            have = set(f.schema_arrow.names)
            table = f.read(columns=[c for c in columns if c in have])
        except Exception as e:  # noqa: BLE001 - pyarrow raises many types for a corrupt file
            raise InputError(f"Cannot read LeRobot file {str(path)!r}: {str(e).splitlines()[0]}.") from None
    return {c: table.column(c).to_pylist() for c in table.column_names}


def read_info(root: Path) -> dict[str, Any]:
    """`meta/info.json` of a dataset, checked for what indexing needs; InputError naming what is wrong."""
    why = not_a_folder(root)
    if why is not None:
        raise InputError(f"Expected `--lerobot` to be a LeRobot dataset folder, got {str(root)!r} ({why}).")
    path = root / "meta" / "info.json"
    if not path.exists():
        raise InputError(f"Expected a LeRobot dataset at {str(root)!r}: meta/info.json not found.")
    with regular(path, "LeRobot metadata") as fh:
        try:
            info = json.loads(fh.read().decode("utf-8"))
        except (OSError, ValueError, RecursionError) as e:
            raise InputError(f"Cannot read {str(path)!r}: {str(e).splitlines()[0] if str(e) else type(e).__name__}.") from None
    if not isinstance(info, dict):
        raise InputError(f"Expected {str(path)!r} to hold a JSON object, got {type(info).__name__}.")
    version = str(info.get("codebase_version", ""))
    if not (version.startswith("v2.") or version.startswith("v3.")):
        raise InputError(f"Expected `codebase_version` v2.x or v3.0 in {str(path)!r}, got {version or 'none'!r}.")
    missing = [k for k in ("features", "fps", "data_path") if k not in info]
    if missing:
        raise InputError(f"{str(path)!r} lacks {', '.join(missing)}.")
    if not isinstance(info["features"], dict):
        raise InputError(f"Expected `features` in {str(path)!r} to be an object (key -> feature), got "
                         f"{type(info['features']).__name__}.")
    for key in ("data_path", "video_path"):
        if info.get(key) is not None and not isinstance(info[key], str):
            raise InputError(f"Expected `{key}` in {str(path)!r} to be a path template (a string), got {info[key]!r}.")
    return info


def fps_of(info: dict[str, Any]) -> float:
    """The dataset's frame rate; InputError unless a positive finite number."""
    try:
        fps = float(info["fps"])
    except (TypeError, ValueError, OverflowError):
        fps = math.nan
    if isinstance(info["fps"], bool) or not math.isfinite(fps) or fps <= 0:
        raise InputError(f"Expected a positive `fps` in meta/info.json, got {info['fps']!r}.")
    return fps


def chunks_size(info: dict[str, Any]) -> int:
    """Episodes per chunk (v2 `chunks_size`, 1000 when absent); InputError unless a positive integer."""
    v = info.get("chunks_size")
    if v is None:
        return 1000
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or int(v) <= 0:
        raise InputError(f"Expected a positive integer `chunks_size` in meta/info.json, got {v!r}.")
    return int(v)


def cameras(info: dict[str, Any]) -> list[str]:
    """Camera keys of a dataset: features whose dtype is `video` or `image`."""
    return sorted(k for k, f in info["features"].items() if isinstance(f, dict) and f.get("dtype") in CAMERA_DTYPES)


def check_camera(info: dict[str, Any], camera: str, flag: str = "--camera") -> str:
    """The camera's dtype (`video` or `image`); InputError for an unknown key or one the catalog's
    source record cannot hold (`#` separates it from the dataset folder there)."""
    keys = cameras(info)
    if camera not in keys:
        raise InputError(f"Unknown camera key {camera!r}; this dataset has: {', '.join(keys) or 'no camera'}.")
    if "#" in camera or "?" in camera:
        raise InputError(f"Expected `{flag}` without '#' or '?' (they delimit the set's recorded source), got {camera!r}.")
    dtype = info["features"][camera]["dtype"]
    if dtype == "video" and not info.get("video_path"):
        raise InputError(f"Camera {camera!r} is a video feature but meta/info.json has no `video_path`.")
    return dtype


def fill(root: Path, info: dict[str, Any], key: str, fields: dict[str, Any], allowed: tuple[str, ...]) -> Path:
    """The path of template `info[key]` with `fields` filled in, under `root`.

    Raises:
        InputError: a field the format does not define, a format other than `{x}` / `{x:0Nd}`, a
            missing field value, or a path that leads outside the dataset folder.
    """
    template = info[key]
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as e:
        raise InputError(f"Cannot read meta/info.json `{key}` {template!r}: {e}.") from None
    for _, name, spec, conv in parts:
        if name is None:
            continue
        text = name == "video_key"
        if name not in allowed or conv is not None or not (_SPEC.fullmatch(spec or "") and not (text and spec)):
            raise InputError(f"Expected meta/info.json `{key}` to use only {', '.join('{' + a + '}' for a in allowed)} "
                             f"(plain, or integers as {{name:03d}}), got {template!r}.")
        if not text and not isinstance(fields.get(name), int):
            raise InputError(f"Cannot fill meta/info.json `{key}` {template!r}: {name} is {fields.get(name)!r}, "
                             "not an integer.")
    rel = template.format(**fields)
    return inside(root, rel, f"meta/info.json `{key}` {template!r}")


def inside(root: Path, rel: str, what: str) -> Path:
    """`root / rel` when it stays inside `root` as written (no `..` out of it, not absolute); InputError else."""
    full = os.path.normpath(os.path.join(root, rel))
    base = os.path.normpath(root)
    if "\0" in rel or not full.startswith(base.rstrip(os.sep) + os.sep):
        raise InputError(f"Expected {what} to name a file inside the dataset folder {str(root)!r}, got {rel!r} "
                         "(never read).")
    return Path(full)


def int_cell(v: Any, what: str) -> int:
    """An integer cell or JSON value (an integral float too); FrameError naming `what` else."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not v.is_integer()):
        raise FrameError(f"{what} is {v!r}, not an integer")
    return int(v)


def episodes_v2(root: Path, info: dict[str, Any]) -> list[dict[str, Any]]:
    """The episodes of `meta/episodes.jsonl`, each with its data file and video template fields."""
    path = root / "meta" / "episodes.jsonl"
    if not path.exists():
        raise InputError(f"Expected {str(path)!r} (a v2 dataset's episode list): not found.")
    with regular(path, "LeRobot episode list") as fh:
        try:
            lines = fh.read().decode("utf-8").splitlines()
            eps = [(n, json.loads(line)) for n, line in enumerate(lines, 1) if line.strip()]
        except (OSError, ValueError, RecursionError) as e:
            raise InputError(f"Cannot read {str(path)!r}: {str(e).splitlines()[0] if str(e) else type(e).__name__}.") from None
    chunks = chunks_size(info)
    out = []
    for n, ep in eps:
        try:
            i = int_cell(ep.get("episode_index") if isinstance(ep, dict) else None, "episode_index")
        except FrameError as e:
            raise InputError(f"Expected line {n} of {str(path)!r} to be an object with an integer episode_index, "
                             f"got: {e}.") from None
        fmt = {"episode_chunk": i // chunks, "episode_index": i}
        out.append({"episode_index": i, "data": fill(root, info, "data_path", fmt, V2_FIELDS),
                    "video_fmt": fmt, "from_timestamp": 0.0})
    return out


def episodes_v3(root: Path, info: dict[str, Any], camera: str) -> list[dict[str, Any]]:
    """The episodes of `meta/episodes/**/*.parquet`, each with its data file, and its video file
    fields and start time for `camera` when the lists give them."""
    folder = root / "meta" / "episodes"
    files = sorted(folder.rglob("*.parquet")) if folder.is_dir() else []
    if not files:
        raise InputError(f"Expected episode files under {str(folder)!r} (a v3.0 dataset): none found.")
    v = f"videos/{camera}/"
    need = ["episode_index", "data/chunk_index", "data/file_index"]
    cols = need + [v + "chunk_index", v + "file_index", v + "from_timestamp"]
    out = []
    for f in files:
        t = read_parquet(f, cols)
        missing = [c for c in need if c not in t]
        if missing:
            raise InputError(f"LeRobot episode file {str(f)!r} lacks column(s) {', '.join(missing)}.")
        for j in range(len(t["episode_index"])):
            try:
                ep = int_cell(t["episode_index"][j], "episode_index")
                data_fmt = {"chunk_index": int_cell(t["data/chunk_index"][j], "data/chunk_index"),
                            "file_index": int_cell(t["data/file_index"][j], "data/file_index")}
                row = {"episode_index": ep, "data": fill(root, info, "data_path", data_fmt, V3_FIELDS),
                       "from_timestamp": 0.0}
                if v + "file_index" in t:
                    row["video_fmt"] = {"chunk_index": int_cell(t.get(v + "chunk_index", [None] * (j + 1))[j],
                                                                v + "chunk_index"),
                                        "file_index": int_cell(t[v + "file_index"][j], v + "file_index")}
                    start = t.get(v + "from_timestamp", [None] * (j + 1))[j]
                    row["from_timestamp"] = float(start or 0.0)
            except (FrameError, TypeError, ValueError) as e:
                raise InputError(f"Cannot read row {j} of LeRobot episode file {str(f)!r}: {e}.") from None
            if not math.isfinite(row["from_timestamp"]):
                raise InputError(f"Expected a finite {v}from_timestamp in row {j} of {str(f)!r}, got "
                                 f"{row['from_timestamp']!r}.")
            out.append(row)
    return out


def video_path(root: Path, info: dict[str, Any], camera: str, ep: dict[str, Any]) -> Path:
    """The episode's video file of `camera` (see `fill`)."""
    v3 = str(info.get("codebase_version", "")).startswith("v3.")
    allowed = ("video_key",) + (V3_FIELDS if v3 else V2_FIELDS)
    return fill(root, info, "video_path", {"video_key": camera, **ep.get("video_fmt", {})}, allowed)
