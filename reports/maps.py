"""The gap maps (`results["maps"]`) as inline SVG: where in the frame sim and real differ.

Draws what `perception_gap.diagnoses.unexplained.gap_maps` wrote: each set's mean thumbnail in
linear light (greyscale, one scale shared by both sets), the paired mean signed difference sim − real
(diverging scale centred on 0) and mean |sim − real| (sequential scale), each scale with a colour
bar, and the radial, row and column profiles of both sets as line plots. Nothing is computed here
beyond choosing colour-scale and axis limits and laying the numbers out.

Hand-written SVG rather than matplotlib PNG: every cell is a `<rect>` whose fill is its value on the
scale its colour bar states, every profile point sits where its axis ticks say, so the drawing can be
read back (tests/test_report_maps.py), and the section adds no rasterizing time to a report.

The section is read typed (`Maps` of perception_gap.schema); a plain or partial `maps` object is
read into it by `reports.reading`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from markupsafe import Markup

from perception_gap.reports import page
from perception_gap.reports.plots import REAL_COLOR, SIM_COLOR
from perception_gap.reports.reading import section
from perception_gap.reports.safe_text import escape
from perception_gap.schema import Maps, MapSide
from perception_gap.wording import finite, sig

CELL = 6  # px per thumbnail pixel: a 32 x 32 map is 192 px square
BAR_STEPS = 64  # bands in a colour bar
# matplotlib colormap names per scale; positive signed differences (sim brighter) are red.
CMAP_MEAN, CMAP_SIGNED, CMAP_ABS = "gray", "RdBu_r", "viridis"
# Half-width of the signed scale and top of the |difference| scale when a map is all zeros, so that
# the scale is still drawn (and shows 0 as its centre / bottom colour).
EMPTY_SPAN = 1e-3
PLOT_W, PLOT_H = 270, 200
_ML, _MR, _MT, _MB = 50, 10, 22, 42  # profile plot margins (px): left, right, top, bottom
SIDES = ("real", "sim")  # reference first, as the report's set colours


def _grid(v: Any, size: int) -> list[list[Any]] | None:
    """`v` when it is a `size` x `size` list of rows, else None."""
    if isinstance(v, list) and len(v) == size and all(isinstance(r, list) and len(r) == size for r in v):
        return v
    return None


def _values(v: Any) -> list[Any] | None:
    return v if isinstance(v, list) and v and any(finite(x) for x in v) else None


def _finite(*grids: list[list[Any]] | None) -> list[float]:
    return [float(x) for g in grids if g for row in g for x in row if finite(x)]


@lru_cache(maxsize=None)
def _lut(cmap: str) -> tuple[str, ...]:
    """256 hex colours of a matplotlib colormap, low to high."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cm = colormaps[cmap]
    return tuple(to_hex(cm(i / 255)) for i in range(256))


def colour(cmap: str, v: float, lo: float, hi: float) -> str:
    """The hex colour of value `v` on `cmap` scaled linearly from `lo` (first colour) to `hi` (last)."""
    t = (v - lo) / (hi - lo) if hi > lo else 0.5
    return _lut(cmap)[min(255, max(0, int(round(t * 255))))]


def _t(s: Any, limit: int = 40) -> str:
    """Escaped SVG text, long names shortened."""
    s = str(s)
    return str(escape(s if len(s) <= limit else s[: limit - 1] + "\u2026"))


