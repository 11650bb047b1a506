"""The report's "What closes the gap" section, read from a real run of the small built-in demo.

The demo (3 episodes of 4 steps, 96 x 72) is indexed and `run` with the pixel encoder through the
command line, once per module; its results.json and report.html are what the tests read. The
section's numbers are checked against results.json with an independent formatting of the shares,
the waterfall's bars against the axis written on the SVG, the factors' words against
`perception_gap.camera.model.describe`, and the middle thumbnail of each worst pair against the sim
frame put through `apply_camera_model` here.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import math
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from perception_gap.reports import attribution
from perception_gap.reports.attribution import AXIS_MAX, AXIS_MIN, PLOT_W, waterfall


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict:
    """results.json and report.html of `run --encoders pixel` on a small demo."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from perception_gap.cli import main

    tmp = tmp_path_factory.mktemp("attr")
    try:
        from perception_gap.demo import build_demo

        files = build_demo(tmp / "data", n_episodes=3, steps=4, size=(96, 72))
    except (ImportError, OSError, RuntimeError) as e:  # no offscreen GL here: the demo cannot be built, say so
        pytest.skip(f"demo cannot render here: {e}")
    db = ["--db", str(tmp / "t.duckdb"), "-q"]
    assert main(["index", "--manifest", str(files.manifest), *db]) == 0
    assert main(["run", "--sim", files.sim_set, "--real", files.real_set, "--encoders", "pixel",
                 "--out", str(tmp / "out"), *db]) == 0
    results = json.loads((tmp / "out" / "results.json").read_text())
    (entry,) = [e for e in results["encoders"] if e["name"] == "pixel"]
    assert entry["attribution"]["clear_gap"] and entry["attribution"]["factors"], entry["attribution"]
    return {"results": results, "html": (tmp / "out" / "report.html").read_text(encoding="utf-8"), "tmp": tmp,
            "attribution": entry["attribution"]}


def _section(html: str) -> str:
    start = html.index('<section id="attribution">')
    return html[start:html.index("</section>", start)]


def _text(html: str) -> str:
    """Visible text: tags dropped, entities read, whitespace collapsed."""
    t = re.sub(r"<title>.*?</title>", "", html, flags=re.S)
    t = re.sub(r"<[^>]+>", " ", t)
    for entity, char in (("&#39;", "'"), ("&quot;", '"'), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")):
        t = t.replace(entity, char)
    return re.sub(r"\s+([.,;:])", r"\1", re.sub(r"\s+", " ", t))


def _percent(x: float) -> str:
    """The share as the report should write it: whole percents from 10% up, one decimal below."""
    v = 100 * x
    s = f"{v:,.0f}" if abs(v) >= 10 else f"{v:.1f}"
    return "0" if s in ("0.0", "-0.0") else s


def _with_ci(share: float, ci: list[float]) -> str:
    return f"{_percent(share)}% [{_percent(ci[0])}, {_percent(ci[1])}]"


def _svgs(section: str) -> list[ET.Element]:
    return [ET.fromstring(s) for s in re.findall(r'<svg [^>]*class="waterfall".*?</svg>', section, flags=re.S)]


def _decode(src: str):
    from PIL import Image

    return Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).convert("RGB")


def test_the_section_sits_after_the_ranking_and_says_what_the_factors_close(demo):
    html, a = demo["html"], demo["attribution"]
    assert html.index('id="ranking"') < html.index('<section id="attribution">') < html.index('<section id="stats">')
    assert '<a href="#attribution">What closes the gap</a>' in html
    text = _text(_section(html))
    head = f"The camera factors close {_with_ci(a['all']['share'], a['all']['ci'])} of pixel's gap above its floor"
    assert head in text
    if a["residual"]["share"] >= 0:
        assert f"; {_with_ci(a['residual']['share'], a['residual']['ci'])} remains: content, materials or lighting, " \
               "see the gap maps." in text
    else:
        assert f"; nothing remains (residual {_with_ci(a['residual']['share'], a['residual']['ci'])})" in text
    for f in a["factors"]:  # each factor's share alone, with its interval, in the table
        alone = ("+" if f["share"] > 0 and _percent(f["share"]).strip("0.") else "") + _with_ci(f["share"], f["ci"])
        assert alone in text, alone


