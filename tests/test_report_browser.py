"""The report in a real headless Chromium at 1,280 px: the demo's report and a report of real frames.

Each page is loaded once with an audit script added (allowed by a CSP hash, the page's own policy
otherwise unchanged) that opens every <details>, then records any table wider than its container or
the page, any image that did not decode, and the page's scroll width. Chromium's own log gives the
console messages, its NetLog the requests. A screenshot of each page is kept for review under
$CI_ARTEFACTS (default reports/artefacts/, git-ignored).

The demo's encoder ranking is also read as a person opening the report would see it: loaded as
shipped (details closed) in a 1280 x 800 window, a second script records the ranking table's box,
its column headers, each row's cells and the box of every line of text in its cells; a screenshot
of the first two screens shows the table's pixels.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perception_gap.reports import write_report
from tests.test_report import console_lines, page_requests

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
WIDTH = 1280
SCREEN = 800  # one screen of a 1280 x 800 laptop display, CSS pixels
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")

AUDIT = """window.addEventListener('load', function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  var W = document.documentElement.clientWidth, out = {width: W, scroll: document.documentElement.scrollWidth,
      tables: [], broken: [], n_images: document.images.length, n_tables: 0};
  document.querySelectorAll('table').forEach(function (t, i) {
    out.n_tables += 1;
    var p = t.parentElement, r = t.getBoundingClientRect();
    if (r.right > W + 1 || p.scrollWidth > p.clientWidth + 1 || t.scrollWidth > t.clientWidth + 1)
      out.tables.push((t.id || 'table' + i) + ' right=' + Math.round(r.right) + ' page=' + W);
  });
  Array.prototype.forEach.call(document.images, function (im) {
    if (!(im.complete && im.naturalWidth > 0)) out.broken.push(im.alt);
  });
  var pre = document.createElement('pre'); pre.id = 'pg-audit'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});"""


# The ranking as shipped (details closed): the table's page box, its headers and rows as read, cells whose
# content is wider than the cell (clipped), text lines that leave their cell, text lines of two cells that
# overlap, and text set below 9 px. Only the table's own cells: a closed <details> lays out nothing.
RANKING = """window.addEventListener('load', function () {
  var out = {width: document.documentElement.clientWidth, found: false};
  var t = document.getElementById('ranking');
  if (t) {
    var box = t.getBoundingClientRect(), lines = [];
    out.found = true;
    out.box = {top: box.top + window.scrollY, bottom: box.bottom + window.scrollY, left: box.left, right: box.right};
    out.row_bottoms = Array.prototype.map.call(t.rows, function (tr) {
      return tr.getBoundingClientRect().bottom + window.scrollY; });
    out.headers = Array.prototype.map.call(t.rows[0].cells, function (c) { return c.innerText.trim(); });
    out.rows = Array.prototype.map.call(t.querySelectorAll('tr.enc-row'), function (tr) {
      return Array.prototype.map.call(tr.cells, function (c) { return c.innerText.trim(); }); });
    out.clipped = []; out.outside = []; out.overlaps = []; out.small = [];
    Array.prototype.forEach.call(t.rows, function (tr, ri) {
      Array.prototype.forEach.call(tr.cells, function (c, ci) {
        var cr = c.getBoundingClientRect(), w = document.createTreeWalker(c, NodeFilter.SHOW_TEXT), n;
        if (c.scrollWidth > c.clientWidth + 1) out.clipped.push(c.innerText.trim().slice(0, 40));
        while ((n = w.nextNode())) {
          var owner = n.parentElement, text = n.textContent.trim().slice(0, 40);
          if (!text || owner.closest('td, th') !== c) continue;
          var size = parseFloat(getComputedStyle(owner).fontSize), rg = document.createRange();
          rg.selectNodeContents(n);
          Array.prototype.forEach.call(rg.getClientRects(), function (q) {
            if (q.width < 0.5 || q.height < 0.5) return;
            if (size < 9) out.small.push(text + ' ' + size + 'px');
            if (q.left < cr.left - 1 || q.right > cr.right + 1 || q.top < cr.top - 1 || q.bottom > cr.bottom + 1)
              out.outside.push(text);
            lines.push({cell: ri + ':' + ci, l: q.left, r: q.right, t: q.top, b: q.bottom, text: text});
          });
        }
      });
    });
    lines.forEach(function (p, a) { lines.slice(a + 1).forEach(function (q) {
      if (p.cell !== q.cell && Math.min(p.r, q.r) - Math.max(p.l, q.l) > 1 && Math.min(p.b, q.b) - Math.max(p.t, q.t) > 1)
        out.overlaps.push(p.text + ' / ' + q.text);
    }); });
    out.n_lines = lines.length;
  }
  var pre = document.createElement('pre'); pre.id = 'pg-ranking'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});"""


def _instrumented(html: str, script: str = AUDIT) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert "default-src 'none';" in html
    html = html.replace("default-src 'none';", f"default-src 'none'; script-src 'sha256-{digest}';", 1)
    return html.replace("</body>", f"<script>{script}</script></body>", 1)


def _read_pre(dom: str, ident: str) -> dict:
    text = dom[dom.index(f'id="{ident}">') + len(f'id="{ident}">'):].split("</pre>")[0]
    for entity, char in (("&quot;", '"'), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return json.loads(text)


def _chromium(profile: Path, page: Path, *extra: str, height: int = 2400) -> subprocess.CompletedProcess:
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size={WIDTH},{height}", *extra, page.as_uri()]
    return subprocess.run(args, capture_output=True, text=True, timeout=90, check=False)


def _audit(tmp: Path, results: dict, name: str) -> dict:
    """Render, load once instrumented (console, requests, layout), screenshot the plain page."""
    page = write_report(results, tmp / f"{name}.html")
    probe = tmp / f"{name}.audit.html"
    probe.write_text(_instrumented(page.read_text(encoding="utf-8")), encoding="utf-8")
    net = tmp / f"{name}.netlog.json"
    r = _chromium(tmp / "profile", probe, "--enable-logging=stderr", "--v=0", f"--log-net-log={net}",
                  "--virtual-time-budget=5000", "--dump-dom")
    console, urls, dom = console_lines(r.stderr), page_requests(net), r.stdout
    audit = _read_pre(dom, "pg-audit")
    shots = Path(os.environ.get("CI_ARTEFACTS") or REPO / "reports" / "artefacts")
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report-{name}-{WIDTH}.png"
    _chromium(tmp / "profile", page, f"--screenshot={shot}")
    return {"console": console, "urls": urls, "audit": audit, "shot": shot, "html": page.read_text(), "page": page}


def _ranking(tmp: Path, page: Path, name: str) -> dict:
    """The ranking as shipped in a 1280 x 800 window (RANKING's record), and a screenshot of two screens."""
    probe = tmp / f"{name}.ranking.html"
    probe.write_text(_instrumented(page.read_text(encoding="utf-8"), RANKING), encoding="utf-8")
    layout = _read_pre(_chromium(tmp / "profile", probe, "--virtual-time-budget=5000", "--dump-dom",
                                 height=SCREEN).stdout, "pg-ranking")
    shots = Path(os.environ.get("CI_ARTEFACTS") or REPO / "reports" / "artefacts")
    shot = shots / f"report-{name}-ranking-{WIDTH}x{2 * SCREEN}.png"
    _chromium(tmp / "profile", page, f"--screenshot={shot}", height=2 * SCREEN)
    return {"layout": layout, "shot": shot}


def _cli():
    sys.path.insert(0, str(REPO))
    from perception_gap import cli

    return cli


@pytest.fixture(scope="module")
def real_frames(tmp_path_factory, shared_data) -> dict:
    """`run` on the SimplerEnv sim renders vs real Google-robot frames (pixel encoder), audited."""
    cli = _cli()
    tmp = tmp_path_factory.mktemp("real")
    db = str(tmp / "t.duckdb")
    for name, folder, domain in (("sim", "sim", "sim"), ("real", "real/fractal", "real")):  # 10 vs 19 frames
        assert cli.main(["index", str(shared_data / "simpler" / folder), "--set", f"simpler_{name}",
                         "--domain", domain, "--db", db, "-q"]) == 0
    assert cli.main(["run", "--sim", "simpler_sim", "--real", "simpler_real", "--encoders", "pixel",
                     "--out", str(tmp / "out"), "--db", db, "-q"]) == 0
    return _audit(tmp, json.loads((tmp / "out" / "results.json").read_text()), "real-frames")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict:
    """The built-in demo (small), indexed with its boxes and run with the pixel encoder and
    efficientnet-lite0 (when its weights are installed), audited."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        from perception_gap.demo import build_demo

        cli = _cli()
        tmp = tmp_path_factory.mktemp("demo")
        files = build_demo(tmp / "data", n_episodes=2, steps=4, size=(96, 72))
    except (ImportError, OSError, RuntimeError) as e:  # no offscreen GL here: the demo cannot be built, say so
        pytest.skip(f"demo cannot render here: {e}")
    db = ["--db", str(tmp / "t.duckdb"), "-q"]
    assert cli.main(["index", "--manifest", str(files.manifest), *db]) == 0
    assert cli.main(["index", "--coco", str(files.sim_coco), "--set", files.sim_set, "--source", "colour", *db]) == 0
    assert cli.main(["index", "--coco", str(files.real_coco), "--set", files.real_set, "--source", "colour", *db]) == 0
    from perception_gap.embed import default_encoders

    encoders = [n for n in ("efficientnet-lite0", "pixel") if n in default_encoders()]
    assert cli.main(["run", "--sim", files.sim_set, "--real", files.real_set, "--encoders", ",".join(encoders),
                     "--out", str(tmp / "out"), *db]) == 0
    got = _audit(tmp, json.loads((tmp / "out" / "results.json").read_text()), "demo")
    return {**got, "encoders": encoders, "ranking": _ranking(tmp, got["page"], "demo")}


def test_audit_catches_overflow_and_broken_images(tmp_path):
    """Known answer for the audit: a too-wide table and an undecodable image are both reported."""
    page = tmp_path / "bad.html"
    page.write_text("<html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                    "img-src data:; style-src 'unsafe-inline'\"></head><body><table id=\"wide\"><tr><td>"
                    + "x" * 400 + "</td></tr></table><img alt=\"bad\" src=\"data:image/png;base64,AAAA\"></body></html>")
    probe = tmp_path / "probe.html"
    probe.write_text(_instrumented(page.read_text()))
    dom = _chromium(tmp_path / "profile", probe, "--virtual-time-budget=5000", "--dump-dom").stdout
    audit = json.loads(dom.split('id="pg-audit">')[1].split("</pre>")[0].replace("&quot;", '"'))
    assert audit["tables"] and audit["tables"][0].startswith("wide") and audit["broken"] == ["bad"]
    assert audit["scroll"] > audit["width"] == WIDTH


def test_ranking_probe_catches_clipped_overlapping_and_tiny_text(tmp_path):
    """Known answer for the ranking probe: a cell whose text is cut off by its width, a line pushed into the
    next cell, and 7 px text are each reported."""
    page = tmp_path / "bad.html"
    page.write_text("<html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
                    "style-src 'unsafe-inline'\"></head><body><table id=\"ranking\" style=\"table-layout:fixed;"
                    "width:300px\"><tr><th style=\"width:100px\">gap</th><th style=\"width:200px\">probe</th></tr>"
                    "<tr class=\"enc-row\"><td style=\"overflow:hidden;white-space:nowrap\">" + "clipped " * 10
                    + "</td><td><span style=\"position:relative;left:-60px\">pushed</span> "
                    "<span style=\"font-size:7px\">tiny</span></td></tr></table></body></html>")
    probe = tmp_path / "probe.html"
    probe.write_text(_instrumented(page.read_text(), RANKING))
    lay = _read_pre(_chromium(tmp_path / "profile", probe, "--virtual-time-budget=5000", "--dump-dom",
                              height=SCREEN).stdout, "pg-ranking")
    assert lay["clipped"] and lay["clipped"][0].startswith("clipped")
    assert "pushed" in lay["outside"] and any("pushed" in o for o in lay["overlaps"])
    assert lay["small"] == ["tiny 7px"] and lay["headers"] == ["gap", "probe"]


@pytest.mark.parametrize("which", ["demo", "real_frames"])
def test_report_fits_1280_loads_every_image_quietly_offline(which, request):
    got = request.getfixturevalue(which)
    a = got["audit"]
    assert a["width"] == WIDTH
    assert a["tables"] == [] and a["scroll"] <= WIDTH  # no table overflows, the page never scrolls sideways
    assert a["n_images"] >= 4 and a["broken"] == []
    assert a["n_tables"] >= 5
    assert got["console"] == [] and got["urls"] == []
    assert got["shot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_ranking_reads_at_a_glance(demo):
    """On the demo's report at 1280 px, as shipped: the ranking table (header and every encoder row) lies
    within the first two screens, its columns say what they rank on and which way is better, no text is
    clipped, leaves its cell or overlaps another cell's, and the probe column shows a value for two encoders;
    the screenshot of those two screens holds the table's ink."""
    import numpy as np
    from PIL import Image

    if len(demo["encoders"]) < 2:
        pytest.skip("efficientnet-lite0 weights not installed: one encoder only")
    lay = demo["ranking"]["layout"]
    assert lay["found"] and lay["width"] == WIDTH
    box = lay["box"]
    assert box["bottom"] <= 2 * SCREEN and lay["row_bottoms"][-1] <= 2 * SCREEN, box
    assert box["left"] >= 0 and box["right"] <= WIDTH
    headers = [h.lower() for h in lay["headers"]]
    gap = next(h for h in headers if h.startswith("gap above noise floor"))
    probe = next(h for h in headers if h.startswith("probe r"))
    assert "ranked on" in gap and "lower is better" in gap
    assert "ranked on" in probe and "higher is better" in probe and "held out" in probe
    assert any("noise floor" in h and "ranked on" not in h for h in headers)
    assert any("auc" in h and "not ranked on" in h for h in headers)
    assert (lay["clipped"], lay["outside"], lay["overlaps"], lay["small"]) == ([], [], [], [])
    assert lay["n_lines"] >= 2 * len(headers)
    names = [r[headers.index("encoder")] for r in lay["rows"]]
    assert sorted(names) == sorted(demo["encoders"])
    shown = [r[headers.index(probe)] for r in lay["rows"]]
    assert sum(any(ch.isdigit() for ch in v) or "worse than predicting the mean" in v for v in shown) >= 2, shown
    # the pixels: the table's box in the screenshot of the first two screens is not blank, and it has ink
    # (dark text) in every encoder row
    shot = np.asarray(Image.open(demo["ranking"]["shot"]).convert("L"), dtype=np.float64)
    assert shot.shape == (2 * SCREEN, WIDTH)
    top, left, right = int(box["top"]), int(box["left"]), int(box["right"])
    edges = [top] + [int(b) for b in lay["row_bottoms"]]
    for y0, y1 in zip(edges[:-1], edges[1:]):
        band = shot[y0:y1, left:right]
        assert band.size and (band < 100).mean() > 0.005, (y0, y1)


# Every key-value table (a finding's evidence, an encoder's details) against its container's content
# box, to a hundredth of a pixel (the audit above allows 1 px): its cells' right edges, each cell's own
# overflow, and the container's scroll width.
KV_AUDIT = """window.addEventListener('load', function () {
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  var out = {n: 0, over: []};
  document.querySelectorAll('table.evidence, table.kv').forEach(function (t, i) {
    var p = t.parentElement, pr = p.getBoundingClientRect(), cs = getComputedStyle(p);
    var inner = pr.right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth);
    var far = t.getBoundingClientRect().right;
    out.n += 1;
    t.querySelectorAll('td, th').forEach(function (c) {
      far = Math.max(far, c.getBoundingClientRect().right);
      if (c.scrollWidth > c.clientWidth) out.over.push(t.className + i + ' cell ' + c.innerText.slice(0, 30));
    });
    if (far > inner + 0.01) out.over.push(t.className + i + ' by ' + (far - inner).toFixed(2) + ' px');
    if (p.scrollWidth > p.clientWidth) out.over.push(t.className + i + ' container scrolls');
  });
  var pre = document.createElement('pre'); pre.id = 'pg-kv'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});"""


def _kv_audit(tmp: Path, page: Path) -> dict:
    probe = tmp / "kv.html"
    probe.write_text(_instrumented(page.read_text(encoding="utf-8"), KV_AUDIT), encoding="utf-8")
    return _read_pre(_chromium(tmp / "kv-profile", probe, "--virtual-time-budget=5000", "--dump-dom").stdout, "pg-kv")


def test_key_value_tables_stay_in_their_box_at_1280(real_frames, tmp_path):
    """No evidence or encoder-details table reaches past its container at 1,280 px, in the report of real
    frames and in one whose evidence holds long unbroken words (a hash-named file's key, a path value)."""
    from tests.test_report import make_results

    got = _kv_audit(tmp_path, real_frames["page"])
    assert got["n"] >= 1 and got["over"] == [], got
    res = make_results()
    res["findings"][0]["evidence"]["per_file"] = {"0123456789abcdef" * 12: 0.25, "ok": 1.0}
    res["findings"][0]["evidence"]["file"] = "/data/" + "x" * 300 + ".png"
    res["encoders"][0]["family"] = "imagenet-" + "y" * 200
    got = _kv_audit(tmp_path, write_report(res, tmp_path / "long.html"))
    assert got["n"] >= 3 and got["over"] == [], got
