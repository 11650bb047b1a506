"""MMRV and Pearson: a hand-worked example, the SimplerEnv reference tables, the CLI and its gate."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perception_gap import cli
from perception_gap.evaluation.rank_fidelity import PolicyRates, mmrv, pearson, rank_fidelity, violations
from tests.figures import capture, cell, html_tables, lines, only, points

# SimplerEnv's published tables (simpler_env/utils/metrics.py: REAL_PERF, SIMPLER_PERF; the paper's
# visual-matching numbers), policies in the order rt-2-x, rt-1-converged, rt-1-15pct, rt-1-x,
# rt-1-begin, octo-base for the Google robot and rt-1-x, octo-base, octo-small for WidowX.
# The expected MMRV/Pearson are what the reference's `mean_maximum_rank_violation(sim, real)` and
# `pearson_correlation(sim, real)` (tools/calc_metrics.py, sim first) give for each task.
REFERENCE = {  # task: (sim, real, mmrv, pearson)
    "google_robot_pick_coke_can": ([0.787, 0.857, 0.710, 0.567, 0.027, 0.170],
                                   [0.907, 0.853, 0.920, 0.760, 0.133, 0.293], 0.031333, 0.975434),
    "google_robot_move_near": ([0.779, 0.442, 0.354, 0.317, 0.050, 0.042],
                               [0.733, 0.633, 0.583, 0.450, 0.017, 0.350], 0.111000, 0.856097),
    "google_robot_open_drawer": ([0.157, 0.601, 0.463, 0.296, 0.000, 0.009],
                                 [0.333, 0.815, 0.704, 0.519, 0.000, 0.148], 0.0, 0.983167),
    "google_robot_close_drawer": ([0.343, 0.861, 0.667, 0.891, 0.278, 0.444],
                                  [0.630, 0.926, 0.889, 0.741, 0.000, 0.519], 0.123333, 0.771233),
    "widowx_carrot_on_plate": ([0.042, 0.083, 0.097], [0.000, 0.250, 0.083], 0.111333, 0.571368),
    "widowx_put_eggplant_in_basket": ([0.000, 0.431, 0.569], [0.000, 0.250, 0.400], 0.0, 0.989415),
}


@pytest.mark.parametrize("task", sorted(REFERENCE))
def test_reference_tables(task):
    sim, real, want_mmrv, want_pearson = REFERENCE[task]
    assert mmrv(np.array(sim), np.array(real)) == pytest.approx(want_mmrv, abs=1e-6)
    assert pearson(np.array(sim), np.array(real)) == pytest.approx(want_pearson, abs=1e-6)
    assert pearson(np.array(sim), np.array(real)) == pytest.approx(np.corrcoef(sim, real)[0, 1], abs=1e-12)


def test_hand_worked_example_and_asymmetry():
    # sim 0.9, 0.5, 0.6; real 0.8, 0.7, 0.3. Only the pair (B, C) is ordered wrongly by sim
    # (sim B < C, real B > C); its size on the REAL side is |0.7 - 0.3| = 0.4. Per-policy maxima
    # A 0, B 0.4, C 0.4 -> MMRV = 0.8 / 3. Swapped, the same pair costs the sim difference 0.1.
    sim, real = np.array([0.9, 0.5, 0.6]), np.array([0.8, 0.7, 0.3])
    assert mmrv(sim, real) == pytest.approx(0.8 / 3)
    assert mmrv(real, sim) == pytest.approx(0.2 / 3)
    assert violations(sim, real) == [(1, 2)]
    assert mmrv(sim, sim) == 0.0  # a perfect simulator
    assert pearson(np.array([0.2, 0.2]), np.array([0.1, 0.3])) is None  # constant side: undefined


def test_bootstrap_intervals_hold_the_point_and_shrink_with_counts():
    def run(n):
        rates = [PolicyRates(f"p{i}", "t", s, r, n, n) for i, (s, r) in enumerate([(0.9, 0.8), (0.5, 0.7), (0.6, 0.3)])]
        return rank_fidelity(rates, n_boot=400).tasks["t"]
    small, big = run(20), run(2000)
    for t in (small, big):
        assert t.mmrv_ci[0] <= t.mmrv + 1e-9 and t.pearson_ci[0] <= t.pearson <= t.pearson_ci[1]
    assert (big.pearson_ci[1] - big.pearson_ci[0]) < (small.pearson_ci[1] - small.pearson_ci[0])


def _check_rank_scatter(drawn, tasks):
    """One scatter per task: each policy at (sim, real) with its own name beside it, each
    violation a dashed red segment joining the two policies' points, axes named sim (x), real (y)."""
    figs = only(drawn, "rank_scatter")
    assert len(figs) == len(tasks)
    for fig, (task, entry) in zip(figs, tasks.items()):
        (ax,) = fig.axes
        assert ax.get_title().startswith(task)
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("sim success", "real success")
        pts = np.vstack([off for off, *_ in points(ax)])
        names = {t.get_text(): t.xy for t in ax.texts}
        want = {p["policy"]: (p["sim"], p["real"]) for p in entry["policies"]}
        assert set(names) == set(want)
        for name, xy in want.items():
            np.testing.assert_allclose(names[name], xy)
            assert np.isclose(pts, xy).all(1).sum() == 1, name
        segs = sorted(tuple(np.round(np.r_[x, y], 9)) for x, y, c, _, _ in lines(ax) if c == "#c0392b")
        expect = sorted(tuple(np.round([want[a][0], want[b][0], want[a][1], want[b][1]], 9))
                        for a, b in entry["violations"])
        assert segs == expect and len(expect) > 0


