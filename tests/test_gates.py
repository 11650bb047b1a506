"""One gate type and one rule for a missing value, whichever command builds the gate."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perception_gap import gates
from perception_gap.evaluation.jobs import latency_job, rank_fidelity_job, rollouts_job
from perception_gap.gates import Gate, make_gate, threshold_gate
from perception_gap.workflows import drift_gates, screening

KEYS = {"name", "value", "threshold", "direction", "passed", "status", "rule", "ci", "detail", "reason", "description"}


@pytest.mark.parametrize("value", [None, math.nan, math.inf, -math.inf, np.float32("nan")])
@pytest.mark.parametrize("direction", ["max", "min"])
def test_a_missing_or_non_finite_value_is_not_computed_and_does_not_pass(value, direction):
    g = make_gate("x", value, 1.0, direction=direction, reason="nothing to measure")
    assert (g.status, g.passed, g.value, g.reason) == ("not computed", False, None, "nothing to measure")
    # a rule that would have passed it is not consulted without a value
    assert not make_gate("x", value, 1.0, direction=direction, failed=False).passed
    d = threshold_gate("x", value, 1.0, direction=direction)
    assert d["status"] == "not computed" and d["passed"] is False and set(d) == KEYS


@pytest.mark.parametrize("value, direction, passed", [(0.5, "max", True), (1.0, "max", True), (1.5, "max", False),
                                                      (0.5, "min", False), (1.0, "min", True), (1.5, "min", True),
                                                      (np.float64(2.0), "max", False), (np.int64(0), "max", True)])
def test_the_plain_rule_reads_the_direction(value, direction, passed):
    g = make_gate("x", value, 1.0, direction=direction)
    assert g.passed is passed and g.status == ("passed" if passed else "failed") and isinstance(g.value, float)
    assert g.rule == f"passes when value {'<=' if direction == 'max' else '>='} 1"


def test_a_gate_that_does_not_apply_is_skipped_and_holds_nothing_back():
    g = gates.skipped("depth_dropout", 0.05, "no depth maps in either set")
    assert (g.status, g.passed, g.value) == ("skipped", True, None)
    with pytest.raises(ValueError, match="direction"):
        make_gate("x", 1.0, 1.0, direction="up")
    assert threshold_gate("x", None, None) is None  # no threshold asked for: no gate


def test_every_builder_returns_the_one_gate_type():
    rng = np.random.default_rng(0)
    base, cur = rng.normal(size=(40, 3)), rng.normal(size=(40, 3))
    built = [drift_gates.shift_gate("channel_shift", base, cur, None, None, 0.25),
             drift_gates.ap_gate("detector_ap:det", 0.5, 0.4, 0.1),
             drift_gates.skipped("depth_dropout", 0.05, "no depth maps in either set"),
             drift_gates.not_computed("sensor_noise", 2.0, "tiny frames"),
             screening.baseline_gate("a", [], [])]
    assert all(type(g) is Gate and set(g.to_dict()) == KEYS for g in built)
    assert built[0].rule == "fails when the 95% interval of the change lies entirely beyond \u00b10.25"
    assert built[0].description == drift_gates.DESCRIPTIONS["channel_shift"]


def test_drift_gates_on_missing_values_do_not_pass():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(30, 1))
    nan_cur = np.full((30, 1), np.nan)
    shift = drift_gates.shift_gate("sharpness", base, nan_cur, None, None, 0.5)
    assert shift.status == "not computed" and not shift.passed
    assert drift_gates.shift_gate("sharpness", base[:1], base, None, None, 0.5).status == "not computed"
    ap = drift_gates.ap_gate("detector_ap:det", None, 0.4, 0.1)
    assert ap.status == "not computed" and not ap.passed and "ground truth" in ap.reason


def test_screen_baseline_gate_without_an_interval_is_not_computed():
    pair = {"closer": "a", "farther": "b", "ci": {"low": None, "high": None}, "significant": False}
    g = screening.baseline_gate("a", [], [pair])
    assert g.status == "not computed" and not g.passed and "b against a" in g.reason
    ok = screening.baseline_gate("a", [], [{**pair, "ci": {"low": -0.1, "high": 0.1}}])
    assert ok.passed and ok.value == 0
    worse = screening.baseline_gate("a", ["b"], [{**pair, "ci": {"low": 0.1, "high": 0.3}, "significant": True}])
    assert worse.status == "failed" and worse.value == 1


def test_evaluation_gates_without_a_value_fail(tmp_path):
    """A one-group rollouts log has no drop to gate on, a rates file of one policy no Pearson r, a
    latency log without an end-to-end stage no p95: each gate is not computed and the section fails."""
    log = tmp_path / "r.csv"
    log.write_text("policy,task,domain,episode,success\n" + "".join(f"p,t,real,{i},{i % 2}\n" for i in range(10)))
    res = rollouts_job(log, max_drop=0.1)["rollouts"]
    assert [g["status"] for g in res["gates"]] == ["not computed"] and res["passed"] is False
    rates = tmp_path / "rates.csv"
    rates.write_text("policy,task,sim,real\np1,t,0.5,0.4\np2,t,0.5,0.6\n")  # sim rates equal: r undefined
    res = rank_fidelity_job(rates, min_pearson=0.5)["rank_fidelity"]
    assert res["gates"][0]["status"] == "not computed" and res["gates"][0]["direction"] == "min"
    assert res["passed"] is False


def test_latency_gate_reads_p95_against_its_threshold(tmp_path):
    log = tmp_path / "lat.csv"
    log.write_text("capture,actuated\n" + "".join(f"{i * 0.05},{i * 0.05 + 0.03}\n" for i in range(50)))
    for limit, status in ((20.0, "failed"), (40.0, "passed")):
        g = latency_job(log, 20.0, max_p95_ms=limit)["latency"]["gates"][0]
        assert set(g) == KEYS and g["direction"] == "max" and g["status"] == status
        assert g["value"] == pytest.approx(30.0)
