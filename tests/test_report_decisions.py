"""reports/decisions.py: each gate's word and the rule written beside it, on gates as results.json holds them."""

from __future__ import annotations

from perception_gap.reports import decisions
from perception_gap.workflows import drift_gates


def test_constants_match_the_gates_they_describe():
    assert decisions.FORMAT_ALPHA == drift_gates.FORMAT_ALPHA


def test_threshold_gates_read_their_direction_from_the_name():
    g = {"name": "max_drop", "value": 0.45333333333333325, "threshold": 0.3, "passed": False, "status": "failed"}
    assert decisions.outcome(g) == "FAIL"
    assert decisions.threshold_rule(g) == "0.453 > 0.300; passes with at most 0.300"
    g = {"name": "min_pearson", "value": 0.91, "threshold": 0.8, "passed": True, "status": "passed"}
    assert (decisions.outcome(g), decisions.threshold_rule(g)) == ("PASS", "0.910 > 0.800; passes with at least 0.800")
    g = {"name": "mean_px", "value": None, "threshold": 2.0, "passed": True, "status": "skipped", "reason": "no points"}
    assert (decisions.outcome(g), decisions.threshold_rule(g)) == ("SKIP", "not measured (no points)")
    assert decisions.outcome({"name": "translation_mean_m", "passed": False}) == "FAIL"  # no status: the flag


def test_drift_rules_name_what_decided():
    shift = drift_gates.shift_gate("channel_shift", [[0.0, 0.0, 0.0], [0.02, 0.0, 0.0]] * 10,
                                   [[0.6, 0.0, 0.01], [0.62, 0.0, 0.0]] * 10, None, None, 0.25,
                                   labels=["R", "G", "B"], n_boot=200).to_dict()
    assert shift["status"] == "failed" and shift["detail"]["failed"] == ["R"]
    assert decisions.drift_rule(shift).startswith("the 95% interval of the change lies entirely beyond ±0.250 for R; "
                                                  "largest change (R) 0.600")
    auc = {"name": "domain_auc:pixel", "value": 0.943, "threshold": 0.85, "passed": True, "status": "passed",
           "detail": {"effect_ratio": 1.31, "min_ratio": 2.0}}
    assert decisions.drift_rule(auc) == ("AUC 0.943 > 0.850, but the shift is only 1.31x the baseline's own variation; "
                                         "fails only when the AUC is above 0.850 and the shift above 2.00x")
    auc = {**auc, "passed": False, "status": "failed", "detail": {"effect_ratio": 3.5, "min_ratio": 2.0}}
    assert decisions.drift_rule(auc) == "AUC 0.943 > 0.850 and the shift is 3.50x the baseline's own variation, above 2.00x"
    low = {**auc, "value": 0.61, "passed": True, "status": "passed", "detail": {"effect_ratio": 0.9, "min_ratio": 2.0}}
    assert decisions.drift_rule(low) == ("AUC 0.610 < 0.850; fails only when it is above 0.850 and the shift above "
                                         "2.00x the baseline's own variation")
    unsized = {**low, "detail": {"effect_ratio": None, "min_ratio": 2.0}}  # no floor: the AUC alone decides
    assert decisions.drift_rule(unsized) == "AUC 0.610 < 0.850; fails above 0.850"
    skipped = drift_gates.skipped("depth_dropout", 0.05, "no depth on baseline").to_dict()
    assert (decisions.outcome(skipped), decisions.drift_rule(skipped)) == ("SKIP", "not measured: no depth on baseline")


def test_screen_headline_without_a_significant_winner():
    scr = {"closest": None, "ci_level": 0.95, "ranking": [{"set": "b", "distance": 0.1234}, {"set": "a", "distance": 0.13}]}
    v = decisions.screen_verdict(scr)
    assert v["title"] == ("No rendering is significantly closer to real than every other one (nearest point estimate: "
                          "b, distance 0.123)")
    assert "95% intervals of their differences include 0" in v["action"] and v["severity"] == "result"


def test_a_gate_without_a_value_is_named_so():
    """A gate that applies but could not be measured holds the verdict back: neither PASS nor SKIP."""
    g = {"name": "max_drop", "value": None, "threshold": 0.3, "direction": "max", "passed": False,
         "status": "not computed", "reason": "no sim-vs-real comparison in the log"}
    assert decisions.outcome(g) == "NOT COMPUTED"
    assert decisions.threshold_rule(g) == "not measured (no sim-vs-real comparison in the log)"
    assert decisions.drift_rule({**g, "name": "embedding:pixel"}) == "not measured: no sim-vs-real comparison in the log"
    g = {"name": "pearson", "value": 0.7, "threshold": 0.8, "direction": "min", "passed": False, "status": "failed"}
    assert decisions.threshold_rule(g) == "0.700 < 0.800; passes with at least 0.800"  # direction, not the name


def test_screen_gate_word_from_its_gate_entry():
    scr = {"closest": "a", "ci_level": 0.95, "ranking": [{"set": "a", "distance": 0.1}], "baseline": "a",
           "passed": False, "worse_than_baseline": [],
           "gate": {"name": "worse_than_baseline", "value": None, "threshold": 0, "passed": False,
                    "status": "not computed", "reason": "no interval for b against a"}}
    v = decisions.screen_verdict(scr)
    assert v["title"].endswith("Gate --fail-if-worse a: NOT COMPUTED (no interval for b against a)")
    assert v["sev_class"] == "gap"
    assert decisions.screen_word({"passed": True}) == "PASS"
