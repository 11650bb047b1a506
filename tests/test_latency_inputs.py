"""`latency` inputs: non-finite or extreme flags are bad input, a timestamp unit that contradicts
`--fps` is a finding, and one named stage is one line. Through `cli.main`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perception_gap import cli
from tests.cli_process import one_line


def _latency_log(path: Path, n: int = 60, period_s: float = 1 / 30) -> Path:
    lines = ["capture,inferred,actuated"]
    for i in range(n):
        t = i * period_s
        lines.append(f"{t:.6f},{t + 0.010:.6f},{t + 0.012:.6f}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("args, needle", [
    (["--fps", "nan"], "--fps"),
    (["--fps", "inf"], "--fps"),
    (["--fps", "1e-308"], "--fps"),
    (["--fps", "-30"], "--fps"),
    (["--fps", "30", "--max-p95-ms", "nan"], "--max-p95-ms"),
    (["--fps", "30", "--max-p95-ms", "-inf"], "--max-p95-ms"),
])
def test_latency_non_finite_or_extreme_flags_are_bad_input(tmp_path, capsys, args, needle):
    log = _latency_log(tmp_path / "t.csv")
    assert cli.main(["latency", str(log), *args, "--json", str(tmp_path / "r.json")]) == 2
    one_line(capsys, needle, "expected")
    assert not (tmp_path / "r.json").exists()


def test_a_unit_that_contradicts_fps_is_a_finding(tmp_path):
    log = _latency_log(tmp_path / "t.csv")  # seconds, 30 Hz
    js = tmp_path / "r.json"
    assert cli.main(["latency", str(log), "--fps", "30", "--unit", "ms", "--json", str(js), "-q"]) == 0
    res = json.loads(js.read_text())
    f = next(x for x in res["findings"] if x["code"] == "latency_unit")
    assert f["severity"] == "bug" and f["evidence"]["unit_that_fits"] == "s"
    assert f["evidence"]["period_over_tick"] == pytest.approx(1e-3, rel=1e-3)
    assert res["latency"]["end_to_end"]["p50"] == pytest.approx(0.012, rel=1e-6)  # what the wrong unit gives
    assert cli.main(["latency", str(log), "--fps", "30", "--json", str(js), "-q"]) == 0
    assert "latency_unit" not in [x["code"] for x in json.loads(js.read_text())["findings"]]
    # every fifth tick logged: a ratio of 5 stays within the tenfold tolerance
    assert cli.main(["latency", str(_latency_log(tmp_path / "t5.csv", period_s=5 / 30)), "--fps", "30",
                     "--json", str(js), "-q"]) == 0
    assert json.loads(js.read_text())["findings"] == []


def test_latency_with_one_named_stage_is_one_line(tmp_path, capsys):
    assert cli.main(["latency", str(_latency_log(tmp_path / "t.csv")), "--fps", "30", "--stages", "capture"]) == 2
    one_line(capsys, "--stages", "at least two", "capture")
