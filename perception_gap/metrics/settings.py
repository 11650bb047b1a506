"""Resampling settings: how many bootstrap replicates, at which interval level, from which seed.

One frozen `Resampling` travels from the API or the command line (`--bootstrap N`, `--ci-level`)
down to every interval a command reports. Its `replicates` left as None means "each statistic's
own default" (`REPLICATES`), so results do not change unless the user asks.

The defaults differ by use because a replicate costs very differently:

- `statistic` (200): `bootstrap_ci` recomputes an arbitrary statistic (an AUC, an MMD) on up to
  5,000 samples a replicate; 200 settles a 95% interval's ends to about a percent of its width.
- `centroid` (1,000): a replicate is a weighted sum over clusters, O(clusters x k): cheap, so
  the headline interval gets the steadier ends.
- `distance` (100): a Frechet / KID replicate is an eigendecomposition or a kernel over 500
  frames per side; 100 keeps a run's FID under a few seconds an encoder.
- `probe` (200): the probes' transfer drop redraws held-out frames around fixed ridges.
- `detection` (200): a replicate re-accumulates COCOeval's matches, O(detections).
- `rank_fidelity` (2,000): a handful of policies, microseconds a replicate, and MMRV is a max
  over pairs, whose interval ends need many replicates.
- `screen`, `drift` (1,000): a decision (closer / farther, gate passed) is read off an interval
  end, and the replicates are a matrix product over shared cluster draws.
- `camera` (200) and `camera_texture` (100): the camera model's per-factor intervals; the
  texture fits redo a spectrum fit a replicate.

The plumbing checks' own resampling (`diagnoses.verdicts.N_RESAMPLES`, the tone curve's and the
field of view's replicate counts) is part of their calibration against false alarms and is not
set from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from perception_gap.errors import InputError

REPLICATES = MappingProxyType({
    "statistic": 200, "centroid": 1_000, "distance": 100, "probe": 200, "detection": 200,
    "rank_fidelity": 2_000, "screen": 1_000, "drift": 1_000, "camera": 200, "camera_texture": 100,
})
LEVEL = 0.95
MIN_REPLICATES, MAX_REPLICATES = 10, 100_000


@dataclass(frozen=True)
class Resampling:
    """Bootstrap settings shared by every interval of one command; a field left None keeps each
    use's default (`REPLICATES`, `LEVEL`, the command's own seed or its config file's).

    Attributes:
        replicates: replicates for every interval, in [10, 100000].
        level: two-sided confidence level of the intervals, in (0.5, 1).
        seed: seed of the random draws.
    """

    replicates: int | None = None
    level: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        r = self.replicates
        if r is not None and (isinstance(r, bool) or not isinstance(r, int)
                              or not MIN_REPLICATES <= r <= MAX_REPLICATES):
            raise InputError(f"Expected `--bootstrap` (replicates) a whole number in [{MIN_REPLICATES}, "
                             f"{MAX_REPLICATES}], got {r!r}.")
        lv = self.level
        if lv is not None and (isinstance(lv, bool) or not isinstance(lv, (int, float)) or not math.isfinite(lv)
                               or not 0.5 < lv < 1):
            raise InputError(f"Expected `--ci-level` (level) in (0.5, 1), got {lv!r}.")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise InputError(f"Expected `seed` a whole number, got {self.seed!r}.")

    def n(self, use: str, default: int | None = None) -> int:
        """Replicates for `use` (a key of `REPLICATES`): the user's count, else `default`, else the use's."""
        if self.replicates is not None:
            return self.replicates
        return default if default is not None else REPLICATES[use]

    def ci(self, default: float = LEVEL) -> float:
        """The interval level: the user's, else `default`."""
        return float(self.level) if self.level is not None else float(default)

    def random_state(self, default: int = 0) -> int:
        """The seed: the user's, else `default`."""
        return self.seed if self.seed is not None else default

    def to_dict(self) -> dict[str, Any]:
        return {"replicates": self.replicates, "level": self.level, "seed": self.seed}
