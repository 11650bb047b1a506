"""Filesystems a test can fill or make read-only: a tmpfs of its own (root only; the test skips where
mounting is refused), filled to the last page, or a folder this process cannot write into."""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


@contextmanager
def tmpfs(where: Path, size: str = "16m", read_only: bool = False) -> Iterator[Path]:
    """A small filesystem of its own at `where` (root only); the test is skipped where mounting is refused."""
    where.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()[:200]}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@contextmanager
def disk_full(fs: Path, leave: int = 4096) -> Iterator[None]:
    """Fill filesystem `fs` up to `leave` bytes (0: completely), then free it again."""
    filler = fs / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    try:
        yield
    finally:
        filler.unlink()


@contextmanager
def read_only_dir(where: Path) -> Iterator[Path]:
    """A folder this process cannot write into: a read-only mount as root, mode 555 otherwise."""
    if os.geteuid() == 0:
        with tmpfs(where, size="1m", read_only=True):
            yield where
        return
    where.mkdir()
    where.chmod(0o555)
    try:
        yield where
    finally:
        where.chmod(0o755)
