"""Offline: a full run (index, statistics, a real encoder, metrics, probes, the report) opens no
network socket, checked by an audit hook in the process that runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_process import ENV, REPO, clean, paired_catalog, write_manifest


@pytest.fixture(scope="module")
def crash_world(tmp_path_factory):
    """The paired frames (`m.jsonl`) and a template catalog with them indexed."""
    return paired_catalog(tmp_path_factory)


_AUDIT = r"""
import socket, sys
sys.path.insert(0, {repo!r})
log = open({log!r}, "a", buffering=1)
def hook(event, args):
    if event == "socket.__new__" and args[1] not in (socket.AF_UNIX,):
        log.write(f"socket {{args[1]!r}}\n")
    elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo", "socket.gethostbyname"):
        addr = args[1] if len(args) > 1 else args
        if not (isinstance(addr, (str, bytes)) and event in ("socket.connect", "socket.bind")):  # AF_UNIX paths
            log.write(f"{{event}} {{addr!r}}\n")
sys.addaudithook(hook)
{body}
"""


def _audited(tmp: Path, body: str, log: Path) -> subprocess.CompletedProcess:
    code = _AUDIT.format(repo=str(REPO), log=str(log), body=body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=ENV)


def test_a_full_run_opens_no_network_socket(crash_world, tmp_path):
    tmp, _ = crash_world
    log = tmp_path / "net.log"
    # known answer for the audit itself: a socket and a name lookup are caught
    p = _audited(tmp_path, "import socket\ns = socket.socket()\ntry:\n    socket.getaddrinfo('localhost', 80)\n"
                           "except OSError:\n    pass\n", log)
    assert p.returncode == 0, p.stderr
    assert "socket" in log.read_text() and "getaddrinfo" in log.read_text()
    log.unlink()
    # 60 frames a side of the crash world (3 episodes each), indexed and analysed in the audited process:
    # index, statistics, embeddings through a real encoder, metrics, probes and the report
    rows = [json.loads(line) for line in (tmp / "m.jsonl").read_text().splitlines()]
    manifest = write_manifest(tmp / "m60.jsonl", [r for r in rows if int(r["pair_key"][1:]) < 60])
    db = tmp_path / "c.duckdb"
    index = ["index", "--manifest", str(manifest), "--db", str(db), "-q"]
    argv = ["run", "--sim", "csim", "--real", "creal", "--db", str(db), "--out", str(tmp_path / "out"), "-q",
            "--encoders", "pixel,efficientnet-lite0"]
    p = _audited(tmp_path, f"import cli\nassert cli.main({index!r}) == 0\nsys.exit(cli.main({argv!r}))", log)
    clean(p)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "report.html").exists()
    assert not log.exists() or log.read_text() == "", log.read_text()
