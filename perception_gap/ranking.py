"""Encoder ranking: a Pareto front of gap (low) against probe R^2 (high), then a rank.

An encoder can "win" on distance by discarding everything; the probe says whether it kept what
the policy needs. So neither number alone ranks encoders: an encoder is on the front when no
other one is both closer (sim to real) and at least as predictive, and encoders are ranked by
front layer (repeated non-dominated sorting), then by gap.

A probe only ranks when it says something: when an encoder's sim->sim probe R^2 is <= 0 (a
linear read-out cannot even predict sim actions from sim frames: too few episodes, or targets
the frames do not show), its sim->real R^2 is noise, and the comparisons that involve it use
the gap alone (`ranking_basis`). A held-out sim->real R^2 at or below 0 compares as 0: the
read-out is no better than predicting the real targets' mean, and how much worse (-0.8 or
-4,000,000) says nothing about what the encoder keeps, so two such encoders are told apart by
the gap. The weights-free pixel baseline (family `pixel`) is a reference row: reported beside
the ranking, never ranked (`is_reference`).
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
        probe: held-out sim->real probe R^2 (ridges trained on the sim frames of some episodes,
            scored on the real frames of the others; higher is better); None when no probe could
            be run.
        probe_informative: False when the sim->sim probe R^2 is <= 0 (see `probe_informative`).
    """

    name: str
    gap: float
    probe: float | None = None
    probe_informative: bool = True

    @property
    def uses_probe(self) -> bool:
        """True when the probe takes part in the ranking: it exists and is informative."""
        return self.probe is not None and self.probe_informative


REFERENCE_FAMILIES = ("pixel",)


def is_reference(family: str | None) -> bool:
    """True for encoder families shown as a reference row and never ranked (the pixel baseline)."""
    return family in REFERENCE_FAMILIES


def probe_informative(sim_to_sim: float | None) -> bool | None:
    """False when the sim->sim probe R^2 is <= 0 (the probe explains nothing), None without a probe."""
    return None if sim_to_sim is None else sim_to_sim > 0


def ranking_basis(score: EncoderScore) -> str:
    """`gap and probe` when the encoder's probe takes part in the ranking, else `gap alone`."""
    return "gap and probe" if score.uses_probe else "gap alone"


@dataclass(frozen=True)
class RankedEncoder:
    """An encoder's place: `rank` 1 is best; `layer` 0 is the Pareto front."""

    name: str
    rank: int
    layer: int
    on_front: bool


def _dominates(a: EncoderScore, b: EncoderScore) -> bool:
    """a is at least as good as b on both axes and strictly better on one (probe R^2 below 0
    compared as 0); when either probe is missing or uninformative, a has the smaller gap."""
    if not (a.uses_probe and b.uses_probe):
        return a.gap < b.gap
    pa, pb = max(0.0, float(a.probe)), max(0.0, float(b.probe))  # type: ignore[arg-type]
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
        ordered = sorted(layer, key=lambda s: (s.gap, -(max(0.0, s.probe) if s.uses_probe else -math.inf), s.name))
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