def test_the_factors_are_worded_as_the_camera_model_describes_them(demo):
    from perception_gap.camera.model import PARAMS, Factor, describe
    from perception_gap.reports.attribution import factor_words

    text = _text(_section(demo["html"]))
    model = demo["results"]["camera_model"]
    for f in model["factors"]:
        assert describe(Factor(f["code"], f["params"])) in text, f["code"]
        for name in f["params"]:
            assert f"{name} = " in text
    samples = {"resolution": {"width": 640, "height": 480}, "channel_swap": {"order": "bgr"},
               "value_range": {"scale": 255.0}, "orientation": {"transform": "flip_lr"},
               "field_of_view": {"zoom_sim_over_real": 1.12}, "brightness": {"stops": -0.42},
               "white_balance": {"r_gain": 1.15, "b_gain": 0.88}, "tone_curve": {"exponent": 1.1},
               "vignetting": {"corner_stops": -0.5}, "sharpness": {"sigma_px": 1.2},
               "motion_blur": {"length_px": 6.0, "angle_deg": 30.0},
               "resize_filter": {"signature": "nearest_upscale", "factor": 2},
               "sensor_noise": {"read_levels": 2.0, "shot_levels2": 0.05}, "compression": {"quality": 60}}
    assert set(samples) == set(PARAMS)
    for code, params in samples.items():
        assert factor_words(code, params) == describe(Factor(code, params)), code


def test_the_waterfall_steps_through_each_factor_then_the_residual(demo):
    a = demo["attribution"]
    (svg,) = _svgs(_section(demo["html"]))
    lo, hi = float(svg.get("data-lo")), float(svg.get("data-hi"))
    assert AXIS_MIN <= lo <= 0.0 and 1.0 <= hi <= AXIS_MAX
    rows = [g for g in svg.iter("g") if "wf-row" in g.get("class", "")]
    assert [g.get("data-code") for g in rows] == [f["code"] for f in a["factors"]] + ["residual"]
    for g, f in zip(rows, a["factors"]):
        assert float(g.get("data-share")) == f["step"]
        assert [float(g.get("data-low")), float(g.get("data-high"))] == f["step_ci"]
    assert float(rows[-1].get("data-share")) == a["residual"]["share"]
    ticks = {t.text: float(t.get("x")) for t in svg.iter() if t.get("class") == "wf-tick"}
    x0, x100 = ticks["0%"], ticks["100%"]
    scale = (x100 - x0)  # px per whole gap
    assert scale == pytest.approx(PLOT_W / (hi - lo), abs=0.02)

    def x(v: float) -> float:  # where a share sits, clamped to the axis as drawn
        return x0 + (min(hi, max(lo, v)) - 0.0) * scale

    prev = 0.0
    for g, f in zip(rows, a["factors"]):
        (bar,) = [r for r in g if r.get("class") == "wf-bar"]
        left, right = float(bar.get("x")), float(bar.get("x")) + float(bar.get("width"))
        a0, a1 = sorted((prev, f["cumulative"]))
        assert left == pytest.approx(x(a0), abs=0.02)
        assert right == pytest.approx(max(x(a1), x(a0) + 1.0), abs=0.02)
        assert bar.get("fill") == ("#009E73" if f["cumulative"] >= prev else "#D55E00")
        off = [p for p in g if p.get("class") == "wf-off"]
        assert bool(off) == any(v < lo or v > hi for v in (a0, a1))  # cut off at the edge: an arrow says so
        prev = f["cumulative"]
    (res_bar,) = [r for r in rows[-1] if r.get("class") == "wf-bar"]
    ends = sorted((float(res_bar.get("x")), float(res_bar.get("x")) + float(res_bar.get("width"))))
    assert min(abs(e - x(1.0)) for e in ends) < 1.05  # the residual reaches 100% (at least 1 px wide)
    width = float(svg.get("width"))
    for r in svg.iter():
        if r.get("class") == "wf-bar":
            assert 0 < float(r.get("x")) and float(r.get("x")) + float(r.get("width")) < width


