"""Offline: a full run (index, statistics, a real encoder, metrics, probes, the report) opens no
network socket, checked by an audit hook in the process that runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.cli_process import ENV, REPO, clean, write_manifest
from tests.scenes import render, scenes

N_SIDE = 24  # frames a side: 3 episodes of 8, enough for every stage (the probes want 8 a side, 2 episodes)


@pytest.fixture(scope="module")
def paired_frames(tmp_path_factory) -> Path:
    """Rendered sim and real frames (sets csim, creal; 2-d actions) listed in `m.jsonl`."""
    tmp = tmp_path_factory.mktemp("offline")
    rows = []
    rng = np.random.default_rng(0)
    for side, dom in (("csim", "sim"), ("creal", "real")):
        (tmp / side).mkdir()
        for i, s in enumerate(scenes(N_SIDE, h=48, w=64, seed=7 if dom == "sim" else 8)):
            Image.fromarray(render(s, 1.0 if dom == "sim" else 0.9, 0.01, rng)).save(tmp / side / f"k{i:04d}.png")
            rows.append({"set": side, "domain": dom, "rgb": f"{side}/k{i:04d}.png", "pair_key": f"k{i:04d}",
                         "episode": f"e{i // 8}", "action": [float(i % 7), float(i % 3)]})
    write_manifest(tmp / "m.jsonl", rows)
    return tmp


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


def test_a_full_run_opens_no_network_socket(paired_frames, tmp_path):
    log = tmp_path / "net.log"
    # known answer for the audit itself: a socket and a name lookup are caught
    p = _audited(tmp_path, "import socket\ns = socket.socket()\ntry:\n    socket.getaddrinfo('localhost', 80)\n"
                           "except OSError:\n    pass\n", log)
    assert p.returncode == 0, p.stderr
    assert "socket" in log.read_text() and "getaddrinfo" in log.read_text()
    log.unlink()
    # the paired frames indexed and analysed in the audited process: index, statistics, embeddings
    # through a real encoder, metrics, probes, the camera model and attribution, and the report
    db = tmp_path / "c.duckdb"
    index = ["index", "--manifest", str(paired_frames / "m.jsonl"), "--db", str(db), "-q"]
    argv = ["run", "--sim", "csim", "--real", "creal", "--db", str(db), "--out", str(tmp_path / "out"), "-q",
            "--encoders", "pixel,efficientnet-lite0"]
    p = _audited(tmp_path, f"import cli\nassert cli.main({index!r}) == 0\nsys.exit(cli.main({argv!r}))", log)
    clean(p)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "report.html").exists()
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "efficientnet-lite0" in [e["name"] for e in res["encoders"]]
    # every stage ran: probes and attribution measured for each encoder, nothing short of data
    assert all(e["probe"] and e["attribution"] and not e["insufficient"] for e in res["encoders"]), res["encoders"]
    assert not log.exists() or log.read_text() == "", log.read_text()
