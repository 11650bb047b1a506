"""HTML report of the evaluation commands (`rollouts`, `rank-fidelity`, `latency`).

Draws and tabulates what the results hold (interval bars per policy, sim-vs-real scatter with
the rank violations drawn, latency histogram and per-stage stacked bars); computes nothing. The
sections are read typed (`Rollouts`, `RankFidelity`, `Latency` of perception_gap.schema); a plain or
partial results.json is read into them by `reports.reading`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from perception_gap.reports import page
from perception_gap.reports.decisions import outcome, threshold_rule
from perception_gap.reports.format import MISSING, ci, compact, labelled, num, signed
from perception_gap.reports.plots import REAL_COLOR, SIM_COLOR, _figure, _label, _png, legend_beside
from perception_gap.reports.reading import entries
from perception_gap.reports.reading import results as read_results
from perception_gap.schema import Latency, RankFidelity, Results, RolloutGroup, Rollouts
from perception_gap.wording import finite

MAX_ROWS = 60


def interval_bars(groups: Sequence[RolloutGroup | Mapping[str, Any]]) -> Markup | None:
    """Success rate of each policy/task, sim and real side by side, with their interval bars
    (`rollouts.groups`, typed or their JSON form)."""
    rows = [g for g in entries(RolloutGroup, list(groups)) if finite(g.rate)][:MAX_ROWS]
    if not rows:
        return None
    keys = list(dict.fromkeys(f"{g.policy}/{g.task}" for g in rows))
    fig = _figure(6.4, 0.9 + 0.35 * len(keys))
    ax = fig.add_subplot()
    for g in rows:
        y = keys.index(f"{g.policy}/{g.task}") + (-0.15 if g.domain == "sim" else 0.15)
        # a group without its interval is drawn as the bare rate
        lo = g.rate if g.ci_low is None else g.ci_low
        hi = g.rate if g.ci_high is None else g.ci_high
        ax.errorbar([g.rate], [y], xerr=[[g.rate - lo], [hi - g.rate]], fmt="o", capsize=3,
                    color=SIM_COLOR if g.domain == "sim" else REAL_COLOR)
    ax.set_yticks(range(len(keys)), [_label(k, 32) for k in keys])
    ax.set_ylim(len(keys) - 0.5, -0.5)  # first row on top; each row's two marks well inside the axes
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("success rate (bars: confidence interval)")
    ax.plot([], [], "o", color=SIM_COLOR, label="sim")
    ax.plot([], [], "o", color=REAL_COLOR, label="real")
    legend_beside(ax, 8)
    return _png(fig)


def rank_scatter(task: str, entry: Mapping[str, Any]) -> Markup | None:
    """Sim (x) vs real (y) success of each policy; pairs sim orders wrongly joined in red."""
    pts = {p["policy"]: (p["sim"], p["real"]) for p in entry.get("policies") or [] if finite(p.get("sim"))}
    if len(pts) < 2:
        return None
    fig = _figure(4.6, 4.2)
    ax = fig.add_subplot()
    for a, b in entry.get("violations") or []:
        if a in pts and b in pts:
            ax.plot([pts[a][0], pts[b][0]], [pts[a][1], pts[b][1]], color="#c0392b", lw=1.2, ls="--", zorder=1)
    for name, (x, y) in pts.items():
        ax.scatter([x], [y], color="#34495e", zorder=3)
        ax.annotate(_label(name), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.plot([0, 1], [0, 1], color="#bbb", lw=0.8)
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("sim success")
    ax.set_ylabel("real success")
    ax.set_title(f"{_label(task, 40)} (red: rank violations)", fontsize=9)
    return _png(fig)


def latency_histogram(sample: Sequence[Any], tick_ms: Any) -> Markup | None:
    """Histogram of end-to-end latency with the control tick marked."""
    v = [float(x) for x in sample if finite(x)]
    if not v:
        return None
    fig = _figure(6.0, 3.0)
    ax = fig.add_subplot()
    ax.hist(v, bins=40, color=REAL_COLOR, alpha=0.8)
    if finite(tick_ms):
        ax.axvline(float(tick_ms), color="#c0392b", lw=1.5, label=f"tick {num(float(tick_ms))} ms")
        legend_beside(ax, 8)
    ax.set_xlabel("end-to-end latency (ms)")
    ax.set_ylabel("ticks")
    return _png(fig)


def stage_bars(stages: Mapping[str, Mapping[str, Any]], order: Sequence[str], tick_ms: Any) -> Markup | None:
    """Per-stage latency stacked into one bar at p50 and one at p95, beside the tick."""
    names = [s for s in order if s in stages]
    if not names:
        return None
    fig = _figure(6.0, 2.6)
    ax = fig.add_subplot()
    colors = ["#2b6cd9", "#d9822b", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d"]
    for row, q in enumerate(("p50", "p95")):
        left = 0.0
        for i, s in enumerate(names):
            w = float(stages[s].get(q) or 0.0)
            ax.barh([row], [w], left=left, color=colors[i % len(colors)], label=_label(s) if row == 0 else None)
            left += w
    if finite(tick_ms):
        ax.axvline(float(tick_ms), color="#c0392b", lw=1.5, ls="--")
    ax.set_yticks([0, 1], ["p50", "p95"])
    ax.set_xlabel("ms from the first stage (stacked per stage; dashed: tick)")
    ax.legend(fontsize=7, ncol=min(4, len(names)), loc="upper center", bbox_to_anchor=(0.5, -0.35))
    return _png(fig)


TEMPLATE = r"""{% extends "page.html" %}
{% from "parts.html" import findings_brief, plot, table %}
{% block title %}perception-gap {{ kind }}{% endblock %}
{% block heading %}{{ title }}{% endblock %}
{% block byline %} &middot; {{ source }}{% endblock %}
{% block nav %}{% if gates %}<a href="#gates-section">Gates</a>{% endif %}<a href="#findings">Findings</a>{% if plots %}<a href="#plots">Plots</a>{% endif %}{% if tables %}<a href="#tables">Tables</a>{% endif %}{% if skipped %}<a href="#skipped">Skipped</a>{% endif %}{% endblock %}
{% block content %}
{% if gates %}
<section id="gates-section"><h2>Gates</h2>
<table id="gates"><tr><th>gate</th><th>value</th><th>threshold</th><th>result</th></tr>
{% for g in gates %}<tr><td>{{ g.name }}</td><td class="n">{{ g.value }}</td><td class="n">{{ g.threshold }}</td><td{% if g.word not in ("PASS", "SKIP") %} class="fail"{% endif %}><b>{{ g.word }}</b>: {{ g.rule }}</td></tr>{% endfor %}
</table></section>
{% endif %}
<section id="findings"><h2>Findings</h2>
{{ findings_brief(findings) }}
</section>
{% if plots %}<section id="plots">{% for p in plots %}{{ plot(p, "plot") }}{% endfor %}</section>{% endif %}
<section id="tables">
{% for t in tables %}<h2>{{ t.title }}</h2>
{{ table(t.head, t.rows) }}
{% endfor %}
</section>
{% if skipped %}<section id="skipped"><h2>Skipped</h2><ul>{% for s in skipped %}<li>{{ s }}</li>{% endfor %}</ul></section>{% endif %}
{% endblock %}
"""


def _rollouts(sec: Rollouts) -> tuple[list[Markup], list[dict[str, Any]]]:
    groups_ = sec.groups or []
    plots = [p for p in [interval_bars(groups_)] if p]
    groups = {"title": f"Success rates ({sec.ci_method} {num((sec.confidence or 0) * 100, 0)}% CI)",
              "head": ["policy", "task", "domain", "n", "successes", "rate", "CI"],
              "rows": [[g.policy, g.task, g.domain, g.n, g.successes, num(g.rate), ci(g.ci_low, g.ci_high)]
                       for g in groups_[:MAX_ROWS]]}
    comps = {"title": "Sim vs real (drop = sim - real, Newcombe hybrid score CI)",
             "head": ["policy", "task", "sim", "real", "drop", "drop CI",
                      "rollouts needed per side (\u2014: no drop to resolve, or beyond the search)"],
             "rows": [[c["policy"], c["task"], num(c["sim_rate"]), num(c["real_rate"]), signed(c["drop"]),
                       ci(*c["drop_ci"]), labelled(c["rollouts_needed"])] for c in (sec.comparisons or [])]}
    modes = {"title": "Failure modes (failed episodes per category)", "head": ["policy/task", "categories", "sim",
                                                                               "real", "test", "p"],
             "rows": [[k, ", ".join(v["categories"]), labelled(dict(zip(v["categories"], v["sim"]))),
                       labelled(dict(zip(v["categories"], v["real"]))), v["test"],
                       num(v["p_value"])] for k, v in (sec.failure_modes or {}).items()]}
    lengths = {"title": "Episode length (p10 / p50 / p90)", "head": ["policy/task", "sim", "real"],
               "rows": [[k] + [(f"{num(v[d]['p10'], 1)} / {num(v[d]['p50'], 1)} / {num(v[d]['p90'], 1)} "
                                f"(n {v[d]['n']})" if d in v else MISSING) for d in ("sim", "real")]
                        for k, v in (sec.episode_lengths or {}).items()]}
    return plots, [t for t in (groups, comps, modes, lengths) if t["rows"]]


def _rank(sec: RankFidelity) -> tuple[list[Markup], list[dict[str, Any]]]:
    tasks = sec.tasks or {}
    plots = [p for p in (rank_scatter(k, v) for k, v in list(tasks.items())[:12]) if p]
    mean = sec.mean or {}
    rows = [[k, v["n_policies"], num(v["mmrv"]), ci(*(v.get("mmrv_ci") or (None, None))), num(v["pearson"]),
             ci(*(v.get("pearson_ci") or (None, None)))] for k, v in tasks.items()]
    rows.append(["mean over tasks", MISSING, num(mean.get("mmrv")), MISSING, num(mean.get("pearson")), MISSING])
    return plots, [{"title": "Rank fidelity (MMRV: order from sim and real, violation size from real)",
                    "head": ["task", "policies", "MMRV", "CI", "Pearson", "CI"], "rows": rows}]


def _latency(sec: Latency) -> tuple[list[Markup], list[dict[str, Any]]]:
    stages = sec.stages or {}
    plots = [p for p in (latency_histogram(sec.end_to_end_sample or [], sec.tick_ms),
                         stage_bars(stages, sec.stage_order or [], sec.tick_ms)) if p]
    rows = [[s, num(v["p50"], 2), num(v["p95"], 2), num(v["p99"], 2)] for s, v in stages.items()]
    e = sec.end_to_end or {}
    rows.append(["end to end", num(e.get("p50"), 2), num(e.get("p95"), 2), num(e.get("p99"), 2)])
    summary = [["tick (ms)", num(sec.tick_ms, 2)], ["overrun fraction", num(sec.overrun_fraction)],
               ["staleness (whole ticks between capture and action)", labelled(sec.staleness_ticks)],
               ["tick period jitter (ms, std)", num(sec.jitter_ms, 2)],
               ["end-to-end jitter (ms, std)", num(sec.e2e_jitter_ms, 2)], ["ticks", sec.n_ticks]]
    return plots, [{"title": "Latency per stage (ms, from the previous stage)", "head": ["stage", "p50", "p95", "p99"],
                    "rows": rows}, {"title": "Budget", "head": ["", ""], "rows": summary}]


_SECTIONS = {"rollouts": ("Rollouts: success rates, sim vs real", _rollouts),
             "rank_fidelity": ("Rank fidelity: does sim rank policies as real does?", _rank),
             "latency": ("Latency budget against the control tick", _latency)}


def render_evaluation(results: Results | Mapping[str, Any]) -> str:
    """One self-contained HTML document for the section that `results` holds (a `Results` or its JSON form)."""
    res = read_results(results)
    present = {"rollouts": res.rollouts, "rank_fidelity": res.rank_fidelity, "latency": res.latency}
    kind = next((k for k, v in present.items() if v is not None), None)
    if kind is None:
        raise ValueError("results hold no rollouts, rank_fidelity or latency section")
    sec: Any = present[kind]
    title, build = _SECTIONS[kind]
    plots, tables = build(sec)
    return page.render(
        TEMPLATE, kind=kind, title=title, version=res.version, source=res.config.file if res.config else None,
        gates=[{"name": g.name, "value": num(g.value), "threshold": num(g.threshold), "word": outcome(g),
                "rule": threshold_rule(g)} for g in sec.gates or []],
        findings=res.findings or [], plots=plots, tables=tables,
        skipped=[compact(s, 200) for s in (sec.skipped or [])[:100]])
