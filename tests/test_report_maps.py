"""The gap maps section read back: cell colours inverted through their colour bar, profile points
through their axis ticks, against the numbers of a synthetic vignette written into results."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from matplotlib import colormaps

from perception_gap.reports import render_report

N = 32
EDGES = [0.0, 0.3, 0.5, 0.7, 0.85, 1.0]
_yy, _xx = np.mgrid[0:N, 0:N]
_c = (N - 1) / 2
RADIUS = np.hypot(_yy - _c, _xx - _c) / math.hypot(_c, _c)
# sim: a vignette, 0.5 at the centre falling to 0.25 in the corners; real: flat 0.4 with a dark strip
# on the left edge (asymmetric, so a transposed, mirrored or swapped drawing shows).
_R2 = (RADIUS**2 - RADIUS.min() ** 2) / (1 - RADIUS.min() ** 2)  # 0 on the four centre pixels, 1 in the corners
SIM = 0.5 - 0.25 * _R2
REAL = np.full((N, N), 0.4)
REAL[:, :6] = 0.1
DIFF = SIM - REAL
DIFF[20:, 20:] = 0.0  # a block of no difference: the diverging scale's centre colour
SIM_RADIAL = [0.49, 0.45, 0.41, 0.35, 0.29]
REAL_RADIAL = [0.4, 0.37, 0.33, 0.3, 0.26]
HOSTILE = '<img src=x onerror="alert(1)">'


def _set(m: np.ndarray, radial: list[float], n: int) -> dict:
    return {"mean_linear": m.round(4).tolist(), "radial": radial, "rows": m.mean(axis=1).round(4).tolist(),
            "cols": m.mean(axis=0).round(4).tolist(), "n_frames": n}


def make_results(*, paired: bool = True, sim: str = "sim_v2", see: str = "maps (radial profiles and difference maps)") -> dict:
    maps = {"size": N, "ring_edges": EDGES, "sim": _set(SIM, SIM_RADIAL, 40), "real": _set(REAL, REAL_RADIAL, 45),
            "paired": None, "orientation_applied": None}
    if paired:
        maps["paired"] = {"n_pairs": 38, "mean_signed_diff": DIFF.round(4).tolist(),
                          "mean_abs_diff": np.abs(DIFF).round(4).tolist()}
    return {"config": {"sim": sim, "real": "real_cam"}, "sets": {}, "encoders": [], "maps": maps,
            "findings": [
                {"code": "vignetting", "severity": "gap", "title": "Sim darkens towards the corners.", "action": "a",
                 "evidence": {"basis": "pairs", "n_pairs": 38, "corner_over_centre_stops": -1.0, "see": see}},
                {"code": "brightness", "severity": "gap", "title": "Sim is darker.", "action": "b",
                 "evidence": {"stops_sim_minus_real": -0.3}}]}


@pytest.fixture(scope="module")
def html() -> str:
    return render_report(make_results())


def _svg(html: str, ident: str) -> str:
    m = re.search(rf'<svg id="{ident}"[^>]*>.*?</svg>', html, flags=re.DOTALL)
    assert m, ident
    return m.group(0)


def _cells(svg: str) -> dict[tuple[int, int], np.ndarray]:
    """(row, col) -> RGB in [0, 1] of each drawn cell; a cell is as wide as the map is wide / N."""
    cells = svg[svg.index('<g class="cells">'):svg.index("</g>")]
    rects = re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="[\d.]+" fill="#([0-9a-f]{6})"/>', cells)
    w = float(rects[0][2])
    return {(round(float(y) / w), round(float(x) / w)): np.array([int(f[i:i + 2], 16) for i in (0, 2, 4)]) / 255
            for x, y, _, f in rects}


def _bar(html: str, ident: str) -> tuple[float, float, dict[str, float], str]:
    """(low, high, tick label -> y, units) of a colour bar."""
    svg = _svg(html, ident)
    lo, hi = (float(re.search(rf'data-{k}="([^"]+)"', svg).group(1)) for k in ("lo", "hi"))
    ticks = {t: float(y) for y, t in re.findall(r'<text class="cb-label" x="[\d.]+" y="([\d.]+)"[^>]*>([^<]*)</text>', svg)}
    units = re.search(r'<text class="cb-units"[^>]*>([^<]*)</text>', svg).group(1)
    return lo, hi, ticks, units


def _drawn(html: str, ident: str, bar: str, cmap: str) -> np.ndarray:
    """A map's cells read back: each the value whose colour on matplotlib's `cmap`, scaled over its
    colour bar's limits, is nearest the cell's fill."""
    lo, hi, _, _ = _bar(html, bar)
    cells = _cells(_svg(html, ident))
    assert sorted(cells) == [(r, c) for r in range(N) for c in range(N)]
    lut = colormaps[cmap](np.linspace(0, 1, 1024))[:, :3]
    rgb = np.array([[cells[r, c] for c in range(N)] for r in range(N)])
    nearest = np.argmin(((rgb[:, :, None, :] - lut[None, None]) ** 2).sum(axis=-1), axis=-1)
    return lo + (hi - lo) * nearest / 1023


def test_mean_images_drawn_where_they_are_and_not_swapped(html):
    lo, hi, ticks, units = _bar(html, "bar-mean")
    assert (lo, hi) == (0.0, 0.5) and units == "linear light"  # one scale from black, top = the brightest set
    for ident, want in (("map-sim", SIM), ("map-real", REAL)):
        cells = _cells(_svg(html, ident))
        grey = np.array([[cells[r, c][0] for c in range(N)] for r in range(N)])
        assert all(np.ptp(cells[k]) < 1e-9 for k in cells)  # greyscale
        np.testing.assert_allclose(grey * hi, want, atol=hi / 255 + 1e-4)
    # the captions name each map's own set
    for ident, caption in (("map-sim", "sim <span class=\"mono\">sim_v2</span>: mean of 40 frames"),
                           ("map-real", "real <span class=\"mono\">real_cam</span>: mean of 45 frames")):
        fig = html[html.index(f'<svg id="{ident}"'):]
        assert fig[fig.index("<figcaption>"):].startswith(f"<figcaption>{caption}</figcaption>")


def test_colour_bars_state_the_limits_the_cells_are_drawn_on(html):
    m = float(np.abs(DIFF.round(4)).max())
    lo, hi, ticks, units = _bar(html, "bar-signed")
    assert (lo, hi) == (-m, m) and units == "linear light, sim \u2212 real"  # symmetric about 0
    assert set(ticks) == {f"{-m:.3g}", "0", f"{m:.3g}"}
    assert ticks["0"] == pytest.approx((ticks[f"{-m:.3g}"] + ticks[f"{m:.3g}"]) / 2)  # 0 in the middle
    lo, hi, ticks, units = _bar(html, "bar-abs")
    assert (lo, hi) == (0.0, m) and units == "linear light, |sim \u2212 real|"
    lo, hi, ticks, _ = _bar(html, "bar-mean")
    assert ticks["0"] > ticks["0.25"] > ticks["0.5"]  # low at the bottom (SVG y grows downwards)


def test_difference_maps_read_back_with_their_sign(html):
    signed = _drawn(html, "map-signed", "bar-signed", "RdBu_r")
    m = float(np.abs(DIFF).max())
    np.testing.assert_allclose(signed, DIFF, atol=2 * m / 255 + 1e-3)
    cells = _cells(_svg(html, "map-signed"))
    assert cells[10, 2][0] > cells[10, 2][2]  # sim brighter than the dark real strip: red
    assert np.ptp(cells[25, 25]) < 0.05 and cells[25, 25].min() > 0.9  # no difference: near white
    absolute = _drawn(html, "map-abs", "bar-abs", "viridis")
    np.testing.assert_allclose(absolute, np.abs(DIFF), atol=m / 255 + 1e-3)
    assert "each real frame turned" not in html  # no orientation applied, none claimed


def _axis(svg: str, axis: str) -> tuple[float, float]:
    """(scale, offset) mapping a value to its SVG coordinate, fitted through the axis' tick marks and labels."""
    pos = "y1" if axis == "y" else "x1"
    marks = re.findall(rf'<line class="{axis}tick" [^>]*{pos}="([-\d.]+)"[^>]*/><text class="{axis}label-tick"[^>]*>([^<]*)</text>'
                       if axis == "x" else
                       rf'<line class="{axis}tick" [^>]*{pos}="([-\d.]+)"[^>]*/><line [^>]*/><text class="{axis}label-tick"[^>]*>([^<]*)</text>',
                       svg)
    assert len(marks) >= 3, (axis, svg[:300])
    coords, values = np.array([float(p) for p, _ in marks]), np.array([float(t) for _, t in marks])
    scale, offset = np.polyfit(values, coords, 1)
    np.testing.assert_allclose(scale * values + offset, coords, atol=0.02)  # the ticks are evenly placed
    return scale, offset


