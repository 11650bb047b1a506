"""Rollouts: group rates and intervals, comparisons, findings, the failure-mode test, bad input, CLI."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest, fisher_exact

from perception_gap import cli
from perception_gap.evaluation.failure_modes import failure_mode_test, permutation_chi2_p
from perception_gap.evaluation.jobs import add_rollouts
from perception_gap.evaluation.rollouts import Rollout, analyze_rollouts
from tests.figures import capture, cell, html_tables, legend, lines, only, ticklabels

REPO = Path(__file__).resolve().parents[1]


def _rows(policy, task, domain, k, n, modes=(), lengths=None):
    modes = list(modes) + [None] * n
    return [Rollout(policy, task, domain, i < k, None if lengths is None else float(lengths[i]),
                    None if i < k else modes[i - k]) for i in range(n)]


def _write_csv(path, rollouts):
    lines = ["policy,task,domain,success,episode_length,failure_mode"]
    for r in rollouts:
        lines.append(f"{r.policy},{r.task},{r.domain},{int(r.success)},"
                     f"{'' if r.episode_length is None else r.episode_length},{r.failure_mode or ''}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_groups_comparisons_and_findings():
    rs = (_rows("a", "pick", "sim", 900, 1000) + _rows("a", "pick", "real", 9, 10)
          + _rows("b", "pick", "sim", 95, 100) + _rows("b", "pick", "real", 20, 50)
          + _rows("c", "pick", "sim", 5, 5))
    res = analyze_rollouts(rs)
    g = {(x.policy, x.domain): x for x in res.groups}
    assert (g["a", "sim"].n, g["a", "sim"].successes) == (1000, 900)
    ref = binomtest(9, 10).proportion_ci(method="exact")
    assert g["a", "real"].ci_low == pytest.approx(ref.low) and g["a", "real"].ci_high == pytest.approx(ref.high)
    c = {x.policy: x for x in res.comparisons}
    assert c["a"].drop == pytest.approx(0.0) and not c["a"].significant  # 90% vs 90%: no drop to claim
    assert c["b"].drop == pytest.approx(0.55) and c["b"].significant and c["b"].drop_ci[0] > 0
    assert res.skipped == ({"policy": "c", "task": "pick", "reason": "only sim rollouts; no comparison"},)
    codes = [f.code for f in res.findings]
    assert codes == ["sim_baseline", "too_few_rollouts"] or codes == ["too_few_rollouts", "sim_baseline"]
    weak = next(f for f in res.findings if f.code == "sim_baseline").evidence["groups"]
    assert [(w["policy"], w["n"]) for w in weak] == [("b", 100), ("c", 5)]  # a: 1000 episodes at 90% is fine
    # rollouts needed: both sides' intervals narrower than the 0.55 drop, and one fewer would not do
    need = c["b"].rollouts_needed
    assert need["sim"] < need["real"] and need["real"] <= 50  # the observed 50 real already suffice


def test_failure_modes_fisher_for_two_categories():
    sim = ["grasp"] * 8 + ["timeout"] * 2
    real = ["grasp"] * 1 + ["timeout"] * 9
    t = failure_mode_test(sim, real)
    assert t.test == "fisher" and t.p_value == pytest.approx(fisher_exact([[8, 2], [1, 9]]).pvalue)
    assert isinstance(failure_mode_test(sim, []), str)  # no real failures: a reason, not a test
    assert isinstance(failure_mode_test(["x"] * 3, ["x"] * 4), str)


def _exact_permutation_p(sim_labels, real_labels):
    """The exact conditional p-value by enumerating every split of the failed episodes (reference)."""
    labels = np.concatenate([sim_labels, real_labels])
    n, k, c = len(labels), len(sim_labels), labels.max() + 1
    col = np.bincount(labels, minlength=c)
    exp = np.outer([k, n - k], col) / n

    def chi2(sim_idx):
        s = np.bincount(labels[list(sim_idx)], minlength=c)
        return (((np.stack([s, col - s]) - exp) ** 2) / exp).sum()
    stat = chi2(range(k))
    stats = np.array([chi2(idx) for idx in itertools.combinations(range(n), k)])
    return float(np.mean(stats >= stat - 1e-9))


def test_failure_modes_permutation_matches_exact_enumeration():
    sim = np.array([0, 0, 0, 0, 1, 2])
    real = np.array([1, 1, 2, 2, 2])  # 462 splits: small enough to enumerate
    exact = _exact_permutation_p(sim, real)
    mc = permutation_chi2_p(sim, real, n_permutations=20000, random_state=1)
    assert mc == pytest.approx(exact, abs=0.01)
    t = failure_mode_test(["g"] * 4 + ["t", "s"], ["t", "t", "s", "s", "s"])
    assert t.test == "permutation_chi2" and t.p_value == pytest.approx(exact, abs=0.015)


def test_failure_modes_differ_finding_and_episode_lengths():
    rs = (_rows("a", "t", "sim", 80, 100, ["grasp"] * 20, lengths=range(100))
          + _rows("a", "t", "real", 10, 30, ["slip"] * 15 + ["collision"] * 5, lengths=range(100, 130)))
    res = analyze_rollouts(rs)
    f = next(f for f in res.findings if f.code == "failure_modes_differ")
    assert f.severity == "gap" and f.evidence["sim"] == [20, 0, 0] and f.evidence["real"] == [0, 15, 5]
    el = res.episode_lengths["a/t"]
    assert el["sim"]["p50"] == pytest.approx(np.percentile(range(100), 50)) and el["real"]["n"] == 30
    assert sum(el["sim"]["counts"]) == 100 and len(el["edges"]) == 11


def _check_interval_bars(drawn, groups):
    """Each group's point sits at its rate on its policy/task row, sim above real, in its side's
    colour, with its interval drawn from ci_low to ci_high; the legend names the colours."""
    from perception_gap.reports.plots import REAL_COLOR, SIM_COLOR

    (fig,) = only(drawn, "interval_bars")
    (ax,) = fig.axes
    rows = ticklabels(ax, "y")
    marks = [(x[0], y[0], c) for x, y, c, _, m in lines(ax) if m == "o" and len(x) == 1]  # errorbar centres
    segs = [s for coll in ax.collections for s in coll.get_segments()]
    assert len(marks) == len(groups)
    for g in groups:
        row = rows.index(f"{g['policy']}/{g['task']}")
        y = row + (-0.15 if g["domain"] == "sim" else 0.15)  # y axis inverted: sim is the upper mark
        colour = (SIM_COLOR if g["domain"] == "sim" else REAL_COLOR).lower()
        assert [m for m in marks if m[0] == pytest.approx(g["rate"]) and m[1] == pytest.approx(y)] == \
            [(pytest.approx(g["rate"]), pytest.approx(y), colour)], g
        assert any(np.allclose(s, [[g["ci_low"], y], [g["ci_high"], y]]) for s in segs), g
    assert ax.yaxis_inverted()
    assert legend(ax) == {"sim": SIM_COLOR.lower(), "real": REAL_COLOR.lower()}
    assert ax.get_xlabel().startswith("success rate")


def _check_rollout_tables(html, sec):
    """The report's tables hold each group's own counts and rate, and each comparison's sim and
    real rates in their own columns."""
    tables = {rows[0][0] + "|" + rows[0][2]: rows for rows in html_tables(html).values()}
    groups = tables["policy|domain"]
    assert groups[0] == ["policy", "task", "domain", "n", "successes", "rate", "CI"]
    assert len(groups) - 1 == len(sec["groups"])
    for row, g in zip(groups[1:], sec["groups"]):
        assert row[:5] == [g["policy"], g["task"], g["domain"], str(g["n"]), str(g["successes"])]
        assert cell(row[5]) == pytest.approx(g["rate"], rel=5e-3)
    comps = tables["policy|sim"]
    assert comps[0][:5] == ["policy", "task", "sim", "real", "drop"]
    for row, c in zip(comps[1:], sec["comparisons"]):
        assert row[:2] == [c["policy"], c["task"]]
        assert [cell(x) for x in row[2:5]] == pytest.approx([c["sim_rate"], c["real_rate"], c["drop"]], rel=5e-3)


def test_wilson_report_of_a_group_that_always_succeeds(tmp_path):
    """One rollout that succeeded: the Wilson interval holds the rate 1.0 and the report draws its bar."""
    f = _write_csv(tmp_path / "r.csv", _rows("a", "pick", "sim", 1, 1) + _rows("a", "pick", "real", 3, 5))
    assert cli.main(["rollouts", str(f), "--ci", "wilson", "--out", str(tmp_path / "o"), "-q"]) == 0
    groups = json.loads((tmp_path / "o" / "results.json").read_text())["rollouts"]["groups"]
    (group,) = [g for g in groups if g["domain"] == "sim"]
    assert group["rate"] == 1.0 and group["ci_high"] == 1.0


def test_cli_json_report_gate_and_formats(tmp_path, capsys, monkeypatch):
    rs = _rows("a", "pick", "sim", 95, 100, ["t"] * 5) + _rows("a", "pick", "real", 12, 20, ["t"] * 4 + ["s"] * 4)
    rs += _rows("b", "pick", "sim", 30, 40) + _rows("b", "pick", "real", 25, 30)  # real above sim on this one
    f = _write_csv(tmp_path / "r.csv", rs)
    out = tmp_path / "out"
    drawn = capture(monkeypatch)
    assert cli.main(["rollouts", str(f), "--out", str(out), "--json", str(tmp_path / "r.json")]) == 0
    res = json.loads((tmp_path / "r.json").read_text())
    assert {"version", "config", "findings", "rollouts"} <= set(res)
    comp = res["rollouts"]["comparisons"][0]
    assert comp["drop"] == pytest.approx(0.35) and set(comp["rollouts_needed"]) == {"sim", "real"}
    assert json.loads((out / "results.json").read_text()) == res
    assert (out / "report.html").read_text().count("<img") == 1
    assert len(res["rollouts"]["groups"]) == 4
    _check_interval_bars(drawn, res["rollouts"]["groups"])
    _check_rollout_tables((out / "report.html").read_text(), res["rollouts"])
    assert cli.main(["rollouts", str(f), "--max-drop", "0.3", "-q"]) == 1
    assert cli.main(["rollouts", str(f), "--max-drop", "0.4", "-q"]) == 0
    # the same rows as JSONL and Parquet give the same groups
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = [{"policy": r.policy, "task": r.task, "domain": r.domain, "success": int(r.success)} for r in rs]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "r.parquet")
    for name in ("r.jsonl", "r.parquet"):
        assert cli.main(["rollouts", str(tmp_path / name), "--json", str(tmp_path / "x.json"), "-q"]) == 0
        assert json.loads((tmp_path / "x.json").read_text())["rollouts"]["groups"] == res["rollouts"]["groups"]


@pytest.mark.parametrize("body,needle", [
    ("policy,task,domain,success\na,t,sim,1\na,t,real,2\n", "Row 2: expected `success` to be 0 or 1, got '2'"),
    ("policy,task,domain,success\na,t,sim,yes\n", "`success` to be 0 or 1"),
    ("policy,task,domain,success\n,t,sim,1\n", "Row 1: empty `policy`"),
    ("policy,task,domain,success\na,t,robot,1\n", "`domain` sim or real"),
    ("policy,task,domain\na,t,sim\n", "missing required column(s) success"),
    ("policy,task,domain,success\n", "has no rows"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, body, needle):
    f = tmp_path / "bad.csv"
    f.write_text(body)
    assert cli.main(["rollouts", str(f)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_run_checks_rollouts_before_the_analysis_and_add_rollouts_merges(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("policy,task,domain,success\na,t,sim,0.5\n")
    assert cli.main(["run", "--sim", "s", "--real", "r", "--out", str(tmp_path / "o"), "--rollouts", str(bad),
                     "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "`success` to be 0 or 1" in capsys.readouterr().err
    good = _write_csv(tmp_path / "g.csv", _rows("a", "t", "sim", 9, 10) + _rows("a", "t", "real", 8, 10))
    res = {"findings": [{"code": "channel_swap", "severity": "bug"}, {"code": "sharpness", "severity": "gap"}]}
    add_rollouts(res, good)
    assert [f["code"] for f in res["findings"]][:2] == ["channel_swap", "sharpness"]
    assert {"too_few_rollouts", "sim_baseline"} <= {f["code"] for f in res["findings"]}
    assert res["rollouts"]["comparisons"][0]["drop"] == pytest.approx(0.1)


def test_real_cli_one_line_no_traceback(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"policy": "a", "task": "t", "domain": "sim", "success": 3}\n')
    p = subprocess.run([sys.executable, str(REPO / "cli.py"), "rollouts", str(f)], capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_drift_includes_the_rollouts_section_end_to_end(tmp_path, monkeypatch):
    from PIL import Image

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    for d in ("base", "new"):
        (tmp_path / d).mkdir()
        for i in range(4):
            Image.fromarray((rng.random((32, 48, 3)) * 255).astype(np.uint8)).save(tmp_path / d / f"f{i}.png")
        assert cli.main(["index", d, "--set", d, "--domain", "real", "-q", "--db", "c.duckdb"]) == 0
    f = _write_csv(tmp_path / "r.csv", _rows("a", "t", "sim", 9, 10) + _rows("a", "t", "real", 5, 10))
    assert cli.main(["drift", "--baseline", "base", "--current", "new", "--encoders", "none", "--out", "out",
                     "--rollouts", str(f), "-q", "--db", "c.duckdb", "--workers", "1"]) in (0, 1)
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["rollouts"]["comparisons"][0]["drop"] == pytest.approx(0.4)
    assert "drift" in res and {"sim_baseline", "too_few_rollouts"} <= {f["code"] for f in res["findings"]}
    assert "too_few_rollouts" in (tmp_path / "out" / "report.html").read_text()
