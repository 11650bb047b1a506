"""HTML report of the geometry checks (`policy-check`, `replay`, `reprojection`): tables and plots.

Reads the sections those commands write to results.json and lays them out; every number
drawn is already in the results (the policy's per-dimension quantiles, the per-step errors,
the grid's per-point errors and the fitted slope). The sections are read typed (`PolicyCheck`,
`Replay`, `Reprojection` of perception_gap.schema); a plain or partial results.json is read into
them by `reports.reading`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from perception_gap.reports import page
from perception_gap.reports.decisions import outcome, threshold_rule
from perception_gap.reports.format import num
from perception_gap.reports.plots import PALETTE, REAL_COLOR, SIM_COLOR, _figure, _png, legend_beside
from perception_gap.reports.reading import blank, entries, section
from perception_gap.reports.reading import results as read_results
from perception_gap.schema import GateEntry, PolicyCheck, Replay, Reprojection, Results
from perception_gap.schema.jobs import KnownPoints, ReplayEpisode, ReprojectionGrid
from perception_gap.wording import finite, sig

RepLike = Reprojection | Mapping[str, Any]

MAX_LAYERS = 4


def policy_plot(per_dim: Sequence[Mapping[str, Any]]) -> Markup | None:
    """Sim vs real action distribution per dimension, drawn as boxes from the stored quantiles."""
    stats = []
    for i, d in enumerate(per_dim[:24]):
        for dom in ("sim", "real"):
            q = d.get(f"{dom}_quantiles")
            if isinstance(q, list) and len(q) == 5 and all(finite(v) for v in q):
                stats.append(({"whislo": q[0], "q1": q[1], "med": q[2], "q3": q[3], "whishi": q[4], "fliers": [],
                               "label": f"{i}{dom[0]}"}, dom))
    if not stats:
        return None
    fig = _figure(max(4.0, 0.4 * len(stats) + 1.5), 3.2)
    ax = fig.add_subplot()
    boxes = ax.bxp([s for s, _ in stats], showfliers=False, patch_artist=True)
    for patch, (_, dom) in zip(boxes["boxes"], stats):
        patch.set_facecolor(SIM_COLOR if dom == "sim" else REAL_COLOR)
    ax.set_title("actions per dimension (s = sim, r = real; p5-p25-p50-p75-p95)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def _flat_zero(values: Sequence[Any]) -> bool:
    return all(finite(v) and v == 0 for v in values)


def replay_plot(episodes: Sequence[ReplayEpisode | Mapping[str, Any]]) -> Markup | None:
    """Every episode's translation error (mm) per step, and rotation error (deg) in a panel below
    unless it is 0 at every step of every episode; each episode one colour and a legend entry, its
    divergence onset dashed and its first contact dotted in the same colour (`replay.episodes`,
    typed or their JSON form)."""
    eps = [e for e in entries(ReplayEpisode, list(episodes)) if e.steps]
    if not eps:
        return None
    rotation = not all(_flat_zero(e.rotation_error_deg or []) for e in eps)
    fig = _figure(7.2, 5.0 if rotation else 3.0)
    axes = fig.subplots(2 if rotation else 1, 1, sharex=True, squeeze=False)[:, 0]
    series = [([e.translation_error for e in eps], 1000.0, "translation error (mm)")]
    if rotation:
        series.append(([e.rotation_error_deg for e in eps], 1.0, "rotation error (deg)"))
    for ax, (errors, scale, ylabel) in zip(axes, series):
        for i, (e, err) in enumerate(zip(eps, errors)):
            colour = PALETTE[i % len(PALETTE)]
            ax.plot(e.steps, [v * scale if finite(v) else math.nan for v in err or []], color=colour, lw=1.2,
                    label=f"episode {e.episode}")
            for mark, style in ((e.divergence_step, "--"), (e.first_contact_step, ":")):
                if finite(mark):
                    ax.axvline(mark, color=colour, ls=style, lw=1)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    top = axes[0]
    top.plot([], [], color="#000000", ls="--", lw=1, label="divergence onset")
    top.plot([], [], color="#000000", ls=":", lw=1, label="first contact")
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes, never on a line
    note = "" if rotation else "; rotation error 0 at every step (no orientation in the log, or identical): not drawn"
    top.set_title(f"Replay error per step, {len(eps)} episode{'s' if len(eps) != 1 else ''}{note}", fontsize=9)
    fig.tight_layout()
    return _png(fig)


def _layers(pts: Sequence[Sequence[float]], rep: Reprojection) -> list[float]:
    """The grid layers (z) the heatmaps draw, the same for the error and the coverage figures: all
    of them up to MAX_LAYERS; past that, the layers holding the most initial states and failures
    when the check has coverage (so no start is hidden in an undrawn layer while a drawn one is
    empty), else evenly spaced ones."""
    zs = sorted({round(p[2], 6) for p in pts})
    if len(zs) <= MAX_LAYERS:
        return zs
    cells = (rep.coverage or {}).get("cells") or {}
    counts = [(a or 0) + (b or 0) for a, b in zip(cells.get("n_states") or [], cells.get("n_failures") or [])]
    if len(counts) == len(pts) and any(counts):
        per_z = {z: 0 for z in zs}
        for p, c in zip(pts, counts):
            per_z[round(p[2], 6)] += c
        return sorted(sorted(zs, key=lambda z: -per_z[z])[:MAX_LAYERS])
    return [zs[round(i * (len(zs) - 1) / (MAX_LAYERS - 1))] for i in range(MAX_LAYERS)]


def _reprojection_section(rep: RepLike) -> Reprojection:
    return section(Reprojection, rep) or blank(Reprojection)


def reprojection_plots(rep: RepLike) -> list[Markup]:
    """Heatmaps of the error per grid layer (z), and error against distance with the fitted line
    (the `reprojection` section, typed or its JSON form)."""
    rep = _reprojection_section(rep)
    grid = rep.grid or blank(ReprojectionGrid)
    pts, err = grid.points or [], grid.error_px or []
    if not pts:
        return []
    zs = _layers(pts, rep)
    vals = [e for e in err if finite(e)]
    vmax = max(vals) if vals else 1.0
    fig = _figure(3.2 * len(zs) + 0.8, 3.0)
    for k, z in enumerate(zs):
        ax = fig.add_subplot(1, len(zs), k + 1)
        layer = [(p, e) for p, e in zip(pts, err) if round(p[2], 6) == z]
        ok = [(p, e) for p, e in layer if finite(e)]
        bad = [p for p, e in layer if not finite(e)]
        sc = ax.scatter([p[0] for p, _ in ok], [p[1] for p, _ in ok], c=[e for _, e in ok], marker="s", s=18,
                        cmap="magma", vmin=0, vmax=vmax)
        if bad:
            ax.scatter([p[0] for p in bad], [p[1] for p in bad], marker="x", s=10, color="#999")
        ax.set_title(f"z = {sig(z)} m", fontsize=9)
        ax.set_xlabel("x (m)", fontsize=8)
        ax.set_aspect("equal", adjustable="datalim")
    fig.colorbar(sc, ax=fig.axes, label="error (px)")
    out = [_png(fig)]
    centre, slope, icpt = rep.centre, rep.slope_px_per_m, rep.intercept_px
    if isinstance(centre, list) and finite(slope) and finite(icpt):
        fig2 = _figure(4.8, 3.0)
        ax = fig2.add_subplot()
        d = [math.dist(p, centre) for p, e in zip(pts, err) if finite(e)]
        ax.scatter(d, vals, s=6, color="#7f8c8d")
        if d:
            ax.plot([0, max(d)], [icpt, icpt + slope * max(d)], color="#c0392b", label=f"{sig(slope)} px/m")
            legend_beside(ax, fontsize=8)
        ax.set_xlabel("distance from the grid centre (m)")
        ax.set_ylabel("error (px)")
        out.append(_png(fig2))
    return out


def coverage_plot(rep: RepLike) -> Markup | None:
    """Per grid layer (z): training initial states per cell (squares, shaded by count) and the
    failures (red circles, area by count), to read beside the error heatmap of the same layers
    (the `reprojection` section, typed or its JSON form)."""
    rep = _reprojection_section(rep)
    cov = rep.coverage
    pts = (rep.grid or blank(ReprojectionGrid)).points or []
    if not pts or cov is None or not isinstance(cov.get("cells"), Mapping):
        return None
    states, fails = cov["cells"].get("n_states") or [], cov["cells"].get("n_failures") or []
    if len(states) != len(pts) or len(fails) != len(pts):
        return None
    zs = _layers(pts, rep)
    vmax = max(max(states), 1)
    fmax = max(max(fails), 1)
    fig = _figure(3.2 * len(zs) + 0.8, 3.0)
    for k, z in enumerate(zs):
        ax = fig.add_subplot(1, len(zs), k + 1)
        layer = [i for i, p in enumerate(pts) if round(p[2], 6) == z]
        sc = ax.scatter([pts[i][0] for i in layer], [pts[i][1] for i in layer], c=[states[i] for i in layer],
                        marker="s", s=18, cmap="Blues", vmin=0, vmax=vmax)
        failed = [i for i in layer if fails[i] > 0]
        if failed:
            ax.scatter([pts[i][0] for i in failed], [pts[i][1] for i in failed], s=[8 + 40 * fails[i] / fmax for i in failed],
                       facecolors="none", edgecolors="#c0392b", label="failures")
        ax.set_title(f"z = {sig(z)} m", fontsize=9)
        ax.set_xlabel("x (m)", fontsize=8)
        ax.set_aspect("equal", adjustable="datalim")
    fig.colorbar(sc, ax=fig.axes, label="initial states per cell")
    hidden = sum(states[i] + fails[i] for i, p in enumerate(pts) if round(p[2], 6) not in zs)
    if hidden:
        fig.suptitle(f"{hidden:,} starts and failures lie in the {len({round(p[2], 6) for p in pts}) - len(zs)} "
                     "layers not drawn", fontsize=8)
    return _png(fig)


PAGE = r"""{% extends "page.html" %}
{% from "parts.html" import findings_brief, gate_line, plot, table %}
{% block title %}perception-gap geometry report{% endblock %}
{% block heading %}After the gap hunt: policy, replay, reprojection{% endblock %}
{% block nav %}<a href="#findings">Findings</a>{% if policy %}<a href="#policy-check">Policy check</a>{% endif %}{% if replay %}<a href="#replay">Replay</a>{% endif %}{% if reprojection %}<a href="#reprojection">Reprojection</a>{% endif %}{% endblock %}
{% block content %}
<section id="findings"><h2>Findings</h2>
{{ findings_brief(findings) }}
</section>
{% if policy %}
<section id="policy-check"><h2>Policy check</h2>
<p>{{ policy.n_pairs }} pairs through <code>{{ policy.spec }}</code>.</p>
{{ gate_line(policy.gate) }}
{{ table(["dim", "sim std", "real std", "paired diff (real - sim)", "|diff| / sim std"], policy.rows, "policy-dims") }}
{{ plot(policy.plot, "actions") }}
</section>
{% endif %}
{% if replay %}
<section id="replay"><h2>Replay</h2>
<p>Mean translation error {{ replay.translation_mm }} mm, mean rotation error {{ replay.rotation_deg }} deg, divergence from step {{ replay.divergence }}.</p>
{{ gate_line(replay.gate) }}
{{ table(["episode", "translation mean (m)", "rotation mean (deg)", "divergence step", "first contact", "cause"], replay.rows, "replay-episodes") }}
{{ plot(replay.plot, "replay") }}
</section>
{% endif %}
{% if reprojection %}{% set rep = reprojection %}
<section id="reprojection"><h2>Reprojection</h2>
{{ gate_line(rep.gate) }}
{{ table(["", "value"], rep.rows, "reprojection-summary") }}
{% if rep.known %}<p>Known points: {{ rep.known.n }}; real model RMS {{ rep.known.real_rms }} px, sim model RMS {{ rep.known.sim_rms }} px.</p>{% endif %}
{% if rep.fit %}{% set fit = rep.fit %}
<h3>Camera fit</h3>
<p>The sim camera's offsets that best reproduce the real projections (error {{ fit.error_rms }} px RMS over {{ fit.n_points }} points). Named: <strong>{{ fit.named }}</strong> (from the <code>{{ fit.chosen }}</code> fit).{% if fit.ambiguous %} Both single-group models explain this grid: it cannot tell them apart.{% endif %} Rule: {{ fit.rule }}.</p>
{{ table(["model", "residual (px RMS)", "principal point (px)", "focal (px)", "k1", "translation (mm, base frame)", "rotation (deg, camera axes)"], fit.rows, "camera-fit") }}
{% endif %}
{{ plot(rep.heatmap, "reprojection") }}
{% if rep.coverage %}
<h3>Initial states and failures on the grid</h3>
<p>Verdict: <strong>{{ rep.coverage.verdict }}</strong>.</p>
<p class="rule">Decision rule: {{ rep.coverage.rule }}</p>
{{ table(["", "value"], rep.coverage.rows, "coverage-summary") }}
{% endif %}
{{ plot(rep.coverage_plot, "initial states and failures") }}
{% for p in rep.more_plots %}{{ plot(p, "reprojection") }}{% endfor %}
</section>
{% endif %}
{% endblock %}
"""


def _cells(rows: Sequence[Sequence[Any]]) -> list[list[str]]:
    """Each cell as shown: text as it is, anything else through the number formatter."""
    return [[c if isinstance(c, str) else num(c) for c in r] for r in rows]


def _contrast_rows(group: str, unit: str, c: Any) -> list[list[Any]]:
    if not isinstance(c, Mapping) or not finite(c.get("threshold")):
        return []
    return [[f"failure rate, starts with {group} {num(c['threshold'])} {unit} / the others",
             f"{num(c.get('failure_rate_in'))} / {num(c.get('failure_rate_out'))} (Fisher p {num(c.get('p_value'))}"
             f"{', holds' if c.get('holds') else ''})"]]


def _coverage(cov: Any) -> dict[str, Any] | None:
    if not isinstance(cov, Mapping):
        return None
    verdict = {"recalibrate": "the error grows toward the failing starts: recalibrate",
               "thin_coverage": "failures where coverage is thin and the error is flat: a data or randomization problem",
               "none": "neither", "insufficient": "too few failures or successes to decide"}.get(cov.get("verdict"), "")
    rows = [["initial states", cov.get("n_states")], ["outside the grid", cov.get("n_outside")],
            ["with an outcome", cov.get("n_outcomes")], ["failures", cov.get("n_failures")],
            ["error at failures / successes (px)", f"{num(cov.get('error_failures_px'))} / {num(cov.get('error_successes_px'))}"],
            ["AUC error (failure > success)", cov.get("auc_error")],
            *_contrast_rows("error above", "px", cov.get("high_error")),
            ["coverage at failures / successes (median states per cell)",
             f"{num(cov.get('coverage_failures'))} / {num(cov.get('coverage_successes'))}"],
            ["AUC coverage (failure < success)", cov.get("auc_coverage")],
            *_contrast_rows("coverage at most", "states per cell", cov.get("thin"))]
    return {"verdict": verdict, "rule": cov.get("rule", ""), "rows": _cells(rows)}


def _gate(g: GateEntry | None) -> dict[str, Any] | None:
    if g is None:
        return None
    return {"name": g.name, "word": outcome(g), "rule": threshold_rule(g)}


def _policy(pc: PolicyCheck) -> dict[str, Any]:
    per_dim = pc.per_dim or []
    rows = [[str(i), d.get("sim_std"), d.get("real_std"), d.get("paired_diff_mean"), d.get("paired_diff_rel")]
            for i, d in enumerate(per_dim)]
    return {"n_pairs": num(pc.n_pairs), "spec": pc.policy or "", "gate": _gate(pc.gate), "rows": _cells(rows),
            "plot": policy_plot(per_dim)}


def _replay(rp: Replay) -> dict[str, Any]:
    tr, rot = rp.translation_error or {}, rp.rotation_error_deg or {}
    episodes = entries(ReplayEpisode, rp.episodes)
    rows = [[str(e.episode), e.translation_mean, e.rotation_mean_deg, e.divergence_step, e.first_contact_step,
             str(e.cause or "-")] for e in episodes]
    return {"translation_mm": num((tr.get("mean") or 0) * 1000), "rotation_deg": num(rot.get("mean")),
            "divergence": num(rp.divergence_step), "gate": _gate(rp.gate), "rows": _cells(rows),
            "plot": replay_plot(episodes)}


def _known(known: KnownPoints | None) -> dict[str, Any] | None:
    if known is None:
        return None
    return {"n": num(known.n), "real_rms": num(known.real_rms_px), "sim_rms": num(known.sim_rms_px)}


def _reprojection(rep: Reprojection) -> dict[str, Any]:
    rows = [["mean", rep.mean], ["median", rep.median], ["max", rep.max], ["slope_px_per_m", rep.slope_px_per_m],
            ["growth_px", rep.growth_px], ["structured", rep.structured], ["n_points", rep.n_points],
            ["n_valid", rep.n_valid], ["n_behind", rep.n_behind], ["n_outside", rep.n_outside]]
    plots = reprojection_plots(rep)  # the error heatmap first, the coverage beside it, then the distance plot
    return {"gate": _gate(rep.gate), "rows": _cells(rows), "known": _known(rep.points),
            "fit": _camera_fit(rep.camera_fit), "heatmap": plots[0] if plots else None,
            "coverage": _coverage(rep.coverage), "coverage_plot": coverage_plot(rep), "more_plots": plots[1:]}


def _vec(v: Any) -> str:
    return ", ".join(num(x) for x in v) if isinstance(v, list) else num(v)


def _camera_fit(fit: Any) -> dict[str, Any] | None:
    """The three fitted models side by side, and what they name."""
    if not isinstance(fit, Mapping) or not isinstance(fit.get("fits"), Mapping):
        return None
    rows = [[m, f.get("residual_rms_px"), _vec(f.get("principal_point_px")), _vec(f.get("focal_px")), f.get("k1"),
             _vec(f.get("translation_mm")), _vec(f.get("rotation_deg"))]
            for m, f in fit["fits"].items() if isinstance(f, Mapping)]
    return {"error_rms": num(fit.get("error_rms_px")), "n_points": num(fit.get("n_points")),
            "named": ", ".join(fit.get("named") or []) or "nothing", "chosen": fit.get("chosen", ""),
            "ambiguous": bool(fit.get("ambiguous")), "rule": fit.get("rule", ""), "rows": _cells(rows)}


def render_geometry_report(results: Results | Mapping[str, Any]) -> str:
    """One self-contained HTML page for whichever of `policy_check`, `replay`, `reprojection` is present
    (a `Results` or its JSON form)."""
    res = read_results(results)
    # built in page order, so the figures are drawn in the order they appear
    policy = _policy(res.policy_check) if res.policy_check is not None else None
    replay = _replay(res.replay) if res.replay is not None else None
    reprojection = _reprojection(res.reprojection) if res.reprojection is not None else None
    return page.render(PAGE, version="" if res.version is None else res.version, findings=res.findings or [],
                       policy=policy, replay=replay, reprojection=reprojection)
