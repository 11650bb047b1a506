"""One in-memory DuckDB database per process, with catalog files attached to it for each operation.

The catalog opens its file for each operation and closes it after (`core.Catalog.con`: other
processes read between a writer's batches). A `duckdb.connect` builds a whole database instance,
its function catalogue included: about 20 ms, paid by every operation. Attaching the file to a
database already open costs about 2 ms and holds the same file lock, which `DETACH` releases
(bench/bench_fast_paths.py). So each process keeps one in-memory database (the host), and an
operation gets a cursor whose default database is the attached file: SQL without a database
prefix reads and writes the catalog, as on a connection of its own.

A file attached by two catalog objects of one process at once is attached once and detached after
the last. A forked child makes its own host. A fatal error (a full disk during a write) invalidates
the host: it is dropped and the next operation makes a fresh one.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import duckdb

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"pid": None, "con": None, "attached": {}, "n": 0}


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _host(config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    if _STATE["pid"] != os.getpid() or _STATE["con"] is None:
        _STATE.update(pid=os.getpid(), con=duckdb.connect(":memory:", config=dict(config)), attached={}, n=0)
    return _STATE["con"]


def attach(path: str, read_only: bool, config: dict[str, Any]) -> tuple[duckdb.DuckDBPyConnection, str]:
    """A cursor on the catalog file at `path` (attached now unless this process has it attached)
    and the key to `release` it with. Raises DuckDB's own errors (a lock held by another process is
    an `IOException`, as from `duckdb.connect`)."""
    key = os.path.abspath(path)
    with _LOCK:
        host = _host(config)
        entry = _STATE["attached"].get(key)
        if entry is None:
            _STATE["n"] += 1
            alias = f"catalog_{_STATE['n']}"
            sql = f"ATTACH {_literal(key)} AS {alias}" + (" (READ_ONLY)" if read_only else "")
            try:
                host.execute(sql)
            except duckdb.FatalException:  # a host an earlier failure invalidated: a fresh one
                drop()
                host = _host(config)
                host.execute(sql)
            entry = _STATE["attached"][key] = {"alias": alias, "read_only": read_only, "users": 0}
        elif entry["read_only"] and not read_only:
            raise duckdb.ConnectionException(
                f"Cannot write {key!r}: this process has it open read-only (another catalog object).")
        entry["users"] += 1
        try:
            cur = host.cursor()
            cur.execute(f"USE {entry['alias']}")
        except BaseException:
            _release_locked(key)
            raise
    return cur, key


def cursor(con: duckdb.DuckDBPyConnection, key: str) -> duckdb.DuckDBPyConnection:
    """A fresh cursor of `con` on the catalog file `key` names (a new cursor starts on the host's
    own database; `con`'s pending result, if any, is left alone)."""
    cur = con.cursor()
    cur.execute(f"USE {_STATE['attached'][key]['alias']}")
    return cur


def release(con: duckdb.DuckDBPyConnection, key: str) -> None:
    """Close the cursor; detach the file when no catalog object of this process uses it any more.
    A failed detach (its checkpoint met a full disk) drops the host and raises; a host a fatal
    error invalidated is dropped quietly (the operation raised that error already). In a forked
    child, a cursor of the parent's host is left alone: its DuckDB is not this process's."""
    if _STATE["pid"] != os.getpid():
        return
    try:
        con.close()
    finally:
        with _LOCK:
            _release_locked(key)


def _release_locked(key: str) -> None:
    if _STATE["pid"] != os.getpid():
        return
    entry = _STATE["attached"].get(key)
    if entry is None:
        return
    entry["users"] -= 1
    if entry["users"] > 0:
        return
    del _STATE["attached"][key]
    if _STATE["con"] is None:
        return
    try:
        _STATE["con"].execute(f"DETACH {entry['alias']}")
    except duckdb.FatalException:
        drop()  # invalidated by the failure the operation itself raised: nothing left to close
    except BaseException:
        drop()
        raise


def drop() -> None:
    """Forget the host (after a fatal error invalidated it): the next `attach` makes a fresh one."""
    con, _STATE["con"] = _STATE["con"], None
    _STATE["attached"] = {}
    if con is not None:
        try:
            con.close()
        except duckdb.Error:
            pass
