"""What the sets' own records say about how a command was given them.

Two things a command cannot decide for the user but must not pass over in silence:

- `role_findings`: a set given as `--sim` that was indexed as a real set (or the reverse). Every
  finding reads sim as the rendering and real as the camera, so swapped roles swap every
  direction ("real is darker"), and the noise floor is measured on the sim side.
- `step_findings`: steps that repeat within an episode. Frames are put in time order by
  (episode, step), so repeated steps (a folder's file names ending in a heading angle) interleave
  distant frames, and the real-vs-real noise floor, read from alternating blocks of consecutive
  frames, comes out too low.

Each returns `info` findings and logs one warning line (the CLI shows warnings on stderr).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from perception_gap.findings import Finding
from perception_gap.ingest.steps import repeated_steps, step_source
from perception_gap.statistics.records import SetRecords

log = logging.getLogger(__name__)


def role_findings(roles: Mapping[str, str], domains: Mapping[str, str | None]) -> list[Finding]:
    """One `set_roles` info when any set's role differs from the domain it was indexed with.

    Args:
        roles: set name -> the role a command gives it (`sim` or `real`).
        domains: set name -> the domain it was indexed with.
    """
    off = [(name, role, domains.get(name)) for name, role in roles.items()
           if domains.get(name) is not None and domains.get(name) != role]
    if not off:
        return []
    said = "; ".join(f"{name!r} is given as --{role} but was indexed as {dom}" for name, role, dom in off)
    log.warning("%s: check the roles (every finding reads sim as the rendering, real as the camera)", said)
    swapped = {role for _, role, _ in off} == {"sim", "real"}
    return [Finding(
        code="set_roles", severity="info",
        title=f"Roles differ from the indexed domains: {said}" + (" (the sides look swapped)" if swapped else ""),
        evidence={"sets": [{"set": name, "role": role, "indexed_domain": dom} for name, role, dom in off]},
        action=("If the roles on the command line are wrong, swap --sim and --real and rerun: every finding reads "
                "sim as the rendering and real as the camera, and the noise floor is measured on the real side. "
                "If the sets were indexed with the wrong --domain, index them again with the right one."),
        score=0.0)]


def step_notes(records: Mapping[str, SetRecords], roles: Mapping[str, str],
               sources: Mapping[str, str | None]) -> tuple[dict[str, dict[str, Any]], list[Finding]]:
    """Where each set's steps came from, and a `repeated_steps` info per set whose steps repeat
    within an episode.

    Args:
        records: set name -> its usable frames.
        roles: set name -> `sim` or `real`.
        sources: set name -> `frame_sets.source` (`folder:...`, `manifest:...`, ...).

    Returns:
        (set name -> {"step_source": words, "repeated_steps": frames sharing a step}, findings).
    """
    notes: dict[str, dict[str, Any]] = {}
    findings = []
    for name, rec in records.items():
        has_steps = any(f.step is not None for f in rec.frames)
        where = step_source(sources.get(name)) if has_steps else "none (no frame has a step)"
        rep = repeated_steps((f.episode, f.step) for f in rec.frames)
        notes[name] = {"step_source": where, "repeated_steps": rep.n_frames}
        if not rep.n_frames:
            continue
        role = roles.get(name, "")
        eps = "one episode" if rep.n_episodes == 1 else f"{rep.n_episodes} episodes"
        e = rep.examples[0]
        example = f"step {e[1]} {'' if e[0] is None else f'of episode {e[0]!r} '}on {e[2]} frames"
        log.warning("steps of the %s set %r repeat within an episode (%d of %d frames, e.g. %s); they came from %s",
                    role, name, rep.n_frames, len(rec.frames), example, where)
        findings.append(Finding(
            code="repeated_steps", severity="info",
            title=(f"Steps of the {role} set {name!r} repeat within {eps}: {rep.n_frames} of {len(rec.frames)} "
                   f"frames share their step with another ({example}); the steps came from {where}"),
            evidence={"set": name, "role": role, "step_source": where, "n_frames": len(rec.frames),
                      "n_frames_repeated": rep.n_frames, "n_steps_repeated": rep.n_steps,
                      "n_episodes": rep.n_episodes,
                      "examples": [{"episode": ep, "step": st, "frames": n} for ep, st, n in rep.examples]},
            action=("Give every frame its own place in time: name the files with the frame number last, or index "
                    "a manifest with an explicit `step` column (and an `episode` per recording). Frames are "
                    "ordered by (episode, step); repeated steps interleave distant frames, and the real-vs-real "
                    "noise floor, read from alternating blocks of consecutive frames, comes out too low."),
            score=float(rep.n_frames / max(len(rec.frames), 1))))
    return notes, findings
