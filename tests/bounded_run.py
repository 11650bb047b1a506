"""Run the CLI in a child process whose address space is capped, for tests of small files that
declare huge contents: exceeding the cap fails the allocation there, not the test machine.

The cap is set after the heavy libraries are imported (torch alone maps several GiB of address
space for its libraries), as that process's size plus `headroom` bytes, so the cap measures what
the command itself allocates.
"""

from __future__ import annotations

import os
import subprocess
import sys

_CHILD = r"""
import resource, sys
import numpy, torch, duckdb, pyarrow.parquet  # noqa: F401 - mapped before the cap
from perception_gap import cli
with open("/proc/self/status") as f:
    vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
cap = vm + int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
sys.exit(cli.main(sys.argv[2:]))
"""


def run_bounded(argv: list[str], headroom: int = 3 * 2**29, timeout: float = 120) -> tuple[int, str]:
    """(exit code, stderr) of `perception-gap ARGV` with at most `headroom` bytes (default 1.5 GiB)
    of address space beyond its imports."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", _CHILD, str(headroom), *argv], capture_output=True, text=True,
                       env=env, timeout=timeout)
    return r.returncode, r.stderr
