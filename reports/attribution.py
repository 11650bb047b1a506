"""The report's "What closes the gap" section: the camera model and what each of its factors closes.

Draws what `perception_gap.camera.attribution` wrote under each `encoders[i].attribution` and what
`perception_gap.camera.fit` wrote under `results["camera_model"]`:

- per encoder, a sentence with the share of its gap above the noise floor that all camera factors
  close together (and what remains), then a waterfall: one bar per factor in urgency order, from
  the cumulative share before it to the cumulative share after it (its `step`), its interval
  drawn from the bar's start (`step_ci`), then the residual bar from the total to 100%. Shares are
  fractions of the gap above the floor and are not clipped in results.json (a factor can move sim
  past the floor, > 100%, or away from real, < 0%): the axis spans 0..100% widened to the data
  within [`AXIS_MIN`, `AXIS_MAX`]; a bar or interval beyond that ends in an arrow at the edge and
  its number is written beside it. A table beside it gives each factor's share alone.
- the model's factors with their parameters, units, intervals and how each was measured, and the
  differences measured but not modelled, with the reason.
- the worst pairs as sim | sim through the camera model | real. The middle frame is rendered here
  with `perception_gap.apply_camera_model` (seed 0): a picture of the model, not a statistic.

Hand-written SVG as in `perception_gap.reports.maps`: each bar is a `<rect>` in a `<g class="wf-row">`
carrying its numbers as `data-` attributes, so the drawing can be read back
(tests/test_report_attribution.py).

The sections are read typed (`Attribution`, `CameraModelSection`, `EncoderEntry` of
perception_gap.schema); a plain or partial results.json is read into them by `reports.reading`.
"""

from __future__ import annotations

import base64
import io
import logging
import math
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup

from perception_gap.reports import page
from perception_gap.reports.format import ci as ci_text
from perception_gap.reports.format import num
from perception_gap.reports.maps import nice_ticks
from perception_gap.reports.reading import blank, entries, given
from perception_gap.reports.reading import results as read_results
from perception_gap.reports.reading import section as read_section
from perception_gap.reports.safe_text import escape
from perception_gap.schema import (
    Attribution,
    AttributionFactor,
    CameraFactor,
    CameraModelSection,
    EncoderEntry,
    Results,
)
from perception_gap.schema.sections import AttributionTotal
from perception_gap.wording import MISSING, finite

logger = logging.getLogger(__name__)

AXIS_MIN, AXIS_MAX = -1.0, 2.0  # widest axis, fractions of the gap above the floor (-100% .. 200%)
OPEN = 3  # encoders whose waterfall is shown open; the others fold under <details>
THUMB = 160  # px, longest side of a thumbnail
MAX_PAIRS = 6
CLOSES, WIDENS, REMAINS = "#009E73", "#D55E00", "#999999"  # Okabe-Ito: closes, widens the gap, residual
FONT = 11
ROW_H, BAR_H = 24, 14
PLOT_W, VALUE_W = 340, 170
_MT, _MB = 8, 40  # top and bottom margins (px); the bottom holds the tick labels and the axis label
CHAR_W = 0.6 * FONT  # estimated width of a character, for the label column
LABEL_MAX = 44  # characters of a factor's words before they are shortened
MAPS = "see the gap maps"


AttributionLike = Attribution | Mapping[str, Any]


