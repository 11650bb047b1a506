"""Argument checks shared by the metrics (and the probes): embeddings, integers, levels, seeds.

Bad arguments raise `InputError` naming the argument, what was expected and what was received;
too few frames raise `InsufficientData`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perception_gap.errors import InputError, InsufficientData

CHUNK_ROWS = 4096

MIN_FRAMES = {"centroid distance": 2, "noise floor": 4, "domain AUC": 4, "MMD": 4, "bootstrap CI": 2,
              "Frechet distance": 2, "KID": 2}


def make_rng(random_state: int | np.random.Generator | None) -> np.random.Generator:
    """A numpy Generator from a seed, a Generator or None (InputError for anything else, bools included)."""
    if isinstance(random_state, (bool, np.bool_)):
        raise InputError(f"Expected `random_state` an int, a numpy Generator or None, got {random_state!r}.")
    if random_state is None or isinstance(random_state, (int, np.integer, np.random.Generator)):
        return np.random.default_rng(random_state)
    raise InputError(f"Expected `random_state` an int, a numpy Generator or None, got {random_state!r}.")


def draw_seed(rng: np.random.Generator) -> int:
    """An int seed in [0, 2**31 - 1) drawn from rng, for sklearn's `random_state`."""
    return int(rng.integers(2**31 - 1))


def check_int(name: str, value: Any, lo: int, hi: int) -> int:
    """`value` as an int in [lo, hi] (bools refused), else InputError naming `name`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise InputError(f"Expected `{name}` in [{lo}, {hi}], got {value!r}.")
    return int(value)


def check_level(ci: Any) -> float:
    """A confidence level `ci` in (0, 1) as a float, else InputError."""
    if isinstance(ci, (bool, np.bool_)) or not isinstance(ci, (int, float, np.floating)) or not 0.0 < ci < 1.0:
        raise InputError(f"Expected `ci` in (0, 1), got {ci!r}.")
    return float(ci)


def check_embeddings(emb: Any, name: str) -> np.ndarray:
    """`emb` as an (N, D) real numeric array (not copied), finite if float, else InputError naming `name`."""
    a = np.asarray(emb)
    if a.ndim != 2 or a.shape[1] < 1:
        raise InputError(f"Expected `{name}` of shape (N, D) with D >= 1, got shape {a.shape}.")
    if a.dtype.kind not in "fiu":
        raise InputError(f"Expected `{name}` of a real numeric dtype, got {a.dtype}.")
    if a.dtype.kind == "f":
        bad = sum(int((~np.isfinite(a[s:s + CHUNK_ROWS])).any(axis=1).sum()) for s in range(0, len(a), CHUNK_ROWS))
        if bad:
            raise InputError(f"Expected finite values in `{name}`, found NaN or inf in {bad} of {len(a)} rows.")
    return a


def check_embedding_pair(emb_sim: Any, emb_real: Any) -> tuple[np.ndarray, np.ndarray]:
    """`check_embeddings` on both sides, and the same width D."""
    sim = check_embeddings(emb_sim, "emb_sim")
    real = check_embeddings(emb_real, "emb_real")
    if sim.shape[1] != real.shape[1]:
        raise InputError("Expected `emb_sim` and `emb_real` of the same "
                         f"width D, got {sim.shape[1]} and {real.shape[1]}.")
    return sim, real


def check_pair(emb_sim: Any, emb_real: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """`check_embedding_pair`, and at least `MIN_FRAMES[what]` frames per side (else InsufficientData)."""
    sim, real = check_embedding_pair(emb_sim, emb_real)
    need = MIN_FRAMES[what]
    if len(sim) < need or len(real) < need:
        raise InsufficientData(f"Expected at least {need} frames per side for the "
                               f"{what}, got {len(sim)} sim and {len(real)} real.")
    return sim, real
