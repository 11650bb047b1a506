"""One writer per catalog: an advisory lock on a sidecar file, naming its holder.

DuckDB lets one process at a time open a file for writing, and nobody else in while it is open,
even to read. The catalog therefore opens DuckDB only for each operation (a batch write, a
query) and keeps a *writer lock* for the whole command: a second writer waits for it or fails
with a message naming the holder, while readers get in between the writer's batches.

The lock is `flock(2)` on `<catalog>.lock`: the kernel drops it when its process dies, so a
killed run never leaves a stale lock behind. The file holds a line describing the holder (pid,
command, start time) for the message the next writer sees.

A forked child shares its parent's open lock file, and with it the lock: a statistics worker
orphaned by a `kill -9` of its parent would hold the lock for ever. So a forked child closes
its copy at once (`os.register_at_fork`), and a lock still held although the pid it names is
gone is taken over: the lock file is replaced by a fresh one, under a short-lived guard lock
(`<catalog>.lock.guard`) that every acquisition takes, so two writers never both take over.

A writer that releases the lock removes both files, under the guard, so a finished command leaves
only the catalog. That is safe because the lock file is only ever opened, replaced or removed by
someone holding the guard, and whoever locks the guard checks that the file they locked is still
the one at its path (a lock on a guard removed meanwhile guards nothing: they open it again).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import logging
import os
import re
import shlex
import stat
import sys
import time
from pathlib import Path

from perception_gap.errors import CatalogBusy, CatalogError, InputError

log = logging.getLogger(__name__)

POLL_S = 0.1
_HOST = os.uname().nodename

# Locks this process holds, by lock path: (open file, reference count). A process is one writer:
# a command that calls another in-process (`demo` -> `index`, `drift --current-dir`) re-enters.
_HELD: dict[str, list] = {}


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def check_db_path(db: Path) -> None:
    """A catalog is a regular file, or a path where one can be created.

    Checked before anything opens the path or writes beside it: `--db /dev/null` would
    otherwise leave `/dev/null.lock` behind, and opening a FIFO blocks for ever. Links are
    followed (a link to a catalog file is one).

    Raises:
        InputError: the path exists and is a directory, a device, a FIFO or a socket.
    """
    try:
        mode = os.stat(db).st_mode
    except FileNotFoundError:
        return  # a new catalog (or a dangling link, which creating the file reports)
    except OSError as e:
        raise CatalogError(f"Cannot read catalog {str(db)!r}: {e.strerror}.") from None
    if not stat.S_ISREG(mode):
        kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
        raise InputError(f"Expected `--db` to name a catalog file, got {str(db)!r}, which is {kind}.")


def _holder_line() -> str:
    argv = " ".join(shlex.quote(a) for a in sys.argv[1:])[:300]
    started = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    return f"pid {os.getpid()} ({Path(sys.argv[0]).name} {argv}) since {started} on {_HOST}".replace("\n", " ")


def _open(path: Path):
    try:
        return open(path, "a+b")
    except OSError as e:
        raise CatalogError(f"Cannot create the catalog's lock file {str(path)!r}: {e.strerror}.") from None


def _holder_pid(holder: str) -> int | None:
    """The pid a holder line names, when it names this host (a pid elsewhere cannot be checked)."""
    m = re.match(r"pid (\d+) ", holder)
    return int(m.group(1)) if m and holder.endswith(f" on {_HOST}") else None


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _forget_in_child() -> None:
    """In a forked child: close the inherited lock files without unlocking (the parent holds them)."""
    for fh, _ in _HELD.values():
        try:
            fh.close()
        except OSError:
            pass
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _is_at(fh, path: Path) -> bool:
    """Whether the open file `fh` is the file at `path` now (not removed, not replaced)."""
    try:
        return os.path.samestat(os.fstat(fh.fileno()), os.stat(path))
    except OSError:
        return False


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError as e:
        log.debug("catalog lock: cannot remove %s (%s)", path, e)


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
        check_db_path(db)
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
        deadline = time.monotonic() + self.wait
        while True:
            fh, holder = self._try_once()
            if fh is not None:
                break
            if time.monotonic() >= deadline:
                waited = f" after waiting {self.wait:g} s" if self.wait else ""
                raise CatalogBusy(
                    f"Catalog {str(self.path.with_suffix(''))!r} is being written by {holder}{waited}; "
                    f"wait for it to finish, or pass `--wait SECONDS`.")
            time.sleep(POLL_S)
        _HELD[self.key] = [fh, 1]
        self.held = True
        return self

    def _guard(self):
        """The guard file, opened and locked (held for milliseconds, never across a fork)."""
        path = self.path.with_name(self.path.name + ".guard")
        while True:
            guard = _open(path)
            fcntl.flock(guard.fileno(), fcntl.LOCK_EX)
            if _is_at(guard, path):
                return guard
            guard.close()  # a releasing writer removed it while we waited: lock the one at the path

    def _try_once(self):
        """One attempt under the guard lock: (locked file, None) or (None, holder description)."""
        guard = self._guard()
        try:
            fh = _open(self.path)
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fh)
                fh.close()
                pid = _holder_pid(holder)
                if pid is None or _alive(pid):
                    return None, holder
                fh = self._take_over(holder)
            fh.seek(0)
            fh.truncate()
            fh.write((_holder_line() + "\n").encode("utf-8", "replace"))
            fh.flush()
            return fh, None
        finally:
            guard.close()  # closing drops the guard lock

    def _take_over(self, holder: str):
        """Replace a lock file held by the orphans of a dead writer with a fresh, locked one."""
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        fh = _open(tmp)
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: nobody else has it
        os.replace(tmp, self.path)
        log.warning("catalog lock: took over from %s (that process is gone; its children still held the lock)", holder)
        return fh

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
                guard = self._guard()
            except (CatalogError, OSError) as e:  # the folder went read-only, say: leave the files
                log.debug("catalog lock: not removing the lock files (%s)", e)
                guard = None
            try:
                fh.seek(0)
                fh.truncate()  # no holder any more
                if guard is not None and _is_at(fh, self.path):  # not when another writer took it over
                    _remove(self.path)
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            finally:
                fh.close()
                if guard is not None:
                    _remove(Path(guard.name))  # still locked by us: whoever waits on it opens it again
                    guard.close()