def _d(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _attribution(v: AttributionLike) -> Attribution:
    return read_section(Attribution, v) or blank(Attribution)


def _total(v: AttributionTotal | None) -> AttributionTotal:
    return v or blank(AttributionTotal)


def _l(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else []


def _interval(v: Any) -> tuple[float, float] | None:
    v = _l(v)
    return (float(v[0]), float(v[1])) if len(v) == 2 and finite(v[0]) and finite(v[1]) else None


def pct(x: Any, sign: bool = False) -> str:
    """A share as a percent of the gap: whole percents from 10% up, one decimal below (`64%`, `2.7%`)."""
    if not finite(x):
        return MISSING
    v = 100.0 * float(x)
    t = f"{v:,.0f}" if abs(v) >= 10 else f"{v:.1f}"
    if t in ("0.0", "-0.0"):
        t = "0"
    return ("+" + t if sign and v > 0 and t.strip("0.") else t) + "%"


def pct_ci(v: Any) -> str:
    """An interval of shares as `[52, 75]` (percents of the gap, the unit said by the value beside it)."""
    iv = _interval(v)
    if iv is None:
        return ""
    return "[" + ", ".join(pct(x)[:-1] for x in iv) + "]"


def factor_words(code: Any, params: Any) -> str:
    """A factor in a few words with its parameters, from results.json's dict alone; the same words as
    `perception_gap.camera.model.describe` (tests check the two agree)."""
    p = _d(params)
    try:
        if code == "brightness":
            return f"exposure {float(p['stops']):+.2f} stops"
        if code == "white_balance":
            return f"white balance R/G x{float(p['r_gain']):.2f}, B/G x{float(p['b_gain']):.2f}"
        if code == "tone_curve":
            return f"tone curve exponent {float(p['exponent']):.2f}"
        if code == "vignetting":
            return f"vignetting {float(p['corner_stops']):+.2f} stops at the corners"
        if code == "sharpness":
            return f"blur sigma {float(p['sigma_px']):.2f} px"
        if code == "motion_blur":
            return f"motion blur {float(p['length_px']):.1f} px at {float(p['angle_deg']):.0f} deg"
        if code == "sensor_noise":
            mid = math.sqrt(float(p["read_levels"]) ** 2 + float(p["shot_levels2"]) * 127.5)
            return f"sensor noise {mid:.1f} levels at mid grey"
        if code == "compression":
            return f"JPEG quality {float(p['quality']):.0f} ({p.get('subsampling', '4:4:4')})"
        if code == "field_of_view":
            return f"field of view (zoom sim/real {float(p['zoom_sim_over_real']):.2f})"
        if code == "orientation":
            return f"orientation ({p['transform']})"
        if code == "resolution":
            return f"frame size {p['width']}x{p['height']}"
        if code == "channel_swap":
            return "channel order"
        if code == "value_range":
            return f"value scale x{float(p['scale']):g}"
        if code == "resize_filter":
            return f"resize filter ({p['signature']})"
    except (KeyError, TypeError, ValueError):
        pass
    return str(code)  # an unknown code or parameters that do not read: the code alone


def _t(s: Any, limit: int = LABEL_MAX) -> str:
    """Escaped SVG text, long text shortened."""
    s = str(s)
    return str(escape(s if len(s) <= limit else s[: limit - 1] + "\u2026"))


def _rows(entry: Attribution) -> list[dict[str, Any]]:
    """The waterfall's rows: (label, start, end, whisker, value text) per factor, then the residual."""
    rows, prev = [], 0.0
    for f in entries(AttributionFactor, entry.factors):
        step = f.step
        if step is None or not finite(step):
            continue
        end = float(f.cumulative) if f.cumulative is not None and finite(f.cumulative) else prev + float(step)
        ci = _interval(f.step_ci)
        rows.append({"kind": "factor", "code": str(f.code), "label": factor_words(f.code, f.params),
                     "start": prev, "end": end, "share": float(step),
                     "whisker": (prev + ci[0], prev + ci[1]) if ci else None,
                     "text": f"{pct(step, sign=True)} {pct_ci(f.step_ci)}".strip(), "ci": ci})
        prev = end
    all_, res = _total(entry.all), _total(entry.residual)
    total = float(all_.share) if all_.share is not None and finite(all_.share) else prev
    if res.share is not None and finite(res.share):
        rows.append({"kind": "residual", "code": "residual", "label": "remains: content, materials, lighting",
                     "start": total, "end": 1.0, "share": float(res.share), "whisker": _interval(all_.ci),
                     "text": f"{pct(res.share)} {pct_ci(res.ci)}".strip(), "ci": _interval(res.ci)})
    return rows


def waterfall(entry: AttributionLike, *, ident: str, name: Any) -> Markup | None:
    """The waterfall of one encoder's attribution as an SVG (see the module docstring), or None when
    it holds no factor step. Rows are `<g class="wf-row" data-code=... data-share=... data-low=...
    data-high=...>` (the residual's `data-code` is `residual`); the axis limits are the root's
    `data-lo` / `data-hi` (fractions of the gap). `entry`: `encoders[i].attribution`, typed or its JSON form."""
    rows = _rows(_attribution(entry))
    if not any(r["kind"] == "factor" for r in rows):
        return None
    pts = [0.0, 1.0] + [x for r in rows for x in (r["start"], r["end"], *(r["whisker"] or ()))]
    lo, hi, ticks, _ = nice_ticks(max(AXIS_MIN, min(pts)), min(AXIS_MAX, max(pts)), 6)
    lo, hi = max(lo, AXIS_MIN), min(hi, AXIS_MAX)
    ticks = [t for t in ticks if lo - 1e-9 <= t <= hi + 1e-9]
    label_w = int(min(LABEL_MAX, max(len(r["label"]) for r in rows)) * CHAR_W) + 12
    width = label_w + PLOT_W + VALUE_W
    ph = ROW_H * len(rows)
    height = _MT + ph + _MB

    def px(v: float) -> float:
        return label_w + (min(hi, max(lo, v)) - lo) / (hi - lo) * PLOT_W

    title = f"What closes {name}'s gap above its noise floor, factor by factor"
    out = [f'<svg id="{_t(ident, 80)}" class="waterfall" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" data-lo="{lo!r}" data-hi="{hi!r}" role="img" '
           f'aria-label="{_t(title, 200)}" font-size="{FONT}"><title>{_t(title, 200)}</title>']
    for t in ticks:  # 0 (sim as it is) solid, 100% (down to the floor) dashed, the rest faint
        x = px(t)
        stroke = '"#555"' if t == 0 else '"#555" stroke-dasharray="4 3"' if t == 1 else '"#e4e4e4"'
        out.append(f'<line class="wf-grid" x1="{x:.2f}" x2="{x:.2f}" y1="{_MT}" y2="{_MT + ph}" stroke={stroke}/>'
                   f'<text class="wf-tick" x="{x:.2f}" y="{_MT + ph + 14}" text-anchor="middle">{100 * t:g}%</text>')
    for i, r in enumerate(rows):
        y = _MT + i * ROW_H + (ROW_H - BAR_H) / 2
        a, b = sorted((r["start"], r["end"]))
        colour = REMAINS if r["kind"] == "residual" else CLOSES if r["end"] >= r["start"] else WIDENS
        low, high = r["ci"] if r["ci"] else (None, None)
        data = f' data-low="{low!r}" data-high="{high!r}"' if low is not None else ""
        out.append(f'<g class="wf-row{" wf-residual" if r["kind"] == "residual" else ""}" data-code="{_t(r["code"])}" '
                   f'data-share="{r["share"]!r}" data-start="{r["start"]!r}" data-end="{r["end"]!r}"{data}>'
                   f'<title>{_t(r["label"], 200)}: {_t(r["text"], 60)}</title>'
                   f'<text class="wf-label" x="{label_w - 8}" y="{y + BAR_H - 3:.1f}" text-anchor="end">{_t(r["label"])}</text>'
                   f'<rect class="wf-bar" x="{px(a):.2f}" y="{y:.1f}" width="{max(px(b) - px(a), 1.0):.2f}" '
                   f'height="{BAR_H}" fill="{colour}"/>')
        for v in (a, b):  # a bar cut off at the axis' edge ends in an arrow
            if v < lo or v > hi:
                x, d = px(v), (-6 if v < lo else 6)
                out.append(f'<path class="wf-off" d="M{x:.2f},{y - 2:.1f} L{x + d:.2f},{y + BAR_H / 2:.1f} '
                           f'L{x:.2f},{y + BAR_H + 2:.1f} Z" fill="{colour}"/>')
        if r["whisker"]:
            w0, w1 = sorted(r["whisker"])
            yc = y + BAR_H / 2
            out.append(f'<line class="wf-ci" x1="{px(w0):.2f}" x2="{px(w1):.2f}" y1="{yc:.1f}" y2="{yc:.1f}" '
                       f'stroke="#222" stroke-width="1.2"/>')
            for v in (w0, w1):
                x = px(v)
                cap = (f'<path d="M{x:.2f},{yc - 4:.1f} L{x + (-5 if v < lo else 5):.2f},{yc:.1f} '
                       f'L{x:.2f},{yc + 4:.1f}" fill="none" stroke="#222"/>' if v < lo or v > hi else
                       f'<line x1="{x:.2f}" x2="{x:.2f}" y1="{yc - 4:.1f}" y2="{yc + 4:.1f}" stroke="#222"/>')
                out.append(cap)
        if i + 1 < len(rows):  # the waterfall's connector: this bar's end is the next one's start
            x = px(r["end"])
            out.append(f'<line class="wf-link" x1="{x:.2f}" x2="{x:.2f}" y1="{y + BAR_H:.1f}" '
                       f'y2="{y + ROW_H:.1f}" stroke="#888" stroke-dasharray="2 2"/>')
        out.append(f'<text class="wf-value" x="{label_w + PLOT_W + 8}" y="{y + BAR_H - 3:.1f}">{_t(r["text"], 40)}</text>'
                   "</g>")
    out.append(f'<text x="{label_w + PLOT_W / 2}" y="{height - 6}" text-anchor="middle">share of the gap above the '
               "noise floor (%, 100% = down to the floor)</text></svg>")
    return Markup("".join(out))


def _with_ci(share: Any, ci: Any) -> str:
    return f"{pct(share)} {pct_ci(ci)}".strip()


def sentence(name: Any, entry: AttributionLike) -> str:
    """The encoder's headline in words: what the camera factors close together and what remains
    ("The camera factors close 64% [52, 75] of efficientnet-lite0's gap above its floor; 36% [25, 48]
    remains: ..."). `entry`: `encoders[i].attribution`, typed or its JSON form."""
    a = _attribution(entry)
    all_, res = _total(a.all), _total(a.residual)
    head = f"The camera factors close {_with_ci(all_.share, all_.ci)} of {name}'s gap above its floor"
    r = res.share
    if r is not None and finite(r) and r < 0:  # past the floor: nothing of the gap is left to content
        return (f"{head}; nothing remains (residual {_with_ci(r, res.ci)}): through the model the sim "
                "frames come closer to the real ones than two halves of the real set are to each other.")
    return f"{head}; {_with_ci(r, res.ci)} remains: content, materials or lighting, {MAPS}."


def _param_text(f: CameraFactor) -> tuple[str, str]:
    """(parameters with their units, their intervals) of one model factor."""
    units, ci = _d(f.units), _d(f.ci)
    params = ", ".join(f"{k} = {v}" + (f" ({units[k]})" if k in units else "") for k, v in _d(f.params).items())
    cis = "; ".join(f"{k} [{iv[0]:g}, {iv[1]:g}]" for k, v in ci.items() if (iv := _interval(v)))
    return params or MISSING, cis or MISSING


def _model(model: CameraModelSection) -> dict[str, Any]:
    factors = []
    for f in entries(CameraFactor, model.factors):
        params, cis = _param_text(f)
        factors.append({"words": factor_words(f.code, f.params), "code": f.code,
                        "params": params, "ci": cis, "method": f.method or MISSING, "bug": bool(f.bug)})
    return {"basis": model.basis, "n": model.n, "factors": factors,
            "not_modelled": [{"code": _d(x).get("code"), "reason": _d(x).get("reason")}
                             for x in _l(model.not_modelled)]}


def _jpeg(im: Any) -> Markup:
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=75)
    return Markup("data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii"))


