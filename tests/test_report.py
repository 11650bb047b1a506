"""The HTML report: self-contained, bounded in size, escaped, and rendering in a real browser."""

from __future__ import annotations

import base64
import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap.reports import render_report, write_report
from perception_gap.reports.format import ci, num, r2

REPO = Path(__file__).resolve().parents[1]
SCRIPT = '"><script>document.title="PWNED"</script>'
IMG = '<img src=x onerror="document.title=\'PWNED\'">'
HOSTILE = SCRIPT + IMG
COCO = ("AP", "AP50", "AP75", "APsmall", "APmedium", "APlarge",
        "AR1", "AR10", "AR100", "ARsmall", "ARmedium", "ARlarge")


def _stats(name: str, domain: str, shift: float) -> dict:
    return {
        "name": name, "domain": domain, "n_frames": 60, "n_images": 60, "n_depth": 60,
        "sizes": {"320x256": 50, "640x480": 10}, "dtypes": {"uint8": 60}, "modes": {"RGB": 60},
        "jpeg_fraction": 0.0, "channels": 3, "channel_mean": [80.0 + shift, 60.0, 40.0],
        "channel_std": [40.0, 35.0, 30.0], "channel_min": [0.0, 0.0, 0.0], "channel_max": [255.0, 255.0, 250.0],
        "lum_percentiles": {"p1": 1.0, "p5": 4.0, "p50": 69.0 + shift, "p95": 118.0, "p99": 141.0},
        "lum_mean": 64.5 + shift, "lin_mean": [0.11, 0.06, 0.03], "sharpness": 0.0017, "hf_ratio": 2.46,
        "grad_ratio": 2.05, "dup_frac": 0.17, "blockiness": 1.05, "nonfinite_frac": 0.0,
        "depth": {"dtypes": {"uint16": 60}, "inferred_units": {"mm": 60}, "declared_units_per_m": [],
                  "percentiles": {"p1": 0.4, "p50": 1.2, "p99": 3.1}, "dropout_mean": 0.02, "dropout_max": 0.11},
        "action": {"n": 60, "dim": 2, "inconsistent_length": 0, "min": [-1.0, -0.5], "max": [1.0, 0.5],
                   "mean": [0.0, 0.0], "std": [0.3, 0.2]},
        "proprio": None,
    }


def _encoder(name: str, rank: int, front: bool, family: str = "imagenet") -> dict:
    e = {
        "name": name, "family": family, "dim": 1280, "fingerprint": "7d5b55e0",
        "preprocessing": {"size": [224, 224], "interpolation": "bicubic", "mean": [0.5] * 3, "std": [0.5] * 3},
        "n_sim": 60, "n_real": 60, "centroid_distance": 0.318, "centroid_distance_norm": 0.0562551,
        "centroid_distance_norm_ci": {"low": 0.0388912, "high": 0.0942373, "level": 0.95, "n_boot": 1000},
        "noise_floor": 0.0813979, "noise_floor_method": "episodes",
        "paired_cosine": {"mean": 0.0911, "median": 0.0934, "p90": 0.1328, "shuffled_mean": 0.5363, "n_pairs": 60},
        "domain_auc": 0.96889, "mmd": {"value": 0.02706, "p_value": 0.4776, "bandwidth": 16.6, "n_permutations": 200},
        "probe": {"target": "action", "sim_to_sim": 0.81, "real_to_real": 0.77, "sim_to_real": 0.42 + 0.1 * rank,
                  "transfer_drop": 0.39 - 0.1 * rank, "r2_display_floor": -1.0,
                  "transfer_drop_ci": {"low": 0.21 - 0.1 * rank, "high": 0.47 - 0.1 * rank, "level": 0.95}},
        "frechet_distance": {"value": 41.2345, "ci": {"low": 35.01, "high": 48.9, "level": 0.95}},
        "kid": {"value": 0.012345, "ci": {"low": 0.00811, "high": 0.01702, "level": 0.95}},
        "rank": rank, "insufficient": {}, "skipped": [], "pareto_front": front, "gap_above_floor": -0.0251 + rank / 10,
    }
    if family == "clip":
        e["paired_cosine"]["clip_band"] = "watch"
    return e


