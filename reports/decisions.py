"""What each check decided, in words: a gate's outcome with the rule that decided it, and the
screen's conclusion for the report's headline box.

Each function takes the typed section (`GateEntry`, `Screen`) or its JSON form, read as
`reports.reading` says. Everything here reads fields results.json already holds (a gate's value, threshold, interval,
status and detail; the screen's ranking); nothing is recomputed. The comparison written beside a
verdict (`0.453 > 0.3`) only orders the two numbers shown, so that a reader sees why the gate
passed or failed without looking elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

from perception_gap.reports.format import MISSING, ci, num
from perception_gap.reports.reading import blank, entries, section
from perception_gap.schema import GateEntry, Interval, Screen, ScreenRank
from perception_gap.wording import FAIL, NOT_COMPUTED, PASS, SKIP, finite, gate_word

# Drift gates whose interval decides (drift_gates.shift_gate): two-sided unless listed one-sided.
_CI_GATES = {"channel_shift", "sharpness", "sensor_noise", "depth_dropout"}
_ONE_SIDED = {"depth_dropout"}
FORMAT_ALPHA = 0.01  # drift_gates.FORMAT_ALPHA (a test keeps the two equal)


GateLike = Union[GateEntry, Mapping[str, Any]]
ScreenLike = Union[Screen, Mapping[str, Any]]


def _d(v: Any) -> Mapping[str, Any]:
    # a gate's free-form `detail` and what it holds: itself, or empty when it is another kind
    return v if isinstance(v, Mapping) else {}


def _gate(g: GateLike) -> GateEntry:
    # callers pass the typed gate or its JSON form (the evaluation and geometry reports, the drift printer)
    return section(GateEntry, g) or blank(GateEntry)


def _cmp(v: Any, t: Any) -> str:
    """`0.453 > 0.3`, `0.1 <= 0.3` (as the two numbers order), for the sentence beside a verdict."""
    if not (finite(v) and finite(t)):
        return f"{num(v)} against {num(t)}"
    return f"{num(v)} {'>' if v > t else '=' if v == t else '<'} {num(t)}"


def outcome(g: GateLike) -> str:
    """A gate's one word (`PASS`, `FAIL`, `SKIP`, `NOT COMPUTED`) from its `status`, else its `passed` flag."""
    g = _gate(g)
    return gate_word(g.status or bool(g.passed))


def threshold_rule(g: GateLike) -> str:
    """Why a plain threshold gate (rollouts, rank fidelity, latency, policy check, replay,
    reprojection) passed or failed: a gate of `direction` `min` (else named `min_...`) needs at least
    the threshold, the others at most."""
    g = _gate(g)
    if outcome(g) in (SKIP, NOT_COMPUTED):
        return f"not measured ({g.reason or 'no value'})"
    v, t = g.value, g.threshold
    low = g.direction == "min" or (g.direction is None and str(g.name or "").startswith("min_"))
    need = "at least" if low else "at most"
    return f"{_cmp(v, t)}; passes with {need} {num(t)}"


def _ci_rule(g: GateEntry, base: str) -> str:
    det, t = _d(g.detail), g.threshold
    c = section(Interval, g.ci) or blank(Interval)
    level = f"{100 * c.level:g}% " if finite(c.level) else ""
    beyond = f"above +{num(t)}" if base in _ONE_SIDED else f"beyond \u00b1{num(t)}"
    failed = [str(x) for x in det.get("failed") or []]
    col = det.get("column")
    per = _d(_d(det.get("per_channel")).get(col)) if col is not None else {}
    where = f" ({col})" if col is not None and len(_d(det.get("per_channel"))) > 1 else ""
    interval = ci(per.get("low", c.low), per.get("high", c.high))
    multi = len(_d(det.get("per_channel"))) > 1
    if outcome(g) == FAIL:
        return (f"the {level}interval of the change lies entirely {beyond}"
                + (f" for {', '.join(failed)}" if failed and multi else "") + f"; largest change{where} "
                f"{num(g.value)}, interval {interval}")
    return (f"fails only when the {level}interval of the change lies entirely {beyond}; "
            f"largest change{where} {num(g.value)}, interval {interval}")


def _auc_rule(g: GateEntry) -> str:
    det, v, t = _d(g.detail), g.value, g.threshold
    r, need = det.get("effect_ratio"), det.get("min_ratio")
    sized = finite(need) and need > 0 and finite(r)
    if outcome(g) == FAIL:
        return (f"AUC {_cmp(v, t)} and the shift is {num(r)}x the baseline's own variation, above {num(need)}x"
                if sized else f"AUC {_cmp(v, t)}")
    if finite(v) and finite(t) and v > t and sized:
        return (f"AUC {_cmp(v, t)}, but the shift is only {num(r)}x the baseline's own variation; "
                f"fails only when the AUC is above {num(t)} and the shift above {num(need)}x")
    # without an effect size (min_ratio 0, or no floor to size it against) the AUC alone decides
    return f"AUC {_cmp(v, t)}" + (f"; fails only when it is above {num(t)} and the shift above {num(need)}x the "
                                  f"baseline's own variation" if sized else f"; fails above {num(t)}")