def modelled_strip(sim_path: str, real_path: str, model: CameraModelSection | Mapping[str, Any],
                   max_side: int = THUMB) -> tuple[Markup, Markup, Markup] | None:
    """(sim, sim through the camera model, real) thumbnails of a pair; the model (`camera_model`,
    typed or its JSON form) is applied to the full-size sim frame (its blur and noise are in that
    frame's pixels), seed 0. None when a file cannot be read or the model cannot be applied."""
    spec = model.to_dict() if isinstance(model, CameraModelSection) else dict(model)
    try:
        import numpy as np
        from PIL import Image

        import perception_gap

        with Image.open(sim_path) as a, Image.open(real_path) as b:
            sim, real = a.convert("RGB"), b.convert("RGB")
        modelled = Image.fromarray(np.asarray(perception_gap.apply_camera_model(np.asarray(sim), spec, rng=0)))
        out = []
        for im in (sim, modelled, real):
            im.thumbnail((max_side, max_side))
            out.append(_jpeg(im))
    except Exception as e:  # a frame that cannot be shown must never break the report
        logger.debug("no modelled thumbnail for %s: %s", sim_path, e)
        return None
    return out[0], out[1], out[2]


def _pairs(res: Results, model: CameraModelSection, max_pairs: int) -> dict[str, Any] | None:
    """The worst pairs of the best-ranked encoder that lists them (as the report's worst pairs)."""
    if max_pairs <= 0 or not _l(model.factors):
        return None
    encs = sorted(entries(EncoderEntry, res.encoders), key=lambda e: (e.rank is None, e.rank or 0))
    enc = next((e for e in encs if _l(e.worst_pairs)), None)
    if enc is None:
        return None
    rows = []
    for w in map(_d, _l(enc.worst_pairs)[:max_pairs]):
        strip = modelled_strip(str(w.get("sim_path")), str(w.get("real_path")), model)
        if strip is not None:
            rows.append({"sim": strip[0], "modelled": strip[1], "real": strip[2], "key": w.get("pair_key")})
    return {"encoder": enc.name, "rows": rows} if rows else None