def make_results(sim: str = "sim", real: str = "real", *, path: str = "ep0/f001.png", encoder: str = "efficientnet-lite0",
                 category: str = "mug", title: str = "Sim is 0.72 stops (64%) darker than real.") -> dict:
    """A results dict with the structure `run` writes (see /tmp run example), detection included."""
    summ = {k: round(0.3 + 0.01 * i, 4) for i, k in enumerate(COCO)}
    det_set = {"yolo": {**summ, "per_class_ap": {category: 0.512, "bowl": None}, "n_images": 40, "n_gt": 90,
                        "n_dets": 120}}
    return {
        "version": "0.1.0",
        "config": {"sim": sim, "real": real, "encoders": [encoder, "pixel"], "device": "auto", "batch_size": 32,
                   "random_state": 0},
        "sets": {
            sim: {"name": sim, "domain": "sim", "tags": None, "n_frames": 60, "n_usable": 59, "n_skipped": 1,
                  "skipped": [{"path": path, "status": "unreadable", "reason": "truncated PNG"}], "role": "sim"},
            real: {"name": real, "domain": "real", "tags": None, "n_frames": 60, "n_usable": 60, "n_skipped": 0,
                   "skipped": [], "role": "real"},
        },
        "pairs": {"n_pairs": 60, "n_unpaired_sim": 0, "n_unpaired_real": 0, "unpaired_sim": [], "unpaired_real": []},
        "stats": {sim: _stats(sim, "sim", 0.0), real: _stats(real, "real", 18.0)},
        "findings": [
            {"code": "brightness", "severity": "gap", "title": title,
             "evidence": {"basis": "pairs", "n_pairs": 59, "stops_sim_minus_real": -0.7154, "stops_iqr": [-0.72, -0.71],
                          "file": path},
             "action": "Randomize light intensity / exposure by at least \u00b10.8 stops.", "score": 2.38},
            {"code": "detector_gap", "severity": "gap", "title": f"Detector 'yolo' worse on real ({category})",
             "evidence": {"source": "yolo", "ci": {"low": 0.05, "high": 0.2}}, "action": "Fine-tune the detector.",
             "score": 0.1},
        ],
        "encoders": [_encoder(encoder, 1, True), _encoder("open_clip:ViT-B-32:laion2b", 2, False, "clip")],
        "detection": {
            "sets": {sim: det_set, real: copy.deepcopy(det_set)},
            "differences": {"yolo": {"estimate": 0.1234, "low": 0.0512, "high": 0.2049, "level": 0.95, "ap_sim": 0.41,
                                     "ap_real": 0.29, "n_pairs": 40, "n_boot": 1000, "n_valid": 1000,
                                     "method": "paired percentile bootstrap over pairs"}},
            "flips": {"yolo": {"n_pairs": 40, "n_objects": 80, "n_unmatched_sim": 0, "n_unmatched_real": 1,
                               "found_both": 50, "sim_only": 17, "real_only": 3, "missed_both": 10,
                               "sim_only_rate": 0.2125, "real_only_rate": 0.0375, "recall_sim": 0.84,
                               "recall_real": 0.66, "iou": 0.5, "score_threshold": 0.3,
                               "examples": [{"sim_key": path, "real_key": path, "kind": "sim_only",
                                             "category": category, "bbox_sim": [1, 2, 30, 40],
                                             "bbox_real": [2, 2, 31, 40]}]}},
            "latching": {real: {"yolo": {"n_images": 40, "n_detections": 120, "n_true_positive": 90,
                                         "n_false_positive": 30, "latching": 7, "wrong_class": 5, "duplicate": 4,
                                         "localization": 6, "background": 8, "latching_rate": 0.058,
                                         "wrong_class_rate": 0.041, "iou": 0.5, "score_threshold": 0.3,
                                         "examples": [{"key": path, "kind": "latching", "category": category,
                                                       "bbox": [1, 1, 5, 5], "score": 0.9, "gt_category": category,
                                                       "gt_bbox": [1, 1, 6, 6], "iou": 0.6}]}}},
        },
        "run_id": 3,
    }


