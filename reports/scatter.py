"""The encoder scatter (gap above floor vs sim->real probe R²) as an inline SVG with data-placed labels.

Labels are placed by the data: each one takes the first of eight positions around its own point
whose box overlaps no other point and no label already placed, and whose centre is nearer its own
point than any other. A probe R² below `R2_FLOOR` (a ridge extrapolating off-distribution can read
-76,000) is not drawn to scale, which would flatten every other point: it sits on the lower edge
with a downward arrow, labelled "worse than predicting the mean" (results.json keeps the number).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from perception_gap.reports.format import R2_WORDS
from perception_gap.reports.plots import MAX_BARS, _figure, _label, _ok

R2_FLOOR = -1.0
FONT = 8.0  # points
# Offsets (points) of the label anchor from its point, with the text alignment that goes with each.
_SPOTS = ((6, 4, "left"), (6, -10, "left"), (-6, 4, "right"), (-6, -10, "right"),
          (0, 9, "center"), (0, -16, "center"), (10, -3, "left"), (-10, -3, "right"))


def _box(px: float, py: float, dx: float, dy: float, ha: str, text: str, scale: float) -> tuple[float, ...]:
    """Approximate display box (x0, y0, x1, y1) of a label anchored at a point plus an offset."""
    w, h = 0.55 * FONT * len(text) * scale, FONT * scale
    x0 = px + dx * scale - (w if ha == "right" else w / 2 if ha == "center" else 0)
    y0 = py + dy * scale
    return x0, y0, x0 + w, y0 + h


def _hits(b: tuple[float, ...], c: tuple[float, ...]) -> bool:
    return b[0] < c[2] and c[0] < b[2] and b[1] < c[3] and c[1] < b[3]


def _place(disp: list[tuple[float, float]], texts: list[str], scale: float,
           frame: tuple[float, ...]) -> list[tuple[int, int, str]]:
    """An offset per point (dx, dy, ha) chosen by the rule in the module docstring; `frame` is the
    axes' display box, which a label should not leave."""
    placed: list[tuple[float, ...]] = []
    out = []
    for i, ((px, py), text) in enumerate(zip(disp, texts)):
        best = None
        for dx, dy, ha in _SPOTS:
            b = _box(px, py, dx, dy, ha, text, scale)
            cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
            own = (cx - px) ** 2 + (cy - py) ** 2
            nearest = all(own < (cx - qx) ** 2 + (cy - qy) ** 2 for j, (qx, qy) in enumerate(disp) if j != i)
            r = 4 * scale
            clear = not any(_hits(b, (qx - r, qy - r, qx + r, qy + r)) for j, (qx, qy) in enumerate(disp) if j != i)
            clear = clear and not any(_hits(b, c) for c in placed)
            clear = clear and frame[0] <= b[0] and b[2] <= frame[2] and frame[1] <= b[1] and b[3] <= frame[3]
            if nearest and clear:
                best = (dx, dy, ha, b)
                break
            if best is None and nearest:
                best = (dx, dy, ha, b)
        dx, dy, ha, b = best or (*_SPOTS[0], _box(px, py, *_SPOTS[0], text, scale))
        placed.append(b)
        out.append((dx, dy, ha))
    return out


def gap_vs_probe(encoders: Sequence[dict[str, Any]]) -> Markup | None:
    """Scatter of gap above the noise floor (x) against the sim->real probe R² (y), Pareto front
    starred, as an SVG data URI; point i carries the SVG id `pt-i`, its label `label-i` (i = the
    encoder's position among those drawn, in results order)."""
    import matplotlib

    pts = []
    for e in encoders[:MAX_BARS]:
        x = e.get("gap_above_floor")
        if not _ok(x):
            x = e.get("centroid_distance_norm")
        y = (e.get("probe") or {}).get("sim_to_real")
        if _ok(x) and _ok(y):
            pts.append((float(x), float(y), bool(e.get("pareto_front")), str(e.get("name", "?"))))
    if not pts:
        return None
    fig = _figure(6.4, 4.0)
    ax = fig.add_subplot()
    inside = [y for _, y, _, _ in pts if y >= R2_FLOOR] or [R2_FLOOR]
    xs = [x for x, *_ in pts]
    xpad = (max(xs) - min(xs)) * 0.15 or 0.05
    ylo, yhi = min(inside), max(inside)
    ypad = (yhi - ylo) * 0.15 or 0.1
    bottom = ylo - ypad * (2.5 if any(y < R2_FLOOR for _, y, _, _ in pts) else 1)
    ax.set_xlim(min(xs) - xpad, max(xs) + xpad * 2)
    ax.set_ylim(bottom, yhi + ypad)
    shown = [(x, y if y >= R2_FLOOR else bottom + ypad * 0.4, front, name, y) for x, y, front, name in pts]
    texts = [_label(n) + ("" if raw >= R2_FLOOR else f" ({R2_WORDS}, off scale)") for _, _, _, n, raw in shown]
    ax.set_xlabel("gap above noise floor (normalized centroid distance, unitless; lower is better)")
    ax.set_ylabel("probe R² sim\u2192real, held out\n(unitless; higher is better)")
    ax.set_title("Encoders: gap vs probe (stars: Pareto front; dotted: R² = 0)", fontsize=10)
    fig.tight_layout()  # axis labels and tick labels inside the figure: the SVG is not cropped to them
    fig.canvas.draw()
    scale = fig.dpi / 72.0
    disp = [tuple(ax.transData.transform((x, y))) for x, y, *_ in shown]
    spots = _place([(px, py) for px, py in disp], texts, scale, tuple(ax.bbox.extents))
    for i, ((x, y, front, _name, raw), text, (dx, dy, ha)) in enumerate(zip(shown, texts, spots)):
        colour = "#D55E00" if front else "#555555"
        (line,) = ax.plot([x], [y], marker="*" if front else "o", ms=11 if front else 6, color=colour,
                          ls="none", zorder=3)
        line.set_gid(f"pt-{i}")
        if raw < R2_FLOOR:
            ax.annotate("", (x, bottom), xytext=(x, y), arrowprops={"arrowstyle": "->", "color": colour}, zorder=2)
        t = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=FONT, ha=ha,
                        va="bottom")
        t.set_gid(f"label-{i}")
    front = sorted((x, y) for x, y, f, _, _ in shown if f)
    if len(front) > 1:
        ax.plot([p[0] for p in front], [p[1] for p in front], color="#D55E00", lw=1, ls="--", zorder=2)
    ax.axhline(0.0, color="#999999", lw=0.8, ls=":")
    ax.grid(alpha=0.3)
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "perception-gap"}):
        fig.savefig(buf, format="svg", dpi=fig.dpi, metadata={"Date": None})
    return Markup("data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii"))