def _series(svg: str, side: str) -> np.ndarray:
    """(n, 2) data points of a side's line, read back through the axes."""
    pts = re.search(rf'<g class="series" data-side="{side}"><polyline points="([^"]+)"', svg).group(1)
    xy = np.array([[float(v) for v in p.split(",")] for p in pts.split()])
    (sx, ox), (sy, oy) = _axis(svg, "x"), _axis(svg, "y")
    return np.column_stack([(xy[:, 0] - ox) / sx, (xy[:, 1] - oy) / sy])


def test_profiles_plot_the_numbers_of_each_set(html):
    mids = [(a + b) / 2 for a, b in zip(EDGES[:-1], EDGES[1:])]
    svg = _svg(html, "profile-radial")
    for side, radial in (("sim", SIM_RADIAL), ("real", REAL_RADIAL)):
        np.testing.assert_allclose(_series(svg, side), np.column_stack([mids, radial]), atol=2e-3)
    assert 'stroke-dasharray' in svg[svg.index('data-side="sim"'):]  # sim dashed, real solid
    assert 'stroke-dasharray' not in re.search(r'data-side="real">.*?</g>', svg, flags=re.DOTALL).group(0)
    for ident, m in (("profile-rows", None), ("profile-cols", None)):
        svg = _svg(html, ident)
        for side, img in (("sim", SIM), ("real", REAL)):
            want = (img.mean(axis=1) if ident == "profile-rows" else img.mean(axis=0)).round(4)
            np.testing.assert_allclose(_series(svg, side), np.column_stack([np.arange(N), want]), atol=2e-3)
    # axes labelled; the legend is the HTML key above the plots, not on them
    assert "row (0 = top)" in html and "column (0 = left)" in html and "mean linear light" in svg
    assert "sim_v2" not in "".join(_svg(html, i) for i in ("profile-radial", "profile-rows", "profile-cols"))
    key = html[html.index('<p class="maps-key">'):]
    assert key.index("real_cam") < key.index("sim_v2") < key.index("</p>")


