"""Every results.json a test writes is checked against docs/results.schema.json (tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "docs" / "results.schema.json"
_checked: dict[Path, tuple[int, int]] = {}  # path -> (mtime_ns, size) when last checked


def check_results_files(folder: Path) -> None:
    """Validate each `results.json` under `folder` not checked since it last changed.

    A file that is not JSON is a test's own broken input and is left alone; without `jsonschema`
    installed nothing is checked (tests/test_results_schema.py then skips, visibly).

    Raises:
        AssertionError: naming the file and the first place it differs from the schema.
    """
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return
    from perception_gap.errors import InputError
    from perception_gap.schema.export import validate_results

    for path in folder.rglob("results.json"):
        try:
            st = path.stat()
        except OSError:
            continue
        if _checked.get(path) == (st.st_mtime_ns, st.st_size):
            continue
        _checked[path] = (st.st_mtime_ns, st.st_size)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        try:
            validate_results(data, schema_file=SCHEMA_FILE)
        except InputError as e:
            raise AssertionError(f"{path}: {e}") from None
