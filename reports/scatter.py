"""The encoder scatter (gap above floor vs sim->real probe R²) as an inline SVG with data-placed labels.

Labels are placed by the data: each one takes the first of eight positions around its own point
whose box overlaps no other point and no label already placed, and whose centre is nearer its own
point than any other. When none of the eight is free, it moves out along rings around its point
(a thin leader line joins them) to the first free place inside the axes; only where the axes hold
no free place at all does it take the one that overlaps least. Beyond `NAMED_MAX` encoders the
points carry numbers (their row in the report's ranking) and a key beside the axes names them,
family by family: numbers are short enough to stay beside their points. Points are coloured by
family; the Pareto front is starred and joined by a dashed line. A probe R² below `R2_FLOOR` (a
ridge extrapolating off-distribution can read -76,000) is not drawn to scale, which would flatten
every other point: it sits on the lower edge with a downward arrow, labelled "worse than predicting
the mean" (results.json keeps the number).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from typing import Any

from markupsafe import Markup

from perception_gap.reports.format import R2_WORDS
from perception_gap.reports.plots import MAX_BARS, _figure, _label
from perception_gap.reports.reading import entries
from perception_gap.schema import EncoderEntry
from perception_gap.wording import finite

R2_FLOOR = -1.0
FONT = 8.0  # points
NAMED_MAX = 8  # encoders labelled by name beside their points; more are numbered, with a key
KEY_CHARS = 30  # longest name in the key
FRONT_COLOUR = "#000000"
# Okabe-Ito, the front's black aside: one colour per family, in order of first appearance.
FAMILY_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")
# Offsets (points) of the label anchor from its point, with the text alignment that goes with each.
_SPOTS = ((6, 4, "left"), (6, -10, "left"), (-6, 4, "right"), (-6, -10, "right"),
          (0, 9, "center"), (0, -16, "center"), (10, -3, "left"), (-10, -3, "right"))
_RINGS = tuple(range(16, 161, 8))  # radii (points) of the leader-line positions, tried after the spots
_ANGLES = 24
PAD = 1.5  # points of clearance around a label's estimated box (browsers' fonts differ in width)


def _box(px: float, py: float, dx: float, dy: float, ha: str, text: str, scale: float) -> tuple[float, ...]:
    """Approximate display box (x0, y0, x1, y1) of a label anchored at a point plus an offset, padded."""
    w, h = 0.6 * FONT * len(text) * scale, FONT * scale
    x0 = px + dx * scale - (w if ha == "right" else w / 2 if ha == "center" else 0)
    y0 = py + dy * scale
    p = PAD * scale
    return x0 - p, y0 - p, x0 + w + p, y0 + h + p


def _hits(b: tuple[float, ...], c: tuple[float, ...]) -> bool:
    return b[0] < c[2] and c[0] < b[2] and b[1] < c[3] and c[1] < b[3]


def _overlap(b: tuple[float, ...], c: tuple[float, ...]) -> float:
    return max(0.0, min(b[2], c[2]) - max(b[0], c[0])) * max(0.0, min(b[3], c[3]) - max(b[1], c[1]))


def _ring_spots() -> list[tuple[float, float, str]]:
    import math

    out = []
    for r in _RINGS:
        for k in range(_ANGLES):
            a = 2 * math.pi * k / _ANGLES
            dx, dy = r * math.cos(a), r * math.sin(a) - FONT / 2
            out.append((dx, dy, "left" if dx > 2 else "right" if dx < -2 else "center"))
    return out


def _place(disp: list[tuple[float, float]], texts: list[str], scale: float,
           frame: tuple[float, ...]) -> list[tuple[float, float, str, bool]]:
    """An offset per point (dx, dy, ha, leader) chosen by the rule in the module docstring; `frame`
    is the axes' display box, which a label should not leave."""
    placed: list[tuple[float, ...]] = []
    out: list[tuple[float, float, str, bool]] = []
    r = 4 * scale
    marks = [(qx - r, qy - r, qx + r, qy + r) for qx, qy in disp]
    rings = _ring_spots()

    def inside(b: tuple[float, ...]) -> bool:
        return frame[0] <= b[0] and b[2] <= frame[2] and frame[1] <= b[1] and b[3] <= frame[3]

    for i, ((px, py), text) in enumerate(zip(disp, texts)):
        others = [m for j, m in enumerate(marks) if j != i]
        best = None
        for dx, dy, ha in _SPOTS:
            b = _box(px, py, dx, dy, ha, text, scale)
            cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
            own = (cx - px) ** 2 + (cy - py) ** 2
            nearest = all(own < (cx - qx) ** 2 + (cy - qy) ** 2 for j, (qx, qy) in enumerate(disp) if j != i)
            if nearest and inside(b) and not any(_hits(b, c) for c in others + placed):
                best = (dx, dy, ha, False, b)
                break
        if best is None:  # out along the rings, joined to the point by a leader line
            for dx, dy, ha in rings:
                b = _box(px, py, dx, dy, ha, text, scale)
                if inside(b) and not any(_hits(b, c) for c in marks + placed):
                    best = (dx, dy, ha, True, b)
                    break
        if best is None:  # no free place at all: the least overlap
            def cost(spot: tuple[float, float, str]) -> float:
                b = _box(px, py, *spot, text, scale)
                return sum(_overlap(b, c) for c in marks + placed) + (0.0 if inside(b) else 1e9)

            dx, dy, ha = min(list(_SPOTS) + rings, key=cost)
            best = (dx, dy, ha, (dx, dy, ha) not in _SPOTS, _box(px, py, dx, dy, ha, text, scale))
        dx, dy, ha, leader, b = best
        placed.append(b)
        out.append((dx, dy, ha, leader))
    return out


