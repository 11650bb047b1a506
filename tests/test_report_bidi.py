"""Bidirectional controls in user text (set, file, policy and task names) never reach a report as
they are: each shows as a visible `<U+XXXX>`, so a right-to-left override cannot reorder what a
report displays (`sim\u202egnp.jpg` reading as `simgpj.png`)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image

from perception_gap import cli
from perception_gap.examples import example_frame
from perception_gap.reports.safe_text import BIDI_CONTROLS, escape, neutralize

RLO, LRI, RLM = "\u202e", "\u2066", "\u200f"


def _assert_neutral(html: str, *visible: str) -> None:
    left = sorted({f"U+{ord(c):04X}" for c in html if c in BIDI_CONTROLS})
    assert not left, f"bidirectional controls in the report: {left}"
    for v in visible:
        assert v in html, v


def test_every_control_is_made_visible_and_markup_stays_escaped():
    assert neutralize("a\u202eb\u061cc\u200ed") == "a<U+202E>b<U+061C>c<U+200E>d"
    assert all(neutralize(c) == f"<U+{ord(c):04X}>" for c in BIDI_CONTROLS)
    assert str(escape("<b>\u2067x")) == "&lt;b&gt;&lt;U+2067&gt;x"
    assert neutralize("plain ascii, \u00e9t\u00e9, \u05e9\u05dc\u05d5\u05dd") == "plain ascii, \u00e9t\u00e9, \u05e9\u05dc\u05d5\u05dd"


def test_run_report_shows_set_and_file_names_with_controls_visible(tmp_path):
    """Set names and a skipped file's name carrying an override, an isolate and a mark: the report
    has none of the controls, and each where it was as `<U+XXXX>` (escaped in the HTML)."""
    sim_name, real_name = f"sim{RLO}gnp.jpg", f"real{LRI}cam{RLM}"
    db = str(tmp_path / "gap.duckdb")
    for name, domain in ((sim_name, "sim"), (real_name, "real")):
        folder = tmp_path / domain
        folder.mkdir()
        for i in range(4):
            a = example_frame(i)
            Image.fromarray(a if domain == "sim" else np.ascontiguousarray(a[..., ::-1])).save(folder / f"f{i}.png")
        (folder / f"bad{RLO}gnp.png").write_bytes(b"not an image")
        assert cli.main(["index", str(folder), "--set", name, "--domain", domain, "--db", db, "--quiet"]) == 0
    out = tmp_path / "out"
    assert cli.main(["run", "--sim", sim_name, "--real", real_name, "--encoders", "pixel", "--out", str(out),
                     "--db", db, "--quiet"]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    _assert_neutral(html, "sim&lt;U+202E&gt;gnp.jpg", "real&lt;U+2066&gt;cam&lt;U+200F&gt;", "bad&lt;U+202E&gt;gnp.png")


def test_evaluation_report_shows_policy_and_task_names_with_controls_visible(tmp_path):
    rows = [{"policy": f"ckpt{RLO}1", "task": f"pick{LRI}up", "domain": d, "success": int(k < s)}
            for d, s in (("sim", 8), ("real", 4)) for k in range(10)]
    path = Path(tmp_path / "rollouts.csv")
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "out"
    assert cli.main(["rollouts", str(path), "--out", str(out), "--db", str(tmp_path / "gap.duckdb"), "--quiet"]) == 0
    _assert_neutral((out / "report.html").read_text(encoding="utf-8"), "ckpt&lt;U+202E&gt;1", "pick&lt;U+2066&gt;up")