def _encoder(e: EncoderEntry, i: int, plots: bool, see_maps: bool) -> dict[str, Any]:
    a = e.attribution or blank(Attribution)
    name = e.name
    clear = bool(a.clear_gap) and a.all is not None
    text: Any = sentence(name, a) if clear else None
    if text and see_maps and text.endswith(MAPS + "."):
        text = escape(text[: -len(MAPS) - 1]) + Markup(f'<a href="#maps">{MAPS}</a>.')
    total = _total(a.all)
    return {"name": name, "open": i < OPEN, "note": a.note, "clear_gap": clear, "sentence": text,
            "svg": waterfall(a, ident=f"waterfall-{i}", name=name) if clear and plots else None,
            "factors": [{"words": factor_words(f.code, f.params), "code": f.code,
                         "alone": pct(f.share, sign=True), "alone_ci": pct_ci(f.ci),
                         "cum": pct(f.cumulative), "cum_ci": pct_ci(f.cumulative_ci)}
                        for f in entries(AttributionFactor, a.factors)] if clear else [],
            "total": _with_ci(total.share, total.ci) if clear else None,
            "n_pairs": a.n_pairs, "n_cf": a.n_counterfactual, "basis": a.basis,
            "gap": num(a.gap_above_floor), "gap_ci": ci_text(*(_interval(a.gap_ci) or (None, None))),
            "floor": num(a.floor), "distance": num(a.distance)}


