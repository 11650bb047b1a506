"""The analysis report's Jinja2 template (`run`, `screen`, `drift`; kept in Python so it ships with the
package): the blocks it fills in the page every report shares (reports/page.py)."""

TEMPLATE = r"""{% extends "page.html" %}
{% block heading %}{% if kind == "screen" %}Screening renderings against <span class="mono">{{ real }}</span>{% elif kind == "drift" %}Drift check: <span class="mono">{{ drift.current }}</span> against baseline <span class="mono">{{ drift.baseline }}</span>{% else %}Sim-to-real gap: <span class="mono">{{ sim }}</span> vs <span class="mono">{{ real }}</span>{% endif %}{% endblock %}
{% block byline %}{% if run_id is not none %} &middot; run {{ run_id }}{% endif %}{% endblock %}
{% block nav %}{% if screen %}<a href="#screen">Screening</a>{% endif %}{% if drift %}<a href="#drift">Gates</a>{% endif %}<a href="#findings">Findings</a>{% if kind == "run" %}<a href="#encoders">Encoders</a>{% endif %}{% if attribution %}<a href="#attribution">What closes the gap</a>{% endif %}{% if maps %}<a href="#maps">Maps</a>{% endif %}<a href="#stats">Statistics</a>{% if detection %}<a href="#detection">Detection</a>{% endif %}<a href="#data">Data</a>{% endblock %}
{% block content %}
<section id="verdict">
{% if verdict %}
<div class="verdict {{ verdict.sev_class }}">
<span class="badge sev-{{ verdict.sev_class }}">{{ verdict.severity }}</span> <code>{{ verdict.code }}</code>
<div class="title" id="verdict-title">{{ verdict.title }}</div>
<div class="action"><strong>Action:</strong> {{ verdict.action }}</div>
{% if verdict.see_maps and maps %}<div class="see-maps"><a href="#maps">See where the frames differ (gap maps)</a></div>{% endif %}
</div>
{% else %}
<div class="verdict none"><span class="badge sev-none">ok</span>
<div class="title" id="verdict-title">No finding: nothing in this run crossed a threshold.</div></div>
{% endif %}
</section>

{% if screen %}
<section id="screen">
<h2>Renderings, closest to real first</h2>
<p>{% if screen.closest %}Closest: <strong class="mono">{{ screen.closest }}</strong>, significantly closer than every other rendering.{% else %}No rendering is significantly closer to real than every other one.{% endif %}
<span class="muted">Distance = mean over views of the normalized PCA centroid distance to real in one shared projection; {{ screen.ci_level }} intervals from a paired bootstrap that resamples <span id="screen-units">{{ screen.units }}</span>, the same draws for every rendering.</span></p>
<div class="wide"><table id="screen-ranking"><tr><th>rank</th><th>sim set</th><th>distance [CI]</th>{% for v in screen.views %}<th class="mono">{{ v }}</th>{% endfor %}</tr>
{% for r in screen.ranking %}<tr class="screen-row"><td class="n">{{ r.rank }}</td><td class="mono">{{ r.set }}</td><td class="n">{{ r.distance }} {{ r.ci }}</td>{% for c in r.per_view %}<td class="n">{{ c }}</td>{% endfor %}</tr>{% endfor %}
</table></div>
<h3>Pairwise differences (farther &minus; closer)</h3>
<div class="wide"><table id="screen-pairs"><tr><th>closer</th><th>farther</th><th>difference [CI]</th><th>significant</th>{% for v in screen.views %}<th class="mono">{{ v }}</th>{% endfor %}</tr>
{% for p in screen.pairwise %}<tr><td class="mono">{{ p.closer }}</td><td class="mono">{{ p.farther }}</td><td class="n">{{ p.difference }} {{ p.ci }}</td><td>{{ p.significant }}</td>{% for c in p.per_view %}<td class="n">{{ c }}</td>{% endfor %}</tr>{% endfor %}
</table></div>
{% if screen.baseline %}<p id="screen-gate">Gate <code>--fail-if-worse</code> <span class="mono">{{ screen.baseline }}</span>: <strong>{{ screen.word }}</strong>: {% if screen.word == "FAIL" %}significantly farther from real than the baseline: <span class="mono">{{ screen.worse }}</span>{% elif screen.word == "NOT COMPUTED" %}{{ screen.reason }}{% else %}no rendering is significantly farther from real than the baseline{% endif %} (fails when the interval of a difference to the baseline lies entirely above 0).</p>{% endif %}
{% if screen.skipped_views %}<p class="muted">Views not computed: {% for k, v in screen.skipped_views %}{{ k }} ({{ v }}){% if not loop.last %}; {% endif %}{% endfor %}</p>{% endif %}
{% if screen.plot %}<img class="plot" alt="screening plot" src="{{ screen.plot }}">{% endif %}
</section>
{% endif %}

{% if drift %}
<section id="drift">
<h2>Gates: <span class="badge {{ "sev-none" if drift.word == "PASS" else "sev-bug" }}">{{ drift.word }}</span></h2>
<table id="gates"><tr><th>gate</th><th>value [CI]</th><th>threshold</th><th>result</th><th>what it measures</th></tr>
{% for g in drift.gates %}<tr class="gate-row"><td class="mono">{{ g.name }}</td><td class="n">{{ g.value }} {{ g.ci }}</td><td class="n">{{ g.threshold }}</td><td class="gate-result"><span class="badge {{ {"FAIL": "sev-bug", "NOT COMPUTED": "sev-gap", "SKIP": "sev-info"}.get(g.word, "sev-none") }}">{{ g.word }}</span> {{ g.rule }}</td><td class="muted">{{ g.description }}</td></tr>{% endfor %}
</table>
{% if drift.history %}<h3>History against this baseline</h3>
<table id="drift-history"><tr><th>run</th><th>when</th><th>current set</th><th>result</th><th>failed gates</th></tr>
{% for h in drift.history %}<tr><td class="n">{{ h.run_id }}</td><td class="mono">{{ h.started_at }}</td><td class="mono">{{ h.current }}</td><td>{{ h.result }}</td><td class="mono">{{ h.failed }}</td></tr>{% endfor %}
</table>{% if drift.plot %}<img class="plot" alt="drift trend" src="{{ drift.plot }}">{% endif %}{% endif %}
</section>
{% endif %}

<section id="findings">
<h2>Findings ({{ n_findings }})</h2>
{% if not findings %}<p>No finding.</p>{% endif %}
{% for f in findings %}
<div class="finding {{ f.sev_class }}">
<h3>{{ loop.index }}. <span class="badge sev-{{ f.sev_class }}">{{ f.severity }}</span> <code>{{ f.code }}</code> {{ f.title }}</h3>
{% if f.reading %}<div class="reading{% if f.borderline %} borderline{% endif %}"><strong>Reading:</strong> {{ f.reading }}</div>{% endif %}
<div class="action"><strong>Action:</strong> {{ f.action }}</div>
{% if f.see_maps and maps %}<div class="see-maps"><a href="#maps">See where the frames differ (gap maps)</a></div>{% endif %}
{% if f.evidence or f.evidence_rest %}<table class="evidence"><tr><th>evidence</th><th>value</th></tr>
{% for lab, k, v in f.evidence %}<tr><td title="{{ k }}">{{ lab }}</td><td class="mono">{{ v }}</td></tr>{% endfor %}
</table>
{% if f.evidence_rest %}<details class="evidence-more"><summary>{{ f.evidence_rest|length }} more evidence values</summary><table class="evidence">
{% for lab, k, v in f.evidence_rest %}<tr><td title="{{ k }}">{{ lab }}</td><td class="mono">{{ v }}</td></tr>{% endfor %}
{% if f.evidence_more %}<tr><td colspan="2" class="muted">&hellip; {{ f.evidence_more }} more</td></tr>{% endif %}
</table></details>{% endif %}{% endif %}
</div>
{% endfor %}
{% if findings_more %}<p class="muted">&hellip; {{ findings_more }} more findings not shown.</p>{% endif %}
</section>
{% if kind == "run" %}
<section id="encoders">
<h2>Encoder ranking</h2>
{% if encoders %}
<p class="muted" id="ranking-basis">Encoders are ranked on two things together: the <strong>gap above the noise floor</strong> (how much farther sim is from real than two halves of the real set are from each other; lower is better) and the <strong>held-out sim&rarr;real probe R&sup2;</strong> (a linear read-out trained on sim frames of some episodes, scored on real frames of the others; higher is better). The noise floor stands beside each gap. A star marks the Pareto front: no other encoder is both closer and more predictive. Open a row's details for the rest.</p>
{% if families|length > 1 %}<p id="family-best">Best of each family: {% for f in families %}<span class="fam" style="color:{{ f.colour }}">&#9679;</span> {{ f.family }}: <span class="mono name">{{ f.best }}</span> <span class="muted">({% if f.rank == "reference" %}reference row{% elif f.rank is none %}not ranked{% else %}rank {{ f.rank }}{% endif %}{% if f.count > 1 %}, best of {{ f.count }}{% endif %})</span>{% if not loop.last %}; {% endif %}{% endfor %}.</p>{% endif %}
<div class="wide"><table id="ranking">
<tr>{% if numbered %}<th title="the encoder's number in the gap-vs-probe plot">#</th>{% endif %}<th title="by gap above the noise floor and held-out probe R²">rank</th><th>encoder</th>{% if numbered %}<th>family</th>{% endif %}<th title="normalized centroid distance minus the noise floor; interval = the distance's bootstrap CI shifted by the floor">gap above noise floor [CI] (ranked on; lower is better)</th><th title="normalized centroid distance between two halves of the real set">noise floor (real vs real)</th><th title="trained on sim frames of the training episodes, scored on real frames of the held-out episodes">probe R&sup2; sim&rarr;real, held out (ranked on; higher is better)</th><th title="sim-to-sim R² minus sim-to-real R² on the same held-out episodes; interval from a bootstrap over held-out episodes">transfer drop [CI]</th><th>domain AUC (not ranked on)</th><th>details</th></tr>
{% for e in encoders %}
<tr class="enc-row">{% if numbered %}<td class="n muted">{{ e.n }}</td>{% endif %}<td class="n">{{ e.rank }}{% if e.front %} <span class="front" title="Pareto front">&#9733;</span>{% endif %}{% if e.basis == "gap alone" %} <span class="muted" title="ranked on the gap alone">(gap alone)</span>{% endif %}</td>
<td class="mono name">{{ e.name }}</td>
{% if numbered %}<td style="white-space:nowrap"><span class="fam" style="color:{{ e.family_colour }}">&#9679;</span> {{ e.family }}</td>{% endif %}
<td class="n">{{ e.gap }} <span class="muted">{{ e.gap_ci }}</span></td>
<td class="n">{{ e.floor }}</td>
<td class="n">{{ e.p_sr }}{% if e.probe_uninformative %} <span class="badge sev-info" title="sim-to-sim R² <= 0: the probe explains nothing and does not rank this encoder">uninformative</span>{% elif e.probe_warn %} <span class="badge sev-gap" title="sim-to-real R² at or below 0: the probe predicts no better than the mean on real frames">R&sup2; &le; 0</span>{% endif %}</td>
<td class="n">{{ e.drop }} <span class="muted">{{ e.drop_ci }}</span></td>
<td class="n">{{ e.auc }}</td>
<td><details class="enc-details"><summary>more</summary><table class="kv">
<tr><th>family / dim</th><td>{{ e.family }} / {{ e.dim }}</td></tr>
<tr><th>centroid distance (norm.) [CI]</th><td class="n">{{ e.cd }} {{ e.cd_ci }}</td></tr>
<tr><th>noise floor</th><td class="n">{{ e.floor }}{% if e.floor_method %} <span class="muted">({{ e.floor_method }})</span>{% endif %}</td></tr>
<tr><th>MMD (permutation p)</th><td class="n">{{ e.mmd }} ({{ e.mmd_p }})</td></tr>
<tr><th>Frechet distance [CI]</th><td class="n">{{ e.fd }}</td></tr>
<tr><th>KID [CI]</th><td class="n">{{ e.kid }}</td></tr>
<tr><th>paired cosine distance, mean / shuffled</th><td class="n">{{ e.pc }} / {{ e.pc_shuffled }}{% if e.clip_band %} <span class="badge sev-info">{{ e.clip_band }}</span>{% endif %}</td></tr>
<tr><th>probe R&sup2; sim&rarr;sim / real&rarr;real</th><td class="n">{{ e.p_ss }} / {{ e.p_rr }}</td></tr>
</table></details></td></tr>
{% endfor %}
</table></div>
{% if encoders_more %}<p class="muted">&hellip; {{ encoders_more }} more encoders not shown.</p>{% endif %}
<p class="muted" id="auc-vs-gap">Why a domain AUC near 1 can sit beside a gap inside the noise floor: the classifier needs only one direction in which sim and real frames fall apart, however small the shift along it, while the gap measures how far apart the two sets are overall compared with real-vs-real variation. Sim and real can be separable but close; the ranking reads closeness, and the AUC says only that a difference exists.</p>
{% set weak = encoders|selectattr("probe_warn")|map(attribute="name")|list %}{% if weak %}<p class="probe-warning"><span class="badge sev-gap">R&sup2; &le; 0</span> Sim&rarr;real probe R&sup2; at or below 0 for <span class="mono name">{{ weak|join(", ") }}</span>: the probe predicts the real targets no better than their mean, so the probe axis does not separate these encoders; read their gap alone.</p>{% endif %}
{% for e in encoders if e.insufficient %}<p class="muted"><span class="mono">{{ e.name }}</span> not computed: {% for k, v in e.insufficient %}{{ k }} ({{ v }}){% if not loop.last %}; {% endif %}{% endfor %}</p>{% endfor %}
{% if fid %}<h3>FID with the reference Inception, beside each encoder's Frechet distance</h3>
<div class="wide"><table id="fid"><tr><th>features</th><th>Frechet distance [CI]</th><th>KID [CI]</th></tr>
<tr class="fid-row"><td><strong>FID</strong>: Inception v3 of pytorch-fid <span class="muted mono">(weights sha256 {{ fid.sha }}&hellip;{% if not fid.reference %}, not the reference file: not comparable with published FIDs{% endif %})</span></td><td class="n">{{ fid.fid }}</td><td class="n">{{ fid.kid }}</td></tr>
{% for e in encoders %}<tr><td class="mono name">{{ e.name }}</td><td class="n">{{ e.fd }}</td><td class="n">{{ e.kid }}</td></tr>{% endfor %}
</table></div>
<p class="muted">{% if fid.insufficient %}FID not computed: {{ fid.insufficient }}. {% endif %}{{ fid.n_sim }} sim and {{ fid.n_real }} real frames; {{ fid.implementation }}. Each row is in its own features' squared units: compare renderings within a row, not rows with each other.</p>{% endif %}
{% if plot_encoders %}<img class="plot" alt="encoder plot" src="{{ plot_encoders }}">{% endif %}
{% for p in extra_plots %}<img class="plot" alt="encoder plot" src="{{ p }}">{% endfor %}
{% else %}<p>No encoder results.</p>{% endif %}
</section>
{% endif %}
{% if attribution %}{{ attribution }}{% endif %}
{# the ranking comes before the gap maps, so it is on the first screens of a run report #}
{% if maps %}{{ maps }}{% endif %}

<section id="stats">
<h2>Per-set raw statistics</h2>
{% if stats_rows %}
<table id="stats-table"><tr><th>statistic</th>{% for s in stats_sets %}<th class="mono">{{ s.name }} <span class="muted">({{ s.domain }})</span></th>{% endfor %}</tr>
{% for label, cells in stats_rows %}<tr><td>{{ label }}</td>{% for c in cells %}<td class="n">{{ c }}</td>{% endfor %}</tr>{% endfor %}
</table>
{% for p in stats_plots %}<img class="plot" alt="statistics plot" src="{{ p }}">{% endfor %}
{% else %}<p>No per-set statistics in these results.</p>{% endif %}
</section>

{% if detection %}
<section id="detection">
<h2>Detection</h2>
<h3>COCO summary per set and source</h3>
<table id="coco"><tr><th>set</th><th>source</th>{% for k in coco_names %}<th>{{ k }}</th>{% endfor %}<th>images</th><th>GT</th><th>dets</th></tr>
{% for r in detection.summary %}<tr><td class="mono">{{ r.set }}</td><td class="mono">{{ r.source }}</td>{% for v in r.cells %}<td class="n">{{ v }}</td>{% endfor %}<td class="n">{{ r.n_images }}</td><td class="n">{{ r.n_gt }}</td><td class="n">{{ r.n_dets }}</td></tr>{% endfor %}
</table>
{% if detection.per_class %}<h3>Per-class AP</h3>
<table id="per-class"><tr><th>category</th>{% for c in detection.per_class_cols %}<th class="mono">{{ c }}</th>{% endfor %}</tr>
{% for cat, vals in detection.per_class %}<tr><td class="mono">{{ cat }}</td>{% for v in vals %}<td class="n">{{ v }}</td>{% endfor %}</tr>{% endfor %}
</table>{% if detection.per_class_more %}<p class="muted">&hellip; {{ detection.per_class_more }} more categories.</p>{% endif %}{% endif %}
{% if detection.differences %}<h3>AP difference sim &minus; real (paired bootstrap)</h3>
<table id="ap-diff"><tr><th>source</th><th>AP sim</th><th>AP real</th><th>difference [CI]</th><th>pairs</th><th>method</th></tr>
{% for d in detection.differences %}<tr><td class="mono">{{ d.source }}</td><td class="n">{{ d.ap_sim }}</td><td class="n">{{ d.ap_real }}</td><td class="n">{{ d.estimate }} {{ d.ci }}</td><td class="n">{{ d.n_pairs }}</td><td class="muted">{{ d.method }}</td></tr>{% endfor %}
</table>{% endif %}
{% if detection.flips %}<h3>Per-pair flips</h3>
<table id="flips"><tr><th>source</th><th>pairs</th><th>objects</th><th>found both</th><th>sim only (lost on real)</th><th>real only</th><th>missed both</th><th>recall sim</th><th>recall real</th></tr>
{% for f in detection.flips %}<tr><td class="mono">{{ f.source }}</td>{% for v in f.cells %}<td class="n">{{ v }}</td>{% endfor %}</tr>{% endfor %}
</table>
{% for f in detection.flips if f.examples %}<p class="muted">Examples ({{ f.source }}):</p><table><tr><th>kind</th><th>category</th><th>sim</th><th>real</th><th>box sim</th><th>box real</th></tr>
{% for x in f.examples %}<tr><td>{{ x.kind }}</td><td class="mono">{{ x.category }}</td><td class="mono">{{ x.sim_key }}</td><td class="mono">{{ x.real_key }}</td><td class="mono">{{ x.bbox_sim }}</td><td class="mono">{{ x.bbox_real }}</td></tr>{% endfor %}
</table>{% endfor %}{% endif %}
{% if detection.latching %}<h3>False positives: latching and wrong class</h3>
<table id="latching"><tr><th>set</th><th>source</th><th>detections</th><th>TP</th><th>FP</th><th>latching</th><th>wrong class</th><th>duplicate</th><th>localization</th><th>background</th></tr>
{% for l in detection.latching %}<tr><td class="mono">{{ l.set }}</td><td class="mono">{{ l.source }}</td>{% for v in l.cells %}<td class="n">{{ v }}</td>{% endfor %}</tr>{% endfor %}
</table>
{% for l in detection.latching if l.examples %}<p class="muted">Examples ({{ l.set }} / {{ l.source }}):</p><table><tr><th>frame</th><th>kind</th><th>category</th><th>score</th><th>on GT</th><th>IoU</th></tr>
{% for x in l.examples %}<tr><td class="mono">{{ x.key }}</td><td>{{ x.kind }}</td><td class="mono">{{ x.category }}</td><td class="n">{{ x.score }}</td><td class="mono">{{ x.gt_category }}</td><td class="n">{{ x.iou }}</td></tr>{% endfor %}
</table>{% endfor %}{% endif %}
</section>
{% endif %}

{% if worst %}
<section id="worst-pairs"><h2>Worst pairs ({{ worst.encoder }}, farthest first)</h2>
<p class="muted">Each row: sim frame, real frame, and |sim &minus; real| per pixel multiplied by the gain written under it (white = a difference of 255/gain levels or more).</p>
<div class="pairs">
{% for w in worst.rows %}<div class="pair"><figure><img alt="sim" src="{{ w.sim }}"><figcaption class="mono" title="{{ w.key }}">sim {{ w.key }}</figcaption></figure><figure><img alt="real" src="{{ w.real }}"><figcaption>real, cos. dist. <span class="nw">{{ w.distance }}</span></figcaption></figure><figure><img alt="difference" src="{{ w.diff }}"><figcaption>|sim &minus; real| <span class="nw">&times;{{ w.gain }}</span></figcaption></figure></div>{% endfor %}
</div></section>
{% endif %}
{% if thumbs %}
<section id="thumbnails"><h2>Frames</h2><div class="thumbs">
{% for t in thumbs %}<figure><img alt="frame" src="{{ t.src }}"><figcaption class="mono">{{ t.caption }}</figcaption></figure>{% endfor %}
</div></section>
{% endif %}

<section id="data">
<h2>Data</h2>
<table id="sets"><tr><th>set</th><th>domain</th><th>role</th><th>frames</th><th>usable</th><th>skipped</th><th>tags</th></tr>
{% for s in sets %}<tr><td class="mono">{{ s.name }}</td><td>{{ s.domain }}</td><td>{{ s.role }}</td><td class="n">{{ s.n_frames }}</td><td class="n">{{ s.n_usable }}</td><td class="n">{{ s.n_skipped }}</td><td class="mono">{{ s.tags }}</td></tr>{% endfor %}
</table>
{% if pairs %}<p>Pairs: {{ pairs.n_pairs }}; unpaired sim {{ pairs.n_unpaired_sim }}, unpaired real {{ pairs.n_unpaired_real }}.</p>{% endif %}
<h3>Skipped frames ({{ n_skipped_total }})</h3>
{% if skipped %}<table id="skipped"><tr><th>set</th><th>frames</th><th>reason</th><th>files, e.g.</th></tr>
{% for s in skipped %}<tr><td class="mono">{{ s.set }}</td><td class="n">{{ s.count }}</td><td>{{ s.reason }}</td><td class="mono">{{ s.examples }}{% if s.folder %} <span class="muted">in {{ s.folder }}</span>{% endif %}</td></tr>{% endfor %}
</table>{% if skipped_more_groups %}<p class="muted">&hellip; and {{ skipped_more }} more skipped frames for {{ skipped_more_groups }} other reasons not listed (results.json lists every one).</p>{% endif %}
{% else %}<p>None.</p>{% endif %}
{% if kind == "run" and encoders %}<h3>Encoders and their preprocessing</h3>
<table id="preproc"><tr><th>encoder</th><th>fingerprint</th><th>sim / real embedded</th><th>skipped</th><th>preprocessing</th></tr>
{% for e in encoders %}<tr><td class="mono">{{ e.name }}</td><td class="mono">{{ e.fingerprint }}</td><td class="n">{{ e.n_sim }} / {{ e.n_real }}</td><td class="n">{{ e.n_skipped }}</td><td class="mono">{{ e.preprocessing }}</td></tr>{% endfor %}
</table>{% endif %}
<h3>Configuration</h3>
<table id="config">{% for k, v in config %}<tr><td class="mono">{{ k }}</td><td class="mono">{{ v }}</td></tr>{% endfor %}
<tr><td class="mono">version</td><td class="mono">{{ version }}</td></tr></table>
</section>
{% endblock %}
"""
