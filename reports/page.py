"""The page every report is drawn in, and the one Jinja environment that draws it.

`SHELL` is the document around a report: the head with the Content-Security-Policy (images only
from `data:` URIs, inline styles, nothing else: no script, no request), the styles, the header
(title, version line, navigation) and the footer. A report's template extends it
(`{% extends "page.html" %}`) and fills the blocks `title`, `heading`, `byline`, `nav` and
`content`; `parts.html` holds the pieces the check reports share (a findings list, a plain
table, a plot, a gate line). Every report renders through `environment`, so all of them escape
the same way: autoescaping, with every printed value passed through `safe_text.finalize` first.
"""

from __future__ import annotations

from functools import lru_cache

from jinja2 import DictLoader, Environment, Template

from perception_gap.reports import safe_text

# written into the page as it is (not through a template variable, which would escape its quotes)
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

STYLE = r"""body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:1em 1.5em;color:#222;line-height:1.4}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
h3{font-size:1.02em;margin:1em 0 .3em}
table{border-collapse:collapse;margin:.4em 0 1em;font-size:.85em}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f4f5f7}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
#stats-table{table-layout:fixed;width:100%}#stats-table td.n{white-space:normal;overflow-wrap:anywhere}
#stats-table th:first-child{width:9em}
.badge{display:inline-block;padding:.1em .55em;border-radius:.8em;font-size:.8em;font-weight:600;color:#fff;text-transform:uppercase}
.sev-bug{background:#c0392b}.sev-gap{background:#d9822b}.sev-info{background:#2b6cd9}.sev-none{background:#27ae60}
.verdict{border:2px solid #ccc;border-radius:.5em;padding:.8em 1em;margin:1em 0;background:#fafafa}
.verdict.bug{border-color:#c0392b}.verdict.gap{border-color:#d9822b}.verdict.info{border-color:#2b6cd9}.verdict.none{border-color:#27ae60}
.verdict .title{font-size:1.15em;font-weight:600;margin:.3em 0}.action{margin:.3em 0}.reading{margin:.3em 0;color:#444}.reading.borderline{color:#8a5a00}
.finding{border-left:4px solid #ccc;padding:.2em .8em;margin:.8em 0}
.finding.bug{border-color:#c0392b}.finding.gap{border-color:#d9822b}.finding.info{border-color:#2b6cd9}
.fail{color:#c0392b;font-weight:700}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;overflow-wrap:anywhere}
.name{overflow-wrap:normal;word-break:normal;hyphens:none}table.kv th{font-weight:500;white-space:nowrap}
details>summary{cursor:pointer;color:#2b6cd9}
.muted{color:#666;font-size:.85em}.front{color:#c0392b;font-weight:700}
img.plot{max-width:100%;border:1px solid #eee;margin:.3em .5em .3em 0}
.thumbs figure{display:inline-block;margin:.3em;font-size:.75em;max-width:170px}
.pairs{display:grid;grid-template-columns:repeat(auto-fill,minmax(500px,1fr));gap:.6em 1.2em}
.pair{display:grid;grid-template-columns:repeat(3,160px);gap:6px}.pair figure{margin:0;font-size:.75em;min-width:0}
.pair img{display:block;max-width:160px}.pair figcaption{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}.nw{white-space:nowrap}
nav a{margin-right:1em}.wide{overflow-x:auto}#gates td:first-child{overflow-wrap:normal;white-space:nowrap}
#ranking td.n,#ranking table.kv th{white-space:normal}#ranking table.kv td.n{white-space:normal;overflow-wrap:anywhere}
/* key-value tables stay inside their box: any long word wraps, and borders are drawn inside the table (collapsed ones put half the outer border outside it) */
table.evidence,table.kv{max-width:100%;border-collapse:separate;border-spacing:0;border-top:1px solid #ddd;border-left:1px solid #ddd}
table.evidence th,table.evidence td,table.kv th,table.kv td{border-width:0 1px 1px 0;overflow-wrap:anywhere}
.attr-row{display:flex;flex-wrap:wrap;align-items:flex-start;gap:.4em 1.5em}.attr-row figure{margin:.2em 0;max-width:100%;overflow-x:auto}.attr-encoder>summary{margin:.6em 0 .2em}
.maps-row{display:flex;flex-wrap:wrap;align-items:flex-start;gap:.4em 1.2em}.maps-row figure{margin:.3em 0;font-size:.8em;max-width:300px}.maps-key svg{vertical-align:middle}.see-maps{margin:.3em 0}
footer{margin-top:2em;border-top:1px solid #ddd;padding-top:.4em}"""

SHELL = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="@CSP@">
<title>{% block title %}perception-gap report{% endblock %}</title>
<style>
@STYLE@
</style>
</head>
<body>
<header>
<h1>{% block heading %}{% endblock %}</h1>
<p class="muted">perception-gap {{ version }}{% block byline %}{% endblock %}</p>
<nav class="muted">{% block nav %}{% endblock %}</nav>
</header>
{% block content %}{% endblock %}
<footer class="muted">A self-contained page: it runs no script and loads nothing from the network; every number in it is read from the results.</footer>
</body>
</html>
""".replace("@CSP@", CSP).replace("@STYLE@", STYLE)

PARTS = r"""{% macro findings_brief(findings) %}
{% for f in findings %}
{% set sev = f.severity if f.severity in ("bug", "gap", "info") else "info" %}
<div class="finding {{ sev }}"><span class="badge sev-{{ sev }}">{{ f.severity }}</span> <code>{{ f.code }}</code> {{ f.title }}
<div class="action"><strong>Action:</strong> {{ f.action }}</div></div>
{% else %}
<p>No finding.</p>
{% endfor %}
{% endmacro %}
{% macro table(head, rows, ident=none) %}
<table{% if ident %} id="{{ ident }}"{% endif %}><tr>{% for h in head %}<th>{{ h }}</th>{% endfor %}</tr>
{% for r in rows %}<tr>{% for c in r %}<td class="n">{{ c }}</td>{% endfor %}</tr>{% endfor %}
</table>
{% endmacro %}
{% macro gate_line(g) %}{% if g %}<p class="gate">Gate <code>{{ g.name }}</code>: <strong>{{ g.word }}</strong>: {{ g.rule }}</p>{% endif %}{% endmacro %}
{% macro plot(src, alt) %}{% if src %}<img class="plot" alt="{{ alt }}" src="{{ src }}">{% endif %}{% endmacro %}
"""


@lru_cache(maxsize=8)
def environment(text_limit: int | None = None) -> Environment:
    """The Jinja environment of every report, its shell and parts loaded.

    Args:
        text_limit: longest plain-text value printed, in characters (cut with an ellipsis); None
            prints each whole.
    """
    # Every printed value passes through finalize before escaping: plain text capped and its
    # bidirectional controls made visible, markup (plots) kept.
    return Environment(loader=DictLoader({"page.html": SHELL, "parts.html": PARTS}), autoescape=True,
                       finalize=lambda v: safe_text.finalize(v, text_limit), trim_blocks=True, lstrip_blocks=True)


@lru_cache(maxsize=32)
def compiled(source: str, text_limit: int | None = None) -> Template:
    """`source` (a template's text) compiled once in `environment(text_limit)`: the report templates
    are constants, and compiling one costs about as much as rendering it."""
    return environment(text_limit).from_string(source)


def render(template: str, **context: object) -> str:
    """`template` (the text of a template extending `page.html`) rendered with `context`."""
    return compiled(template).render(**context)
