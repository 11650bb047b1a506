"""The report in a real headless Chromium at 1,280 px: the demo's report and a report of real frames.

Each page is loaded once with an audit script added (allowed by a CSP hash, the page's own policy
otherwise unchanged) that opens every <details>, then records any table wider than its container or
the page, any image that did not decode, and the page's scroll width. Chromium's own log gives the
console messages, its NetLog the requests. A screenshot of each page is kept for review under
$CI_ARTEFACTS (default reports/artefacts/, git-ignored).
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


def _instrumented(html: str) -> str:
    digest = base64.b64encode(hashlib.sha256(AUDIT.encode()).digest()).decode()
    assert "default-src 'none';" in html
    html = html.replace("default-src 'none';", f"default-src 'none'; script-src 'sha256-{digest}';", 1)
    return html.replace("</body>", f"<script>{AUDIT}</script></body>", 1)


def _chromium(profile: Path, page: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--window-size={WIDTH},2400", *extra, page.as_uri()]
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
    audit = json.loads(dom[dom.index('id="pg-audit">') + len('id="pg-audit">'):].split("</pre>")[0]
                       .replace("&quot;", '"').replace("&amp;", "&"))
    shots = Path(os.environ.get("CI_ARTEFACTS") or REPO / "reports" / "artefacts")
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report-{name}-{WIDTH}.png"
    _chromium(tmp / "profile", page, f"--screenshot={shot}")
    return {"console": console, "urls": urls, "audit": audit, "shot": shot, "html": page.read_text()}


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
    """The built-in demo (small), indexed with its boxes and run with the pixel encoder, audited."""
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
    assert cli.main(["run", "--sim", files.sim_set, "--real", files.real_set, "--encoders", "pixel",
                     "--out", str(tmp / "out"), *db]) == 0
    return _audit(tmp, json.loads((tmp / "out" / "results.json").read_text()), "demo")


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
