"""Small matplotlib figures (Agg canvas, no pyplot global state) as inline base64 PNG data URIs.

The figures draw numbers already present in results.json; nothing is computed here beyond
laying them out.
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any, Sequence

from markupsafe import Markup

from perception_gap.reports.reading import entries
from perception_gap.reports.safe_text import neutralize
from perception_gap.schema import EncoderEntry, ScreenRank
from perception_gap.wording import finite

DPI = 80
MAX_BARS = 40
# Okabe-Ito: distinguishable under the common colour-vision deficiencies. One colour per set, kept
# the same in every plot of a report (see set_colours); the reference set (real, baseline) comes first.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442")
# two-sided pages (rollouts, geometry): the reference (real) side first, as set_colours orders sets
REAL_COLOR, SIM_COLOR = PALETTE[0], PALETTE[1]


def set_colours(names: Sequence[Any]) -> dict[str, str]:
    """A colour per set name in the order given (first = reference set), from PALETTE."""
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(dict.fromkeys(str(x) for x in names))}


def _colour(colours: dict[str, str] | None, name: str, j: int) -> str:
    return (colours or {}).get(name) or PALETTE[j % len(PALETTE)]


def _label(s: Any, limit: int = 24) -> str:
    """Plot-safe text: mathtext dollars escaped, long names shortened, bidirectional controls visible."""
    t = neutralize(str(s))
    t = t if len(t) <= limit else t[: limit - 1] + "\u2026"
    return t.replace("$", r"\$")


def legend_beside(ax, fontsize: float = 7, **kw) -> None:
    """The axes' legend outside it, to the right of its top edge, so that it never covers data
    (the PNG is cropped to what is drawn, so the legend widens the image instead)."""
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)


def legend_below(fig, ax, fontsize: float = 7) -> None:
    """The legend of `ax` under the whole figure, in one row: for figures of several panels, where a
    legend beside one panel would cover the next (the PNG is cropped to what is drawn)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, fontsize=fontsize, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=len(handles), frameon=False)


def _figure(w: float, h: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> Markup:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    # base64 output holds only [A-Za-z0-9+/=]: safe to mark up.
    return Markup("data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii"))


def _name(e: EncoderEntry) -> Any:
    return "?" if e.name is None else e.name


def gap_bars(encoders: Sequence[EncoderEntry | dict[str, Any]]) -> Markup | None:
    """Bars of the normalized centroid distance with CI whiskers and each noise floor as a tick
    (`encoders`: the typed entries or their JSON form)."""
    rows = [e for e in entries(EncoderEntry, list(encoders[:MAX_BARS])) if finite(e.centroid_distance_norm)]
    if not rows:
        return None
    fig = _figure(max(4.0, 0.6 * len(rows) + 2), 3.6)
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    vals = [float(e.centroid_distance_norm) for e in rows]  # type: ignore[arg-type]
    lo, hi = [], []
    for e, v in zip(rows, vals):
        c = e.centroid_distance_norm_ci
        low, high = (c.low, c.high) if c is not None else (None, None)
        lo.append(max(0.0, v - low) if finite(low) else 0.0)
        hi.append(max(0.0, high - v) if finite(high) else 0.0)
    ax.bar(xs, vals, color="#5b8def", yerr=[lo, hi], capsize=4, label="centroid distance (norm.)")
    floors = [(i, float(e.noise_floor)) for i, e in enumerate(rows) if finite(e.noise_floor)]  # type: ignore[arg-type]
    if floors:
        ax.scatter([i for i, _ in floors], [f for _, f in floors], marker="_", s=500, color="#c0392b",
                   zorder=3, label="noise floor (real vs real)")
    ax.set_xticks(xs)
    ax.set_xticklabels([_label(_name(e)) for e in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("normalized centroid distance")
    ax.set_title("Encoders: gap with CI and noise floor", fontsize=10)
    legend_beside(ax, 8)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def grouped_bars(title: str, groups: Sequence[str], series: dict[str, Sequence[Any]], ylabel: str,
                 domains: dict[str, str] | None = None, colours: dict[str, str] | None = None) -> Markup | None:
    """Grouped bars: one group per label in `groups`, one bar per series (set) in each group."""
    series = {k: v for k, v in list(series.items())[:6] if isinstance(v, (list, tuple)) and any(finite(x) for x in v)}
    if not series or not groups:
        return None
    groups = list(groups)[:MAX_BARS]
    fig = _figure(max(4.0, 0.35 * len(groups) * len(series) + 2), 3.2)
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    for j, (name, vals) in enumerate(series.items()):
        dom = (domains or {}).get(name)
        color = _colour(colours, name, j)
        ys = [float(v) if finite(v) else 0.0 for v in list(vals)[: len(groups)]]
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(ys))]
        ax.bar(xs, ys, width=width * 0.95, color=color, alpha=0.85 if dom else 0.7,
               label=_label(f"{name} ({dom})" if dom else name, 40))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([_label(g) for g in groups], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(_label(title, 60), fontsize=10)
    legend_beside(ax, 8)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def thumbnail(path: str, max_side: int = 160) -> Markup | None:
    """A small JPEG data URI of an image file named in results; None when it cannot be read."""
    try:
        from PIL import Image

        with Image.open(path) as im:
            im.draft("RGB", (max_side, max_side))
            im = im.convert("RGB")
            im.thumbnail((max_side, max_side))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=75)
    except Exception:  # an unreadable thumbnail must never break the report
        return None
    return Markup("data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii"))


