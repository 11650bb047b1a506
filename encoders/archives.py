"""How much a torch file says it will unpack to, read before any loader allocates it.

`torch.load`, `torch.jit.load` and `torch.export.load` size their buffers from what the file
declares, not from the file's size: a zip member's uncompressed size (its data is inflated
whole), the element count in a pickled storage id (the legacy format allocates it before reading
a byte of data). A few megabytes can therefore declare gigabytes. `check_declared_sizes` reads
those declarations without loading anything and refuses a file that declares more than
`declared_limit(file size)`:

- a zip archive (`torch.save`, TorchScript, `.pt2`): the central directory's uncompressed sizes,
  summed with those of any archive nested in a member (a `.pt2` holds `torch.save` archives);
  for a `torch.save` archive, each storage its pickle names must also fit in its `data/KEY`
  record;
- the legacy `torch.save` format (one stream of pickles, then the storages' data): every storage
  the pickle declares must be followed by data of that size inside the file.

Pickles are read with `pickletools.genops` and a small stack model of their opcodes: nothing is
imported, called or built, so the check cannot run code whatever the file holds.
"""

from __future__ import annotations

import io
import os
import pickletools
import struct
import zipfile
from dataclasses import dataclass
from typing import IO, Any, Iterator

from perception_gap.encoders.errors import ArchiveLimitError, EncoderError

# A file may declare this many times its own size: deflate shrinks trained float weights by a
# few percent at most, so only a file built to inflate comes near it.
MAX_EXPANSION = 4
# Small files (a compressed, mostly-zero test checkpoint) may declare up to this much.
MIN_LIMIT_BYTES = 64 * 2**20
# Never more than this, whatever the file's size (the largest open_clip checkpoint is ~10 GB).
MAX_DECLARED_BYTES = 16 * 2**30
MAX_NESTING = 3  # archives inside archives (a .pt2 holds one level)

ZIP_MAGIC = b"PK\x03\x04"
_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # torch.serialization.MAGIC_NUMBER
_LEGACY_PROTOCOL = 1001  # torch.serialization.PROTOCOL_VERSION
_MARK = object()


@dataclass(frozen=True)
class DeclaredSizes:
    """What a torch file declares, in bytes.

    Attributes:
        file_bytes: the file's size on disk.
        declared_bytes: what loading it may allocate (zip members uncompressed, nested archives
            included; or the legacy storages' sizes).
        limit_bytes: `declared_limit(file_bytes)`.
        fmt: how `torch.load` reads it: "zip", "legacy" or "other" (neither: it refuses the file).
        deflated: whether a zip member is compressed (a memory map of the file cannot hold it).
    """

    file_bytes: int
    declared_bytes: int
    limit_bytes: int
    fmt: str
    deflated: bool


def declared_limit(file_bytes: int) -> int:
    """The most a file of `file_bytes` may declare: MAX_EXPANSION x its size, at least
    MIN_LIMIT_BYTES, at most MAX_DECLARED_BYTES."""
    return min(MAX_DECLARED_BYTES, max(MIN_LIMIT_BYTES, MAX_EXPANSION * file_bytes))