def test_findings_that_see_the_maps_link_to_them(html):
    findings = html[html.index('<section id="findings">'):html.index("</section>", html.index('<section id="findings">'))]
    blocks = findings.split('<div class="finding ')[1:]
    assert '<a href="#maps">' in blocks[0] and "vignetting" in blocks[0]
    assert '<a href="#maps">' not in blocks[1]
    verdict = html[html.index('<section id="verdict">'):html.index("</section>")]
    assert "vignetting" in verdict and '<a href="#maps">' in verdict  # the first finding is also the verdict
    assert html.index('<section id="findings">') < html.index('<section id="maps">') < html.index('<section id="stats">')
    assert '<a href="#maps">Maps</a>' in html[html.index("<nav"):html.index("</nav>")]


def test_unpaired_sets_draw_means_only_and_names_are_escaped():
    html = render_report(make_results(paired=False, sim="sim" + HOSTILE))
    assert 'id="map-sim"' in html and 'id="map-real"' in html and 'id="profile-radial"' in html
    assert 'id="map-signed"' not in html and "No difference maps: they need paired frames" in html
    assert HOSTILE not in html and "sim&lt;img src=x onerror=" in html
    # no maps in results: no section and no link to it
    res = make_results()
    res["maps"] = None
    html = render_report(res)
    assert 'id="maps"' not in html and 'href="#maps"' not in html


def test_orientation_applied_is_stated():
    res = make_results()
    res["maps"]["orientation_applied"] = "rotate_180"
    assert "each real frame turned by <code>rotate_180</code> first" in render_report(res)
