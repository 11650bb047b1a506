"""Every report is drawn in the same page: the analysis report (of `stats`), an evaluation report
(`rollouts`) and a geometry report (`replay`), each made through the API from small inputs, carry
the same Content-Security-Policy and styles, no script, and a hostile name escaped; in a headless
Chromium each loads without a console message or a request."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import perception_gap as pg
from tests.test_report import console_lines, page_requests

# an attribute breakout, a tag and an event handler; no slash, so it can also be a file name
HOSTILE = '"><img src=x onerror=alert(1)>'
ESCAPED = "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"
POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def _analysis_report(tmp: Path) -> Path:
    """The analysis report of `stats` on 6 + 6 noise frames; the set names and a skipped file's are hostile."""
    rng = np.random.default_rng(0)
    cat = pg.open_catalog(tmp / "gap.duckdb")
    for domain, gain in (("sim", 0.6), ("real", 1.0)):
        folder = tmp / domain
        folder.mkdir()
        for i in range(6):
            Image.fromarray((rng.uniform(0, 255, (32, 40, 3)) * gain).astype(np.uint8)).save(folder / f"f{i}.png")
        (folder / f"bad{HOSTILE}.png").write_bytes(b"not an image")
        pg.index_folder(cat, folder, f"{domain}{HOSTILE}", domain)
    res = pg.stats(cat, f"sim{HOSTILE}", f"real{HOSTILE}", workers=1)
    cat.close()
    return pg.write_outputs(res, tmp / "stats")


def _rollouts_report(tmp: Path) -> Path:
    path = tmp / "rollouts.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["policy", "task", "domain", "success"])
        for domain, wins in (("sim", 8), ("real", 3)):
            w.writerows([f"ckpt{HOSTILE}", "pick", domain, int(k < wins)] for k in range(10))
    pg.rollouts(path, max_drop=0.2, out=tmp / "rollouts")
    return tmp / "rollouts" / "report.html"


def _replay_report(tmp: Path) -> Path:
    path = tmp / "replay.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["episode", "step", "domain", "x", "y", "z", "qw", "qx", "qy", "qz"])
        for step in range(12):
            for domain in ("sim", "real"):
                x = 0.01 * step + (0.003 * max(0, step - 4) if domain == "real" else 0.0)
                w.writerow([f"ep{HOSTILE}", step, domain, x, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0])
    pg.replay(path, max_translation_m=0.05, out=tmp / "replay")
    return tmp / "replay" / "report.html"


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("pages")
    return {"stats": _analysis_report(tmp), "rollouts": _rollouts_report(tmp), "replay": _replay_report(tmp)}


def _tags(html: str) -> list[tuple[str, dict[str, str]]]:
    """Every start tag and its attributes, as a browser-like parser sees them."""
    from html.parser import HTMLParser

    found: list[tuple[str, dict[str, str]]] = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, {a: v or "" for a, v in attrs}))

    P().feed(html)
    return found


def _style(html: str) -> str:
    (style,) = re.findall(r"<style>(.*?)</style>", html, flags=re.S)
    return style


@pytest.mark.parametrize("name", ["stats", "rollouts", "replay"])
def test_page_has_the_policy_the_shell_no_script_and_hostile_names_escaped(pages, name):
    text = pages[name].read_text(encoding="utf-8")
    tags = _tags(text)
    metas = [a for t, a in tags if t == "meta" and a.get("http-equiv", "").lower() == "content-security-policy"]
    assert [m["content"] for m in metas] == [POLICY]
    assert text.index("Content-Security-Policy") < text.index("<style>") < text.index("<body>")
    assert [t for t, _ in tags if t in ("header", "h1", "nav", "footer")] == ["header", "h1", "nav", "footer"]
    assert f"perception-gap {pg.__version__}" in text
    assert "script" not in {t for t, _ in tags} and not re.search(r"(?i)<script", text)
    assert [(t, a) for t, attrs in tags for a in attrs if a.startswith("on")] == []
    srcs = [a[k] for _, a in tags for k in ("src", "href") if k in a]
    assert all(s.startswith(("data:image/", "#")) for s in srcs), [s[:40] for s in srcs]
    assert HOSTILE not in text and ESCAPED in text


def test_one_stylesheet_for_every_report(pages):
    html = {k: p.read_text(encoding="utf-8") for k, p in pages.items()}
    assert len({_style(t) for t in html.values()}) == 1
    assert "Replay" in html["replay"] and "Success rates" in html["rollouts"] and 'id="stats-table"' in html["stats"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_every_report_loads_in_a_browser_without_console_messages_or_requests(pages, tmp_path):
    for name, page in pages.items():
        net = tmp_path / f"{name}.netlog.json"
        r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                            "--disable-component-update", "--disable-sync", "--no-first-run",
                            f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                            f"--log-net-log={net}", "--dump-dom", page.as_uri()],
                           capture_output=True, text=True, timeout=60, check=False)
        assert console_lines(r.stderr) == [] and page_requests(net) == [], name
        dom_tags = _tags(r.stdout)
        assert [a for t, a in dom_tags if t == "img" and not a.get("src", "").startswith("data:image/")] == [], name
        assert "<footer" in r.stdout, name
