"""One resampling setting (`--bootstrap`, `--ci-level`) reaches every interval a command reports."""

from __future__ import annotations

import json

import pytest

from perception_gap.cli import main
from perception_gap.errors import InputError
from perception_gap.examples import example_catalog
from perception_gap.metrics.settings import REPLICATES, Resampling


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return str(example_catalog(tmp_path_factory.mktemp("resampling")))


def test_run_intervals_follow_bootstrap_and_ci_level(db, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    assert main(["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--no-attribution", "--db", db,
                 "-q", "--out", str(out), "--bootstrap", "40", "--ci-level", "0.8"]) == 0
    res = json.loads((out / "results.json").read_text())
    ci = res["encoders"][0]["centroid_distance_norm_ci"]
    assert ci["level"] == pytest.approx(0.8) and 20 <= ci["n_boot"] <= 40
    assert res["config"]["resampling"] == {"replicates": 40, "level": 0.8, "seed": None}


def test_defaults_are_each_uses_own(db, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "out"
    assert main(["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--no-attribution", "--db", db,
                 "-q", "--out", str(out)]) == 0
    ci = json.loads((out / "results.json").read_text())["encoders"][0]["centroid_distance_norm_ci"]
    assert ci["level"] == 0.95 and REPLICATES["centroid"] // 2 <= ci["n_boot"] <= REPLICATES["centroid"]


def test_drift_flags_win_over_the_config_file(db, tmp_path_factory):
    out = tmp_path_factory.mktemp("drift") / "out"
    main(["drift", "--baseline", "real", "--current", "sim", "--encoders", "none", "--db", db, "-q",
          "--out", str(out), "--bootstrap", "30", "--ci-level", "0.9"])
    boot = json.loads((out / "results.json").read_text())["config"]["gates"]["bootstrap"]
    assert (boot["n_boot"], boot["ci"]) == (30, 0.9)


@pytest.mark.parametrize("flags", [["--bootstrap", "5"], ["--ci-level", "1.5"], ["--ci-level", "nan"]])
def test_bad_settings_are_one_line_exit_2(db, tmp_path_factory, capsys, flags):
    rc = main(["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--db", db, "-q",
               "--out", str(tmp_path_factory.mktemp("bad") / "x"), *flags])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and flags[0] in err


def test_settings_validate_at_the_api():
    with pytest.raises(InputError, match="--bootstrap"):
        Resampling(replicates=3)
    with pytest.raises(InputError, match="--ci-level"):
        Resampling(level=1.0)
    r = Resampling(level=0.9)
    assert r.n("rank_fidelity") == REPLICATES["rank_fidelity"] and r.ci() == 0.9 and r.random_state(7) == 7