def test_waterfall_known_answer_and_shares_beyond_the_axis():
    entry = {"factors": [{"code": "brightness", "params": {"stops": 0.5}, "step": 0.5, "step_ci": [0.4, 0.6],
                          "cumulative": 0.5},
                         {"code": "compression", "params": {"quality": 60}, "step": -0.1, "step_ci": [-0.2, 0.0],
                          "cumulative": 0.4},
                         {"code": "sharpness", "params": {"sigma_px": 1.2}, "step": 3.6, "step_ci": [2.0, 5.0],
                          "cumulative": 4.0}],
             "all": {"share": 4.0, "ci": [2.5, 5.5]}, "residual": {"share": -3.0, "ci": [-4.5, -1.5]}}
    svg = ET.fromstring(str(waterfall(entry, ident="w", name="enc")))
    lo, hi = float(svg.get("data-lo")), float(svg.get("data-hi"))
    assert (lo, hi) == (0.0, AXIS_MAX)  # 0 .. 400% wanted, the axis stops at its widest
    rows = [g for g in svg.iter() if "wf-row" in (g.get("class") or "")]
    bars = [[r for r in g if r.get("class") == "wf-bar"][0] for g in rows]
    left = [float(b.get("x")) for b in bars]
    right = [float(b.get("x")) + float(b.get("width")) for b in bars]
    x0 = left[0]
    assert right[0] - x0 == pytest.approx(0.5 / hi * PLOT_W, abs=0.02)  # 0 -> 50%
    assert (left[1], right[1]) == (pytest.approx(x0 + 0.4 / hi * PLOT_W, abs=0.02), pytest.approx(right[0], abs=0.02))
    assert bars[1].get("fill") == "#D55E00" and bars[0].get("fill") == "#009E73"
    assert right[2] == pytest.approx(x0 + PLOT_W, abs=0.02)  # 400% drawn to the edge ...
    assert [p for p in rows[2] if p.get("class") == "wf-off"]  # ... with an arrow
    assert not [p for p in rows[0] if p.get("class") == "wf-off"]
    assert rows[-1].get("data-code") == "residual" and float(rows[-1].get("data-share")) == -3.0
    labels = [t.text for t in svg.iter() if t.get("class") == "wf-value"]
    assert labels == ["+50% [40, 60]", "-10% [-20, 0]", "+360% [200, 500]", "-300% [-450, -150]"]
    assert [t.text for t in svg.iter() if t.get("class") == "wf-label"][:3] == [
        "exposure +0.50 stops", "JPEG quality 60 (4:4:4)", "blur sigma 1.20 px"]


def test_the_camera_model_is_listed_with_parameters_intervals_and_method(demo):
    section = _section(demo["html"])
    text = _text(section)
    model = demo["results"]["camera_model"]
    assert section.count('class="cm-factor"') == len(model["factors"])
    for f in model["factors"]:
        assert f["method"] in text
        for k, (low, high) in f["ci"].items():
            assert f"{k} [{low:g}, {high:g}]" in text
    results = copy.deepcopy(demo["results"])
    results["camera_model"]["not_modelled"] = [{"code": "depth_dropout", "reason": "depth: no RGB encoder sees it"}]
    assert "depth_dropout: depth: no RGB encoder sees it" in _text(attribution.section(results))


def test_worst_pairs_show_sim_sim_through_the_model_and_real(demo):
    from PIL import Image

    import perception_gap as pg

    results = demo["results"]
    (enc,) = [e for e in results["encoders"] if e["name"] == "pixel"]
    pairs = enc["worst_pairs"][:6]
    rows = re.findall(r'<div class="pair cm-pair">(.*?)</div>', _section(demo["html"]), flags=re.S)
    assert len(rows) == len(pairs) >= 2
    for row, w in zip(rows, pairs):
        srcs = re.findall(r'src="(data:image/jpeg;base64,[^"]+)"', row)
        assert len(srcs) == 3 and f"sim {w['pair_key']}" in row and "sim + camera model" in row
        sim, modelled, real = (np.asarray(_decode(s), np.float32) for s in srcs)
        with Image.open(w["sim_path"]) as im:
            frame = np.asarray(im.convert("RGB"))
        want = Image.fromarray(pg.apply_camera_model(frame, results["camera_model"], rng=0))
        want.thumbnail((160, 160))
        buf = io.BytesIO()
        want.save(buf, format="JPEG", quality=75)  # the report's thumbnails are JPEG q75
        want = np.asarray(Image.open(buf).convert("RGB"), np.float32)
        assert modelled.shape == sim.shape == want.shape
        # the middle frame is the model's rendering of the sim frame, not the sim frame again
        assert np.abs(modelled - want).mean() < 0.1 < 1.0 < np.abs(modelled - sim).mean()
    broken = copy.deepcopy(results)
    (benc,) = [e for e in broken["encoders"] if e["name"] == "pixel"]
    benc["worst_pairs"][0]["sim_path"] = str(demo["tmp"] / "no_such_frame.png")
    rows = re.findall(r'<div class="pair cm-pair">', attribution.section(broken))
    assert len(rows) == len(pairs) - 1  # an unreadable frame: that pair is left out, the report renders