def test_cli_rates_file_gate_and_skips(tmp_path, capsys, monkeypatch):
    drawn = capture(monkeypatch)
    f = tmp_path / "rates.csv"
    lines = ["policy,task,sim,real"] + [f"p{i},move_near,{s},{r}" for i, (s, r) in
                                        enumerate(zip(*REFERENCE["google_robot_move_near"][:2]))] + ["solo,other,0.5,0.4"]
    f.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert cli.main(["rank-fidelity", str(f), "--json", str(tmp_path / "r.json"), "--out", str(out)]) == 0
    res = json.loads((tmp_path / "r.json").read_text())["rank_fidelity"]
    assert res["tasks"]["move_near"]["mmrv"] == pytest.approx(0.111, abs=1e-6)
    assert res["mean"]["pearson"] == pytest.approx(0.856097, abs=1e-6)
    assert res["skipped"] == [{"task": "other", "reason": "only 1 policy; a ranking needs two or more"}]
    html = (out / "report.html").read_text()
    assert html.count("<img") == 1 and "MMRV" in html
    _check_rank_scatter(drawn, res["tasks"])
    (table,) = [t for t in html_tables(html).values() if t[0][:3] == ["task", "policies", "MMRV"]]
    assert table[1][:3] == ["move_near", "6", table[1][2]] and cell(table[1][2]) == pytest.approx(0.111, rel=5e-3)
    assert cell(table[1][4]) == pytest.approx(res["tasks"]["move_near"]["pearson"], rel=5e-3)
    assert table[-1][0] == "mean over tasks" and cell(table[-1][4]) == pytest.approx(res["mean"]["pearson"], rel=5e-3)
    capsys.readouterr()
    assert cli.main(["rank-fidelity", str(f), "--min-pearson", "0.9", "-q"]) == 1  # 0.856 < 0.9: gate fails
    assert cli.main(["rank-fidelity", str(f), "--min-pearson", "0.8", "-q"]) == 0
    f.write_text("policy,task,sim,real\na,t,0.5,1.2\n")
    assert cli.main(["rank-fidelity", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "`real`" in err[0] and "1.2" in err[0]
