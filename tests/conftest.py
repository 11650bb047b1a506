"""Shared fixtures: the real-data folder (skips cleanly when absent) and offline settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    env = os.environ.get("PERCEPTION_GAP_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if not d.is_dir():
        pytest.skip(f"real test data not found at {d} (set PERCEPTION_GAP_DATA)")
    return d
