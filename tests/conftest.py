"""Shared fixtures: the real-data folder (skips cleanly when absent) and offline settings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The suite runs on two xdist workers (pyproject addopts). Each worker, and every CLI process a
# test starts, then gets one BLAS/OpenMP thread: two workers with two threads each on a 2-core
# machine spin-wait on each other (a 5-fold logistic regression went from ~1 s to minutes).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    env = os.environ.get("PERCEPTION_GAP_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def _results_schema_session(tmp_path_factory: pytest.TempPathFactory):
    """At the end, every results.json under the session's temporary folders (module and session
    fixtures' included) matches docs/results.schema.json."""
    yield
    from results_schema_check import check_results_files

    check_results_files(tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True)
def _results_schema(request: pytest.FixtureRequest):
    """After each test that has a `tmp_path`: every results.json it wrote matches the schema."""
    folder = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if folder is not None:
        from results_schema_check import check_results_files

        check_results_files(folder)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if not d.is_dir():
        pytest.skip(f"real test data not found at {d} (set PERCEPTION_GAP_DATA)")
    return d


@pytest.fixture(scope="module")
def frames(shared_data: Path) -> list:
    """The diagnosis tests' real RGB frames: `N_FRAMES` VOC photos (uint8, 120 x 160 x 3), read and
    resized once per module (tests/diagnosis_cases.py)."""
    try:
        import diagnosis_cases as D
    except ImportError:  # tests/ imported as a package
        from tests import diagnosis_cases as D
    src = D.voc_sources(shared_data)
    if len(src) < D.N_FRAMES:
        pytest.skip(f"need {D.N_FRAMES} VOC frames under {shared_data}")
    return D.load_frames(src)