def _format_rule(g: GateEntry) -> str:
    v, t = g.value, g.threshold
    p = _d(g.detail).get("p_value")
    if outcome(g) == FAIL:
        return f"excess share of odd frames {_cmp(v, t)} and binomial p {num(p)} < {num(FORMAT_ALPHA)}"
    if finite(v) and finite(t) and v > t:
        return (f"excess share of odd frames {_cmp(v, t)}, but binomial p {num(p)} >= {num(FORMAT_ALPHA)}: "
                f"as likely by chance at the baseline's own rate")
    return f"excess share of odd frames {_cmp(v, t)}; fails above {num(t)} when also unlikely by chance"


def drift_rule(g: GateLike) -> str:
    """Why a drift gate passed or failed, from its own fields (see drift_gates' module table)."""
    g = _gate(g)
    base = str(g.name or "").split(":")[0]
    if outcome(g) in (SKIP, NOT_COMPUTED):
        return f"not measured: {g.reason or MISSING}"
    if base in _CI_GATES:
        return _ci_rule(g, base)
    if base == "domain_auc":
        return _auc_rule(g)
    if base == "format":
        return _format_rule(g)
    v, t = g.value, g.threshold
    what = {"embedding": "distance / noise floor", "detector_ap": "AP drop"}.get(base, "value")
    return f"{what} {_cmp(v, t)}; fails above {num(t)}"


def _screen(scr: ScreenLike) -> Screen:
    return section(Screen, scr) or blank(Screen)


def screen_word(scr: ScreenLike) -> str:
    """The `--fail-if-worse` gate's word: from its `gate` entry where results hold one, else `passed`."""
    scr = _screen(scr)
    return outcome(scr.gate) if scr.gate is not None else gate_word(bool(scr.passed))


def _views_split(scr: Screen, first: Any) -> str:
    """`raw statistics prefer 'a'; pixel prefers 'b'` for the nearest rendering's first pair whose views
    disagree (its `prefer` entry), else an empty string."""
    for p in map(_d, scr.pairwise or []):
        if p.get("closer") == first and p.get("views_disagree") and not p.get("significant"):
            return "; ".join(f"{', '.join(str(v) for v in views)} prefer{'s' if len(views) == 1 else ''} {name}"
                             for name, views in _d(p.get("prefer")).items() if views)
    return ""


def screen_verdict(scr: ScreenLike) -> dict[str, Any]:
    """The screen's conclusion for the headline box: which rendering is closest to real (or that none
    is significantly closest, naming the views that disagree where they do), and the `--fail-if-worse`
    gate when one was asked for."""
    scr = _screen(scr)
    ranking = entries(ScreenRank, scr.ranking)
    closest = scr.closest
    first = ranking[0] if ranking else blank(ScreenRank)
    nearest = MISSING if first.set is None else first.set
    level = f"{100 * scr.ci_level:g}% " if finite(scr.ci_level) else ""
    split = _views_split(scr, first.set)
    if closest:
        title = f"Closest to real: {closest}, significantly closer than every other rendering"
        action = f"Prefer {closest}; the per-view columns say which encoders and statistics moved."
    elif split:
        title = (f"No rendering is significantly closer to real on average, but the views disagree: {split} "
                 f"(nearest point estimate: {nearest}, distance {num(first.distance)})")
        action = ("Do not treat the renderings as equivalent: each is closer to real in some views. The raw "
                  "statistics read exposure, contrast, sharpness, noise and compression; the encoders read content "
                  "as a network sees it. Fix what each view names, then screen again.")
    else:
        title = (f"No rendering is significantly closer to real than every other one (nearest point estimate: "
                 f"{nearest}, distance {num(first.distance)})")
        action = (f"Treat the renderings as equivalent at this sample size (the {level}intervals of their differences "
                  "include 0); more paired scenes narrow them.")
    severity, word = "info", None
    if scr.baseline is not None:
        word = screen_word(scr)
        worse = ", ".join(str(w) for w in scr.worse_than_baseline or [])
        title += (f". Gate --fail-if-worse {scr.baseline}: {word}"
                  + (f" (significantly farther from real: {worse})" if word == FAIL else "")
                  + (f" ({scr.gate.reason if scr.gate is not None else None})" if word == NOT_COMPUTED else ""))
        if word in (FAIL, NOT_COMPUTED):
            severity = "gap"
            action += f" Do not adopt {worse} as it is: it moves sim away from real."
    return {"severity": word or "result", "sev_class": "none" if word == PASS else severity, "code": "screen",
            "title": title, "action": action, "see_maps": False}
