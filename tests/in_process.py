"""`cli(...)` of tests/cli_process.py without a new process, for tests where the process boundary
is not the subject: the same argv through `perception_gap.cli.main` in the test's own process,
with its exit code and what reached file descriptors 1 and 2 (C libraries' writes included).

The root logger's handlers (pytest's log capture) are taken off for the call, so the
`logging.basicConfig` in `main` installs its stderr handler and a logged warning reaches stderr
as it does for a user; the handlers and level are put back after.
"""

from __future__ import annotations

import logging
import subprocess

from perception_gap.cli import main


def here(capfd, *args: object) -> subprocess.CompletedProcess:
    """`cli(*args)` run by `main` in this process; `capfd` is pytest's fixture."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    capfd.readouterr()
    try:
        code = main([str(a) for a in args])
    finally:
        for h in root.handlers:
            h.flush()
        root.handlers[:] = handlers
        root.setLevel(level)
        out, err = capfd.readouterr()
    return subprocess.CompletedProcess(list(args), code, out, err)
