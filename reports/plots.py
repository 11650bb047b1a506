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

DPI = 80
MAX_BARS = 40
SIM_COLOR = "#d9822b"
REAL_COLOR = "#2b6cd9"


def _ok(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _label(s: Any, limit: int = 24) -> str:
    """Plot-safe text: mathtext dollars escaped, long names shortened."""
    t = str(s)
    t = t if len(t) <= limit else t[: limit - 1] + "\u2026"
    return t.replace("$", r"\$")


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


R2_FLOOR = -1.0  # probe R² below this is drawn on the floor, with its value


def gap_vs_probe(encoders: Sequence[dict[str, Any]]) -> Markup | None:
    """Scatter of gap above the noise floor (x) against the sim->real probe R² (y), front marked."""
    pts = []
    for e in encoders[:MAX_BARS]:
        x = e.get("gap_above_floor")
        if not _ok(x):
            x = e.get("centroid_distance_norm")
        y = (e.get("probe") or {}).get("sim_to_real")
        if _ok(x) and _ok(y):
            pts.append((float(x), float(y), bool(e.get("pareto_front")), e.get("name", "?")))
    if not pts:
        return None
    fig = _figure(6.4, 4.0)
    ax = fig.add_subplot()
    # R² is unbounded below (ridge extrapolating off-distribution can read -70,000): drawn to
    # scale, one such point flattens every other; below R2_FLOOR points sit on the floor, marked.
    shown = [(x, max(y, R2_FLOOR), front, name, y < R2_FLOOR, y) for x, y, front, name in pts]
    for i, (x, y, front, name, clipped, raw) in enumerate(shown):
        ax.scatter([x], [y], s=70 if front else 35, marker="v" if clipped else "*" if front else "o",
                   color="#c0392b" if front else "#7f8c8d", zorder=3)
        text = _label(name) + (f" (R² {raw:.3g})" if clipped else "")
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(5, (4, -11, 14)[i % 3]), fontsize=8)
    ax.margins(x=0.12, y=0.12)
    if any(c for *_, c, _ in shown):
        ax.axhline(R2_FLOOR, color="#7f8c8d", lw=0.8, ls=":")
    front = sorted((x, y) for x, y, f, _, _, _ in shown if f)
    if len(front) > 1:
        ax.plot([p[0] for p in front], [p[1] for p in front], color="#c0392b", lw=1, ls="--", zorder=2)
    ax.set_xlabel("gap above noise floor (lower is better)")
    ax.set_ylabel("probe R² sim\u2192real (higher is better)")
    ax.set_title("Encoders: gap vs probe (stars: Pareto front)", fontsize=10)
    ax.grid(alpha=0.3)
    return _png(fig)


