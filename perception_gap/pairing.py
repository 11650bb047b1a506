"""Pairing the frames of two sets by pair key: the one place that decides which frames are twins.

The rule, everywhere: a pair key pairs the FIRST frame that carries it on the sim side with the
FIRST frame that carries it on the real side; pairs come in sim order. A later frame with a key
already seen on its own side is left unpaired and its key is returned in `duplicates_sim` /
`duplicates_real`, so a caller can say so rather than pair it with whichever twin came last.
Frames without a key (None) pair with nothing and are not duplicates.

Indexing keeps one usable frame per key and set (the others are skipped with the reason
"duplicate pair key"), so sets read from the catalog have no duplicates; sets built in memory,
manifests read by other tools and resampled sets may.

Any two sides pair the same way: drift passes its current set as `sim` (the side under test) and
its baseline as `real` (the reference).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pairing:
    """Which positions of two key sequences are twins.

    Attributes:
        pairs: (i, j) with `sim_keys[i] == real_keys[j]`, in increasing i; each i and each j once.
        duplicates_sim: keys met again on the sim side after their first frame, once each, in order.
        duplicates_real: the same on the real side.
    """

    pairs: tuple[tuple[int, int], ...]
    duplicates_sim: tuple[Hashable, ...] = ()
    duplicates_real: tuple[Hashable, ...] = ()

    def __len__(self) -> int:
        return len(self.pairs)

    def array(self) -> np.ndarray:
        """The pairs as an int64 array of shape (n_pairs, 2): column 0 sim positions, column 1 real."""
        return np.asarray(self.pairs, dtype=np.int64).reshape(-1, 2)

    def note(self) -> str | None:
        """One line naming the duplicate keys left unpaired (None when there are none)."""
        parts = [f"{side}: {len(d)} ({', '.join(map(repr, d[:3]))}{', ...' if len(d) > 3 else ''})"
                 for side, d in (("sim", self.duplicates_sim), ("real", self.duplicates_real)) if d]
        if not parts:
            return None
        return ("duplicate pair keys, later frames left unpaired (the first frame of a key is its twin): "
                + "; ".join(parts))

    def log_duplicates(self, what: str) -> None:
        """Warn through logging when a side repeats a key (for callers with no results to carry it)."""
        note = self.note()
        if note is not None:
            logger.warning("%s: %s", what, note)


def _first_positions(keys: Sequence[Hashable | None]) -> tuple[dict[Hashable, int], tuple[Hashable, ...]]:
    first: dict[Hashable, int] = {}
    again: dict[Hashable, None] = {}
    for i, k in enumerate(keys):
        if k is None:
            continue
        if k in first:
            again[k] = None
        else:
            first[k] = i
    return first, tuple(again)


def pair_by_key(sim_keys: Sequence[Hashable | None], real_keys: Sequence[Hashable | None]) -> Pairing:
    """Pair two sequences of pair keys (first occurrence wins on each side; see the module docstring).

    Args:
        sim_keys: one key per sim frame (None: the frame has no key).
        real_keys: one key per real frame.

    Returns:
        The `Pairing`: (sim position, real position) pairs in sim order, and the repeated keys.
    """
    first_sim, dup_sim = _first_positions(sim_keys)
    first_real, dup_real = _first_positions(real_keys)
    pairs = tuple((i, first_real[k]) for k, i in first_sim.items() if k in first_real)
    return Pairing(pairs, dup_sim, dup_real)
