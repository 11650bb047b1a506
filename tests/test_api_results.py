"""What the Python API returns is the typed results.json it wrote (`perception_gap.schema.Results`):
equal to the file, JSON-safe, read from the same sanitized form; the catalog's rows of a run are read
from it; and the schema imports without the metrics' heavy dependencies."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import perception_gap as pg
from perception_gap.examples import example_catalog, write_examples
from perception_gap.schema import EncoderEntry, FindingEntry, Latency, Results
from tests.cli_process import proprio_catalog


def _as_written(res: Results, out) -> dict:
    """The results.json `out` holds, after checking `res` is that file, typed and in its key order."""
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert isinstance(res, Results)
    assert res.to_dict() == data and list(res.to_dict()) == list(data)
    assert res == pg.load_results(out)
    return data


def test_each_check_returns_the_results_json_it_writes(tmp_path):
    files = write_examples(tmp_path / "ex")
    calls = {"rollouts": lambda out: pg.rollouts(files.rollouts, max_drop=0.2, out=out),
             "rank_fidelity": lambda out: pg.rank_fidelity(files.rates, out=out),
             "latency": lambda out: pg.latency(files.ticks, fps=20, max_p95_ms=30, out=out),
             "replay": lambda out: pg.replay(files.poses, out=out),
             "reprojection": lambda out: pg.reprojection(files.cameras, initial_states=files.states, out=out)}
    for section, call in calls.items():
        out = tmp_path / section
        res = call(out)
        data = _as_written(res, out)
        assert getattr(res, section).to_dict() == data[section], section
    lat = pg.latency(files.ticks, fps=20, max_p95_ms=30)  # no `out`: the same typed form, nothing written
    assert isinstance(lat.latency, Latency) and lat.latency.stage_order == ["capture", "inferred", "actuated"]
    assert lat.latency.gates[0].passed is False and not lat.latency.passed


def test_run_returns_what_it_wrote_and_its_catalog_rows_are_read_from_it(tmp_path):
    db = example_catalog(tmp_path / "cat")
    with pg.open_catalog(db) as cat:
        res = pg.run(cat, "sim", "real", encoders=["pixel"], workers=1, attribution=False, out=tmp_path / "run")
        stats = pg.stats(cat, "sim", "real", workers=1)
        history = {h["run_id"]: h["results"] for h in cat.run_history("run")}
    _as_written(res, tmp_path / "run")
    enc = res.encoders[0]
    assert isinstance(enc, EncoderEntry) and all(isinstance(f, FindingEntry) for f in res.findings)
    assert isinstance(stats, Results) and stats.pairs.n_pairs == 8 and stats.findings[0].code == "channel_swap"
    assert json.loads(json.dumps(stats.to_dict(), allow_nan=False)) == stats.to_dict()  # JSON-safe as it stands
    rows = history[res.run_id]
    by_name = {(r["scope"], r["name"]): r for r in rows}
    cd = by_name[("encoder:pixel", "centroid_distance_norm")]
    assert (cd["value"], cd["ci_low"], cd["ci_high"]) == (enc.centroid_distance_norm, enc.centroid_distance_norm_ci.low,
                                                          enc.centroid_distance_norm_ci.high)
    assert by_name[("encoder:pixel", "domain_auc")]["value"] == enc.domain_auc
    assert by_name[("encoder:pixel", "mmd_p_value")]["value"] == enc.mmd.p_value
    assert ("encoder:pixel", "rank") not in by_name and enc.rank is None  # the pixel baseline is never ranked
    assert [r["detail"] for r in rows if r["scope"] == "finding"] == [f.to_dict() for f in res.findings]


def test_a_non_finite_statistic_is_null_in_what_the_api_returns_as_in_the_file(tmp_path):
    """Actions of +-1e308 overflow the spread: the returned results hold null there, as the file does,
    and name it under `non_finite`."""
    (tmp_path / "data").mkdir()
    db = proprio_catalog(tmp_path / "data")
    (tmp_path / "huge.py").write_text(
        "import torch\n"
        "def policy(images, proprio):\n"
        "    sign = torch.where(proprio[:, :1] > 0.25, 1.0, -1.0).double()\n"
        "    return torch.cat([sign * 1e308, proprio.double()], dim=1)\n")
    with pg.open_catalog(db, read_only=True) as cat:
        res = pg.policy_check(cat, "sim", "real", f"{tmp_path / 'huge.py'}:policy", out=tmp_path / "out")
    _as_written(res, tmp_path / "out")
    assert res.policy_check.per_dim[0]["sim_std"] is None
    assert "policy_check.per_dim[0].sim_std" in [x.path for x in res.non_finite]


def test_write_outputs_takes_the_results_a_function_returned(tmp_path):
    files = write_examples(tmp_path / "ex")
    res = pg.replay(files.poses, max_translation_m=0.005)
    report = pg.write_outputs(res, tmp_path / "again")
    assert report.is_file() and "replay" in report.read_text(encoding="utf-8")
    _as_written(res, tmp_path / "again")


@pytest.mark.parametrize("module", ["perception_gap.schema", "perception_gap.metrics.results"])
def test_the_typed_results_import_without_scikit_learn(module):
    """Reading a results.json needs no model-fitting library: `metrics` loads its submodules on use."""
    code = (f"import sys, {module}\n"
            "heavy = sorted(m for m in ('sklearn', 'scipy', 'torch') if m in sys.modules)\n"
            "from perception_gap.metrics import CI, kid, noise_floor\n"
            "import perception_gap.metrics as m\n"
            "assert m.kid is kid and m.centroid.noise_floor is noise_floor and CI.__name__ == 'CI'\n"
            "print(','.join(heavy))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