def pair_strip(sim_path: str, real_path: str, max_side: int = 160) -> tuple[Markup, Markup, Markup, float] | None:
    """(sim, real, amplified |sim - real|, gain) for a pair at one thumbnail size, for display only.

    The difference is multiplied by `gain` = 255 / its 99th percentile (between 1 and 32), so that
    the largest differences show white instead of a near-black image; the report states the gain.
    None when either file cannot be read."""
    try:
        import numpy as np
        from PIL import Image

        with Image.open(sim_path) as a, Image.open(real_path) as b:
            a, b = a.convert("RGB"), b.convert("RGB")
        a.thumbnail((max_side, max_side))
        b = b.resize(a.size)
        diff = np.abs(np.asarray(a, np.int16) - np.asarray(b, np.int16))
        p99 = float(np.percentile(diff, 99))
        gain = round(min(32.0, max(1.0, 255.0 / p99)) if p99 > 0 else 1.0, 1)
        amp = Image.fromarray(np.clip(diff * gain, 0, 255).astype(np.uint8))
        out = []
        for im in (a, b, amp):
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=75)
            out.append(Markup("data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")))
    except Exception:  # an unreadable frame must never break the report
        return None
    return out[0], out[1], out[2], gain


PCA_PANELS = 30  # encoders drawn in the PCA panels, family by family
PCA_COLUMNS = 5


def by_family(encoders: Sequence[EncoderEntry]) -> list[tuple[str, list[EncoderEntry]]]:
    """Encoders grouped by their `family`, families in order of first appearance, each keeping the
    order given (results order: best ranked first)."""
    groups: dict[str, list[EncoderEntry]] = {}
    for e in encoders:
        groups.setdefault(str(e.family or "other"), []).append(e)
    return list(groups.items())


