"""The examples' temporary folders (`example_catalog()`, `write_examples()` without a folder) are
gone once the process that made them exits; a folder the caller names is the caller's to keep."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_CHILD = """
import json, os, sys
import perception_gap as pg
from perception_gap.examples import example_catalog, write_examples

db = example_catalog()
with pg.open_catalog(example_catalog(), read_only=True) as cat:  # as the docstring examples use it
    names = sorted(cat.list_sets())
files = write_examples()
kept = write_examples(sys.argv[1]).root
print(json.dumps({"made": [str(db.parent), str(files.root)], "sets": names, "exists": db.is_file() and files.sim.is_dir(),
                  "kept": str(kept)}))
"""


def test_temporary_example_folders_are_removed_at_exit(tmp_path):
    r = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "mine")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["exists"] and got["sets"] == ["real", "sim"]
    assert [p for p in got["made"] if Path(p).exists()] == []
    assert (Path(got["kept"]) / "manifest.csv").is_file()
