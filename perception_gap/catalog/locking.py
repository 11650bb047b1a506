"""One writer per catalog: an advisory lock on a sidecar file, naming its holder.

DuckDB lets one process at a time open a file for writing, and nobody else in while it is open,
even to read. The catalog therefore opens DuckDB only for each operation (a batch write, a
query) and keeps a *writer lock* for the whole command: a second writer waits for it or fails
with a message naming the holder, while readers get in between the writer's batches.

The lock is `flock(2)` on `<catalog>.lock`: the kernel drops it when its process dies, so a
killed run never leaves a stale lock behind. The file holds a line describing the holder (pid,
command, start time) for the message the next writer sees.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
import shlex
import sys
import time
from pathlib import Path

from perception_gap.errors import CatalogBusy, CatalogError

POLL_S = 0.1

# Locks this process holds, by lock path: (open file, reference count). A process is one writer:
# a command that calls another in-process (`demo` -> `index`, `drift --current-dir`) re-enters.
_HELD: dict[str, list] = {}


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


def _holder_line() -> str:
    argv = " ".join(shlex.quote(a) for a in sys.argv[1:])[:300]
    started = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    return f"pid {os.getpid()} ({Path(sys.argv[0]).name} {argv}) since {started}".replace("\n", " ")


def _read_holder(fh) -> str:
    try:
        fh.seek(0)
        text = fh.read(1000).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "another process"


class WriterLock:
    """The writer lock of one catalog file.

    Args:
        db: the catalog file.
        wait: seconds to wait for another writer to finish; 0 fails at once.
    """

    def __init__(self, db: Path, *, wait: float = 0.0) -> None:
        if not (wait >= 0 and wait < float("inf")):
            raise CatalogError(f"Expected `--wait` >= 0 seconds, got {wait!r}.")
        self.path = lock_path(db)
        self.key = str(self.path.resolve())
        self.wait = float(wait)
        self.held = False

    def acquire(self) -> "WriterLock":
        if self.held:
            return self
        if self.key in _HELD:
            _HELD[self.key][1] += 1
            self.held = True
            return self
        try:
            fh = open(self.path, "a+b")
        except OSError as e:
            raise CatalogError(f"Cannot create the catalog's lock file {str(self.path)!r}: {e.strerror}.") from None
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = _read_holder(fh)
                    fh.close()
                    waited = f" after waiting {self.wait:g} s" if self.wait else ""
                    raise CatalogBusy(
                        f"Catalog {str(self.path.with_suffix(''))!r} is being written by {holder}{waited}; "
                        f"wait for it to finish, or pass `--wait SECONDS`.") from None
                time.sleep(POLL_S)
        fh.seek(0)
        fh.truncate()
        fh.write((_holder_line() + "\n").encode("utf-8", "replace"))
        fh.flush()
        _HELD[self.key] = [fh, 1]
        self.held = True
        return self

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        entry = _HELD.get(self.key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del _HELD[self.key]
            fh = entry[0]
            try:
                fh.seek(0)
                fh.truncate()  # no holder any more
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            finally:
                fh.close()