def hostile_results() -> dict:
    return make_results(sim="sim" + HOSTILE, real="real" + IMG, path="ep/" + HOSTILE + ".png",
                        encoder="enc" + HOSTILE, category="cat" + HOSTILE, title="Title " + HOSTILE)


def _external_refs(html: str) -> list[str]:
    refs = [v for _t, attrs in _parsed_tags(html) for a, v in attrs if a in ("src", "href", "srcset", "action")]
    bad = [r for r in refs if re.match(r"(?i)(https?:)?//", r) or not re.match(r"(?i)(data:image/|#)", r)]
    bad += re.findall(r"(?i)url\(\s*['\"]?(?:https?:)?//", html)
    bad += re.findall(r"(?i)@import", html)
    return bad


def _parsed_tags(html: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Every start tag and its attributes, as a browser-like parser sees them."""
    from html.parser import HTMLParser

    found: list[tuple[str, list[tuple[str, str]]]] = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, [(a, v or "") for a, v in attrs]))

    P().feed(html)
    return found


def _tags(html: str, name: str) -> list[str]:
    return re.findall(rf"<{name}\b", html, flags=re.I)


# -- formatting ------------------------------------------------------------------------------------------

def test_number_and_ci_formatting():
    assert num(0.0562551) == "0.0563" and num(0.52) == "0.520" and num(-76496.3) == "-76,496"
    assert num(None) == num(float("nan")) == "\u2014"
    assert num(7) == "7"
    assert ci(0.0388912, 0.0942373, 0.95) == "95% [0.0389, 0.0942]"
    assert num(5.57e-06) == "5.57e-6"


# -- rendering from a realistic results dict -------------------------------------------------------------

def test_render_realistic_results(tmp_path):
    res = make_results()
    html = render_report(res)
    assert html.startswith("<!DOCTYPE html>")
    assert len(html.encode()) < 5 * 1024 * 1024
    assert _external_refs(html) == []
    assert not _tags(html, "script") and not _tags(html, "link") and not _tags(html, "iframe")
    # verdict: the most urgent finding, its badge and action, before the findings list
    verdict = html[html.index('id="verdict"'):html.index('id="findings"')]
    assert "Sim is 0.72 stops (64%) darker than real." in verdict
    assert "badge sev-gap" in verdict and "Randomize light intensity" in verdict
    # ranking rows with CI, noise floor, probes, Pareto mark and the CLIP band
    ranking = html[html.index('id="ranking"'):]
    ranking = ranking[:ranking.index("</table></div>")]
    assert ranking.count('class="enc-row"') == 2
    assert "efficientnet-lite0" in ranking and "open_clip:ViT-B-32:laion2b" in ranking
    assert "0.0563 95% [0.0389, 0.0942]" in ranking
    assert "0.0814" in ranking and "(episodes)" in ranking and "p=0.478" in ranking
    assert "0.520" in ranking and "0.620" in ranking  # probe sim->real of each encoder
    assert ranking.count('class="front"') == 1 and "watch" in ranking
    # scatter plot (probes exist; SVG) plus two statistics plots, each a PNG data URI
    pngs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    svgs = re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(pngs) == 2 and len(svgs) == 1 and base64.b64decode(svgs[0]).startswith(b"<?xml")
    assert all(base64.b64decode(p)[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    # per-set statistics, detection numbers, differences with CI, flips, latching, data section
    assert 'id="stats-table"' in html and "83.67" not in html and "80.0, 60.0, 40.0" in html
    assert "depth dropout mean / max" in html and "action min" in html
    coco = html[html.index('id="coco"'):]
    assert all(f"<th>{k}</th>" in coco for k in COCO)
    assert "+0.123 95% [0.0512, 0.205]" in html
    assert 'id="flips"' in html and "<td class=\"n\">17</td>" in html
    assert 'id="latching"' in html and "truncated PNG" in html and "bicubic" in html
    out = write_report(res, tmp_path / "sub" / "report.html")
    assert out.read_text(encoding="utf-8") == html
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temp file left behind


def test_no_findings_no_probe_no_detection():
    res = make_results()
    res["findings"] = []
    del res["detection"]
    for e in res["encoders"]:
        e["probe"] = None
    html = render_report(res)
    assert "No finding" in html
    assert 'id="detection"' not in html
    assert html.count("data:image/png;base64,") == 3  # gap bars replace the scatter


def test_render_survives_sparse_results():
    html = render_report({"findings": [], "encoders": [], "sets": {}})
    assert "No finding" in html and "No encoder results" in html


def test_size_capped_for_huge_input():
    res = make_results()
    res["sets"]["sim"]["skipped"] = [{"path": f"ep/{i:06d}_" + "x" * 200 + ".png", "status": "unreadable",
                                      "reason": "r" * 500} for i in range(20000)]
    res["findings"] = res["findings"] * 500
    res["findings"][0] = {**res["findings"][0], "title": "T" * 2_000_000}
    cats = {f"cat{i}": 0.5 for i in range(5000)}
    res["detection"]["sets"]["sim"]["yolo"]["per_class_ap"] = cats
    res["encoders"] = [_encoder(f"enc{i}", i + 1, i == 0) for i in range(300)]
    html = render_report(res)
    assert len(html.encode()) < 5 * 1024 * 1024
    assert "<td class=\"n\">20,000</td>" in html  # one reason: one row for the 20,000 frames
    assert "more categories" in html and "more encoders" in html


def test_thumbnails_embedded_and_capped(tmp_path):
    paths = []
    for i in range(5):
        p = tmp_path / f"f{i}.png"
        Image.fromarray(np.full((300, 400, 3), i * 40, np.uint8)).save(p)
        paths.append({"path": str(p), "caption": f"frame {i}"})
    res = make_results()
    res["thumbnails"] = paths + [{"path": str(tmp_path / "missing.png")}]
    html = render_report(res, max_thumbs=3)
    assert html.count("data:image/jpeg;base64,") == 3 and "frame 2" in html and "frame 3" not in html


# -- hostile names ----------------------------------------------------------------------------------------

def test_hostile_names_are_escaped():
    html = render_report(hostile_results())
    assert not _tags(html, "script")
    tags = _parsed_tags(html)
    assert "script" not in {t for t, _ in tags}
    assert [(t, a) for t, attrs in tags for a, _ in attrs if a.startswith("on")] == []  # no event handler
    assert all(v.startswith(("data:image/png;base64,", "data:image/svg+xml;base64,"))
               for t, attrs in tags if t == "img" for a, v in attrs if a == "src")
    assert re.findall(r"(?i)<img[^>]*onerror", html) == []
    escaped = "&lt;script&gt;document.title=&#34;PWNED&#34;&lt;/script&gt;"
    assert escaped in html
    # each hostile field appears escaped in its section
    for marker in ('id="verdict"', 'id="ranking"', 'id="stats-table"', 'id="per-class"', 'id="skipped"'):
        section = html[html.index(marker):]
        assert "&lt;script&gt;" in section[:section.index("</table>") if "</table>" in section else None]
    assert "<title>perception-gap report</title>" in html
    assert _external_refs(html) == []


# -- the real pipeline ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_results(tmp_path_factory) -> dict:
    """results.json from `run` on a small generated pair of sets with the pixel encoder."""
    sys.path.insert(0, str(REPO))
    from perception_gap import cli

    tmp = tmp_path_factory.mktemp("run")
    rng = np.random.default_rng(0)
    for name, gain in (("sim", 0.6), ("real", 1.0)):
        d = tmp / name / "ep0"
        d.mkdir(parents=True)
        for i in range(12):
            a = (rng.uniform(0, 255, (48, 64, 3)) * gain).astype(np.uint8)
            Image.fromarray(a).save(d / f"f{i:02d}.png")
    (tmp / "sim" / "ep0" / "f99.png").write_bytes(b"")  # a skipped frame
    db = str(tmp / "t.duckdb")
    assert cli.main(["index", str(tmp / "sim"), "--set", "sim", "--domain", "sim", "--db", db, "-q"]) == 0
    assert cli.main(["index", str(tmp / "real"), "--set", "real", "--domain", "real", "--db", db, "-q"]) == 0
    assert cli.main(["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--out", str(tmp / "out"),
                     "--db", db, "-q"]) == 0
    return json.loads((tmp / "out" / "results.json").read_text())


def test_render_real_run(real_results, tmp_path):
    html = render_report(real_results)
    assert len(html.encode()) < 5 * 1024 * 1024 and _external_refs(html) == []
    assert html.count('class="enc-row"') == 1 and "pixel" in html
    e = real_results["encoders"][0]
    c = e.get("centroid_distance_norm_ci") or {}
    assert f"{num(e['centroid_distance_norm'])} {ci(c.get('low'), c.get('high'), c.get('level'))}" in html
    if real_results["findings"]:
        first = real_results["findings"][0]["title"]
        assert render_report({"findings": [{"title": first}]}).count("verdict-title") == 1
    assert "f99.png" in html  # the skipped frame is listed
    hist = real_results["stats"]["sim"]["channel_hist"]
    assert len(hist["channels"]) == 3 and all(sum(c) == pytest.approx(1, abs=1e-3) for c in hist["channels"])
    # channel means, luma percentiles and the channel histograms are drawn (no depth in this data)
    assert html.count('alt="statistics plot"') == 3
    # the gap maps reach run's results.json and are drawn from it (tests/test_report_maps.py reads them back)
    maps = real_results["maps"]
    assert maps["sim"]["n_frames"] == maps["real"]["n_frames"] == maps["paired"]["n_pairs"] == 12
    assert all(f'id="{i}"' in html for i in ("map-sim", "map-real", "map-signed", "map-abs", "profile-radial"))


# -- a real headless browser --------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


def _chromium(tmp_path: Path, page: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", *extra, page.as_uri()]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def _page_load_audit(tmp_path: Path, page: Path) -> tuple[list[str], list[str], str]:
    """Load `page` in headless chromium; return (console messages, network URLs the page requested, DOM).

    Console messages come from chromium's own log (`--enable-logging=stderr`: every console call and
    every CSP refusal prints a `CONSOLE` line); requests from its NetLog (`--log-net-log`), keeping those
    whose network isolation key is the page's `file://` origin (the browser's own background traffic,
    e.g. update checks, is not the page's).
    """
    net = tmp_path / "netlog.json"
    r = _chromium(tmp_path, page, "--enable-logging=stderr", "--v=0", f"--log-net-log={net}", "--dump-dom")
    return console_lines(r.stderr), page_requests(net), r.stdout


def console_lines(stderr: str) -> list[str]:
    """Console messages (and CSP refusals) from chromium's `--enable-logging=stderr` output."""
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln]


