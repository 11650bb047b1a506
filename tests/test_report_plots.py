"""Report plots read back: label positions in the SVG scatter, set colours in the PNGs, depth in metres."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pytest
from PIL import Image

from perception_gap.reports import render_report
from perception_gap.reports.plots import PALETTE, channel_histograms, set_colours
from perception_gap.reports.scatter import gap_vs_probe

# lite0 and lite2 sit close together (the case that once put each name on the other's star); pixel's
# R² is far off scale.
ENCODERS = [
    {"name": "efficientnet-lite0", "gap_above_floor": 0.100, "probe": {"sim_to_real": 0.42}, "pareto_front": True},
    {"name": "efficientnet-lite2", "gap_above_floor": 0.103, "probe": {"sim_to_real": 0.45}, "pareto_front": True},
    {"name": "pixel", "gap_above_floor": 0.21, "probe": {"sim_to_real": -76496.3}},
    {"name": "open_clip:ViT-B-32", "gap_above_floor": 0.05, "probe": {"sim_to_real": 0.1}},
    {"name": "dinov2-small", "gap_above_floor": 0.101, "probe": {"sim_to_real": 0.40}},
]


def _svg(markup) -> str:
    return base64.b64decode(str(markup).split(",", 1)[1]).decode()


def _points_and_labels(svg: str) -> tuple[dict[int, tuple[float, float]], dict[int, tuple[float, float, str]]]:
    pts = {int(i): (float(x), float(y)) for i, x, y in
           re.findall(r'<g id="pt-(\d+)">.*?<use [^>]*?x="([-\d.]+)" y="([-\d.]+)"', svg, flags=re.DOTALL)}
    labels = {}
    for i, style, x, y, text in re.findall(r'<g id="label-(\d+)">\s*<text style="([^"]*)" x="([-\d.]+)" y="([-\d.]+)"'
                                           r'[^>]*>([^<]*)</text>', svg):
        size = float(re.search(r"font-size: ([\d.]+)px", style).group(1))
        anchor = re.search(r"text-anchor: (\w+)", style).group(1)
        w = 0.55 * size * len(text)
        cx = float(x) + {"start": w / 2, "end": -w / 2, "middle": 0.0}[anchor]
        labels[int(i)] = (cx, float(y) - size / 3, text)  # SVG y grows downwards; the baseline is the text's bottom
    return pts, labels


def test_scatter_labels_sit_nearest_their_own_point():
    svg = _svg(gap_vs_probe(ENCODERS))
    pts, labels = _points_and_labels(svg)
    assert sorted(pts) == sorted(labels) == list(range(len(ENCODERS)))
    for i, (cx, cy, text) in labels.items():
        assert text.startswith(ENCODERS[i]["name"][:10])
        nearest = min(pts, key=lambda j: (pts[j][0] - cx) ** 2 + (pts[j][1] - cy) ** 2)
        assert nearest == i, (text, nearest)
    # the points themselves are where the data puts them: x order = gap order, y order = R² order
    on_scale = [i for i, e in enumerate(ENCODERS) if e["probe"]["sim_to_real"] > -1]
    assert sorted(on_scale, key=lambda i: pts[i][0]) == sorted(on_scale, key=lambda i: ENCODERS[i]["gap_above_floor"])
    assert sorted(on_scale, key=lambda i: pts[i][1]) == sorted(on_scale, key=lambda i: -ENCODERS[i]["probe"]["sim_to_real"])


def test_off_scale_r2_is_an_annotated_arrow_not_a_squeezed_axis():
    svg = _svg(gap_vs_probe(ENCODERS))
    pts, labels = _points_and_labels(svg)
    assert "pixel (worse than predicting the mean, off scale)" in labels[2][2]
    ys = [pts[i][1] for i in (0, 1, 3, 4)]
    # the on-scale points spread over a good part of the plot's height (~288 px), not a corner
    assert max(ys) - min(ys) > 100
    assert pts[2][1] > max(ys)  # the outlier sits below them all (SVG y grows downwards)


def _drawn(png_markup, colour: str) -> int:
    """Saturated pixels of the PNG within 8 degrees of hue of `colour` (antialiasing lightens line
    pixels towards white but keeps their hue)."""
    raw = base64.b64decode(str(png_markup).split(",", 1)[1])
    with Image.open(io.BytesIO(raw)) as im:
        hsv = np.asarray(im.convert("RGB").convert("HSV")).reshape(-1, 3).astype(int)
    with Image.new("RGB", (1, 1), colour) as im:
        h0 = int(np.asarray(im.convert("HSV"))[0, 0, 0])
    d = np.abs(hsv[:, 0] - h0)
    return int(((np.minimum(d, 256 - d) <= 6) & (hsv[:, 1] > 150)).sum())


def test_set_colours_reference_first_and_drawn_as_assigned():
    colours = set_colours(["baseline", "current", "baseline", "sim_b"])
    assert colours == {"baseline": PALETTE[0], "current": PALETTE[1], "sim_b": PALETTE[2]}
    h = [{"channels": [[0.1 * (k + 1), 0.5, 0.4 - 0.1 * k]]} for k in range(3)]  # three distinct curves
    png = channel_histograms({"current": h[0], "baseline": h[1], "sim_b": h[2]},
                             {"current": "real", "baseline": "real", "sim_b": "sim"}, colours)
    assert all(_drawn(png, c) > 20 for c in PALETTE[:3])  # two "real" sets, still two colours
    assert _drawn(png, PALETTE[3]) == 0


@pytest.fixture(scope="module")
def depth_html() -> str:
    hist = [0.0] * 80
    hist[30] = 1.0

    def stats(domain, dtype, unit, per_m, p50):
        return {"domain": domain, "n_frames": 4, "depth": {
            "dtypes": {dtype: 4}, "inferred_units": {unit: 4}, "declared_units_per_m": [per_m] if per_m else [],
            "percentiles": {"p50": p50}, "dropout_mean": 0.0, "dropout_max": 0.0,
            "log_hist": hist, "log_hist_range": [-3, 5]}}

    return render_report({"findings": [], "encoders": [], "sets": {},
                          "stats": {"s": stats("sim", "float32", "m", 1.0, 0.543),
                                    "r": stats("real", "uint16", "mm", None, 543.0)}})


def test_depth_percentiles_in_metres_with_native_unit(depth_html):
    table = depth_html[depth_html.index('id="stats-table"'):]
    assert "depth percentiles (m)" in table
    assert "p50 0.543 m (native unit m)" in table and "p50 0.543 m (native unit mm)" in table
    assert 'alt="statistics plot"' in depth_html


def test_worst_pair_difference_amplified_with_its_gain_stated(tmp_path):
    from perception_gap.reports.plots import pair_strip

    base = np.random.default_rng(0).integers(20, 200, (60, 80, 3)).astype(np.uint8)
    Image.fromarray(base).save(tmp_path / "s.png")
    Image.fromarray(base + 8).save(tmp_path / "r.png")  # every pixel differs by exactly 8 levels
    *_, diff, gain = pair_strip(str(tmp_path / "s.png"), str(tmp_path / "r.png"))
    assert gain == 31.9  # 255 / 8, to one decimal
    with Image.open(io.BytesIO(base64.b64decode(str(diff).split(",", 1)[1]))) as im:
        assert np.asarray(im.convert("L")).mean() > 240  # near white, not near black (8 levels unamplified)
    res = {"findings": [], "sets": {}, "encoders": [{"name": "pixel", "rank": 1, "worst_pairs": [
        {"pair_key": "ep0_001", "sim_path": str(tmp_path / "s.png"), "real_path": str(tmp_path / "r.png"),
         "cosine_distance": 0.0123}]}]}
    html = render_report(res)
    worst = html[html.index('id="worst-pairs"'):]
    assert "&times;31.9" in worst and '<span class="nw">0.0123</span>' in worst


def test_evidence_human_labels_telling_numbers_first_rest_folded():
    ev = {"basis": "pairs", "n_pairs": 59, "stops_sim_minus_real": -0.7154, "luminance_ratio_sim_over_real": 0.609,
          "threshold_stops": 0.3, "stops_iqr": [-0.72, -0.71], "sim_linear_luminance": 0.1, "real_linear_luminance": 0.16,
          "flips": {"sim_only": 17, "examples": [{"kind": "sim_only"}]}}
    html = render_report({"findings": [{"code": "brightness", "severity": "gap", "title": "t", "action": "a",
                                        "evidence": ev}], "sets": {}, "encoders": []})
    f = html[html.index('id="findings"'):]
    shown, folded = f[:f.index("<details")], f[f.index("<details"):f.index("</details>")]
    assert '<td title="stops_sim_minus_real">exposure, sim \u2212 real (stops)</td>' in shown
    assert "luminance, sim / real (ratio)" in shown and "sim linear luminance" in shown
    assert "compared on" in folded and "threshold stops" in folded and "flips: sim only" in folded
    assert "1 (listed below)" in folded and "6 more evidence values" in folded
    assert shown.index("exposure, sim") < shown.index("luminance, sim / real")  # results order kept


def test_report_depth_units_match_the_diagnoses():
    from perception_gap.diagnoses.depth import DEPTH_UNIT_NAMES
    from perception_gap.reports.format import DEPTH_UNIT_NAMES as REPORT_UNITS

    assert REPORT_UNITS == DEPTH_UNIT_NAMES


def test_screen_and_drift_reports_colour_by_set_not_by_domain():
    from perception_gap.reports.html import _set_colours

    drift = {"drift": {"baseline": "week1", "current": "week2"}}
    assert _set_colours(drift, None, None, ["week2", "week1"]) == {"week1": PALETTE[0], "week2": PALETTE[1]}
    screen = {"config": {"kind": "screen"}, "screen": {"ranking": [{"set": "r2"}, {"set": "r1"}, {"set": "r3"}]}}
    got = _set_colours(screen, None, "real", ["r1", "r2", "r3", "real"])
    assert got["real"] == PALETTE[0] and len({got["r1"], got["r2"], got["r3"], got["real"]}) == 4
    # no per-encoder preprocessing table of dashes in a screen report
    html = render_report({**screen, "findings": [], "sets": {}, "encoders": [{"name": "lite0"}]})
    assert 'id="preproc"' not in html and "\u2014 / \u2014" not in html


def test_run_report_plots_read_back_by_value(monkeypatch):
    """gap bars, PCA scatter, cosine histograms and depth histograms of a run report, each read back
    from the drawn figure against the results it was given: values, sides, labels, units."""
    from matplotlib.collections import LineCollection
    from matplotlib.patches import StepPatch

    from tests.figures import bars, capture, hexc, legend, lines, only, points, ticklabels

    rng = np.random.default_rng(0)
    sim_pts, real_pts = rng.normal(0, 1, (7, 2)).round(4).tolist(), rng.normal(3, 1, (5, 2)).round(4).tolist()
    encs = [{"name": n, "centroid_distance_norm": v, "centroid_distance_norm_ci": {"low": v - 0.02, "high": v + 0.05},
             "noise_floor": f, "pca_2d": {"sim": sim_pts[k:], "real": real_pts[k:], "explained_variance": [0.61, 0.2]},
             "paired_cosine": {"shuffled_mean": 0.4 + k / 10, "histogram": {"edges": [0, 0.1, 0.2, 0.3],
                                                                            "counts": [k + 1, 5, 2]}}}
            for k, (n, v, f) in enumerate((("lite0", 0.31, 0.05), ("pixel", 0.12, 0.08)))]
    hist = [0.0] * 80
    hist[30], hist[31] = 0.25, 0.75

    def depth(domain, per_m):
        return {"domain": domain, "depth": {"dtypes": {"uint16": 2}, "declared_units_per_m": [per_m],
                                            "log_hist": hist, "log_hist_range": [-3, 5]}}

    drawn = capture(monkeypatch)
    render_report({"findings": [], "sets": {"gen": {"domain": "sim"}, "cam": {"domain": "real"}},
                   "config": {"sim": "gen", "real": "cam"}, "encoders": encs,
                   "stats": {"gen": depth("sim", 1.0), "cam": depth("real", 1000.0)}})
    colours = {"cam": PALETTE[0].lower(), "gen": PALETTE[1].lower()}  # the real set is the reference colour

    (ax,) = only(drawn, "gap_bars")[0].axes
    assert ticklabels(ax) == ["lite0", "pixel"]
    np.testing.assert_allclose([b[3] for b in bars(ax)], [0.31, 0.12])
    whiskers = [s for c in ax.collections if isinstance(c, LineCollection) for s in c.get_segments()]
    for i, e in enumerate(encs):
        assert any(np.allclose(s, [[i, e["centroid_distance_norm_ci"]["low"]], [i, e["centroid_distance_norm_ci"]["high"]]])
                   for s in whiskers), e["name"]
    ((floors, _, label),) = points(ax)
    np.testing.assert_allclose(floors, [[0, 0.05], [1, 0.08]])
    assert label == "noise floor (real vs real)" and ax.get_ylabel() == "normalized centroid distance"

    pca = only(drawn, "pca_scatter")[0]
    for k, (ax, e) in enumerate(zip(pca.axes, encs)):
        assert ax.get_title() == e["name"] and ax.get_xlabel() == "PC1 (61% of variance)"
        got = {label: (off, fc) for off, fc, label in points(ax)}
        assert set(got) == {"gen", "cam"}
        np.testing.assert_allclose(got["gen"][0], e["pca_2d"]["sim"])
        np.testing.assert_allclose(got["cam"][0], e["pca_2d"]["real"])
        assert {n: got[n][1][0] for n in got} == colours
    assert legend(pca.axes[0]) == colours

    cos = only(drawn, "cosine_histograms")[0]
    for ax, e in zip(cos.axes, encs):
        h = e["paired_cosine"]["histogram"]
        got = bars(ax)
        np.testing.assert_allclose([b[3] for b in got], h["counts"])
        np.testing.assert_allclose([b[0] for b in got], h["edges"][:-1])
        np.testing.assert_allclose([b[2] for b in got], np.diff(h["edges"]))
        ((x, _, _, label, _),) = lines(ax)
        assert x[0] == e["paired_cosine"]["shuffled_mean"] and label == "shuffled pairs (mean)"
        assert ax.get_xlabel() == "cosine distance 1 − cos (unitless)"

    (ax,) = only(drawn, "depth_histograms")[0].axes
    steps = {p.get_label(): p for p in ax.patches if isinstance(p, StepPatch)}
    assert set(steps) == {"gen (sim, native m)", "cam (real, native mm)"}
    for label, per_m in (("gen (sim, native m)", 1.0), ("cam (real, native mm)", 1000.0)):
        values, edges, _ = steps[label].get_data()
        np.testing.assert_allclose(values, hist)
        np.testing.assert_allclose(edges, 10 ** np.linspace(-3, 5, 81) / per_m)
        assert hexc(steps[label].get_edgecolor()) == colours[label.split()[0]]
    # the same bins in metres: 10^(-3 + 8 * 30 / 80) = 1 m for the metre set, 1 mm for the millimetre one
    assert steps["gen (sim, native m)"].get_data()[1][30] == pytest.approx(1.0)
    assert ax.get_xscale() == "log" and ax.get_xlabel().startswith("depth (m")


def test_thumbnail_keeps_orientation_aspect_and_colours(tmp_path):
    from perception_gap.reports.plots import thumbnail

    a = np.zeros((200, 300, 3), np.uint8)
    a[:, :150] = (220, 30, 30)  # left half red
    a[:, 150:] = (30, 30, 220)  # right half blue
    a[:50, :, 1] = 200  # top band adds green
    Image.fromarray(a).save(tmp_path / "f.png")
    raw = base64.b64decode(str(thumbnail(str(tmp_path / "f.png"))).split(",", 1)[1])
    with Image.open(io.BytesIO(raw)) as im:
        t = np.asarray(im.convert("RGB"), dtype=float)
    assert t.shape == (107, 160, 3)  # longest side 160, aspect kept
    for (r0, r1, c0, c1), want in (((30, 100, 5, 70), a[150, 10]), ((30, 100, 90, 155), a[150, 290]),
                                   ((2, 20, 5, 70), a[10, 10])):
        np.testing.assert_allclose(t[r0:r1, c0:c1].reshape(-1, 3).mean(0), want, atol=8)
    assert thumbnail(str(tmp_path / "missing.png")) is None


def test_scatter_labels_are_not_clipped_by_the_figure_edge(monkeypatch):
    """The SVG is written at the figure's own size (not cropped to what is drawn), so every axis
    label, tick label and the title must lie inside the figure."""
    from perception_gap.reports import scatter

    figs = []
    original = scatter._figure
    monkeypatch.setattr(scatter, "_figure", lambda *a: figs.append(original(*a)) or figs[-1])
    gap_vs_probe(ENCODERS)
    (fig,) = figs
    box = fig.get_tightbbox(fig.canvas.get_renderer())  # inches, of everything drawn
    assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.get_figwidth() and box.y1 <= fig.get_figheight()