SECTION = r"""<section id="attribution">
<h2>What closes the gap</h2>
<p class="muted">Each factor of the measured camera model (listed below) is applied to sim frames, alone and then cumulatively in urgency order, and the frames are embedded again. A factor's share is the fraction of the encoder's gap above its real-vs-real noise floor it closes: 100% brings sim down to the floor, below 0% moves it away from real, above 100% past the floor. Intervals: 95% bootstrap over episodes, every counterfactual read on the same draws. Bars: green closes, orange widens the gap, grey remains; a whisker is the step's interval from the bar's start.</p>
{% for e in encoders %}
<details class="attr-encoder"{% if e.open %} open{% endif %}><summary><span class="mono name">{{ e.name }}</span>{% if e.clear_gap %}: the camera factors close {{ e.total }}{% else %}: nothing to attribute{% endif %}</summary>
{% if e.clear_gap %}
<p class="attr-sentence">{{ e.sentence }}</p>
<div class="attr-row">
{% if e.svg %}<figure class="attr-figure">{{ e.svg }}</figure>{% endif %}
<table class="attr-alone"><tr><th>factor (urgency order)</th><th title="the factor applied alone">alone [95% CI]</th><th title="this factor and every one above it">with those above [95% CI]</th></tr>
{% for f in e.factors %}<tr><td title="{{ f.code }}">{{ f.words }}</td><td class="n">{{ f.alone }} <span class="muted">{{ f.alone_ci }}</span></td><td class="n">{{ f.cum }} <span class="muted">{{ f.cum_ci }}</span></td></tr>{% endfor %}
</table>
</div>
{% else %}<p class="attr-note">{{ e.note or "No attribution for this encoder." }}</p>{% endif %}
{% if e.n_pairs %}<p class="muted">Gap above the floor {{ e.gap }} <span class="nw">{{ e.gap_ci }}</span> (distance {{ e.distance }}, floor {{ e.floor }}, normalized centroid distance in the sample's own PCA frame); {{ e.n_pairs }} {{ "pairs" if e.basis == "pairs" else "frames per side" }} read, {{ e.n_cf }} sim frames through each counterfactual.</p>{% endif %}
</details>
{% endfor %}
{% if model %}<h3>The measured camera model</h3>
<p class="muted">What the sim frames go through to look like the real camera's ({{ "each sim frame against its own real frame" if model.basis == "pairs" else "set-level statistics" }}, {{ model.n }} {{ "pairs" if model.basis == "pairs" else "frames per side" }}); written as <code>camera_model.json</code> beside results.json, applied with <code>perception_gap.apply_camera_model</code>.</p>
{% if model.factors %}<table id="camera-model" class="kv"><tr><th>factor</th><th>parameters (units)</th><th>95% interval</th><th>measured by</th></tr>
{% for f in model.factors %}<tr class="cm-factor"><td><code>{{ f.code }}</code>{% if f.bug %} <span class="badge sev-bug">fix</span>{% endif %}<br>{{ f.words }}</td><td class="mono">{{ f.params }}</td><td class="mono">{{ f.ci }}</td><td class="muted">{{ f.method }}</td></tr>{% endfor %}
</table>{% else %}<p>No camera factor was measured: the model is empty.</p>{% endif %}
{% if model.not_modelled %}<p>Measured but not modelled:</p><ul id="not-modelled">{% for x in model.not_modelled %}<li><code>{{ x.code }}</code>: {{ x.reason }}</li>{% endfor %}</ul>{% endif %}
{% endif %}
{% if pairs %}<h3>Worst pairs through the camera model ({{ pairs.encoder }}, farthest first)</h3>
<p class="muted">Each row: the sim frame, the same frame through the camera model (noise seed 0), the real frame.</p>
<div class="pairs">
{% for w in pairs.rows %}<div class="pair cm-pair"><figure><img alt="sim" src="{{ w.sim }}"><figcaption class="mono" title="{{ w.key }}">sim {{ w.key }}</figcaption></figure><figure><img alt="sim through the camera model" src="{{ w.modelled }}"><figcaption>sim + camera model</figcaption></figure><figure><img alt="real" src="{{ w.real }}"><figcaption>real</figcaption></figure></div>{% endfor %}
</div>{% endif %}
</section>
"""


