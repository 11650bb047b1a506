"""Read report plots back by value: the matplotlib figures the report drew, captured as they are
encoded, and what each axes holds (bars, points, lines, legend entries, labels, colours).

The report's PNGs cannot be read back to numbers, so the tests capture each Figure at the moment
`_png` encodes it (the real Figure, drawn by the real plot function; the encoding still runs) and
read its artists: a bar's height, a point's position and colour, a legend's text and swatch
colour. Which plot function drew a figure is recorded with it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.colors import to_hex


@dataclass
class Drawn:
    """One captured figure: the plot function that drew it and the Figure itself."""

    function: str
    figure: Any

    @property
    def axes(self) -> list:
        # colour bars are axes too; the data axes are the ones with a title, a label or data
        return [a for a in self.figure.axes if a.get_label() != "<colorbar>"]


def capture(monkeypatch) -> list[Drawn]:
    """Patch every report module's `_png` so each encoded figure is also kept; returns the list
    the figures are appended to, in drawing order."""

    from perception_gap.reports import evaluation, geometry, plots

    drawn: list[Drawn] = []
    original = plots._png

    def keep(fig):
        drawn.append(Drawn(sys._getframe(1).f_code.co_name, fig))
        return original(fig)

    for mod in (plots, evaluation, geometry):
        monkeypatch.setattr(mod, "_png", keep)
    return drawn


def only(drawn: list[Drawn], function: str) -> list[Drawn]:
    return [d for d in drawn if d.function == function]


def hexc(c) -> str:
    return to_hex(c, keep_alpha=False).lower()


def bars(ax) -> list[tuple[float, float, float, float, str]]:
    """Every bar as (x, y, width, height, face colour), left/bottom corner, in drawing order."""
    from matplotlib.patches import Rectangle

    return [(p.get_x(), p.get_y(), p.get_width(), p.get_height(), hexc(p.get_facecolor()))
            for p in ax.patches if isinstance(p, Rectangle)]


def points(ax) -> list[tuple[np.ndarray, list[str], str]]:
    """Every scatter collection as (N x 2 offsets, face colours per point, label)."""
    from matplotlib.collections import PathCollection

    out = []
    for c in ax.collections:
        if isinstance(c, PathCollection):
            off = np.asarray(c.get_offsets(), dtype=float).reshape(-1, 2)
            fc = [hexc(x) for x in c.get_facecolors()]
            out.append((off, fc, c.get_label()))
    return out


def lines(ax) -> list[tuple[np.ndarray, np.ndarray, str, str, str]]:
    """Every line as (x data, y data, colour, label, marker), in drawing order."""
    return [(np.asarray(ln.get_xdata(), dtype=float), np.asarray(ln.get_ydata(), dtype=float),
             hexc(ln.get_color()), ln.get_label(), str(ln.get_marker())) for ln in ax.get_lines()]


def legend(ax) -> dict[str, str]:
    """Legend text -> the colour of its swatch (line, marker, patch or collection); a figure of several
    panels puts the first panel's legend under the figure (`legend_below`), read as that panel's."""
    lg = ax.get_legend()
    if lg is None and ax.figure.legends and ax is ax.figure.axes[0]:
        lg = ax.figure.legends[0]
    if lg is None:
        return {}
    out = {}
    for text, handle in zip(lg.get_texts(), lg.legend_handles):
        if hasattr(handle, "get_markerfacecolor") and handle.get_marker() not in (None, "None", ""):
            colour = handle.get_markerfacecolor()
        elif hasattr(handle, "get_color") and not hasattr(handle, "get_facecolor"):
            colour = handle.get_color()
        elif hasattr(handle, "get_facecolor"):
            fc = handle.get_facecolor()
            colour = fc[0] if np.ndim(fc) == 2 else fc
        else:
            colour = handle.get_color()
        out[text.get_text()] = hexc(colour)
    return out


def ticklabels(ax, axis: str = "x") -> list[str]:
    labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in labels]


def _legend_entry(ax, name: str, domain: str | None) -> str:
    """The legend colour of a set, whose entry reads `name (domain)` (or `name`)."""
    entries = legend(ax)
    key = f"{name} ({domain})" if domain else name
    assert key in entries, (key, list(entries))
    return entries[key]


def check_grouped_bars(drawn: Drawn, groups: list[str], series: dict[str, list[float]],
                       domains: dict[str, str]) -> dict[str, str]:
    """One bar per set in each group, at the set's own value, the set's legend colour on its bars;
    returns set -> colour."""
    (ax,) = drawn.axes
    assert ticklabels(ax) == groups
    got = bars(ax)
    assert len(got) == len(groups) * len(series)
    colours = {}
    for j, (name, values) in enumerate(series.items()):
        mine = got[j * len(groups):(j + 1) * len(groups)]
        np.testing.assert_allclose([h for *_, h, _ in mine], values, rtol=1e-9, err_msg=name)
        # group i's bars sit around x = i, in series order
        assert [round(x + w / 2) for x, _, w, _, _ in mine] == list(range(len(groups)))
        (colour,) = {c for *_, c in mine}
        assert _legend_entry(ax, name, domains.get(name)) == colour
        colours[name] = colour
    return colours


def check_channel_histograms(drawn: Drawn, hists: dict[str, list[list[float]]],
                             domains: dict[str, str]) -> dict[str, str]:
    """One panel per channel; each set's curve holds its own histogram over [0, 1] of full scale."""
    from matplotlib.patches import StepPatch

    nch = max(len(h) for h in hists.values())
    axes = drawn.axes
    assert [a.get_title() for a in axes] == (["R", "G", "B"] if nch == 3 else [f"channel {i}" for i in range(nch)])
    colours = {}
    for ch, ax in enumerate(axes):
        steps = [p for p in ax.patches if isinstance(p, StepPatch)]
        assert len(steps) == len(hists)
        for step, (name, h) in zip(steps, hists.items()):
            values, edges, _ = step.get_data()
            np.testing.assert_allclose(values, h[ch], err_msg=f"{name} channel {ch}")
            np.testing.assert_allclose(edges, np.linspace(0, 1, len(h[ch]) + 1))
            colour = hexc(step.get_edgecolor())
            assert colours.setdefault(name, colour) == colour
        assert ax.get_xlabel() == "fraction of full scale"
    for name, colour in colours.items():  # the legend stands beside the last panel
        assert _legend_entry(axes[-1], name, domains.get(name)) == colour
    return colours