def heatmap(grid: list[list[Any]], lo: float, hi: float, cmap: str, *, ident: str, label: str) -> Markup:
    """A map as an SVG of one `<rect>` per cell (row 0 at the top), coloured on [lo, hi] of `cmap`;
    non-numbers are left blank."""
    n = len(grid)
    side = n * CELL
    out = [f'<svg id="{ident}" class="heatmap" width="{side + 2}" '
           f'height="{side + 2}" viewBox="-1 -1 {side + 2} {side + 2}" shape-rendering="crispEdges" role="img" '
           f'aria-label="{_t(label, 200)}"><title>{_t(label, 200)}</title><g class="cells">']
    for r, row in enumerate(grid):
        for c, v in enumerate(row):
            if finite(v):
                out.append(f'<rect x="{c * CELL}" y="{r * CELL}" width="{CELL}" height="{CELL}" '
                           f'fill="{colour(cmap, float(v), lo, hi)}"/>')
    out.append(f'</g><rect class="frame" x="-0.5" y="-0.5" width="{side + 1}" height="{side + 1}" fill="none" '
               'stroke="#999" stroke-width="1"/></svg>')
    return Markup("".join(out))


def colour_bar(lo: float, hi: float, cmap: str, *, ident: str, units: str, ticks: Sequence[float],
               height: int) -> Markup:
    """A vertical colour bar from `lo` (bottom) to `hi` (top), tick labels at `ticks`, `units` written
    along its right side. The limits are also the root's `data-lo` / `data-hi`."""
    bw, top, w = 14, 6, 74
    out = [f'<svg id="{ident}" class="colour-bar" width="{w}" '
           f'height="{height + 2 * top}" data-lo="{lo!r}" data-hi="{hi!r}" shape-rendering="crispEdges" '
           f'role="img" aria-label="colour scale, {_t(units, 80)}">']
    band = height / BAR_STEPS
    for i in range(BAR_STEPS):
        v = lo + (hi - lo) * (i + 0.5) / BAR_STEPS
        y = top + height - (i + 1) * band
        out.append(f'<rect x="0" y="{y:.2f}" width="{bw}" height="{band + 0.3:.2f}" fill="{colour(cmap, v, lo, hi)}"/>')
    out.append(f'<rect x="0.5" y="{top - 0.5}" width="{bw - 1}" height="{height + 1}" fill="none" stroke="#999"/>')
    for t in ticks:
        y = top + height - (t - lo) / (hi - lo) * height if hi > lo else top + height / 2
        out.append(f'<line class="cb-tick" x1="{bw}" x2="{bw + 4}" y1="{y:.2f}" y2="{y:.2f}" stroke="#333"/>'
                   f'<text class="cb-label" x="{bw + 6}" y="{y + 3.5:.2f}" font-size="10" data-value="{t!r}">'
                   f'{_t(sig(t, 3))}</text>')
    cx = w - 7
    out.append(f'<text class="cb-units" x="{cx}" y="{top + height / 2:.1f}" font-size="10" text-anchor="middle" '
               f'transform="rotate(-90 {cx} {top + height / 2:.1f})">{_t(units, 60)}</text></svg>')
    return Markup("".join(out))


