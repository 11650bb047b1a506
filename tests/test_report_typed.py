"""The report reads the typed results (perception_gap.schema): a `Results`, its sections, or the plain
dict read into them, partial and older files included, with the same page either way."""

from __future__ import annotations

import json

from perception_gap.reports import decisions, plots, render_report, scatter
from perception_gap.reports.reading import results as read_results
from perception_gap.schema import EncoderEntry, GateEntry, Results, Screen

CI = {"low": 0.2, "high": 0.3, "level": 0.95, "n_boot": 200, "n_clusters_sim": 8, "n_clusters_real": 8,
      "clusters": "episodes"}
RUN = {
    "version": "0.0.0",
    "config": {"kind": "run", "sim": "gen", "real": "cam"},
    "sets": {"gen": {"name": "gen", "domain": "sim", "n_frames": 4, "n_usable": 4, "n_skipped": 0, "skipped": []},
             "cam": {"name": "cam", "domain": "real", "n_frames": 4, "n_usable": 3, "n_skipped": 1,
                     "skipped": [{"path": "/data/cam/x.png", "reason": "unreadable"}]}},
    "findings": [{"code": "brightness", "severity": "gap", "title": "sim is brighter", "evidence": {"stops": 0.4},
                  "action": "lower the exposure"}],
    "encoders": [{"name": "pixel", "dim": 32, "family": "pixel", "centroid_distance_norm": 0.25,
                  "centroid_distance_norm_ci": CI, "noise_floor": 0.05, "gap_above_floor": 0.2, "rank": 1,
                  "probe": {"sim_to_sim": 0.9, "real_to_real": 0.8, "sim_to_real": 0.4, "transfer_drop": 0.5,
                            "transfer_drop_ci": CI},
                  "mmd": {"value": 0.01, "p_value": 0.02}}],
}
GATE = {"name": "domain_auc", "value": 0.943, "threshold": 0.85, "direction": "max", "passed": False,
        "status": "failed", "rule": "r", "detail": {"effect_ratio": 3.5, "min_ratio": 2.0}}


def test_a_results_and_its_dict_render_the_same_page():
    res = Results.from_dict(json.loads(json.dumps(RUN)))
    html = render_report(res)
    assert html == render_report(RUN)
    assert "sim is brighter" in html and "lower the exposure" in html


def test_a_partial_file_renders_with_dashes_for_what_it_lacks():
    """No `version`, a finding without `action`, an interval without its cluster counts, an encoder
    that is not an object: load_results refuses it; the report shows what it holds."""
    partial = {"findings": [{"code": "brightness", "severity": "gap", "title": "t"}],
               "encoders": [{"name": "pixel", "centroid_distance_norm": 0.25,
                             "centroid_distance_norm_ci": {"low": 0.2, "high": 0.3}}, 7]}
    res = read_results(partial)
    assert res.version is None and res.findings[0].action is None
    assert res.encoders[0].centroid_distance_norm_ci.high == 0.3 and res.encoders[1] is None
    html = render_report(partial)
    assert "[0.200, 0.300]" in html and "brightness" in html


def test_the_decisions_take_the_typed_gate_and_screen():
    g = GateEntry.from_dict(GATE)
    assert decisions.outcome(g) == decisions.outcome(GATE) == "FAIL"
    assert decisions.drift_rule(g) == decisions.drift_rule(GATE) == (
        "AUC 0.943 > 0.850 and the shift is 3.50x the baseline's own variation, above 2.00x")
    scr = {"ranking": [{"set": "a", "distance": 0.1, "ci": {"low": 0.05, "high": 0.2}}], "closest": "a",
           "baseline": "a", "gate": GATE}
    assert decisions.screen_verdict(Screen.from_dict(scr)) == decisions.screen_verdict(scr)
    assert decisions.screen_word(Screen.from_dict(scr)) == "FAIL"


def test_the_plots_take_typed_encoder_entries():
    entries = [EncoderEntry.from_dict(e) for e in RUN["encoders"]]
    assert plots.gap_bars(entries) == plots.gap_bars(RUN["encoders"])
    assert scatter.gap_vs_probe(entries) == scatter.gap_vs_probe(RUN["encoders"])
    assert scatter.family_colours(entries) == scatter.family_colours(RUN["encoders"])