def check_stats_plots(drawn: list[Drawn], results: dict) -> dict[str, str]:
    """The statistics plots of a run, screen or drift report against results.json's `stats`:
    channel means, luma percentiles and channel histograms, each set in one colour throughout."""
    stats = results["stats"]
    names = list(stats)
    domains = {n: stats[n]["domain"] for n in names}
    figs = only(drawn, "grouped_bars")
    means, lums = figs
    assert means.axes[0].get_title() == "Per-channel mean (median over frames)"
    assert means.axes[0].get_ylabel() == "mean value (native pixel units)"
    c1 = check_grouped_bars(means, ["R", "G", "B"], {n: stats[n]["channel_mean"] for n in names}, domains)
    keys = list(stats[names[0]]["lum_percentiles"])
    assert lums.axes[0].get_title() == "Luma percentiles"
    c2 = check_grouped_bars(lums, keys, {n: [stats[n]["lum_percentiles"][k] for k in keys] for n in names}, domains)
    (hist,) = only(drawn, "channel_histograms")
    c3 = check_channel_histograms(hist, {n: stats[n]["channel_hist"]["channels"] for n in names}, domains)
    assert c1 == c2 == c3 and len(set(c1.values())) == len(c1)  # one colour per set, the same in every plot
    return c1


def html_tables(html: str) -> dict[str, list[list[str]]]:
    """Every table of a report page by its id (else the heading just before it): header row first,
    each cell's text as shown."""
    from html.parser import HTMLParser

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.out, self.heading, self.rows, self.cell, self.name, self.in_h = {}, "", None, None, None, False

        def handle_starttag(self, tag, attrs):
            if tag == "h2":
                self.in_h, self.heading = True, ""
            elif tag == "table":
                self.rows, self.name = [], dict(attrs).get("id") or self.heading
            elif tag == "tr" and self.rows is not None:
                self.rows.append([])
            elif tag in ("td", "th") and self.rows is not None:
                self.cell = ""

        def handle_endtag(self, tag):
            if tag == "h2":
                self.in_h = False
            elif tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append(self.cell.strip())
                self.cell = None
            elif tag == "table" and self.rows is not None:
                self.out[self.name] = self.rows
                self.rows = None

        def handle_data(self, data):
            if self.in_h:
                self.heading += data
            if self.cell is not None:
                self.cell += data

    p = Tables()
    p.feed(html)
    return p.out


def cell(text: str) -> float:
    """A table cell's number (3 significant digits shown: compare with rel=5e-3)."""
    return float(text.replace("\u2212", "-").lstrip("+"))