def gap_bars(encoders: Sequence[dict[str, Any]]) -> Markup | None:
    """Bars of the normalized centroid distance with CI whiskers and each noise floor as a tick."""
    rows = [e for e in encoders[:MAX_BARS] if _ok(e.get("centroid_distance_norm"))]
    if not rows:
        return None
    fig = _figure(max(4.0, 0.6 * len(rows) + 2), 3.6)
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    vals = [float(e["centroid_distance_norm"]) for e in rows]
    lo, hi = [], []
    for e, v in zip(rows, vals):
        c = e.get("centroid_distance_norm_ci") or {}
        lo.append(max(0.0, v - c["low"]) if _ok(c.get("low")) else 0.0)
        hi.append(max(0.0, c["high"] - v) if _ok(c.get("high")) else 0.0)
    ax.bar(xs, vals, color="#5b8def", yerr=[lo, hi], capsize=4, label="centroid distance (norm.)")
    floors = [(i, float(e["noise_floor"])) for i, e in enumerate(rows) if _ok(e.get("noise_floor"))]
    if floors:
        ax.scatter([i for i, _ in floors], [f for _, f in floors], marker="_", s=500, color="#c0392b",
                   zorder=3, label="noise floor (real vs real)")
    ax.set_xticks(xs)
    ax.set_xticklabels([_label(e.get("name", "?")) for e in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("normalized centroid distance")
    ax.set_title("Encoders: gap with CI and noise floor", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def grouped_bars(title: str, groups: Sequence[str], series: dict[str, Sequence[Any]], ylabel: str,
                 domains: dict[str, str] | None = None) -> Markup | None:
    """Grouped bars: one group per label in `groups`, one bar per series (set) in each group."""
    series = {k: v for k, v in list(series.items())[:6] if isinstance(v, (list, tuple)) and any(_ok(x) for x in v)}
    if not series or not groups:
        return None
    groups = list(groups)[:MAX_BARS]
    fig = _figure(max(4.0, 0.35 * len(groups) * len(series) + 2), 3.2)
    ax = fig.add_subplot()
    width = 0.8 / len(series)
    palette = ["#7f8c8d", "#27ae60", "#8e44ad", "#16a085"]
    for j, (name, vals) in enumerate(series.items()):
        dom = (domains or {}).get(name)
        color = SIM_COLOR if dom == "sim" else REAL_COLOR if dom == "real" else palette[j % len(palette)]
        ys = [float(v) if _ok(v) else 0.0 for v in list(vals)[: len(groups)]]
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(ys))]
        ax.bar(xs, ys, width=width * 0.95, color=color, alpha=0.85 if dom else 0.7,
               label=_label(f"{name} ({dom})" if dom else name, 40))
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([_label(g) for g in groups], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(_label(title, 60), fontsize=10)
    ax.legend(fontsize=8)
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


def pair_strip(sim_path: str, real_path: str, max_side: int = 160) -> tuple[Markup, Markup, Markup] | None:
    """(sim, real, |sim - real|) JPEG data URIs of a pair at one thumbnail size, for display only;
    None when either file cannot be read."""
    try:
        from PIL import Image, ImageChops

        with Image.open(sim_path) as a, Image.open(real_path) as b:
            a, b = a.convert("RGB"), b.convert("RGB")
        a.thumbnail((max_side, max_side))
        b = b.resize(a.size)
        diff = ImageChops.difference(a, b)
        out = []
        for im in (a, b, diff):
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=75)
            out.append(Markup("data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")))
    except Exception:  # an unreadable frame must never break the report
        return None
    return out[0], out[1], out[2]