def pca_scatter(encoders: Sequence[EncoderEntry | dict[str, Any]], names: tuple[str, str],
                colours: dict[str, str] | None = None) -> Markup | None:
    """2-D PCA scatter of sim vs real per encoder, from the points listed in results; each axis
    states the share of variance its component explains when results hold it. Up to `PCA_PANELS`
    panels, `PCA_COLUMNS` a row; with several families each family gets its own rows under its name."""
    encs = [e for e in entries(EncoderEntry, list(encoders)) if isinstance(e.pca_2d, dict)][:PCA_PANELS]
    if not encs:
        return None
    groups = by_family(encs)
    cols = min(PCA_COLUMNS, max(len(members) for _, members in groups))
    rows = [math.ceil(len(members) / cols) for _, members in groups]
    fig = _figure(3.0 * cols, 2.9 * sum(rows) + (0.3 * len(groups) if len(groups) > 1 else 0.0))
    fig.set_layout_engine("constrained")
    areas = [fig] if len(groups) == 1 else list(fig.subfigures(len(groups), 1, height_ratios=rows))
    first = None
    for area, (family, members), n_rows in zip(areas, groups, rows):
        if len(groups) > 1:
            area.suptitle(_label(f"{family} ({len(members)})", 40), fontsize=9, fontweight="bold", x=0.01, ha="left")
        for k, e in enumerate(members):
            ax = area.add_subplot(n_rows, cols, k + 1)
            first = first or ax
            pca = e.pca_2d or {}  # free form: `sim`, `real` points and `explained_variance`
            for j, (side, label) in enumerate((("sim", names[0]), ("real", names[1]))):
                pts = [p for p in pca.get(side) or [] if isinstance(p, (list, tuple)) and len(p) == 2]
                if pts:
                    xs, ys = zip(*pts)
                    ax.scatter(xs, ys, s=6, alpha=0.6, c=_colour(colours, label, 1 - j), label=_label(label, 20))
            ev = pca.get("explained_variance") or []
            for axis, i in ((ax.set_xlabel, 0), (ax.set_ylabel, 1)):
                share = f" ({100 * ev[i]:.0f}% of variance)" if len(ev) > i and finite(ev[i]) else ""
                axis(f"PC{i + 1}{share}", fontsize=8)
            ax.set_title(_label(e.name, 28), fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
    legend_below(fig, first)
    fig.suptitle("2-D PCA of the standardized embeddings (subsampled), sim vs real", fontsize=10)
    return _png(fig)


def _histogram(e: EncoderEntry) -> dict[str, list[Any]] | None:
    """The entry's paired-cosine histogram when its `edges` bound its `counts`, else None."""
    h = e.paired_cosine.histogram if e.paired_cosine is not None else None
    if not isinstance(h, dict) or len(h.get("edges") or []) != len(h.get("counts") or []) + 1:
        return None
    return h


def cosine_histograms(encoders: Sequence[EncoderEntry | dict[str, Any]]) -> Markup | None:
    """Histogram of paired cosine distances per encoder on one shared x-scale, each panel with its
    shuffled-pair mean (the no-correspondence reference); CLIP thresholds only on CLIP panels."""
    encs = [(e, e.paired_cosine, h) for e in entries(EncoderEntry, list(encoders))
            if (h := _histogram(e)) is not None][:6]
    if not encs:
        return None
    right = max([float(x) for _, _, h in encs for x in h["edges"] if finite(x)]
                + [float(pc.shuffled_mean) for _, pc, _ in encs if finite(pc.shuffled_mean)]
                + [0.0])
    any_clip = any(e.family == "clip" for e, _, _ in encs)
    from matplotlib.ticker import MaxNLocator

    fig = _figure(3.2 * len(encs), 2.8)
    first = None
    for k, (e, pc, h) in enumerate(encs):
        edges, counts = h["edges"], h["counts"]
        ax = fig.add_subplot(1, len(encs), k + 1, sharex=first)
        first = first or ax
        ax.bar(edges[:-1], counts, width=[b - a for a, b in zip(edges[:-1], edges[1:])], align="edge",
               color=PALETTE[0], label="matched pairs")
        if finite(pc.shuffled_mean):
            ax.axvline(pc.shuffled_mean, color="#000000", lw=1.2, ls="-.", label="shuffled pairs (mean)")
        if e.family == "clip":
            for t, c in ((0.20, "#009E73"), (0.25, "#E69F00"), (0.30, "#D55E00")):
                ax.axvline(t, color=c, lw=1, ls="--")
        ax.set_title(_label(e.name, 28), fontsize=9)
        ax.set_xlabel("cosine distance 1 − cos (unitless)", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        if k == 0:
            ax.set_ylabel("pairs", fontsize=8)
            legend_below(fig, ax)
    first.set_xlim(0, right * 1.05 or 1.0)
    title = "Paired cosine distance per encoder (shared scale; dash-dot: shuffled-pair reference)"
    if any_clip:
        title += "; CLIP panels: thresholds 0.20 / 0.25 / 0.30"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def _step(ax, edges: Sequence[float], values: Sequence[Any], **kw) -> None:
    ys = [float(v) if finite(v) else 0.0 for v in values]
    ax.stairs(ys, list(edges), **kw)


def channel_histograms(hists: dict[str, dict[str, Any]], domains: dict[str, str],
                       colours: dict[str, str] | None = None) -> Markup | None:
    """Per-channel value histograms, one panel per channel, sets overlaid (fractions of samples).

    `hists` maps set name -> its `channel_hist` entry (`full_scale`, `bins`, `channels`)."""
    sets = {n: h for n, h in list(hists.items())[:6]
            if isinstance(h, dict) and isinstance(h.get("channels"), list) and h["channels"]}
    if not sets:
        return None
    nch = max(len(h["channels"]) for h in sets.values())
    labels = ["R", "G", "B"] if nch == 3 else [f"channel {i}" for i in range(nch)]
    fig = _figure(3.0 * nch, 2.6)
    for ch in range(nch):
        ax = fig.add_subplot(1, nch, ch + 1)
        for j, (name, h) in enumerate(sets.items()):
            if ch >= len(h["channels"]) or not isinstance(h["channels"][ch], list):
                continue
            vals = h["channels"][ch]
            edges = [i / len(vals) for i in range(len(vals) + 1)]
            dom = domains.get(name)
            color = _colour(colours, name, j)
            _step(ax, edges, vals, color=color, lw=1.5, label=_label(f"{name} ({dom})" if dom else name, 32))
        ax.set_title(labels[ch], fontsize=9)
        ax.set_xlabel("fraction of full scale", fontsize=8)
        ax.set_xlim(0, 1)
        if ch == 0:
            ax.set_ylabel("fraction of pixels", fontsize=8)
        if ch == nch - 1:
            legend_beside(ax)
    fig.suptitle("Per-channel histograms (mean over frames)", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def depth_histograms(depths: dict[str, dict[str, Any]], domains: dict[str, str],
                     colours: dict[str, str] | None = None) -> Markup | None:
    """Histograms of valid depth in metres on a log axis, each set's bins converted from its own
    unit (declared, else inferred; the native unit is named in the legend). Sets of unknown unit are
    left out of the shared axis and named in the title.

    `depths` maps set name -> its `depth` summary (`log_hist`, `log_hist_range`, units)."""
    from perception_gap.reports.format import depth_unit

    sets = {n: d for n, d in list(depths.items())[:6]
            if isinstance(d, dict) and isinstance(d.get("log_hist"), list) and d["log_hist"]
            and isinstance(d.get("log_hist_range"), list) and len(d["log_hist_range"]) == 2}
    if not sets:
        return None
    fig = _figure(6.5, 2.8)
    ax = fig.add_subplot()
    used, unknown = [], []
    for j, (name, d) in enumerate(sets.items()):
        per_m, unit = depth_unit(d)
        if per_m is None:
            unknown.append(name)
            continue
        lo, hi = d["log_hist_range"]
        vals = d["log_hist"]
        edges = [10 ** (lo + (hi - lo) * i / len(vals)) / per_m for i in range(len(vals) + 1)]
        nz = [i for i, v in enumerate(vals) if finite(v) and v > 0]
        if nz:
            used += [edges[nz[0]], edges[nz[-1] + 1]]
        dom = domains.get(name)
        _step(ax, edges, vals, color=_colour(colours, name, j), lw=1.5,
              label=_label(f"{name} ({dom}, native {unit})" if dom else f"{name} (native {unit})", 48))
    if not used:
        return None
    ax.set_xscale("log")
    ax.set_xlim(min(used) / 1.5, max(used) * 1.5)
    ax.set_xlabel("depth (m, log scale; each set converted from its native unit)", fontsize=8)
    ax.set_ylabel("fraction of valid pixels", fontsize=8)
    title = "Depth histograms in metres (mean over frames; 0/NaN/inf excluded, see dropout)"
    if unknown:
        title += f"; unit unknown, not drawn: {_label(', '.join(unknown), 40)}"
    ax.set_title(title, fontsize=9)
    legend_beside(ax)
    fig.tight_layout()
    return _png(fig)


def screen_distances(ranking: Sequence[Any], views: Sequence[str],
                     colours: dict[str, str] | None = None) -> Markup | None:
    """Distance to real per view (points with CI bars), one row per rendering, closest on top; each
    rendering in its set colour, each view its own marker (`ranking`: `ScreenRank`s or their JSON form)."""
    rows = [r for r in entries(ScreenRank, list(ranking)) if isinstance(r.per_view, dict)][:12]
    views = list(views)[:8]
    if not rows or not views:
        return None
    fig = _figure(6.5, 0.45 * len(rows) * 1 + 1.6)
    ax = fig.add_subplot()
    markers = "osD^vP*X"
    for j, v in enumerate(views):
        for i, r in enumerate(rows):
            cell = (r.per_view or {}).get(v) or {}  # free form: `distance` and its `ci`
            x, c = cell.get("distance"), cell.get("ci") or {}
            if not finite(x):
                continue
            colour = _colour(colours, str(r.set), i + 1)
            y = len(rows) - 1 - i + (j - (len(views) - 1) / 2) * 0.12
            lo, hi = c.get("low"), c.get("high")
            if finite(lo) and finite(hi):
                ax.plot([lo, hi], [y, y], color=colour, lw=1.2)
            ax.plot([x], [y], markers[j % len(markers)], ms=4, color=colour, mfc="white" if j else colour,
                    label=_label(f"view {v}", 28) if i == 0 else None)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_label(r.set, 28) for r in reversed(rows)], fontsize=8)
    ax.set_xlabel("normalized centroid distance to real (unitless, shared projection)", fontsize=8)
    ax.set_title("Distance to real per view, with bootstrap CIs (marker = view)", fontsize=10)
    legend_beside(ax)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def drift_trend(history: Sequence[Any]) -> Markup | None:
    """Gate values over drift runs, each divided by its threshold (1 = the gate's limit), a cross
    where the run failed that gate. A gate decides by its own rule (an interval entirely beyond the
    tolerance, an AUC with an effect size, ...), so a point above 1 can pass: the crosses say which
    did not."""
    runs = [h for h in history if isinstance(h, dict) and isinstance(h.get("ratios"), dict)][-60:]
    if len(runs) < 2:
        return None
    names = sorted({k for h in runs for k in h["ratios"]})[:10]
    fig = _figure(6.5, 2.8)
    ax = fig.add_subplot()
    for j, name in enumerate(names):
        pts = [(i, h["ratios"][name]) for i, h in enumerate(runs) if finite(h["ratios"].get(name))]
        if not pts:
            continue
        colour = PALETTE[j % len(PALETTE)]
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker="o", ms=3, lw=1, color=colour, label=_label(name, 30))
        bad = [(i, y) for i, y in pts if name in (runs[i].get("failed") or [])]
        if bad:
            ax.plot(*zip(*bad), ls="none", marker="X", ms=8, color=colour)
    ax.axhline(1.0, color="#c0392b", ls="--", lw=1)
    ax.plot([], [], ls="none", marker="X", ms=8, color="#555555", label="the run failed this gate")
    ax.plot([], [], color="#c0392b", ls="--", lw=1, label="value = threshold")
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([str(h.get("run_id")) for h in runs], fontsize=7)
    ax.set_xlabel("drift run", fontsize=8)
    ax.set_ylabel("value / threshold", fontsize=8)
    ax.set_title("Gate values over time (crosses: failed by the gate's own rule, see the gates table)", fontsize=9)
    legend_beside(ax, 6)
    fig.tight_layout()
    return _png(fig)
