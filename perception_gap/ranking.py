"""Encoder ranking: a Pareto front of gap (low) against probe R^2 (high), then a rank.

An encoder can "win" on distance by discarding everything; the probe says whether it kept what
the policy needs. So neither number alone ranks encoders: an encoder is on the front when no
other one is both closer (sim to real) and at least as predictive, and encoders are ranked by
front layer (repeated non-dominated sorting), then by gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# CLIP-calibrated paired cosine distance bands (CLIP-family encoders only).
CLIP_STABLE = 0.20
CLIP_INTERVENE = 0.25
CLIP_WIDEN = 0.30


@dataclass(frozen=True)
class EncoderScore:
    """What the ranking reads of one encoder.

    Attributes:
        name: encoder name.
        gap: sim-vs-real centroid distance above the real noise floor (value_norm units,
            lower is better); the raw value_norm when no floor could be computed.
        probe: sim->real probe R^2 (higher is better); None when no probe could be run.
    """

    name: str
    gap: float
    probe: float | None = None


@dataclass(frozen=True)
class RankedEncoder:
    """An encoder's place: `rank` 1 is best; `layer` 0 is the Pareto front."""

    name: str
    rank: int
    layer: int
    on_front: bool


def _dominates(a: EncoderScore, b: EncoderScore) -> bool:
    """a is at least as good as b on both axes and strictly better on one (missing probe = -inf)."""
    pa = a.probe if a.probe is not None else -math.inf
    pb = b.probe if b.probe is not None else -math.inf
    return a.gap <= b.gap and pa >= pb and (a.gap < b.gap or pa > pb)


def pareto_layers(scores: list[EncoderScore]) -> list[list[EncoderScore]]:
    """Non-dominated sorting: layer 0 is the Pareto front, layer 1 the front of the rest, ..."""
    rest = list(scores)
    layers = []
    while rest:
        front = [s for s in rest if not any(_dominates(o, s) for o in rest if o is not s)]
        layers.append(front)
        rest = [s for s in rest if s not in front]
    return layers


def rank_encoders(scores: list[EncoderScore]) -> list[RankedEncoder]:
    """Ranks by Pareto layer, then by gap (then probe, then name, for a stable order)."""
    out = []
    rank = 1
    for layer_no, layer in enumerate(pareto_layers(scores)):
        ordered = sorted(layer, key=lambda s: (s.gap, -(s.probe if s.probe is not None else -math.inf), s.name))
        for s in ordered:
            out.append(RankedEncoder(name=s.name, rank=rank, layer=layer_no, on_front=layer_no == 0))
            rank += 1
    return out


def clip_band(cosine_mean: float) -> str:
    """CLIP-calibrated reading of a mean paired cosine distance (CLIP-family encoders only)."""
    if cosine_mean < CLIP_STABLE:
        return "stable"
    if cosine_mean <= CLIP_INTERVENE:
        return "watch"
    if cosine_mean <= CLIP_WIDEN:
        return "intervene"
    return "widen_randomization"