def page_requests(netlog: Path) -> list[str]:
    """URLs a `file://` page requested, from chromium's NetLog (the browser's own traffic left out)."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [e["params"]["url"] for e in log["events"]
            if e.get("type") == start and "file://" in str(e.get("params", {}).get("network_isolation_key", ""))
            and not e["params"].get("url", "").startswith(("file:", "data:"))]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_browser_audit_catches_console_errors_and_requests(tmp_path):
    """Known answer for the audit itself: a page that logs and fetches is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><head><title>t</title></head><body><img src="http://example.invalid/x.png">'
                   '<script>console.error("boom")</script></body></html>')
    console, urls, _ = _page_load_audit(tmp_path, bad)
    assert any("boom" in c for c in console)
    assert urls == ["http://example.invalid/x.png"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_headless_browser_renders_and_runs_no_hostile_script(tmp_path):
    page = write_report(hostile_results(), tmp_path / "report.html")
    console, urls, dom = _page_load_audit(tmp_path, page)
    assert console == [] and urls == []  # no payload ran, logged or fetched anything
    assert "<title>perception-gap report</title>" in dom  # the payload would have set it to PWNED
    assert "PWNED" not in re.findall(r"<title>(.*?)</title>", dom, flags=re.S)[0]
    assert "Title " in dom and 'id="verdict-title"' in dom
    assert dom.count('class="enc-row"') == 2 and "open_clip:ViT-B-32:laion2b" in dom
    assert re.findall(r"(?i)<script", dom) == [] and re.findall(r"(?i)<img[^>]*onerror", dom) == []
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, page, f"--screenshot={shot}", "--window-size=1280,2000")
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(shot) as im:
        assert im.size == (1280, 2000)
        assert len(np.unique(np.asarray(im.convert("L")))) > 10  # not a blank page


