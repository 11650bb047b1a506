"""A report of 25 encoders stays legible: the gap-vs-probe scatter read in a real headless Chromium
(no label box overlaps another label, the key or another encoder's point; every number and name
shown; the Pareto front starred), the ranking grouped by family, the PCA panels family by family.

Report input: one real `run` (pixel encoder, frames with actions, so that the probe is computed);
its encoder entry is copied under 25 encoder names of six families, each copy's gap and probe R²
moved by a seeded draw and ranked with `perception_gap.ranking` as the engine ranks. The engine's
numbers are not what is under test here, the report's layout of many entries is.
"""

from __future__ import annotations

import base64
import copy
import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap import cli
from perception_gap.ranking import EncoderScore, rank_encoders
from perception_gap.reports import render_report
from tests.test_report_browser import CHROMIUM, WIDTH, _audit, _chromium

FAMILIES = {
    "imagenet": ["efficientnet-lite0", "efficientnet-lite1", "efficientnet-lite2", "timm:resnet50",
                 "timm:vit_base_patch16_224", "torchvision:resnet18@/weights/resnet18.pth"],
    "clip": ["open_clip:ViT-B-32:laion2b_s34b_b79k", "open_clip:ViT-B-16:openai", "open_clip:ViT-L-14:openai"],
    "dinov2": ["hf:facebook/dinov2-small#cls", "hf:facebook/dinov2-base#cls", "hf:facebook/dinov2-large#mean"],
    "robot": ["r3m:resnet18@r3m18.pt", "r3m:resnet34@r3m34.pt", "r3m:resnet50@r3m50.pt", "vip:resnet50@vip.pt",
              "mvp:vitb@mvp_b.pth", "mvp:vits@mvp_s.pth", "vc1:vitb@vc1_base.pth", "vc1:vitl@vc1_large.pth",
              "mcr:resnet50@mcr.pt", "hrp:resnet18@hrp18.pt", "hrp:vit@hrp_vit.pt"],
    "siglip": ["hf:google/siglip-base-patch16-224"],
    "pixel": ["pixel"],
}
N = sum(len(v) for v in FAMILIES.values())
OFF_SCALE = "hrp:vit@hrp_vit.pt"  # its probe R² far below the axis: an arrow and a mark in its label


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> dict:
    """`run --encoders pixel` on 2 x 12 small frames in 3 episodes with two-dimensional actions."""
    d = tmp_path_factory.mktemp("many")
    rows = []
    for dom, tint in (("sim", 80), ("real", 120)):
        (d / dom).mkdir()
        for ep in range(3):
            for st in range(4):
                rng = np.random.default_rng(ep * 10 + st + tint)
                a = np.zeros((32, 40, 3))
                a[..., 0], a[..., 1], a[..., 2] = (ep * 4 + st) * 18, ep * 60, tint
                Image.fromarray(np.clip(a + rng.normal(0, 8, a.shape), 0, 255).astype(np.uint8)).save(
                    d / dom / f"e{ep}_{st}.png")
                rows.append({"set": dom, "domain": dom, "rgb": f"{dom}/e{ep}_{st}.png", "pair_key": f"e{ep}_{st}",
                             "episode": ep, "step": st, "action_0": (ep * 4 + st) / 12, "action_1": ep / 3})
    with (d / "m.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    db = str(d / "m.duckdb")
    assert cli.main(["index", "--manifest", str(d / "m.csv"), "--db", db, "-q"]) == 0
    assert cli.main(["run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--out", str(d / "out"),
                     "--db", db, "-q"]) == 0
    res = json.loads((d / "out" / "results.json").read_text())
    assert (res["encoders"][0].get("probe") or {}).get("sim_to_real") is not None
    return res


def many(res: dict, seed: int = 0) -> dict:
    """The run's entry under every name of FAMILIES (report input, see the module docstring)."""
    rng = np.random.default_rng(seed)
    out = []
    for fam, names in FAMILIES.items():
        for n in names:
            e = copy.deepcopy(res["encoders"][0])
            e.update(name=n, encoder=n, family=fam, reference=fam == "pixel",
                     gap_above_floor=float(rng.uniform(0.0, 0.3)))
            e["probe"]["sim_to_real"] = -5000.0 if n == OFF_SCALE else float(rng.uniform(0.2, 0.9))
            out.append(e)
    ranked = {r.name: r for r in rank_encoders([EncoderScore(name=e["name"], gap=e["gap_above_floor"],
                                                             probe=e["probe"]["sim_to_real"], probe_informative=True)
                                                for e in out if not e["reference"]])}
    for e in out:
        r = ranked.get(e["name"])
        e["rank"], e["pareto_front"] = (r.rank, r.on_front) if r else (None, None)
    out.sort(key=lambda e: (e["rank"] is None, e["rank"] or 0))
    return {**res, "encoders": out}


# Every text and point of the SVG with its box as the browser lays it out, written into the document.
BOXES = """<script type="text/javascript"><![CDATA[
window.addEventListener('load', function () {
  var out = {width: document.documentElement.getBoundingClientRect().width,
             height: document.documentElement.getBoundingClientRect().height, items: []};
  document.querySelectorAll('g[id]').forEach(function (g) {
    if (!/^(label|key|family|pt|leader)-/.test(g.id)) return;
    var el = g.querySelector('text') || g.querySelector('use') || g.querySelector('path');
    if (!el) return;
    var r = el.getBoundingClientRect();
    out.items.push({id: g.id, text: el.textContent, l: r.left, t: r.top, r: r.right, b: r.bottom});
  });
  var axes = document.getElementById('axes');
  if (axes) { var a = (axes.querySelector('path') || axes).getBoundingClientRect(); out.axes = [a.left, a.top, a.right, a.bottom]; }
  var d = document.createElementNS('http://www.w3.org/2000/svg', 'desc');
  d.id = 'pg-boxes'; d.textContent = JSON.stringify(out); document.documentElement.appendChild(d);
});
]]></script>"""


def _scatter_svg(html: str) -> str:
    m = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    assert m, "no gap-vs-probe scatter in the report"
    return base64.b64decode(m.group(1)).decode()


def _laid_out(tmp: Path, svg: str) -> dict:
    page = tmp / "scatter.svg"
    page.write_text(svg.replace("</svg>", BOXES + "</svg>", 1), encoding="utf-8")
    r = _chromium(tmp / "profile", page, "--virtual-time-budget=3000", "--dump-dom", height=1200)
    m = re.search(r'<desc id="pg-boxes">(.*?)</desc>', r.stdout, flags=re.DOTALL)
    assert m, r.stderr[-2000:]
    text = m.group(1)
    for entity, char in (("&quot;", '"'), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return json.loads(text)


def _overlap(a: dict, b: dict) -> float:
    return max(0.0, min(a["r"], b["r"]) - max(a["l"], b["l"])) * max(0.0, min(a["b"], b["b"]) - max(a["t"], b["t"]))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_25_encoders_scatter_labels_never_overlap_in_chromium(real_run, tmp_path):
    res = many(real_run)
    page = _audit(tmp_path, res, "many-encoders")  # the whole page at 1,280 px: nothing overflows
    assert page["audit"]["tables"] == [] and page["audit"]["scroll"] <= WIDTH and page["audit"]["broken"] == []
    assert page["console"] == [] and page["urls"] == []
    lay = _laid_out(tmp_path, _scatter_svg(page["html"]))
    items = {i["id"]: i for i in lay["items"]}
    labels = [items[f"label-{i}"] for i in range(N)]
    keys = [items[f"key-{i}"] for i in range(N)]
    points = [items[f"pt-{i}"] for i in range(N)]
    # numbered points, a key naming each encoder by its number, family headings in ranking order
    assert [lab["text"].rstrip("\u2193") for lab in labels] == [str(i + 1) for i in range(N)]
    for i, (k, e) in enumerate(zip(keys, res["encoders"])):
        assert re.match(rf"\s*{i + 1}\s+{re.escape(e['name'][:20])}", k["text"]), k["text"]
        assert ("\u2605" in k["text"]) == bool(e["pareto_front"])
    off = next(i for i, e in enumerate(res["encoders"]) if e["name"] == OFF_SCALE)
    assert "off scale" in keys[off]["text"] and labels[off]["text"].endswith("\u2193")
    heads = [i["text"] for i in lay["items"] if i["id"].startswith("family-")]
    assert heads == list(dict.fromkeys(e["family"] for e in res["encoders"]))
    # no text box overlaps another, nor another encoder's point; everything inside the picture
    texts = labels + keys + [i for i in lay["items"] if i["id"].startswith("family-")]
    clashes = [(a["id"], b["id"]) for j, a in enumerate(texts) for b in texts[j + 1:] if _overlap(a, b) > 0.5]
    assert clashes == []
    on_points = [(lab["id"], p["id"]) for i, lab in enumerate(labels) for j, p in enumerate(points)
                 if i != j and _overlap(lab, p) > 0.5]
    assert on_points == []
    for t in texts + points:
        assert 0 <= t["l"] and t["r"] <= lay["width"] and 0 <= t["t"] and t["b"] <= lay["height"], t
    x0, y0, x1, y1 = lay["axes"]
    for lab in labels:  # the numbers stay inside the axes, the key outside them
        assert x0 - 1 <= lab["l"] and lab["r"] <= x1 + 1 and y0 - 1 <= lab["t"] and lab["b"] <= y1 + 1, lab
    assert all(k["l"] > x1 for k in keys)
    # a number away from its point is joined to it by a leader line; the rest sit beside their point
    for i, (lab, p) in enumerate(zip(labels, points)):
        gap = max(lab["l"] - p["r"], p["l"] - lab["r"], lab["t"] - p["b"], p["t"] - lab["b"], 0)
        assert gap < 12 or f"leader-{i}" in items, (lab, p)


def test_25_encoders_ranking_and_pca_panels_grouped_by_family(real_run, monkeypatch):
    from tests.figures import capture, only

    res = many(real_run)
    drawn = capture(monkeypatch)
    html = render_report(res)
    ranking = html[html.index('id="ranking"'):html.index("</table></div>", html.index('id="ranking"'))]
    rows = ranking.split('class="enc-row"')[1:]
    assert len(rows) == N
    fams = [re.search(r"&#9679;</span> (\w+)</td>", r).group(1) for r in rows]
    assert fams == [e["family"] for e in res["encoders"]]
    best = html[html.index('id="family-best"'):]
    best = best[:best.index("</p>")]
    for fam in FAMILIES:
        first = next(e for e in res["encoders"] if e["family"] == fam)
        assert re.search(rf"{fam}: <span class=\"mono name\">{re.escape(first['name'])}</span>", best), fam

    (pca,) = only(drawn, "pca_scatter")
    axes = pca.axes
    assert [a.get_title() for a in axes] == [e["name"][:27] + "\u2026" if len(e["name"]) > 28 else e["name"]
                                             for fam in dict.fromkeys(e["family"] for e in res["encoders"])
                                             for e in res["encoders"] if e["family"] == fam]
    renderer = pca.figure.canvas.get_renderer()
    boxes = [a.title.get_window_extent(renderer) for a in axes] + [a.get_window_extent(renderer) for a in axes]
    clashes = [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
               if (j - i != len(axes)) and boxes[i].overlaps(boxes[j])
               and min(boxes[i].x1, boxes[j].x1) - max(boxes[i].x0, boxes[j].x0) > 1
               and min(boxes[i].y1, boxes[j].y1) - max(boxes[i].y0, boxes[j].y0) > 1]
    assert clashes == []
    heads = [sf._suptitle.get_text() for sf in pca.figure.subfigs]
    assert heads == [f"{fam} ({sum(e['family'] == fam for e in res['encoders'])})"
                     for fam in dict.fromkeys(e["family"] for e in res["encoders"])]
