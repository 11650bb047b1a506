"""Each command's report read in a real headless Chromium, against its results.json: what a reader
sees where the decision is shown.

The screen, drift, rollouts, latency and replay reports are made by the CLI on small synthetic
inputs built here (so the expected counts are known independently of the engine), loaded once in
Chromium with a script that writes out the visible text (`innerText`) of the page, of its tables
cell by cell and of the headline box. The figures the reports drew are kept as they were drawn
(tests/figures.py) to check legends and episodes. The CLI's own text is read too.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scenes import render, scenes, write_set  # noqa: E402

from perception_gap import cli  # noqa: E402
from perception_gap.reports.format import labelled, num  # noqa: E402
from perception_gap.wording import FAIL, PASS, SKIP, gate_word  # noqa: E402
from tests.figures import capture, legend, lines  # noqa: E402

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")

EPISODES, PER_EPISODE = 6, 4  # screen: 24 paired scenes in 6 episodes
WORDS = {PASS, FAIL, SKIP}

READ = """window.addEventListener('load', function () {
  var out = {text: document.body.innerText, tables: {}, ids: {}};
  document.querySelectorAll('table').forEach(function (t, i) {
    out.tables[t.id || ('table' + i)] = Array.prototype.map.call(t.rows, function (r) {
      return Array.prototype.map.call(r.cells, function (c) { return c.innerText.trim(); });
    });
  });
  ['verdict', 'verdict-title', 'screen-units', 'screen-gate'].forEach(function (k) {
    var e = document.getElementById(k); if (e) out.ids[k] = e.innerText.trim();
  });
  var pre = document.createElement('pre'); pre.id = 'pg-read'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});"""


def _read(page: Path, tmp: Path) -> dict:
    """The page as Chromium shows it: visible text, tables (cells as shown), the headline's parts."""
    html = page.read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(READ.encode()).digest()).decode()
    if "default-src 'none';" in html:  # keep the page's own policy, allow only this script
        html = html.replace("default-src 'none';", f"default-src 'none'; script-src 'sha256-{digest}';", 1)
    probe = page.with_suffix(".read.html")
    probe.write_text(html.replace("</body>", f"<script>{READ}</script></body>", 1), encoding="utf-8")
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", f"--user-data-dir={tmp / 'profile'}",
                        "--window-size=1280,2400", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
                       capture_output=True, text=True, timeout=90, check=False)
    dom = r.stdout
    raw = dom[dom.index('id="pg-read">') + len('id="pg-read">'):].split("</pre>")[0]
    return json.loads(raw.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&"))


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(list(args))
    return rc, out.getvalue()


def _page(out: Path) -> tuple[dict, Path]:
    return json.loads((out / "results.json").read_text()), out / "report.html"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict:
    """Every report made once, its figures kept, read in Chromium: name -> results, shown, figures, stdout."""
    tmp = tmp_path_factory.mktemp("reads")
    got: dict = {}
    with pytest.MonkeyPatch.context() as mp:
        drawn = capture(mp)

        def run(name: str, *args: str, out: bool = True) -> None:
            start = len(drawn)
            extra = ["--out", str(tmp / name)] if out else []
            rc, text = _cli(*args, *extra)
            res, page = _page(tmp / name)
            got[name] = {"rc": rc, "stdout": text, "results": res, "page": page, "figures": drawn[start:]}

        db = str(tmp / "c.duckdb")
        _screen_sets(tmp, db)
        run("screen", "screen", "--sim", "close,far", "--real", "real", "--encoders", "pixel", "--db", db,
            "--n-boot", "200", "--fail-if-worse", "close")
        _drift_sets(tmp, db)
        cfg = tmp / "gates.toml"  # the classifier can tell the sets apart, but the effect is below its bar
        cfg.write_text("[domain_auc]\nmax_auc = 0.55\nmin_ratio = 1000.0\n")
        for current in ("clean", "brighter"):
            run(f"drift-{current}", "drift", "--baseline", "baseline", "--current", current, "--encoders", "pixel",
                "--db", db, "--config", str(cfg))
        run("rollouts", "rollouts", str(_rollouts_log(tmp)), "--max-drop", "0.3")
        run("latency", "latency", str(_latency_log(tmp)), "--fps", "20", "--max-p95-ms", "30")
        run("replay", "replay", str(_replay_log(tmp)), "--max-translation-m", "0.05")
    for g in got.values():
        g["shown"] = _read(g["page"], tmp)
    return got


def _screen_sets(tmp: Path, db: str) -> None:
    sc = scenes(EPISODES * PER_EPISODE, seed=2)
    rng = np.random.default_rng(3)
    for name, dom, gain in (("real", "real", 1.0), ("close", "sim", 1.05), ("far", "sim", 1.5)):
        for e in range(EPISODES):  # one sub-folder per episode: the pair key is ep<e>/s<i>
            write_set(tmp / name / f"ep{e}", [render(s, gain, 0.02 if dom == "real" else 0.0, rng)
                                              for s in sc[e * PER_EPISODE:(e + 1) * PER_EPISODE]])
        assert cli.main(["index", str(tmp / name), "--set", name, "--domain", dom, "--db", db, "-q"]) == 0


def _drift_sets(tmp: Path, db: str) -> None:
    sc = scenes(60, seed=4)
    rng = np.random.default_rng(5)
    for name, frames in (("baseline", [render(s, 1.0, 0.01, rng) for s in sc[:30]]),
                         ("clean", [render(s, 1.0, 0.01, rng) for s in sc[30:]]),
                         ("brighter", [render(s, 1.6, 0.01, rng) for s in sc[30:]])):
        write_set(tmp / name, frames)
        assert cli.main(["index", str(tmp / name), "--set", name, "--domain", "real", "--db", db, "-q"]) == 0


def _rollouts_log(tmp: Path) -> Path:
    """Sim 34/50 = 0.68, real 17/75: a drop of 0.68 - 0.2266... = 0.4533... (no short decimal)."""
    rows = [("p", "pick", "sim", int(i < 34)) for i in range(50)] + [("p", "pick", "real", int(i < 17)) for i in range(75)]
    path = tmp / "rollouts.csv"
    path.write_text("policy,task,domain,success\n" + "".join(f"{a},{b},{c},{d}\n" for a, b, c, d in rows))
    return path


def _latency_log(tmp: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 120
    capture_s = np.arange(n) * 0.05
    inferred = capture_s + 0.004 + rng.uniform(0.020, 0.070, n)
    cols = {"tick": np.arange(n), "capture": capture_s, "received": capture_s + 0.004, "inferred": inferred,
            "actuated": inferred + 0.002}
    path = tmp / "ticks.csv"
    path.write_text(",".join(cols) + "\n" + "".join(",".join(repr(float(cols[k][i])) for k in cols) + "\n"
                                                    for i in range(n)))
    return path


def _replay_log(tmp: Path) -> Path:
    """Four episodes, positions only (identity orientation): the real arm drifts off from step 10."""
    path = tmp / "replay.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["episode", "step", "domain", "x", "y", "z", "qw", "qx", "qy", "qz"])
        for k, ep in enumerate(("e1", "e2", "e3", "e4")):
            for step in range(25):
                for dom in ("sim", "real"):
                    off = 0.002 * (k + 1) * max(0, step - 10) if dom == "real" else 0.0
                    w.writerow([ep, step, dom, 0.01 * step + off, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0])
    return path


def test_screen_headline_states_the_screening_conclusion(reports):
    r = reports["screen"]
    scr, shown = r["results"]["screen"], r["shown"]
    assert scr["closest"] == "close" and r["results"]["findings"]  # there are plumbing findings too
    title = shown["ids"]["verdict-title"]
    assert title.startswith("Closest to real: close, significantly closer than every other rendering")
    assert f"Gate --fail-if-worse close: {gate_word(scr['passed'])} (significantly farther from real: far)" in title
    # the box is the conclusion, not the first finding (the far rendering's brightness, say)
    assert all(f["title"] not in shown["ids"]["verdict"] for f in r["results"]["findings"])


def test_screen_says_what_its_bootstrap_resampled(reports):
    """24 scenes paired across the three sets, in 6 episode folders: 6 episodes are resampled."""
    scr, shown = reports["screen"]["results"]["screen"], reports["screen"]["shown"]
    assert shown["ids"]["screen-units"] == f"{EPISODES} episodes ({EPISODES * PER_EPISODE} paired scenes in them)"
    assert scr["n_pairs"] == EPISODES * PER_EPISODE and scr["resampling_units"] == {"episodes": EPISODES}
    out = reports["screen"]["stdout"]
    assert f"{EPISODES * PER_EPISODE} paired scenes, resampled as {EPISODES} episodes" in out


def test_one_word_for_a_gate_in_every_report_and_in_the_cli(reports):
    for name, r in reports.items():
        text, out = r["shown"]["text"], r["stdout"]
        for bad in ("FAILED", "PASSED", "passed", "Passed"):
            assert bad not in text and bad not in out, (name, bad)
    drift = reports["drift-brighter"]
    rows = drift["shown"]["tables"]["gates"][1:]
    for row, g in zip(rows, drift["results"]["drift"]["gates"], strict=True):
        assert row[3].split()[0] == gate_word(g["status"]) in WORDS
    scr = reports["screen"]["results"]["screen"]
    assert scr["passed"] is False and scr["worse_than_baseline"] == ["far"]  # far is farther than close
    assert reports["screen"]["shown"]["ids"]["screen-gate"].startswith(
        f"Gate --fail-if-worse close: {FAIL}: significantly farther from real than the baseline: far")
    assert f"--fail-if-worse 'close': {FAIL} (significantly farther: far)" in reports["screen"]["stdout"]
    for name in ("rollouts", "latency"):
        (row,) = reports[name]["shown"]["tables"]["gates"][1:]
        (g,) = reports[name]["results"][name]["gates"]
        assert row[3].split(":")[0] == gate_word(g["status"])
        assert f"gate {g['name']}: " in reports[name]["stdout"] and reports[name]["stdout"].count(gate_word(g["status"]))
    failed_drift = [g["name"] for g in drift["results"]["drift"]["gates"] if g["status"] == "failed"]
    assert failed_drift and f"{FAIL}: {', '.join(failed_drift)}" in drift["stdout"]
    assert f"Gate translation_mean_m: {gate_word(reports['replay']['results']['replay']['gate']['passed'])}:" \
        in reports["replay"]["shown"]["text"]


def test_gate_numbers_go_through_the_formatter(reports):
    """The drop 0.4533... prints as 0.453 in the report and the CLI; results.json keeps every digit."""
    sec = reports["rollouts"]["results"]["rollouts"]
    (g,) = sec["gates"]
    assert g["value"] == pytest.approx(34 / 50 - 17 / 75) and len(repr(g["value"])) > 10
    (row,) = reports["rollouts"]["shown"]["tables"]["gates"][1:]
    assert row[1:3] == [num(g["value"]), num(g["threshold"])] == ["0.453", "0.300"]
    assert row[3] == f"{FAIL}: 0.453 > 0.300; passes with at most 0.300"
    long_number = re.compile(r"\d\.\d{7,}|\d{8,}\.\d")
    for name, r in reports.items():
        assert not long_number.search(r["shown"]["text"]), (name, long_number.search(r["shown"]["text"]))
        assert not long_number.search(r["stdout"]), name


def test_rollouts_needed_and_staleness_read_as_text(reports):
    sec = reports["rollouts"]["results"]["rollouts"]
    (comp,) = sec["comparisons"]
    table = next(t for t in reports["rollouts"]["shown"]["tables"].values() if t[0][:2] == ["policy", "task"]
                 and "drop" in t[0])
    need = comp["rollouts_needed"]
    assert table[1][-1] == f"sim {need['sim']}, real {need['real']}" and "{" not in table[1][-1]
    lat = reports["latency"]["results"]["latency"]
    budget = next(t for t in reports["latency"]["shown"]["tables"].values() if t and t[0] == ["", ""])
    (stale,) = [row for row in budget if row[0].startswith("staleness")]
    s = lat["staleness_ticks"]
    assert stale[1] == f"p50 {s['p50']:g}, p95 {s['p95']:g}, max {s['max']:g}" == labelled(s)
    assert "{" not in reports["latency"]["shown"]["text"] and "{" not in reports["rollouts"]["shown"]["text"]


def test_drift_verdict_states_its_deciding_rule(reports):
    """The classifier tells the brighter set from the baseline beyond max_auc, yet the gate passes:
    the row says so, with the effect size that decided, beside the verdict."""
    dr = reports["drift-brighter"]["results"]["drift"]
    rows = {row[0]: row for row in reports["drift-brighter"]["shown"]["tables"]["gates"][1:]}
    (auc,) = [g for g in dr["gates"] if g["name"].startswith("domain_auc:")]
    assert auc["status"] == "passed" and auc["value"] > auc["threshold"] == 0.55
    cell = rows[auc["name"]][3]
    assert cell == (f"{PASS} AUC {num(auc['value'])} > {num(0.55)}, but the shift is only "
                    f"{num(auc['detail']['effect_ratio'])}x the baseline's own variation; fails only when the AUC "
                    f"is above {num(0.55)} and the shift above {num(1000.0)}x")
    shift = next(g for g in dr["gates"] if g["name"] == "channel_shift")
    assert shift["status"] == "failed"
    assert rows["channel_shift"][3].startswith(f"{FAIL} the 95% interval of the change lies entirely beyond ±0.250")
    assert f"why: {cell[len(PASS) + 1:]}" in reports["drift-brighter"]["stdout"]  # the CLI says it too


def test_legends_never_cover_the_data(reports):
    """Every legend of these reports' figures sits outside every data area of its figure."""
    seen = 0
    for name, r in reports.items():
        for d in r["figures"]:
            fig = d.figure
            renderer = fig.canvas.get_renderer()
            for ax in d.axes:
                lg = ax.get_legend()
                if lg is None:
                    continue
                box = lg.get_window_extent(renderer)
                seen += 1
                for other in d.axes:
                    assert not box.overlaps(other.get_window_extent(renderer)), (name, d.function)
    assert seen >= 8


def test_drift_trend_marks_what_failed_not_what_crossed_the_line(reports):
    r = reports["drift-brighter"]
    (trend,) = [d for d in r["figures"] if d.function == "drift_trend"]
    (ax,) = trend.axes
    assert "above the dashed line fails" not in ax.get_title() and "own rule" in ax.get_title()
    hist = r["results"]["drift"]["history"]
    # crosses in each gate's colour at exactly the runs the history lists as failing it
    colours = legend(ax)
    for name in sorted({k for h in hist for k in h["ratios"]}):
        want = sorted((i, h["ratios"][name]) for i, h in enumerate(hist) if name in h["failed"])
        got = sorted((x, y) for xs, ys, c, lab, m in lines(ax) if m == "X" and lab.startswith("_")
                     and c == colours[name] for x, y in zip(xs, ys))
        np.testing.assert_allclose(np.asarray(got, float).reshape(-1, 2), np.asarray(want, float).reshape(-1, 2),
                                   err_msg=name)


def test_replay_draws_every_listed_episode_and_names_every_line(reports):
    rp = reports["replay"]["results"]["replay"]
    shown = reports["replay"]["shown"]["tables"]["replay-episodes"]
    listed = [row[0] for row in shown[1:]]
    assert listed == ["e1", "e2", "e3", "e4"] == [e["episode"] for e in rp["episodes"]]
    (fig,) = [d for d in reports["replay"]["figures"] if d.function == "replay_plot"]
    (ax,) = fig.axes  # no rotation in this log: no panel of zeros
    assert "rotation error 0 at every step" in ax.get_title()
    entries = legend(ax)
    assert list(entries) == [f"episode {e}" for e in listed] + ["divergence onset", "first contact"]
    for x, y, colour, label, _ in lines(ax):
        if label.startswith("_"):  # an unlabelled line is an episode's onset, in that episode's colour
            assert colour in {entries[f"episode {e}"] for e in listed} and len(set(x)) == 1
        else:
            assert label in entries

