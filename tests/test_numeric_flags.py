"""Numeric flags are finite and within range, or one line and exit 2: gate thresholds of the
evaluation commands, `--workers`, and rollout values beyond any real rollout. Through `cli.main`."""

from __future__ import annotations

import pytest

from perception_gap import cli
from tests.cli_process import one_line


@pytest.mark.parametrize("command, flag, value", [
    ("rank-fidelity", "--min-pearson", "nan"),
    ("rank-fidelity", "--min-pearson", "2"),
    ("rollouts", "--confidence", "1.5"),
    ("rollouts", "--max-drop", "inf"),
    ("replay", "--max-translation-m", "nan"),
    ("reprojection", "--max-mean-px", "inf"),
])
def test_gate_thresholds_must_be_finite(tmp_path, capsys, command, flag, value):
    f = tmp_path / "in.csv"
    f.write_text("x\n1\n")  # never read: the flag is refused while parsing
    assert cli.main([command, str(f), flag, value]) == 2
    one_line(capsys, flag, repr(value))


@pytest.mark.parametrize("value", ["0", "1025", "1000000"])
def test_workers_is_bounded(tmp_path, capsys, value):
    assert cli.main(["sets", "--db", str(tmp_path / "c.duckdb"), "--workers", value]) == 2
    one_line(capsys, "--workers", "[1, 1024]", repr(value))


def test_rollouts_episode_length_beyond_any_rollout_is_one_line(tmp_path, capsys):
    f = tmp_path / "r.csv"
    f.write_text("policy,task,domain,success,episode_length\na,t,sim,1,1e308\na,t,sim,0,1.7e308\n"
                 "a,t,real,1,10\na,t,real,0,5\n")
    assert cli.main(["rollouts", str(f)]) == 2
    one_line(capsys, "`episode_length`", "Row 1")
