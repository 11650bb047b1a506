"""Skipped frames are listed by reason, with a count and a few files, in `index`, `stats` and the
report: 25 truncated PNGs make one line, not 25 (results.json still lists every one)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from PIL import Image

from perception_gap import cli
from perception_gap.examples import example_frame
from perception_gap.reports import render_report
from perception_gap.wording import skip_groups, skip_line


def _set(folder: Path, bgr: bool = False, bad: bool = True) -> Path:
    folder.mkdir(parents=True)
    for i in range(4):
        a = example_frame(i)
        Image.fromarray(np.ascontiguousarray(a[..., ::-1]) if bgr else a).save(folder / f"f{i}.png")
    if bad:
        for i in range(25):
            (folder / f"cut{i:02d}.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"x" * 40)  # a PNG cut short
        for i in range(3):
            (folder / f"empty{i}.png").write_bytes(b"")
    return folder


def _skip_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith("skipped")]


def test_index_stats_and_the_report_group_skips_by_reason(tmp_path, capsys):
    db = str(tmp_path / "gap.duckdb")
    sim, real = _set(tmp_path / "sim"), _set(tmp_path / "real", bgr=True, bad=False)
    assert cli.main(["index", str(sim), "--set", "sim", "--domain", "sim", "--db", db]) == 0
    lines = _skip_lines(capsys.readouterr().out)
    assert len(lines) == 2, lines
    assert re.fullmatch(r"skipped 25 frames: .+: cut00\.png, cut01\.png, cut02\.png, \.\.\. \(in .+sim\)", lines[0]), lines
    assert re.fullmatch(r"skipped 3 frames: zero-byte file: empty0\.png, empty1\.png, empty2\.png \(in .+sim\)",
                        lines[1]), lines
    assert cli.main(["index", str(real), "--set", "real", "--domain", "real", "--db", db, "--quiet"]) == 0

    js = tmp_path / "stats.json"
    assert cli.main(["stats", "--sim", "sim", "--real", "real", "--db", db, "--json", str(js)]) == 0
    assert _skip_lines(capsys.readouterr().out) == lines
    assert len(json.loads(js.read_text())["sets"]["sim"]["skipped"]) == 28  # the full list stays in the JSON

    out = tmp_path / "out"
    assert cli.main(["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--out", str(out), "--db", db,
                     "--quiet"]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    table = html[html.index('<table id="skipped">'):]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 3, table  # the header and one row per reason
    assert '<td class="n">25</td>' in table and '<td class="n">3</td>' in table
    assert "Skipped frames (28)" in html
    assert len(json.loads((out / "results.json").read_text())["sets"]["sim"]["skipped"]) == 28


def test_a_report_of_many_reasons_lists_the_largest_groups_and_counts_the_rest():
    """1,086 skips over 300 reasons: the report's table stops at its cap of rows and says how many
    frames and reasons it left out."""
    skipped = [{"path": f"/data/sim/ep{i % 7}/f{i:04d}.png", "status": "unreadable", "reason": f"reason {i % 300}"}
               for i in range(1086)]
    res = {"findings": [], "encoders": [], "config": {"sim": "sim", "real": "real"},
           "sets": {"sim": {"domain": "sim", "role": "sim", "n_frames": 1100, "n_usable": 14, "n_skipped": 1086,
                            "skipped": skipped},
                    "real": {"domain": "real", "role": "real", "n_frames": 10, "n_usable": 10, "n_skipped": 0,
                             "skipped": []}}}
    html = render_report(res)
    table = html[html.index('<table id="skipped">'):]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 1 + 200
    # 300 reasons: 186 of 4 frames, 114 of 3; the 200 largest shown (786 frames), 100 of 3 left out
    assert "and 300 more skipped frames for 100 other reasons not listed" in html
    assert "Skipped frames (1,086)" in html


def test_groups_count_repeats_and_name_the_shared_folder():
    got = skip_groups([("/d/a/x1.png", "bad"), ("/d/b/x2.png", "bad"), ("/d/a/y.png", "empty"),
                       {"path": "/d/a/x3.png", "reason": "bad"}, {"path": "m.png", "reason": "listed again", "repeats": 5}])
    assert [(g["reason"], g["count"]) for g in got] == [("listed again", 5), ("bad", 3), ("empty", 1)]
    assert got[1]["folder"] == "/d" and got[1]["examples"] == ["a/x1.png", "b/x2.png", "a/x3.png"]
    assert skip_line(got[1]) == "3 frames: bad: a/x1.png, b/x2.png, a/x3.png (in /d)"
    assert skip_line(got[2]) == "1 frame: empty: y.png (in /d/a)"
    assert skip_line(got[0]) == "5 frames: listed again: m.png, ..."