def section(results: Results | Mapping[str, Any], *, max_encoders: int = 60, max_pairs: int = MAX_PAIRS,
            plots: bool = True) -> Markup | None:
    """The "What closes the gap" section, or None when the results hold neither an attribution nor a
    camera model.

    Args:
        results: a `Results` or its JSON form (`encoders[i].attribution`, `camera_model`).
        max_encoders: most encoders shown, in results order (the ranking table's).
        max_pairs: most worst pairs shown through the camera model (0: none).
        plots: draw the waterfalls (False keeps the sentences and tables); the gap maps, drawn with
            the plots, are then linked from the sentences.

    Returns:
        The section's HTML (names escaped).
    """
    res = read_results(results)
    encs = [e for e in entries(EncoderEntry, res.encoders) if e.attribution is not None]
    # a camera model written as `{}` holds nothing to show
    model = res.camera_model if given(res.camera_model) else None
    if not encs and model is None:
        return None
    see_maps = plots and res.maps is not None
    return Markup(page.compiled(SECTION).render(
        encoders=[_encoder(e, i, plots, see_maps) for i, e in enumerate(encs[:max_encoders])],
        model=_model(model) if model is not None else None,
        pairs=_pairs(res, model, min(max_pairs, MAX_PAIRS)) if model is not None else None))