def family_colours(encoders: Sequence[EncoderEntry | dict[str, Any]]) -> dict[str, str]:
    """A colour per family, in order of first appearance (`encoders`: the typed entries or their JSON form)."""
    return _colours(str(e.family or "other") for e in entries(EncoderEntry, list(encoders)))


def _colours(families: Iterable[str]) -> dict[str, str]:
    return {f: FAMILY_COLOURS[i % len(FAMILY_COLOURS)] for i, f in enumerate(dict.fromkeys(families))}


def gap_vs_probe(encoders: Sequence[EncoderEntry | dict[str, Any]]) -> Markup | None:
    """Scatter of gap above the noise floor (x) against the sim->real probe R² (y), coloured by
    family, Pareto front starred, as an SVG data URI. Point i carries the SVG id `pt-i`, its label
    `label-i`, its leader line (if any) `leader-i` and its line of the key (numbered mode) `key-i`
    (i = the encoder's position among those drawn, in results order; its number is i + 1)."""
    import matplotlib

    pts = []
    for n, e in enumerate(entries(EncoderEntry, list(encoders[:MAX_BARS])), 1):
        x = e.gap_above_floor
        if not finite(x):
            x = e.centroid_distance_norm
        y = e.probe.sim_to_real if e.probe is not None else None
        if finite(x) and finite(y):
            pts.append((float(x), float(y), bool(e.pareto_front), "?" if e.name is None else str(e.name),  # type: ignore[arg-type]
                        str(e.family or "other"), n))
    if not pts:
        return None
    numbered = len(encoders) > NAMED_MAX  # as the ranking table decides to show the numbers
    colours = _colours(p[4] for p in pts)
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(pts):
        groups.setdefault(p[4], []).append(i)
    if numbered:  # inches: the axes at a fixed size, the key beside them as wide as its longest line
        key_w = (KEY_CHARS + 10) * 0.6 * FONT / 72
        w, h = 1.0 + 5.0 + 0.3 + key_w, max(4.0, (len(pts) + len(groups) + 3) * 1.35 * FONT / 72)
        fig = _figure(w, h)
        ax = fig.add_axes((1.0 / w, 0.65 / h, 5.0 / w, (h - 1.05) / h))
    else:
        fig = _figure(6.4, 4.0)
        ax = fig.add_subplot()
    inside = [y for _, y, *_ in pts if y >= R2_FLOOR] or [R2_FLOOR]
    xs = [x for x, *_ in pts]
    xpad = (max(xs) - min(xs)) * 0.15 or 0.05
    ylo, yhi = min(inside), max(inside)
    ypad = (yhi - ylo) * 0.15 or 0.1
    bottom = ylo - ypad * (2.5 if any(y < R2_FLOOR for _, y, *_ in pts) else 1)
    ax.set_xlim(min(xs) - xpad, max(xs) + xpad * 2)
    ax.set_ylim(bottom, yhi + ypad)
    shown = [(x, y if y >= R2_FLOOR else bottom + ypad * 0.4, front, name, y, fam, n)
             for x, y, front, name, fam, n in pts]
    off = f" ({R2_WORDS}, off scale)"
    if numbered:
        texts = [str(n) + ("↓" if raw < R2_FLOOR else "") for *_, raw, _fam, n in shown]
    else:
        texts = [_label(name) + ("" if raw >= R2_FLOOR else off) for _, _, _, name, raw, _, _ in shown]
    ax.set_xlabel("gap above noise floor (normalized centroid distance, unitless; lower is better)")
    ax.set_ylabel("probe R² sim\u2192real, held out\n(unitless; higher is better)")
    ax.set_title("Encoders: gap vs probe (stars: Pareto front; dotted: R² = 0)", fontsize=10)
    if not numbered:
        fig.tight_layout()  # axis labels and tick labels inside the figure: the SVG is not cropped to them
    fig.canvas.draw()
    scale = fig.dpi / 72.0
    disp = [tuple(ax.transData.transform((x, y))) for x, y, *_ in shown]
    spots = _place([(px, py) for px, py in disp], texts, scale, tuple(ax.bbox.extents))
    for i, ((x, y, front, _name, raw, fam, _n), text, (dx, dy, ha, leader)) in enumerate(zip(shown, texts, spots)):
        colour = colours[fam]
        (line,) = ax.plot([x], [y], marker="*" if front else "o", ms=12 if front else 6, color=colour,
                          mec=FRONT_COLOUR if front else colour, mew=0.8, ls="none", zorder=3)
        line.set_gid(f"pt-{i}")
        if raw < R2_FLOOR:
            ax.annotate("", (x, bottom), xytext=(x, y), arrowprops={"arrowstyle": "->", "color": colour}, zorder=2)
        if leader:
            tip = ax.annotate("", (x, y), textcoords="offset points", xytext=(dx, dy + FONT / 2),
                              arrowprops={"arrowstyle": "-", "color": "#888888", "lw": 0.6, "shrinkA": 0,
                                          "shrinkB": 3}, zorder=2)
            tip.arrow_patch.set_gid(f"leader-{i}")
        t = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=FONT, ha=ha,
                        va="bottom", color="#222222")
        t.set_gid(f"label-{i}")
    front_pts = sorted((s[0], s[1]) for s in shown if s[2])
    if len(front_pts) > 1:
        ax.plot([pt[0] for pt in front_pts], [pt[1] for pt in front_pts], color=FRONT_COLOUR, lw=0.8, ls="--", zorder=2)
    ax.axhline(0.0, color="#999999", lw=0.8, ls=":")
    ax.grid(alpha=0.3)
    ax.patch.set_gid("axes")
    if numbered:
        _key(fig, ax, shown, groups, colours, off)
    elif len(groups) > 1:
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], marker="o", ls="none", color=c, label=_label(f, 20)) for f, c in colours.items()]
        ax.legend(handles=handles, fontsize=7, title="family", title_fontsize=7, loc="best")
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "perception-gap"}):
        fig.savefig(buf, format="svg", dpi=fig.dpi, metadata={"Date": None})
    return Markup("data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii"))


def _key(fig: Any, ax: Any, shown: list[tuple], groups: dict[str, list[int]], colours: dict[str, str],
         off: str) -> None:
    """The numbered mode's key right of the axes: per family its name, then `n  name` per encoder
    (a star on the Pareto front; off-scale R² said in words)."""
    x0 = ax.get_position().x1 + 0.3 / fig.get_figwidth()
    step = 1.35 * FONT / 72 / fig.get_figheight()  # one line, in figure fractions
    y = 0.95
    for fam, members in groups.items():
        t = fig.text(x0, y, _label(fam, KEY_CHARS), fontsize=FONT, fontweight="bold", color=colours[fam], va="top")
        t.set_gid(f"family-{fam}")
        y -= step
        for i in members:
            _x, _y, front, name, raw, _fam, n = shown[i]
            extra = (" \u2605" if front else "") + (" \u2193 off scale" if raw < R2_FLOOR else "")
            t = fig.text(x0 + 0.01, y, f"{n:>2}  {_label(name, KEY_CHARS)}{extra}", fontsize=FONT, va="top",
                         color="#222222")
            t.set_gid(f"key-{i}")
            y -= step
