"""`rank-fidelity` inputs: `--n-boot` validated and capped, counts beyond any rollout log refused,
and the finding fires below the defaults its `--help` documents. Through `cli.main`."""

from __future__ import annotations

import json

import pytest

from perception_gap import cli
from tests.cli_process import one_line


@pytest.mark.parametrize("value", ["-1", "1", "199", "100001", "1e8"])
def test_rank_fidelity_n_boot_is_validated_and_capped(tmp_path, capsys, value):
    f = tmp_path / "rates.csv"
    f.write_text("policy,task,sim,real,n_sim,n_real\na,t,0.2,0.3,50,50\nb,t,0.6,0.5,50,50\n")
    assert cli.main(["rank-fidelity", str(f), "--n-boot", value]) == 2
    one_line(capsys, "--n-boot", "[200, 100000]", repr(value))


def test_rank_fidelity_n_boot_at_the_minimum_gives_intervals(tmp_path):
    f = tmp_path / "rates.csv"
    f.write_text("policy,task,sim,real,n_sim,n_real\na,t,0.2,0.3,50,50\nb,t,0.6,0.5,50,50\nc,t,0.9,0.8,50,50\n")
    js = tmp_path / "r.json"
    assert cli.main(["rank-fidelity", str(f), "--n-boot", "200", "-q", "--json", str(js)]) == 0
    t = json.loads(js.read_text())["rank_fidelity"]["tasks"]["t"]
    assert t["pearson_ci"][0] <= t["pearson"] <= t["pearson_ci"][1] and t["pearson_ci"][0] < t["pearson_ci"][1]


def test_rank_fidelity_finding_below_the_documented_defaults(tmp_path):
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("policy,task,sim,real\na,t,0.1,0.15\nb,t,0.4,0.45\nc,t,0.7,0.8\n")
    bad.write_text("policy,task,sim,real\na,t,0.1,0.8\nb,t,0.4,0.45\nc,t,0.7,0.15\n")
    js = tmp_path / "r.json"
    assert cli.main(["rank-fidelity", str(good), "--json", str(js), "-q"]) == 0
    assert json.loads(js.read_text())["findings"] == []
    assert cli.main(["rank-fidelity", str(bad), "--json", str(js), "-q"]) == 0  # a finding, not a gate
    (f,) = json.loads(js.read_text())["findings"]
    assert f["code"] == "rank_fidelity" and f["evidence"]["min_pearson"] == 0.7 and f["evidence"]["max_mmrv"] == 0.1
    assert f["evidence"]["mean_pearson"] < 0 and f["evidence"]["mean_mmrv"] > 0.1


def test_rank_fidelity_help_documents_the_finding_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["rank-fidelity", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "below 0.7" in out and "above 0.1" in out


@pytest.mark.parametrize("name, text, needle", [
    ("rates.csv", "policy,task,sim,real,n_sim,n_real\na,t,0.2,0.3,1e300,50\nb,t,0.6,0.5,50,50\n", "`n_sim`"),
    ("rates.jsonl", '{"policy": "a", "task": "t", "sim": 0.2, "real": 0.3, "n_sim": 1' + "0" * 400 + ', "n_real": 5}\n'
     '{"policy": "b", "task": "t", "sim": 0.6, "real": 0.5, "n_sim": 5, "n_real": 5}\n', "`n_sim`"),
])
def test_rank_fidelity_counts_beyond_any_rollout_log_are_one_line(tmp_path, capsys, name, text, needle):
    f = tmp_path / name
    f.write_text(text)
    assert cli.main(["rank-fidelity", str(f)]) == 2
    one_line(capsys, needle, "Row 1")
