"""Encoder candidates of a sweep: `--encoders @candidates.toml` and plain encoder names, as one list.

A candidates file is TOML with one `[[encoder]]` table per encoder::

    [[encoder]]
    name = "efficientnet-lite0"          # the encoder name exactly as on the command line

    [[encoder]]
    name = "open_clip:ViT-B-32:/weights/clip.safetensors"
    label = "CLIP B/32"                  # shown in results.json and the report (default: the name)
    batch_size = 16                      # overrides --batch-size for this encoder ("auto" allowed)
    precision = "bf16"                   # overrides --precision for this encoder

Every problem is one line naming the file, the table (1-based) and the key: a missing file, bad
TOML (with its line), an unknown key, a missing name, a duplicate name or label, a bad value.
Plain names given beside a file (`--encoders @sweep.toml,pixel`) become candidates with no options.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from perception_gap.encoders.base import PRECISIONS
from perception_gap.errors import InputError

KEYS = ("name", "label", "batch_size", "precision")
MAX_BATCH_SIZE = 65_536
MAX_FILE_BYTES = 1 << 20  # a candidates file lists encoders; anything larger is not one
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Candidate:
    """One encoder of a sweep.

    Attributes:
        name: the encoder name as on the command line (`efficientnet-lite0`, `open_clip:...`).
        label: the display name in results.json and the report; the name when not given.
        batch_size: frames per model call for this encoder (an int or "auto"); None: the command's.
        precision: "fp32", "fp16" or "bf16" for this encoder; None: the command's.
    """

    name: str
    label: str
    batch_size: int | str | None = None
    precision: str | None = None

    @classmethod
    def plain(cls, name: str) -> "Candidate":
        """A candidate with no options, labelled by its name."""
        return cls(name=name, label=name)

    @property
    def has_options(self) -> bool:
        return self.label != self.name or self.batch_size is not None or self.precision is not None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "batch_size": self.batch_size, "precision": self.precision}


def as_candidates(items: Iterable[str | Candidate]) -> list[Candidate]:
    """Names and candidates as candidates (a plain name gets no options)."""
    return [i if isinstance(i, Candidate) else Candidate.plain(str(i)) for i in items]


def sweep_config(cands: list[Candidate]) -> dict[str, Any]:
    """What a run's `config` records about its candidates beyond their names: their labels and
    options when any candidate has some, nothing otherwise (results of plain names stay as they were)."""
    return {"candidates": [c.to_dict() for c in cands]} if any(c.has_options for c in cands) else {}


def _where(path: Path, index: int | None = None) -> str:
    return f"Candidates file {str(path)!r}" + (f", [[encoder]] #{index}" if index is not None else "")


def _text(path: Path, index: int, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or value != value.strip() or _CONTROL.search(value):
        raise InputError(f"{_where(path, index)}: expected `{key}` as a non-empty string without surrounding "
                         f"spaces or control characters, got {value!r}.")
    return value


def _batch_size(path: Path, index: int, value: Any) -> int | str:
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_BATCH_SIZE):
        return value
    raise InputError(f"{_where(path, index)}: expected `batch_size` as an integer in [1, {MAX_BATCH_SIZE}] "
                     f"or \"auto\", got {value!r}.")


def _precision(path: Path, index: int, value: Any) -> str:
    if value in PRECISIONS and isinstance(value, str):
        return value
    raise InputError(f"{_where(path, index)}: expected `precision` in {', '.join(PRECISIONS)}, got {value!r}.")


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    from perception_gap.ingest.frames import not_a_file

    why = not_a_file(path)
    if why is not None:
        raise InputError(f"Expected `@FILE` to name a candidates file (TOML), got {str(path)!r} ({why}).")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(f"{_where(path)}: expected at most {MAX_FILE_BYTES:,} bytes, got {size:,}.")
        data = path.read_bytes()
        return tomllib.loads(data.decode("utf-8"))
    except OSError as e:
        raise InputError(f"Cannot read candidates file {str(path)!r}: {e.strerror or e}.") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{_where(path)} is not UTF-8 text: byte {e.start} cannot be decoded.") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{_where(path)} is not valid TOML: {str(e).splitlines()[0]}.") from None


def read_candidates(path: str | Path) -> list[Candidate]:
    """The `[[encoder]]` tables of a candidates file, in file order.

    Raises:
        InputError: the file is missing or unreadable, is not TOML, has a key or table other than
            those documented above, a table without `name`, a bad value, or two tables with the
            same name or label (one line naming the file, the table and the key).
    """
    p = Path(path)
    doc = _load_toml(p)
    extra = [k for k in doc if k != "encoder"]
    if extra:
        raise InputError(f"{_where(p)}: unknown top-level key {extra[0]!r}; expected only [[encoder]] tables.")
    tables = doc.get("encoder")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise InputError(f"{_where(p)}: expected one or more [[encoder]] tables, got "
                         f"{'none' if tables is None else type(tables).__name__}.")
    out: list[Candidate] = []
    for i, t in enumerate(tables, 1):
        unknown = [k for k in t if k not in KEYS]
        if unknown:
            raise InputError(f"{_where(p, i)}: unknown key {unknown[0]!r}; expected {', '.join(KEYS)}.")
        if "name" not in t:
            raise InputError(f"{_where(p, i)}: expected a `name` (the encoder name as on the command line), got none.")
        name = _text(p, i, "name", t["name"])
        label = _text(p, i, "label", t["label"]) if "label" in t else name
        out.append(Candidate(name=name, label=label,
                             batch_size=_batch_size(p, i, t["batch_size"]) if "batch_size" in t else None,
                             precision=_precision(p, i, t["precision"]) if "precision" in t else None))
    _check_unique(out, _where(p))
    return out


def _check_unique(cands: list[Candidate], where: str) -> None:
    for key in ("name", "label"):
        seen: dict[str, int] = {}
        for i, c in enumerate(cands, 1):
            v = getattr(c, key)
            if v in seen:
                raise InputError(f"{where}: expected each encoder {key} once, got {v!r} in entries #{seen[v]} and #{i}.")
            seen[v] = i


def parse_candidates(spec: str | list[str] | None, flag: str = "--encoders") -> list[Candidate]:
    """`--encoders` values (comma-separated or repeated) with `@FILE` items read as candidates files.

    `open_clip:ARCH:PATH` names keep their colons; an item starting with `@` is a file, read in its
    place. The result is in the order given; a name or label twice (across files and plain names)
    is an error.

    Raises:
        InputError: no name at all, or any problem of `read_candidates`.
    """
    if spec is None:
        return []
    items = spec if isinstance(spec, list) else [spec]
    out: list[Candidate] = []
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if part.startswith("@"):
                if not part[1:].strip():
                    raise InputError(f"Expected `{flag} @FILE` with a file name after '@', got {part!r}.")
                out.extend(read_candidates(part[1:].strip()))
            else:
                out.append(Candidate.plain(part))
    if not out:
        raise InputError(f"Expected at least one encoder name in `{flag}`, got none.")
    _check_unique(out, f"`{flag}`")
    return out