def human_bytes(n: int) -> str:
    """`n` bytes as B, KiB, MiB or GiB with three significant digits."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def check_declared_sizes(path: str, what: str, *, legacy: bool = True) -> DeclaredSizes:
    """Refuse `path` when it declares more than it may unpack to (module docstring).

    Args:
        path: a torch file (`torch.save` zip or legacy, TorchScript, `.pt2`).
        what: the file's role for messages ("checkpoint", "FID Inception weights", "`--policy`").
        legacy: also read the legacy (non-zip) `torch.save` format; off where the loader only
            takes zip archives (TorchScript and `.pt2` policies).

    Raises:
        ArchiveLimitError: more declared than `declared_limit`, or a storage declared larger than
            the data the file holds for it.
        EncoderError: a zip archive whose directory cannot be read.
    """
    size = os.path.getsize(path)
    limit = declared_limit(size)
    with open(path, "rb") as f:
        head = f.read(64)
        f.seek(0)
        scan = _Scan(path, what, limit)
        # torch.load picks its format from the first bytes, torch.jit.load from the zip directory
        # at the end: a file may be read either way, so each that applies is checked.
        fmt = "zip" if head.startswith(ZIP_MAGIC) else "other"
        if fmt == "zip" or zipfile.is_zipfile(f):
            f.seek(0)
            scan.zip(f, depth=0)
        if fmt != "zip" and legacy and _is_legacy(head):
            f.seek(0)
            scan.legacy(f, size)
            fmt = "legacy"
    return DeclaredSizes(size, scan.total, limit, fmt, scan.deflated)


def _is_legacy(head: bytes) -> bool:
    """Whether `head` starts with the legacy format's first pickle: torch's magic number."""
    try:
        return next(_pickled_values(io.BytesIO(head)), None) == _LEGACY_MAGIC
    except Exception:  # noqa: BLE001 - any parse failure: not that format
        return False


class _Scan:
    """Declared sizes summed over one file and the archives nested in it."""

    def __init__(self, path: str, what: str, limit: int) -> None:
        self.path, self.what, self.limit = path, what, limit
        self.total = 0
        self.deflated = False

    def _add(self, n: int) -> None:
        self.total += n
        if self.total > self.limit:
            size = os.path.getsize(self.path)
            raise ArchiveLimitError(
                f"Refusing {self.what} {self.path!r}: it declares over {human_bytes(self.total)} of data once "
                f"unpacked, more than the {human_bytes(self.limit)} allowed for a {human_bytes(size)} file "
                f"({MAX_EXPANSION}x its size, at least {human_bytes(MIN_LIMIT_BYTES)}, at most "
                f"{human_bytes(MAX_DECLARED_BYTES)}); nothing was loaded.")

    def _refuse(self, reason: str) -> ArchiveLimitError:
        return ArchiveLimitError(f"Refusing {self.what} {self.path!r}: {reason}; nothing was loaded.")

    def zip(self, f: IO[bytes], depth: int) -> None:
        try:
            z = zipfile.ZipFile(f)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
            raise EncoderError(f"Cannot read {self.what} {self.path!r}: a zip archive whose directory is "
                               f"unreadable ({e}).") from None
        with z:
            infos = z.infolist()
            for info in infos:
                self._add(info.file_size)
                self.deflated |= info.compress_type != zipfile.ZIP_STORED
            records = {info.filename: info for info in infos}
            prefix = infos[0].filename.split("/", 1)[0] + "/" if infos and "/" in infos[0].filename else ""
            pkl = records.get(prefix + "data.pkl")
            if pkl is not None and prefix + "constants.pkl" not in records:  # a torch.save archive
                self._storages_fit(z, pkl, records, prefix)
            for info in infos:
                self._nested(z, info, depth)

    def _storages_fit(self, z: zipfile.ZipFile, pkl: zipfile.ZipInfo, records: dict[str, zipfile.ZipInfo],
                      prefix: str) -> None:
        """Each storage the pickle names fits in its record (torch sizes the storage from the pickle)."""
        try:
            with z.open(pkl) as data:
                for key, nbytes in _storage_ids(data, zip_format=True):
                    rec = records.get(f"{prefix}data/{key}")
                    held = 0 if rec is None else rec.file_size
                    if nbytes > held:
                        raise self._refuse(f"its pickle declares storage {key!r} of {nbytes} bytes but the archive "
                                           f"holds {held} bytes for it")
        except ArchiveLimitError:
            raise
        except Exception:  # noqa: BLE001 - an unreadable pickle is refused by the loader itself
            return

    def _nested(self, z: zipfile.ZipFile, info: zipfile.ZipInfo, depth: int) -> None:
        if info.is_dir() or info.file_size < 4:
            return
        with z.open(info) as member:
            head = member.read(64)
        nested_zip = head.startswith(ZIP_MAGIC)
        if not (nested_zip or _is_legacy(head)):
            return
        if depth + 1 > MAX_NESTING:
            raise self._refuse(f"archives nested more than {MAX_NESTING} deep (member {info.filename!r})")
        data = io.BytesIO(z.read(info))  # bounded: its size was counted against the limit
        if nested_zip:
            self.zip(data, depth + 1)
        else:
            self.legacy(data, info.file_size)

    def legacy(self, f: IO[bytes], size: int) -> None:
        """The legacy format: magic, protocol, system info, the object (storage ids), storage keys, data."""
        try:
            values = [next(_pickled_values(f), None) for _ in range(3)]
            if values[1] != _LEGACY_PROTOCOL:
                raise EncoderError(
                    f"Cannot read {self.what} {self.path!r}: a legacy torch file must give protocol version "
                    f"{_LEGACY_PROTOCOL} after its magic number, this one gives {values[1]!r}.")
            declared: dict[str, tuple[int, int]] = {}
            for key, numel, item in _storage_ids(f, zip_format=False):
                declared.setdefault(key, (numel, item))
            keys = next(_pickled_values(f), None)
        except EncoderError:
            raise
        except Exception:  # noqa: BLE001 - not a pickle stream torch reads either: its loader refuses it
            return
        if not isinstance(keys, list) or set(declared) - set(map(str, keys)):
            missing = sorted(set(declared) - set(map(str, keys if isinstance(keys, list) else [])))
            raise self._refuse(f"its pickle declares storage {missing[0] if missing else '?'!r} without data for it")
        offset = f.tell()
        for key in map(str, keys):
            if key not in declared:
                raise self._refuse(f"it lists data for storage {key!r}, which its pickle never declares")
            numel, item = declared[key]
            f.seek(offset)
            raw = f.read(8)
            if len(raw) < 8:
                raise self._refuse(f"the file ends before the data of storage {key!r} ({numel} elements declared)")
            (held,) = struct.unpack("<q", raw)
            if held != numel:
                raise self._refuse(f"its pickle declares storage {key!r} of {numel} elements but the data "
                                   f"written for it has {held}")
            offset += 8 + numel * item
            if offset > size:
                raise self._refuse(f"its pickle declares storage {key!r} of {numel * item} bytes, past the end "
                                   f"of the {size}-byte file")
            self._add(numel * item)


def _element_size(storage_class: Any) -> int:
    """Bytes per element of a pickled storage class name ("torch.FloatStorage"); 16 (the widest
    dtype) when unknown, so an unknown name can only over-count."""
    name = str(storage_class).rpartition(".")[2]
    if name == "UntypedStorage":
        return 1
    try:
        import torch

        return int(torch.serialization.StorageType(name).dtype.itemsize)
    except Exception:  # noqa: BLE001 - any failure: the conservative width
        return 16


def _storage_ids(f: IO[bytes], *, zip_format: bool) -> Iterator[tuple]:
    """(key, nbytes) per storage id of one pickle (zip format), or (key, numel, element size) (legacy)."""
    for pid in _persistent_ids(f):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] in ("storage", b"storage")):
            continue
        _, cls, key, _location, numel = pid[:5]
        if not isinstance(numel, int) or numel < 0:
            continue
        item = _element_size(cls)
        yield (str(key), numel * item) if zip_format else (str(key), numel, item)


def _persistent_ids(f: IO[bytes]) -> Iterator[Any]:
    """The persistent ids of one pickle, with the values of the literals in them."""
    yield from _walk(f, want_ids=True)


def _pickled_values(f: IO[bytes]) -> Iterator[Any]:
    """The value of one pickle when it is made of literals, tuples and lists only (else a placeholder)."""
    yield from _walk(f, want_ids=False)


def _walk(f: IO[bytes], *, want_ids: bool) -> Iterator[Any]:
    """A stack model of one pickle's opcodes: literals, memo, tuples and lists keep their values,
    everything else is a placeholder (None); nothing is imported or called."""
    stack: list[Any] = []
    memo: dict[int, Any] = {}

    def pop_mark() -> list[Any]:
        i = len(stack) - 1 - next(k for k, v in enumerate(reversed(stack)) if v is _MARK)
        items = stack[i + 1:]
        del stack[i:]
        return items

    for op, arg, _pos in pickletools.genops(f):
        name = op.name
        if name == "STOP":
            if not want_ids:
                yield stack[-1] if stack else None
            return
        if name in ("PROTO", "FRAME"):
            continue
        if name == "MARK":
            stack.append(_MARK)
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[arg] = stack[-1]
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1]
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo.get(arg))
        elif name in ("GLOBAL", "INST"):
            if name == "INST":
                pop_mark()
            stack.append(str(arg).replace(" ", "."))
        elif name == "STACK_GLOBAL":
            qual, module = stack.pop(), stack.pop()
            stack.append(f"{module}.{qual}")
        elif name == "TUPLE":
            stack.append(tuple(pop_mark()))
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            items = stack[-n:]
            del stack[-n:]
            stack.append(tuple(items))
        elif name == "EMPTY_TUPLE":
            stack.append(())
        elif name == "EMPTY_LIST":
            stack.append([])
        elif name == "LIST":
            stack.append(pop_mark())
        elif name == "APPEND":
            v = stack.pop()
            if isinstance(stack[-1], list):
                stack[-1].append(v)
        elif name == "APPENDS":
            items = pop_mark()
            if isinstance(stack[-1], list):
                stack[-1].extend(items)
        elif name == "BINPERSID":
            pid = stack.pop()
            if want_ids:
                yield pid
            stack.append(None)
        elif name == "PERSID":
            if want_ids:
                yield arg
            stack.append(None)
        elif name in ("NONE", "NEWTRUE", "NEWFALSE"):
            stack.append({"NONE": None, "NEWTRUE": True, "NEWFALSE": False}[name])
        elif op.arg is not None and not op.stack_before and len(op.stack_after) == 1:
            stack.append(arg)  # a literal: ints, floats, strings, bytes
        else:
            before = op.stack_before
            if pickletools.markobject in before:
                pop_mark()
                n = before.index(pickletools.markobject)
            else:
                n = len(before)
            if n:
                if len(stack) < n:
                    raise ValueError(f"stack underflow at {name}")
                del stack[-n:]
            stack.extend([None] * len(op.stack_after))
