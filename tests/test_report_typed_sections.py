"""The evaluation and geometry reports, the attribution waterfall and the gap maps take the typed
sections of perception_gap.schema (what `load_results` returns) and draw what their JSON form draws.

The check reports come from the command line on the example inputs (`perception_gap.examples`);
each is rendered again from the results.json read typed and compared byte for byte with the
report.html the command wrote, and each plot is drawn from the typed part and from its JSON form.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perception_gap import load_results
from perception_gap.cli import main
from perception_gap.examples import write_examples
from perception_gap.reports import attribution, evaluation, geometry
from perception_gap.reports.maps import maps_section
from perception_gap.schema import Attribution, Maps


@pytest.fixture(scope="module")
def outs(tmp_path_factory) -> dict[str, Path]:
    """report.html and results.json of each check on the example inputs."""
    tmp = tmp_path_factory.mktemp("typed")
    ex = write_examples(tmp / "ex")
    jobs = {"rollouts": ["rollouts", str(ex.rollouts)], "rank_fidelity": ["rank-fidelity", str(ex.rates)],
            "latency": ["latency", str(ex.ticks), "--fps", "20"], "replay": ["replay", str(ex.poses)],
            "reprojection": ["reprojection", str(ex.cameras), "--initial-states", str(ex.states)]}
    for name, argv in jobs.items():
        assert main([*argv, "--out", str(tmp / name), "-q"]) == 0, name
    return {name: tmp / name for name in jobs}


@pytest.mark.parametrize("kind", ["rollouts", "rank_fidelity", "latency", "replay", "reprojection"])
def test_a_check_report_renders_the_same_from_its_typed_results(outs, kind):
    res = load_results(outs[kind] / "results.json")
    render = geometry.render_geometry_report if kind in ("replay", "reprojection") else evaluation.render_evaluation
    html = (outs[kind] / "report.html").read_text(encoding="utf-8")
    assert render(res) == html
    assert render(json.loads((outs[kind] / "results.json").read_text(encoding="utf-8"))) == html


def test_the_check_plots_take_the_typed_parts(outs):
    rollouts, replay, rep = (load_results(outs[k] / "results.json") for k in ("rollouts", "replay", "reprojection"))
    plain = {k: json.loads((outs[k] / "results.json").read_text(encoding="utf-8"))
             for k in ("rollouts", "replay", "reprojection")}
    assert evaluation.interval_bars(rollouts.rollouts.groups) == evaluation.interval_bars(plain["rollouts"]["rollouts"]["groups"])
    assert geometry.replay_plot(replay.replay.episodes) == geometry.replay_plot(plain["replay"]["replay"]["episodes"])
    drawn = geometry.reprojection_plots(rep.reprojection)
    assert drawn and drawn == geometry.reprojection_plots(plain["reprojection"]["reprojection"])
    cov = geometry.coverage_plot(rep.reprojection)
    assert cov is not None and cov == geometry.coverage_plot(plain["reprojection"]["reprojection"])


ATTRIBUTION = {"factors": [{"code": "brightness", "params": {"stops": 0.5}, "share": 0.5, "ci": [0.4, 0.6],
                            "cumulative": 0.5, "cumulative_ci": [0.4, 0.6], "step": 0.5, "step_ci": [0.4, 0.6]},
                           {"code": "compression", "params": {"quality": 60}, "share": -0.1, "ci": [-0.2, 0.0],
                            "cumulative": 0.4, "cumulative_ci": [0.3, 0.5], "step": -0.1, "step_ci": [-0.2, 0.0]}],
               "all": {"share": 0.4, "ci": [0.3, 0.5]}, "residual": {"share": 0.6, "ci": [0.5, 0.7]},
               "clear_gap": True, "n_pairs": 12, "n_counterfactual": 12, "basis": "pairs", "distance": 0.3,
               "floor": 0.1, "gap_above_floor": 0.2, "gap_ci": [0.15, 0.25]}


def test_the_waterfall_and_its_sentence_take_the_typed_attribution():
    typed = Attribution.from_dict(json.loads(json.dumps(ATTRIBUTION)))
    svg = attribution.waterfall(typed, ident="w", name="enc")
    assert svg is not None and 'data-code="compression"' in svg
    assert svg == attribution.waterfall(ATTRIBUTION, ident="w", name="enc")
    words = attribution.sentence("enc", typed)
    assert words.startswith("The camera factors close 40% [30, 50] of enc's gap") and \
        words == attribution.sentence("enc", ATTRIBUTION)


def test_the_maps_section_takes_the_typed_maps():
    side = {"mean_linear": [[0.1, 0.2], [0.3, 0.4]], "radial": [0.2, 0.3], "rows": [0.15, 0.35],
            "cols": [0.2, 0.3], "n_frames": 5}
    maps = {"size": 2, "ring_edges": [0.0, 0.5, 1.0], "sim": side, "real": {**side, "n_frames": 6},
            "paired": {"n_pairs": 5, "mean_signed_diff": [[0.0, 0.1], [-0.1, 0.0]],
                       "mean_abs_diff": [[0.0, 0.1], [0.1, 0.0]]}}
    names, colours = {"sim": "gen", "real": "cam"}, {"sim": "#ff0000", "real": "#0000ff"}
    html = maps_section(Maps.from_dict(json.loads(json.dumps(maps))), names, colours)
    assert html is not None and 'id="map-signed"' in html and "mean of 6 frames" in html
    assert html == maps_section(maps, names, colours)
