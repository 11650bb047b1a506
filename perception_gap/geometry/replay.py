"""Open-loop replay: logged real end-effector poses against the same actions unrolled in sim.

Per step: translation error `|p_sim - p_real|` (m) and the geodesic rotation angle between the
two orientations (deg): quaternions are normalized, and q and -q are the same rotation, so the
angle is `2 atan2(|v|, |w|)` of the relative quaternion `conj(q_sim) q_real` (accurate near zero,
where `2 acos(|<q_sim, q_real>|)` loses digits).

Divergence onset (one rule, stated): each step gets a score `max(translation / TRANSLATION_TOL_M,
rotation / ROTATION_TOL_DEG)`, so 1 means "at tolerance". The trajectory diverges *from the start*
when the median score of its first START_STEPS steps is >= 1. Otherwise a change point is fitted:
for every split k, a constant before k and a straight line from k on (a step, a ramp or both);
the split with the least squared error wins (the latest of
equal ones: the first step off the baseline) and is the onset when its fitted line rises at least
1 (one tolerance) above the level before it. Cause: from the start -> `tracking_offset` (gains,
latency, actuator lag, a frame offset); an onset within CONTACT_WINDOW steps of the first logged
contact -> `contact_divergence` (the contact model); an onset without contact -> `tracking_offset`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perception_gap.errors import InputError
from perception_gap.findings import Finding

TRANSLATION_TOL_M = 0.005
ROTATION_TOL_DEG = 2.0
START_STEPS = 3
CONTACT_WINDOW = 3


def _unit(q: np.ndarray, what: str) -> np.ndarray:
    n = np.linalg.norm(q, axis=1, keepdims=True)
    if (n < 1e-9).any():
        raise InputError(f"Expected non-zero quaternions (qw, qx, qy, qz) in {what}, got a zero one at row "
                         f"{int(np.argmax(n[:, 0] < 1e-9))}.")
    return q / n


def rotation_error_deg(q_sim: np.ndarray, q_real: np.ndarray) -> np.ndarray:
    """(N,) geodesic angle in degrees between (N, 4) quaternions given as (w, x, y, z)."""
    a, b = _unit(np.asarray(q_sim, float), "sim"), _unit(np.asarray(q_real, float), "real")
    w1, v1, w2, v2 = a[:, :1], a[:, 1:], b[:, :1], b[:, 1:]
    w = (w1 * w2 + (v1 * v2).sum(axis=1, keepdims=True))[:, 0]  # conj(a) * b
    v = w1 * v2 - w2 * v1 - np.cross(v1, v2)
    return np.degrees(2 * np.arctan2(np.linalg.norm(v, axis=1), np.abs(w)))


def change_point(score: np.ndarray) -> tuple[int | None, float]:
    """(k, rise): the best constant-then-line split of `score` and how far its line rises above the constant."""
    n = len(score)
    if n < 4:
        return None, 0.0
    t = np.arange(n, dtype=np.float64)
    y = np.asarray(score, dtype=np.float64)
    pre_y, pre_yy = np.cumsum(y), np.cumsum(y * y)  # sums over [0, k)
    suf = [np.cumsum(a[::-1])[::-1] for a in (np.ones(n), t, t * t, y, t * y, y * y)]  # sums over [k, n)
    ks = np.arange(1, n - 1)
    m, st, stt, sy, sty, syy = (s[ks] for s in suf)
    pre_sse = pre_yy[ks - 1] - pre_y[ks - 1] ** 2 / ks
    var_t = stt - st * st / m
    cov = sty - st * sy / m
    post_sse = syy - sy * sy / m - cov * cov / var_t
    sse = np.round(pre_sse + post_sse, 12)
    best = len(sse) - 1 - int(np.argmin(sse[::-1]))  # ties -> the latest split: the first step off the baseline
    k = int(ks[best])
    slope = cov[best] / var_t[best]
    intercept = sy[best] / m[best] - slope * st[best] / m[best]
    level = pre_y[k - 1] / k
    rise = max(intercept + slope * k, intercept + slope * (n - 1)) - level
    return k, float(rise)


@dataclass(frozen=True)
class EpisodeReplay:
    """One episode's replay error (higher is worse).

    Attributes:
        episode: its name.
        steps: (T,) matched steps, ascending.
        translation_error: (T,) metres.
        rotation_error_deg: (T,) degrees.
        divergence_step: the step where divergence starts, or None.
        first_contact_step: the first step logged in contact, or None.
        causes: finding codes this episode supports (`tracking_offset`, `contact_divergence`).
    """

    episode: str
    steps: np.ndarray
    translation_error: np.ndarray
    rotation_error_deg: np.ndarray
    divergence_step: int | None
    first_contact_step: int | None
    causes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"episode": self.episode, "steps": self.steps.tolist(),
                "translation_error": np.round(self.translation_error, 9).tolist(),
                "rotation_error_deg": np.round(self.rotation_error_deg, 6).tolist(),
                "translation_mean": float(self.translation_error.mean()),
                "rotation_mean_deg": float(self.rotation_error_deg.mean()),
                "divergence_step": self.divergence_step, "first_contact_step": self.first_contact_step,
                "cause": ", ".join(self.causes) or None}


def replay_episode(episode: str, steps: np.ndarray, p_sim: np.ndarray, q_sim: np.ndarray, p_real: np.ndarray,
                   q_real: np.ndarray, contact: np.ndarray | None = None) -> EpisodeReplay:
    """Errors, onset and cause of one episode.

    Args:
        episode: its name.
        steps: (T,) ascending integer steps.
        p_sim, p_real: (T, 3) positions, metres.
        q_sim, q_real: (T, 4) orientations as (w, x, y, z).
        contact: optional (T,) bool, True where the robot touches something.
    """
    tr = np.linalg.norm(np.asarray(p_sim, float) - np.asarray(p_real, float), axis=1)
    rot = rotation_error_deg(q_sim, q_real)
    score = np.maximum(tr / TRANSLATION_TOL_M, rot / ROTATION_TOL_DEG)
    first_contact = int(steps[np.argmax(contact)]) if contact is not None and contact.any() else None
    from_start = len(score) > 0 and float(np.median(score[:START_STEPS])) >= 1.0
    k, rise = change_point(score)
    changed = k is not None and rise >= 1.0
    causes: list[str] = ["tracking_offset"] if from_start else []
    onset = int(steps[0]) if from_start else int(steps[k]) if changed else None
    if changed:
        at_contact = first_contact is not None and abs(int(steps[k]) - first_contact) <= CONTACT_WINDOW
        causes.append("contact_divergence" if at_contact else "tracking_offset")
    return EpisodeReplay(episode, np.asarray(steps), tr, rot, onset, first_contact, tuple(dict.fromkeys(causes)))


@dataclass(frozen=True)
class Replay:
    """Replay error over all episodes.

    Attributes:
        episodes: one entry per episode.
        steps: (S,) every step seen; `translation_per_step` / `rotation_per_step_deg` (S,) are
            the means over the episodes that have that step.
        translation_mean, rotation_mean_deg: over every matched step of every episode.
        divergence_step: the lower median of the diverging episodes' onsets, or None.
        n_unmatched: rows with no counterpart in the other domain (excluded).
    """

    episodes: tuple[EpisodeReplay, ...]
    steps: np.ndarray
    translation_per_step: np.ndarray
    rotation_per_step_deg: np.ndarray
    translation_mean: float
    rotation_mean_deg: float
    divergence_step: int | None
    n_unmatched: int
    higher_is_gap: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"translation_error": {"mean": self.translation_mean,
                                      "per_step": np.round(self.translation_per_step, 9).tolist()},
                "rotation_error_deg": {"mean": self.rotation_mean_deg,
                                       "per_step": np.round(self.rotation_per_step_deg, 6).tolist()},
                "steps": self.steps.tolist(), "divergence_step": self.divergence_step,
                "tolerances": {"translation_m": TRANSLATION_TOL_M, "rotation_deg": ROTATION_TOL_DEG,
                               "contact_window_steps": CONTACT_WINDOW},
                "n_unmatched": self.n_unmatched, "episodes": [e.to_dict() for e in self.episodes]}


def summarize_replay(episodes: list[EpisodeReplay], n_unmatched: int = 0) -> Replay:
    """Pool episodes into per-step means and one onset."""
    steps = np.unique(np.concatenate([e.steps for e in episodes]))
    idx = {int(s): i for i, s in enumerate(steps)}
    sums, counts = np.zeros((2, len(steps))), np.zeros(len(steps))
    for e in episodes:
        at = [idx[int(s)] for s in e.steps]
        np.add.at(sums[0], at, e.translation_error)
        np.add.at(sums[1], at, e.rotation_error_deg)
        np.add.at(counts, at, 1)
    onsets = sorted(e.divergence_step for e in episodes if e.divergence_step is not None)
    tr = np.concatenate([e.translation_error for e in episodes])
    rot = np.concatenate([e.rotation_error_deg for e in episodes])
    return Replay(tuple(episodes), steps, sums[0] / counts, sums[1] / counts, float(tr.mean()), float(rot.mean()),
                  onsets[(len(onsets) - 1) // 2] if onsets else None, n_unmatched)


def replay_findings(r: Replay) -> list[Finding]:
    """`tracking_offset` and `contact_divergence`, each naming the episodes that support it."""
    out = []
    for code in ("tracking_offset", "contact_divergence"):
        eps = [e for e in r.episodes if code in e.causes]
        if not eps:
            continue
        onset = [e.divergence_step for e in eps]
        start = sum(1 for e in eps if e.divergence_step == int(e.steps[0]))
        evidence = {"episodes": [e.episode for e in eps][:20], "n_episodes": len(eps), "onset_steps": onset[:20],
                    "translation_mean_m": r.translation_mean, "rotation_mean_deg": r.rotation_mean_deg}
        if code == "tracking_offset":
            title = (f"Sim tracks real poorly in {len(eps)} of {len(r.episodes)} episodes ({start} from the first step, "
                     f"mean translation error {r.translation_mean * 1000:.3g} mm, rotation {r.rotation_mean_deg:.3g} deg).")
            action = ("Compare the controller gains, the action latency and actuator limits between sim and the robot; "
                      "an error present from the first step also points at a frame or TCP offset.")
        else:
            evidence["first_contact_steps"] = [e.first_contact_step for e in eps][:20]
            title = f"Sim and real diverge at first contact in {len(eps)} of {len(r.episodes)} episodes."
            action = "Tune the contact model (friction, stiffness, damping, collision geometry) against the real contacts."
        score = max(float(e.translation_error.max() / TRANSLATION_TOL_M) for e in eps)
        out.append(Finding(code, "gap", title, evidence, action, score=score if math.isfinite(score) else 0.0))
    return out