def test_ranking_shows_reference_and_uninformative_probe():
    res = make_results()
    pixel = {**_encoder("pixel", 1, False, family="pixel"), "rank": None, "reference": True,
             "ranking_basis": "reference", "pareto_front": None}
    weak = {**_encoder("weak-enc", 2, False), "probe_informative": False, "ranking_basis": "gap alone"}
    weak["probe"] = {**weak["probe"], "sim_to_sim": -0.4}
    res["encoders"] = [res["encoders"][0], weak, pixel]
    html = render_report(res)
    ranking = html[html.index('id="ranking"'):]
    ranking = ranking[:ranking.index("</table></div>")]
    rows = ranking.split('class="enc-row"')[1:]
    pixel_row = next(r for r in rows if ">pixel<" in r)
    weak_row = next(r for r in rows if "weak-enc" in r)
    assert '<td class="n">reference</td>' in pixel_row
    assert "uninformative" in weak_row and "(gap alone)" in weak_row
    assert not any("uninformative" in r or "gap alone" in r for r in rows if "weak-enc" not in r)


def test_ranking_decisive_columns_first_and_probe_at_or_below_zero_warned():
    res = make_results()
    res["encoders"][1]["probe"] = {**res["encoders"][1]["probe"], "sim_to_real": -0.031}
    html = render_report(res)
    ranking = html[html.index('id="ranking"'):]
    header = ranking[:ranking.index("</tr>")]
    cols = re.findall(r"<th[^>]*>(.*?)</th>", header)
    # the columns say what the ranking reads, the noise floor beside the gap, the AUC marked as not ranked on
    assert cols[:7] == ["rank", "encoder", "gap above noise floor [CI] (ranked on; lower is better)",
                        "noise floor (real vs real)", "probe R&sup2; sim&rarr;real, held out (ranked on; higher is better)",
                        "transfer drop [CI]", "domain AUC (not ranked on)"]
    rows = ranking[:ranking.index("</table></div>")].split('class="enc-row"')[1:]
    # gap 0.0749 = -0.0251 + 0.1; its CI = the distance CI minus the floor 0.0813979; the floor beside it
    assert "+0.0749" in rows[0] and "95% [-0.0425, 0.0128]" in rows[0]
    cells = re.findall(r'<td class="n">(.*?)</td>', rows[0].split("<details")[0], flags=re.S)
    assert cells[2] == "0.0814" and cells[4].startswith("+0.290") and "95% [0.110, 0.370]" in cells[4]
    assert "41.2 95% [35.0, 48.9]" in rows[0] and "0.01235 95% [0.008110, 0.01702]" in rows[0]  # FD, KID
    why = html[html.index('id="auc-vs-gap"'):]
    assert "separable but close" in why[:why.index("</p>")]
    assert "R&sup2; &le; 0" not in rows[0] and "R&sup2; &le; 0" in rows[1]
    warning = html[html.index('class="probe-warning"'):]
    assert "open_clip:ViT-B-32:laion2b" in warning[:warning.index("</p>")]
    assert "efficientnet-lite0" not in warning[:warning.index("</p>")]
    assert 'class="mono name"' in rows[0] and "<details" in rows[0]  # names kept whole, the rest folded


def test_r2_far_below_zero_is_shown_in_words():
    res = make_results()
    res["encoders"][1]["probe"] = {**res["encoders"][1]["probe"], "sim_to_real": -4317743.2, "sim_to_sim": -2.5}
    html = render_report(res)
    ranking = html[html.index('id="ranking"'):html.index("</table></div>")]
    assert "worse than predicting the mean" in ranking
    assert "4,317,743" not in html and "-4.32" not in html and "-2.50" not in ranking
    res["encoders"][1]["probe"]["sim_to_sim"] = 0.3  # the drop then reads as a bound, without digits of noise
    res["encoders"][1]["probe"]["transfer_drop"] = 0.3 + 4317743.2
    ranking = render_report(res)
    ranking = ranking[ranking.index('id="ranking"'):ranking.index("</table></div>")]
    assert "more than +1.30" in ranking and "4,317,743" not in ranking
    assert r2(-0.42) == "-0.420" and r2(-1.5) == "worse than predicting the mean" and r2(-1.5, -2.0) == "-1.50"
