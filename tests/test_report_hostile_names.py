"""Hostile content end to end: set names, file names, tags, a detector name and COCO categories
carrying markup reach the run and drift reports escaped, and a real browser loading them runs,
logs and fetches nothing."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.cli_process import clean
from tests.in_process import here
from tests.scenes import render, scenes

XSS = '"><script>console.error("XSS-script")</script><img src=x onerror=console.error("XSS-img")>'
XSS_FILE = '"><img src=x onerror=console.error("XSS-file")>'  # no "/" in a file name


def _hostile_world(tmp: Path, capfd) -> tuple[Path, str, str, str]:
    """Paired sets whose set names, file names, tags, detector name and COCO categories carry markup."""
    sim, real, det = "sim" + XSS, "real" + XSS, "det" + XSS
    db = tmp / "c.duckdb"
    rng = np.random.default_rng(3)
    for folder, name, dom, gain in (("s", sim, "sim", 1.0), ("r", real, "real", 0.8)):
        (tmp / folder / "ep0").mkdir(parents=True)
        for i, s in enumerate(scenes(10, h=48, w=64, seed=21)):
            Image.fromarray(render(s, gain, 0.01, rng)).save(tmp / folder / "ep0" / f"{XSS_FILE}{i}.png")
        (tmp / folder / "ep0" / f"{XSS_FILE}_broken.png").write_bytes(b"")  # a skipped, listed file
        p = here(capfd, "index", tmp / folder, "--set", name, "--domain", dom, "--tags", "t" + XSS.replace(",", ";"),
                "--db", db, "-q")
        assert p.returncode == 0, p.stderr
        coco = {"images": [{"id": i, "file_name": f"{XSS_FILE}{i}.png", "width": 64, "height": 48} for i in range(10)],
                "categories": [{"id": 1, "name": "cat" + XSS}],
                "annotations": [{"id": i, "image_id": i, "category_id": 1, "bbox": [10, 10, 20, 15]} for i in range(10)]}
        (tmp / f"{folder}_gt.json").write_text(json.dumps(coco))
        dets = dict(coco, annotations=[dict(a, score=0.9, bbox=[11 + (dom == "real") * 6, 10, 20, 15])
                                       for a in coco["annotations"]])
        (tmp / f"{folder}_det.json").write_text(json.dumps(dets))
        for src, f in (("gt", f"{folder}_gt.json"), (det, f"{folder}_det.json")):
            p = here(capfd, "index", "--coco", tmp / f, "--set", name, "--source", src, "--db", db, "-q")
            assert p.returncode == 0, p.stderr
    return db, sim, real, det


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_hostile_names_end_to_end_are_escaped_and_run_nothing_in_a_browser(tmp_path, capfd):
    from tests.test_report import _page_load_audit

    db, sim, real, det = _hostile_world(tmp_path, capfd)
    p = here(capfd, "run", "--sim", sim, "--real", real, "--encoders", "pixel", "--out", tmp_path / "out", "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert det in res["detection"]["sets"][sim]
    pages = [tmp_path / "out" / "report.html"]
    p = here(capfd, "drift", "--baseline", real, "--current", sim, "--encoders", "pixel", "--out", tmp_path / "drift",
             "--db", db)
    clean(p)
    assert p.returncode in (0, 1), p.stderr
    pages.append(tmp_path / "drift" / "report.html")
    for page in pages:
        html = page.read_text()
        console, urls, dom = _page_load_audit(tmp_path, page)
        assert console == [] and urls == [], (page, console, urls)  # nothing ran, logged or fetched
        for doc in (html, dom):
            assert re.findall(r"(?i)<script", doc) == [], page
            assert re.findall(r"(?i)<img[^>]*onerror", doc) == [], page
        assert "&lt;script&gt;console.error(" in html  # shown as text
    html = pages[0].read_text()
    for shown in ("sim&#34;&gt;&lt;script&gt;", "det&#34;&gt;&lt;script&gt;", "cat&#34;&gt;&lt;script&gt;",
                  "t&#34;&gt;&lt;script&gt;", "&#34;&gt;&lt;img src=x onerror=console.error(&#34;XSS-file&#34;)&gt;"):
        assert shown in html, shown  # set, detector, category, tag and file names all reach the page, escaped
