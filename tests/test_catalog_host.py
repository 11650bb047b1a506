"""Each catalog operation attaches its file to the process's one in-memory DuckDB database
(`catalog/host.py`): the file is free for other processes between operations, two catalog objects
of one process share one attachment, and a forked child makes its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from perception_gap.catalog import Catalog, host
from perception_gap.errors import CatalogError

OPEN_ELSEWHERE = """
import duckdb, sys
con = duckdb.connect(sys.argv[1], config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
print(con.execute("SELECT count(*) FROM frame_sets").fetchone()[0])
"""


def _elsewhere(db) -> subprocess.CompletedProcess:
    """Open the file for writing from another process (DuckDB refuses while this one holds it)."""
    return subprocess.run([sys.executable, "-c", OPEN_ELSEWHERE, str(db)], capture_output=True, text=True, timeout=120)


def test_the_file_is_held_during_an_operation_and_free_after_it(tmp_path):
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        cat.ensure_set("a", "sim")
        with cat.session():
            assert cat.get_set("a")["domain"] == "sim"
            held = _elsewhere(db)
            assert held.returncode != 0 and "lock" in held.stderr.lower(), held.stderr
        free = _elsewhere(db)  # between operations: another process gets in
        assert free.returncode == 0 and free.stdout.strip() == "1", free.stderr
        assert cat.list_sets()  # and the next operation attaches it again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.duckdb"]  # no WAL, no lock left behind


def test_two_catalog_objects_share_one_attachment_and_the_last_detaches(tmp_path):
    db = tmp_path / "c.duckdb"
    with Catalog(db) as w:
        w.ensure_set("a", "sim")
    key = os.path.abspath(db)
    with Catalog(db, read_only=True) as r1, Catalog(db, read_only=True) as r2, r1.session(), r2.session():
        assert r1.get_set("a") == r2.get_set("a")
        assert host._STATE["attached"][key]["users"] == 2
    assert key not in host._STATE["attached"]
    assert _elsewhere(db).returncode == 0


def test_a_catalog_dropped_while_attached_lets_the_file_go(tmp_path):
    """`con` read outside a session keeps the file attached until `close`, or until the object is
    collected, as a connection of its own was closed when collected."""
    db = tmp_path / "c.duckdb"
    cat = Catalog(db)
    cat.ensure_set("a", "sim")
    assert cat.con.execute("SELECT count(*) FROM frame_sets").fetchone()[0] == 1
    assert os.path.abspath(db) in host._STATE["attached"] and _elsewhere(db).returncode != 0
    del cat
    assert os.path.abspath(db) not in host._STATE["attached"]
    assert _elsewhere(db).returncode == 0


def test_writing_a_file_this_process_holds_read_only_is_one_line(tmp_path):
    db = tmp_path / "c.duckdb"
    with Catalog(db) as w:
        w.ensure_set("a", "sim")
    with Catalog(db, read_only=True) as r, r.session():
        r.get_set("a")
        with pytest.raises(CatalogError, match="read-only") as err:
            with Catalog(db, wait=0) as w:
                w.ensure_set("b", "real")
        assert "\n" not in str(err.value)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_makes_its_own_host(tmp_path):
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        cat.ensure_set("a", "sim")
    parent = host._STATE["con"]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reads the catalog through a host of its own, then leaves at once
        try:
            with Catalog(db, read_only=True) as c:
                ok = c.get_set("a") is not None and host._STATE["con"] is not parent
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b"1"
    os.close(r)


def test_a_full_disk_in_process_then_the_next_operation_completes(tmp_path):
    """A write that meets a full disk is one CatalogError, and the same process's next operations
    on the freed disk complete through the same host (one that a fatal error invalidated would be
    replaced: `host.drop`)."""
    from tests.filesystems import disk_full, tmpfs

    rows = [{"set_name": "a", "rgb_path": f"/f/{i:05d}.png", "content_hash": f"{i:040x}", "status": "ok"}
            for i in range(3000)]
    with tmpfs(tmp_path / "fs", size="8m") as fs:
        db = fs / "c.duckdb"
        with Catalog(db) as cat:
            cat.ensure_set("a", "sim")
            with disk_full(fs, 0), pytest.raises(CatalogError, match="(?i)disk full|failed write|cannot be"):
                cat.write_frames(rows)
            cat.write_frames(rows[:10])
            assert cat.set_counts("a")["total"] == 10
        with Catalog(db, read_only=True) as again:
            assert again.set_counts("a")["total"] == 10