def nice_ticks(lo: float, hi: float, n: int = 4) -> tuple[float, float, list[float], int]:
    """(lower limit, upper limit, ticks, decimals): limits widened to multiples of a 1/2/2.5/5 x 10^k
    step giving about `n` intervals; a zero span is widened first."""
    if not hi > lo:
        pad = max(abs(lo) * 0.05, 0.01)
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    m = next(m for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    step = m * mag
    a, b = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
    dec = max(0, -math.floor(math.log10(step) + 1e-9) + (1 if m == 2.5 else 0))
    return a * step, b * step, [round(k * step, dec + 2) for k in range(a, b + 1)], dec


def profile_plot(series: Mapping[str, tuple[list[float], list[Any]]], colours: Mapping[str, str], *,
                 ident: str, title: str, xlabel: str, ylabel: str, xlim: tuple[float, float],
                 xticks: Sequence[float], xgrid: Sequence[float] = ()) -> Markup | None:
    """A small line plot: one line per side (`real` solid with dots, `sim` dashed with squares) of
    (x, y) points, y limits from the data (nice steps), x limits as given; `xgrid` draws faint
    vertical lines (ring edges). Series go in `<g class="series" data-side=...>` groups."""
    ys_all = [float(y) for xs, ys in series.values() for y in ys if finite(y)]
    if not ys_all:
        return None
    y0, y1, yticks, ydec = nice_ticks(min(ys_all), max(ys_all))
    pw, ph = PLOT_W - _ML - _MR, PLOT_H - _MT - _MB

    def px(x: float) -> float:
        return _ML + (x - xlim[0]) / (xlim[1] - xlim[0]) * pw

    def py(y: float) -> float:
        return _MT + ph - (y - y0) / (y1 - y0) * ph

    out = [f'<svg id="{ident}" class="profile" width="{PLOT_W}" '
           f'height="{PLOT_H}" role="img" aria-label="{_t(title, 80)}" font-size="10">',
           f'<text x="{_ML + pw / 2}" y="13" text-anchor="middle" font-size="11">{_t(title, 60)}</text>']
    for g in xgrid:
        out.append(f'<line class="xgrid" x1="{px(g):.2f}" x2="{px(g):.2f}" y1="{_MT}" y2="{_MT + ph}" '
                   'stroke="#e4e4e4"/>')
    for t in yticks:
        y = py(t)
        out.append(f'<line class="ytick" x1="{_ML - 4}" x2="{_ML}" y1="{y:.2f}" y2="{y:.2f}" stroke="#333"/>'
                   f'<line x1="{_ML}" x2="{_ML + pw}" y1="{y:.2f}" y2="{y:.2f}" stroke="#f0f0f0"/>'
                   f'<text class="ylabel-tick" x="{_ML - 6}" y="{y + 3.5:.2f}" text-anchor="end">{t:.{ydec}f}</text>')
    for t in xticks:
        x = px(t)
        out.append(f'<line class="xtick" x1="{x:.2f}" x2="{x:.2f}" y1="{_MT + ph}" y2="{_MT + ph + 4}" stroke="#333"/>'
                   f'<text class="xlabel-tick" x="{x:.2f}" y="{_MT + ph + 15}" text-anchor="middle">{t:g}</text>')
    out.append(f'<rect x="{_ML}" y="{_MT}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
    for side in SIDES:
        if side not in series:
            continue
        xs, ys = series[side]
        pts = [(px(float(x)), py(float(y))) for x, y in zip(xs, ys) if finite(x) and finite(y)]
        col = colours.get(side, SIM_COLOR if side == "sim" else REAL_COLOR)
        dash = ' stroke-dasharray="5 3"' if side == "sim" else ""
        out.append(f'<g class="series" data-side="{side}"><polyline points="'
                   + " ".join(f"{x:.2f},{y:.2f}" for x, y in pts)
                   + f'" fill="none" stroke="{col}" stroke-width="1.6"{dash}/>')
        for x, y in pts:
            out.append(f'<rect x="{x - 2.5:.2f}" y="{y - 2.5:.2f}" width="5" height="5" fill="{col}"/>' if side == "sim"
                       else f'<circle cx="{x:.2f}" cy="{y:.2f}" r="2.6" fill="{col}"/>')
        out.append("</g>")
    out.append(f'<text x="{_ML + pw / 2}" y="{PLOT_H - 6}" text-anchor="middle">{_t(xlabel, 60)}</text>'
               f'<text x="12" y="{_MT + ph / 2}" text-anchor="middle" transform="rotate(-90 12 {_MT + ph / 2})">'
               f'{_t(ylabel, 40)}</text></svg>')
    return Markup("".join(out))


def _swatch(side: str, col: str) -> Markup:
    """The legend mark of a side's profile line (drawn in the HTML key, off the plots)."""
    mark = ('<rect x="11" y="3" width="5" height="5" fill="{c}"/>' if side == "sim"
            else '<circle cx="13.5" cy="5.5" r="2.6" fill="{c}"/>').format(c=col)
    dash = ' stroke-dasharray="5 3"' if side == "sim" else ""
    return Markup(f'<svg class="swatch" width="27" height="11"><line x1="0" x2="27" '
                  f'y1="5.5" y2="5.5" stroke="{col}" stroke-width="1.6"{dash}/>{mark}</svg>')


def _sides(maps: Maps) -> dict[str, MapSide]:
    """The sides the maps hold, in `SIDES` order."""
    both = {"real": maps.real, "sim": maps.sim}
    return {s: m for s in SIDES if (m := both[s]) is not None}


def _profiles(maps: Maps, size: int, colours: Mapping[str, str]) -> list[Markup]:
    sides = _sides(maps)
    out = []
    radial = {s: _values(m.radial) for s, m in sides.items()}
    radial = {s: v for s, v in radial.items() if v}
    if radial:
        k = max(len(v) for v in radial.values())
        edges = maps.ring_edges
        if isinstance(edges, list) and len(edges) == k + 1 and all(finite(e) for e in edges):
            xs = [(edges[i] + edges[i + 1]) / 2 for i in range(k)]
            xlim, xticks, xgrid = (0.0, float(edges[-1])), [0, 0.5, 1], edges[1:-1]
            xlabel = "radius (0 = centre, 1 = corner)"
        else:
            xs, xlim, xticks, xgrid, xlabel = list(range(k)), (-0.5, k - 0.5), list(range(k)), [], "ring (0 = centre)"
        p = profile_plot({s: (xs, v) for s, v in radial.items()}, colours, ident="profile-radial",
                         title="Radial profile (mean per ring)", xlabel=xlabel, ylabel="mean linear light",
                         xlim=xlim, xticks=xticks, xgrid=xgrid)
        if p:
            out.append(p)
    step = 10 if size > 12 else 2
    for profile, ident, title, xlabel in (
            ({s: m.rows for s, m in sides.items()}, "profile-rows", "Row profile (mean across each row)", "row (0 = top)"),
            ({s: m.cols for s, m in sides.items()}, "profile-cols", "Column profile (mean down each column)",
             "column (0 = left)")):
        vals = {s: v for s, v in ((s, _values(p)) for s, p in profile.items()) if v}
        if vals:
            p = profile_plot({s: (list(range(len(v))), v) for s, v in vals.items()}, colours, ident=ident, title=title,
                             xlabel=xlabel, ylabel="mean linear light", xlim=(0.0, float(size - 1)),
                             xticks=list(range(0, size, step)))
            if p:
                out.append(p)
    return out


SECTION = r"""<section id="maps">
<h2>Where the frames differ</h2>
<p class="muted">Mean {{ size }}&times;{{ size }} luma thumbnails of the whole frame in linear light (0 = black, 1 = full scale), row 0 at the top.
{% if paired %}Difference maps average sim &minus; real over {{ paired.n_pairs }} pairs{% if turned %}, each real frame turned by <code>{{ turned }}</code> first (the orientation the checks found), so that a pixel shows the same place in both{% endif %}.{% endif %}</p>
<div class="maps-row">
{% for m in means %}<figure>{{ m.svg }}<figcaption>{{ m.side }}{% if m.name %} <span class="mono">{{ m.name }}</span>{% endif %}: mean of {{ m.n }} frames</figcaption></figure>
{% endfor %}<figure>{{ mean_bar }}<figcaption>one scale for both</figcaption></figure>
</div>
{% if paired %}<div class="maps-row">
<figure>{{ paired.signed }}<figcaption>mean signed difference, sim &minus; real (red: sim brighter, blue: sim darker)</figcaption></figure>
<figure>{{ paired.signed_bar }}</figure>
<figure>{{ paired.abs }}<figcaption>mean |sim &minus; real| per pair</figcaption></figure>
<figure>{{ paired.abs_bar }}</figure>
</div>
{% else %}<p class="muted">No difference maps: they need paired frames, and these sets were compared as distributions only.</p>
{% endif %}
{% if profiles %}<p class="maps-key">{% for k in key %}{{ k.swatch }} {{ k.side }}{% if k.name %} <span class="mono">{{ k.name }}</span>{% endif %}{% if not loop.last %} &nbsp; {% endif %}{% endfor %}
<span class="muted">&nbsp; Radial profile: the mean of each ring (between the faint lines) at its middle radius.</span></p>
<div class="maps-row">{% for p in profiles %}<figure>{{ p }}</figure>{% endfor %}</div>{% endif %}
</section>
"""


def maps_section(maps: Maps | Mapping[str, Any] | None, names: Mapping[str, Any],
                 colours: Mapping[str, str]) -> Markup | None:
    """The "Where the frames differ" section of the report, or None when `maps` holds no drawable map.

    Args:
        maps: `results.maps` (see the module docstring), typed or its JSON form; anything else gives None.
        names: set name per side (`{"sim": ..., "real": ...}`), as captions.
        colours: colour per side (`{"sim": ..., "real": ...}`) for the profile lines.

    Returns:
        The section's HTML (names escaped).
    """
    sec = section(Maps, maps)
    if sec is None:
        return None
    size = sec.size if isinstance(sec.size, int) and sec.size > 1 else 32
    sides = _sides(sec)
    grids = {s: _grid(sides[s].mean_linear if s in sides else None, size) for s in ("sim", "real")}
    if not any(grids.values()):
        return None
    side_px = size * CELL + 2
    # One greyscale for both sets, from black at 0 so brightness ratios read as they are.
    hi = max(_finite(*grids.values()) + [0.0]) or 1.0
    means = [{"side": s, "name": names.get(s), "n": sides[s].n_frames,
              "svg": heatmap(grids[s], 0.0, hi, CMAP_MEAN, ident=f"map-{s}", label=f"{s} mean, linear light")}
             for s in ("sim", "real") if grids[s]]
    mean_bar = colour_bar(0.0, hi, CMAP_MEAN, ident="bar-mean", units="linear light", ticks=[0.0, hi / 2, hi],
                          height=side_px - 2)
    paired = None
    pr = sec.paired
    if pr is not None:
        sg, ab = _grid(pr.mean_signed_diff, size), _grid(pr.mean_abs_diff, size)
        if sg and ab:
            m = max([abs(v) for v in _finite(sg)] + [0.0]) or EMPTY_SPAN
            top = max(_finite(ab) + [0.0]) or EMPTY_SPAN
            paired = {"n_pairs": pr.n_pairs,
                      "signed": heatmap(sg, -m, m, CMAP_SIGNED, ident="map-signed",
                                        label="mean signed difference, sim minus real, linear light"),
                      "signed_bar": colour_bar(-m, m, CMAP_SIGNED, ident="bar-signed", units="linear light, sim \u2212 real",
                                               ticks=[-m, 0.0, m], height=side_px - 2),
                      "abs": heatmap(ab, 0.0, top, CMAP_ABS, ident="map-abs",
                                     label="mean absolute difference, linear light"),
                      "abs_bar": colour_bar(0.0, top, CMAP_ABS, ident="bar-abs", units="linear light, |sim \u2212 real|",
                                            ticks=[0.0, top / 2, top], height=side_px - 2)}
    side_colours = {s: colours.get(s) or (SIM_COLOR if s == "sim" else REAL_COLOR) for s in SIDES}
    profiles = _profiles(sec, size, side_colours)
    key = [{"side": s, "name": names.get(s), "swatch": _swatch(s, side_colours[s])} for s in sides]
    turned = sec.orientation_applied
    return Markup(page.compiled(SECTION).render(
        size=size, means=means, mean_bar=mean_bar, paired=paired, profiles=profiles, key=key,
        turned=turned if isinstance(turned, str) and turned != "identity" else None))