def test_no_clear_gap_shows_the_note_and_no_results_no_section(demo):
    from perception_gap.camera.attribution import N_BOOT, attribution_entry, variants
    from perception_gap.camera.model import CameraModel

    model = CameraModel.from_dict(demo["results"]["camera_model"])
    vs = variants(model)
    flat = np.full(N_BOOT + 1, 0.2)  # the sim as far from real as the floor: no gap to attribute
    entry = attribution_entry(model, vs, {"d0": flat, "floor": flat, "gap": flat - flat, "dv": [flat] * len(vs),
                                          "shares": [flat * math.nan] * len(vs)}, n_pairs=12, m=12, paired=True)
    assert entry["clear_gap"] is False and entry["note"]
    results = copy.deepcopy(demo["results"])
    (enc,) = [e for e in results["encoders"] if e["name"] == "pixel"]
    enc["attribution"] = entry
    html = attribution.section(results)
    assert entry["note"] in _text(html) and not _svgs(html) and "The camera factors close" not in html
    for e in results["encoders"]:
        e.pop("attribution", None)
    results.pop("camera_model")
    assert attribution.section(results) is None


AUDIT = """window.addEventListener('load', function () {
  var W = document.documentElement.clientWidth, s = document.getElementById('attribution'), out = {width: W,
      scroll: document.documentElement.scrollWidth, wide: [], broken: [], n_svg: 0, n_img: 0};
  s.querySelectorAll('svg, table, img, p').forEach(function (el, i) {
    var r = el.getBoundingClientRect();
    if (el.tagName.toLowerCase() === 'svg') out.n_svg += 1;
    if (r.right > W + 1 || el.scrollWidth > el.clientWidth + 1 && el.tagName.toLowerCase() === 'table')
      out.wide.push(el.tagName + (el.id ? '#' + el.id : '') + ' right=' + Math.round(r.right));
  });
  s.querySelectorAll('img').forEach(function (im) {
    out.n_img += 1; if (!(im.complete && im.naturalWidth > 0)) out.broken.push(im.alt); });
  var pre = document.createElement('pre'); pre.id = 'pg-attr'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});"""


def test_the_section_fits_1280_px_in_a_browser(demo, tmp_path):
    from tests.test_report_browser import CHROMIUM, WIDTH, _chromium, _instrumented, _read_pre

    if CHROMIUM is None:
        pytest.skip("chromium not installed")
    page = tmp_path / "attr.html"
    page.write_text(_instrumented(demo["html"], AUDIT), encoding="utf-8")
    got = _read_pre(_chromium(tmp_path / "profile", page, "--virtual-time-budget=5000", "--dump-dom").stdout, "pg-attr")
    assert got["width"] == WIDTH and got["scroll"] <= WIDTH
    assert got["wide"] == [] and got["broken"] == []
    assert got["n_svg"] == 1 and got["n_img"] == 3 * len(re.findall(r'class="pair cm-pair"', demo["html"]))


def test_demo_report_needs_no_file_beside_it(demo):
    """The section's images are inline (the report is copied alone): no path of the run in an src."""
    section = _section(demo["html"])
    assert not [s for s in re.findall(r'src="([^"]+)"', section) if not s.startswith("data:image/")]
    assert str(Path(demo["tmp"])) not in "".join(re.findall(r'src="([^"]+)"', section))
