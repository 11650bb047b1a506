"""Latency: per-stage and end-to-end percentiles vs numpy, overruns, staleness, bad logs, the CLI gate."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perception_gap import cli
from perception_gap.errors import InputError
from perception_gap.evaluation.latency import analyze_latency, latency_findings
from tests.figures import bars, capture, cell, html_tables, legend, lines, only, ticklabels


def _log(n=200, seed=0):
    rng = np.random.default_rng(seed)
    capture = np.arange(n) * 0.050  # 20 Hz ticks, in seconds
    received = capture + 0.004
    inferred = received + rng.uniform(0.020, 0.060, n)  # inference dominates
    actuated = inferred + 0.002
    return {"tick": list(range(n)), "capture": capture.tolist(), "received": received.tolist(),
            "inferred": inferred.tolist(), "actuated": actuated.tolist()}, (inferred - received) * 1000


def test_known_answers():
    cols, infer_ms = _log()
    res = analyze_latency(cols, fps=20)
    assert res.stage_order == ("capture", "received", "inferred", "actuated")  # `tick` is not a stage
    assert res.tick_ms == 50.0 and res.n_ticks == 200
    assert res.stages["received"]["p95"] == pytest.approx(4.0)
    assert res.stages["inferred"]["p95"] == pytest.approx(np.percentile(infer_ms, 95))
    e2e = infer_ms + 6.0
    assert res.end_to_end["p99"] == pytest.approx(np.percentile(e2e, 99))
    assert res.overrun_fraction == pytest.approx(np.mean(e2e > 50.0))
    assert res.staleness_ticks["max"] == np.floor(e2e.max() / 50.0)
    assert res.jitter_ms == pytest.approx(0.0, abs=1e-9) and res.period["p50"] == pytest.approx(50.0)
    f = latency_findings(res)
    assert [x.code for x in f] == ["latency_budget"] and f[0].evidence["dominant_stage"] == "inferred"
    assert latency_findings(analyze_latency(cols, fps=10)) == []  # a 100 ms tick holds every tick


def test_units_and_explicit_stages():
    cols, _ = _log()
    ms = {k: [v * 1000 for v in vals] for k, vals in cols.items()}
    a = analyze_latency(cols, fps=20, stages=["capture", "actuated"])
    b = analyze_latency(ms, fps=20, stages=["capture", "actuated"], unit="ms")
    assert list(a.stages) == ["actuated"] and a.end_to_end["p50"] == pytest.approx(b.end_to_end["p50"])


def test_incomplete_tick_is_a_reported_skip():
    cols, _ = _log(20)
    cols["inferred"][3] = None
    res = analyze_latency(cols, fps=20)
    assert res.n_ticks == 19 and res.skipped == ({"tick": 4, "reason": "stage(s) not logged: inferred"},)


@pytest.mark.parametrize("change,needle", [
    (lambda c: c["inferred"].__setitem__(5, 0.0), "Row 6: timestamps run backwards"),
    (lambda c: c["capture"].__setitem__(9, 0.0) or c["received"].__setitem__(9, 0.004)
     or c["inferred"].__setitem__(9, 0.03) or c["actuated"].__setitem__(9, 0.031), "goes back in time"),
])
def test_non_monotonic_timestamps(change, needle):
    cols, _ = _log(20)
    change(cols)
    with pytest.raises(InputError, match=needle):
        analyze_latency(cols, fps=20)


def _check_latency_plots(drawn, lat):
    """The histogram holds every end-to-end sample (numpy's 40 bins over them) with the tick at
    tick_ms; the stacked bars hold each stage's p50 and p95 in pipeline order, in ms."""
    (hist,) = only(drawn, "latency_histogram")
    (ax,) = hist.axes
    sample = np.asarray(lat["end_to_end_sample"], float)
    assert len(sample) == lat["n_ticks"]
    counts, edges = np.histogram(sample, bins=40)
    got = bars(ax)
    np.testing.assert_allclose([b[3] for b in got], counts)
    np.testing.assert_allclose([b[0] for b in got], edges[:-1])
    (tick,) = [x for x, _, _, label, _ in lines(ax) if label.startswith("tick")]
    assert tick[0] == pytest.approx(lat["tick_ms"]) == pytest.approx(50.0)
    assert list(legend(ax)) == [f"tick {lat['tick_ms']:.1f} ms"]
    assert ax.get_xlabel() == "end-to-end latency (ms)"
    (stacked,) = only(drawn, "stage_bars")
    (ax,) = stacked.axes
    got = bars(ax)
    assert lat["stage_order"] == ["capture", "received", "inferred", "actuated"]  # capture is the reference
    order = ["received", "inferred", "actuated"]
    assert len(got) == 2 * len(order)
    for row, q in enumerate(("p50", "p95")):
        left = 0.0
        for (x, y, w, h, _), stage in zip(got[row * len(order):(row + 1) * len(order)], order):
            assert y + h / 2 == pytest.approx(row) and x == pytest.approx(left)
            assert w == pytest.approx(lat["stages"][stage][q])
            left += w
    assert ticklabels(ax, "y") == ["p50", "p95"]
    assert list(legend(ax)) == order  # the colours are told apart by the legend, in pipeline order
    assert [legend(ax)[s] for s in order] == [c for *_, c in got[:len(order)]]
    assert ax.get_xlabel().startswith("ms from the first stage")


def test_cli_gate_missing_stage_and_report(tmp_path, capsys, monkeypatch):
    cols, _ = _log(100)
    f = tmp_path / "ticks.csv"
    f.write_text("\n".join([",".join(cols)] + [",".join(str(cols[k][i]) for k in cols) for i in range(100)]) + "\n")
    out = tmp_path / "out"
    drawn = capture(monkeypatch)
    assert cli.main(["latency", str(f), "--fps", "20", "--out", str(out), "--json", str(tmp_path / "l.json")]) == 0
    res = json.loads((tmp_path / "l.json").read_text())
    assert set(res["latency"]["stages"]) == {"received", "inferred", "actuated"}
    assert res["findings"][0]["code"] == "latency_budget"
    assert (out / "report.html").read_text().count("<img") == 2  # histogram and stacked bars
    # the sample is the log's own: capture to actuated, in ms
    e2e = (np.asarray(cols["actuated"]) - np.asarray(cols["capture"])) * 1000
    np.testing.assert_allclose(sorted(res["latency"]["end_to_end_sample"]), sorted(e2e), rtol=1e-9)
    _check_latency_plots(drawn, res["latency"])
    table = html_tables((out / "report.html").read_text())["Latency per stage (ms, from the previous stage)"]
    assert table[0] == ["stage", "p50", "p95", "p99"]
    lat = res["latency"]
    want = [[s, *(lat["stages"][s][q] for q in ("p50", "p95", "p99"))] for s in ("received", "inferred", "actuated")]
    want.append(["end to end", *(lat["end_to_end"][q] for q in ("p50", "p95", "p99"))])
    for row, w in zip(table[1:], want, strict=True):
        assert row[0] == w[0] and [cell(x) for x in row[1:]] == pytest.approx(w[1:], rel=5e-3)
    p95 = res["latency"]["end_to_end"]["p95"]
    assert cli.main(["latency", str(f), "--fps", "20", "--max-p95-ms", str(p95 - 1), "-q"]) == 1
    assert cli.main(["latency", str(f), "--fps", "20", "--max-p95-ms", str(p95 + 1), "-q"]) == 0
    capsys.readouterr()
    assert cli.main(["latency", str(f), "--fps", "20", "--stages", "capture,sent"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing required column(s) sent" in err[0]
    assert cli.main(["latency", str(f), "--fps", "0"]) == 2


def test_iso_datetimes_read_as_seconds(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("capture,actuated\n2026-12-01T10:00:00.000,2026-12-01T10:00:00.040\n"
                 "2026-12-01T10:00:00.050,2026-12-01T10:00:00.080\n")
    from perception_gap.ingest.tables import read_columns
    res = analyze_latency(read_columns(f), fps=20)
    assert res.end_to_end["p50"] == pytest.approx(35.0) and res.period["p50"] == pytest.approx(50.0)