def pca_scatter(encoders: Sequence[dict[str, Any]], names: tuple[str, str]) -> Markup | None:
    """2-D PCA scatter of sim vs real per encoder, from the points listed in results."""
    encs = [e for e in encoders if isinstance(e.get("pca_2d"), dict)][:6]
    if not encs:
        return None
    fig = _figure(3.2 * len(encs), 3.0)
    for k, e in enumerate(encs):
        ax = fig.add_subplot(1, len(encs), k + 1)
        for side, colour, label in (("sim", "#e08a2e", names[0]), ("real", "#3b6fd8", names[1])):
            pts = [p for p in e["pca_2d"].get(side) or [] if isinstance(p, (list, tuple)) and len(p) == 2]
            if pts:
                xs, ys = zip(*pts)
                ax.scatter(xs, ys, s=6, alpha=0.6, c=colour, label=_label(label, 20))
        ax.set_title(_label(e.get("name"), 28), fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
        if k == 0:
            ax.legend(fontsize=7)
    fig.suptitle("2-D PCA of the embeddings (subsampled), sim vs real", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def cosine_histograms(encoders: Sequence[dict[str, Any]]) -> Markup | None:
    """Histogram of paired cosine distances per encoder (CLIP thresholds on CLIP-family ones)."""
    encs = [e for e in encoders if isinstance((e.get("paired_cosine") or {}).get("histogram"), dict)][:6]
    if not encs:
        return None
    fig = _figure(3.2 * len(encs), 2.8)
    for k, e in enumerate(encs):
        h = e["paired_cosine"]["histogram"]
        edges, counts = h.get("edges") or [], h.get("counts") or []
        if len(edges) != len(counts) + 1:
            continue
        ax = fig.add_subplot(1, len(encs), k + 1)
        ax.bar(edges[:-1], counts, width=[b - a for a, b in zip(edges[:-1], edges[1:])], align="edge", color="#3b6fd8")
        if e.get("family") == "clip":
            for t, c in ((0.20, "#2a9d46"), (0.25, "#e08a2e"), (0.30, "#c0392b")):
                ax.axvline(t, color=c, lw=1, ls="--")
        ax.set_title(_label(e.get("name"), 28), fontsize=9)
        ax.set_xlabel("1 - cos (matched pairs)", fontsize=8)
    fig.suptitle("Paired cosine distance per encoder (CLIP thresholds 0.20 / 0.25 / 0.30 on CLIP encoders)", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def _step(ax, edges: Sequence[float], values: Sequence[Any], **kw) -> None:
    ys = [float(v) if _ok(v) else 0.0 for v in values]
    ax.stairs(ys, list(edges), **kw)


def channel_histograms(hists: dict[str, dict[str, Any]], domains: dict[str, str]) -> Markup | None:
    """Per-channel value histograms, one panel per channel, sets overlaid (fractions of samples).

    `hists` maps set name -> its `channel_hist` entry (`full_scale`, `bins`, `channels`)."""
    sets = {n: h for n, h in list(hists.items())[:6]
            if isinstance(h, dict) and isinstance(h.get("channels"), list) and h["channels"]}
    if not sets:
        return None
    nch = max(len(h["channels"]) for h in sets.values())
    labels = ["R", "G", "B"] if nch == 3 else [f"channel {i}" for i in range(nch)]
    fig = _figure(3.0 * nch, 2.6)
    palette = ["#7f8c8d", "#27ae60", "#8e44ad", "#16a085"]
    for ch in range(nch):
        ax = fig.add_subplot(1, nch, ch + 1)
        for j, (name, h) in enumerate(sets.items()):
            if ch >= len(h["channels"]) or not isinstance(h["channels"][ch], list):
                continue
            vals = h["channels"][ch]
            edges = [i / len(vals) for i in range(len(vals) + 1)]
            dom = domains.get(name)
            color = SIM_COLOR if dom == "sim" else REAL_COLOR if dom == "real" else palette[j % len(palette)]
            _step(ax, edges, vals, color=color, lw=1.5, label=_label(f"{name} ({dom})" if dom else name, 32))
        ax.set_title(labels[ch], fontsize=9)
        ax.set_xlabel("fraction of full scale", fontsize=8)
        ax.set_xlim(0, 1)
        if ch == 0:
            ax.set_ylabel("fraction of pixels", fontsize=8)
            ax.legend(fontsize=7)
    fig.suptitle("Per-channel histograms (mean over frames)", fontsize=10)
    fig.tight_layout()
    return _png(fig)


def depth_histograms(depths: dict[str, dict[str, Any]], domains: dict[str, str]) -> Markup | None:
    """Histograms of valid depth on a log axis in each set's own units (unit in the legend).

    `depths` maps set name -> its `depth` summary (`log_hist`, `log_hist_range`, units)."""
    sets = {n: d for n, d in list(depths.items())[:6]
            if isinstance(d, dict) and isinstance(d.get("log_hist"), list) and d["log_hist"]
            and isinstance(d.get("log_hist_range"), list) and len(d["log_hist_range"]) == 2}
    if not sets:
        return None
    fig = _figure(6.5, 2.8)
    ax = fig.add_subplot()
    palette = ["#7f8c8d", "#27ae60", "#8e44ad", "#16a085"]
    used = []
    for j, (name, d) in enumerate(sets.items()):
        lo, hi = d["log_hist_range"]
        vals = d["log_hist"]
        edges = [10 ** (lo + (hi - lo) * i / len(vals)) for i in range(len(vals) + 1)]
        nz = [i for i, v in enumerate(vals) if _ok(v) and v > 0]
        if nz:
            used += [edges[nz[0]], edges[nz[-1] + 1]]
        units = d.get("declared_units_per_m") or []
        inferred = ", ".join(k for k in (d.get("inferred_units") or {}) if isinstance(k, str))
        named = {1.0: "m", 100.0: "cm", 1000.0: "mm"}
        if units and _ok(units[0]):
            unit = named.get(float(units[0]), f"{units[0]:g} units/m")
        else:
            unit = f"inferred {inferred}" if inferred else "unit unknown"
        dom = domains.get(name)
        color = SIM_COLOR if dom == "sim" else REAL_COLOR if dom == "real" else palette[j % len(palette)]
        _step(ax, edges, vals, color=color, lw=1.5, label=_label(f"{name} ({dom}, {unit})", 48))
    ax.set_xscale("log")
    if used:
        ax.set_xlim(min(used) / 1.5, max(used) * 1.5)
    ax.set_xlabel("depth, each set's own units (log scale)", fontsize=8)
    ax.set_ylabel("fraction of valid pixels", fontsize=8)
    ax.set_title("Depth histograms (mean over frames; 0/NaN/inf excluded, see dropout)", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


def screen_distances(ranking: Sequence[Any], views: Sequence[str]) -> Markup | None:
    """Distance to real per view (points with CI bars), one row per rendering, closest on top."""
    rows = [r for r in ranking if isinstance(r, dict) and isinstance(r.get("per_view"), dict)][:12]
    views = list(views)[:8]
    if not rows or not views:
        return None
    fig = _figure(6.5, 0.45 * len(rows) * 1 + 1.6)
    ax = fig.add_subplot()
    palette = ["#2b6cd9", "#d9822b", "#27ae60", "#8e44ad", "#16a085", "#7f8c8d", "#c0392b", "#2c3e50"]
    for j, v in enumerate(views):
        for i, r in enumerate(rows):
            cell = r["per_view"].get(v) or {}
            x, c = cell.get("distance"), cell.get("ci") or {}
            if not _ok(x):
                continue
            y = len(rows) - 1 - i + (j - (len(views) - 1) / 2) * 0.12
            lo, hi = c.get("low"), c.get("high")
            if _ok(lo) and _ok(hi):
                ax.plot([lo, hi], [y, y], color=palette[j % len(palette)], lw=1.2)
            ax.plot([x], [y], "o", ms=4, color=palette[j % len(palette)], label=_label(v, 28) if i == 0 else None)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_label(r.get("set"), 28) for r in reversed(rows)], fontsize=8)
    ax.set_xlabel("normalized centroid distance to real (shared projection)", fontsize=8)
    ax.set_title("Distance to real per view, with bootstrap CIs", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def drift_trend(history: Sequence[Any]) -> Markup | None:
    """Gate values over drift runs, each divided by its threshold (1 = the gate's limit)."""
    runs = [h for h in history if isinstance(h, dict) and isinstance(h.get("ratios"), dict)][-60:]
    if len(runs) < 2:
        return None
    names = sorted({k for h in runs for k in h["ratios"]})[:10]
    fig = _figure(6.5, 2.8)
    ax = fig.add_subplot()
    for name in names:
        pts = [(i, h["ratios"][name]) for i, h in enumerate(runs) if _ok(h["ratios"].get(name))]
        if pts:
            xs, ys = zip(*pts)
            ax.plot(xs, ys, marker="o", ms=3, lw=1, label=_label(name, 30))
    ax.axhline(1.0, color="#c0392b", ls="--", lw=1)
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([str(h.get("run_id")) for h in runs], fontsize=7)
    ax.set_xlabel("drift run", fontsize=8)
    ax.set_ylabel("value / threshold", fontsize=8)
    ax.set_title("Gate values over time (above the dashed line fails)", fontsize=10)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return _png(fig)
