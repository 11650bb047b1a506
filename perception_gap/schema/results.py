"""`Results`: a whole results.json, typed, as `perception_gap.load_results` returns it.

Every command writes the same structure, each with the sections it computed: `run` the analysis
(`sets`, `pairs`, `stats`, `findings`, `encoders`, `detection`, `fid`, `maps`, `camera_model`),
`screen` and `drift` theirs, each evaluation and geometry check its own. Sections are attributes
(`res.encoders[0].centroid_distance_norm`); `res.to_dict()` is the JSON form. For code written
against the plain dict, `Results` is also a read-only mapping of that JSON form: `res["findings"]`,
`res.get("detection")`, `"fid" in res`, `dict(res)` give what `json.load` gave, and `res == d`
compares the JSON forms.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from perception_gap.schema.base import Section, optional
from perception_gap.schema.jobs import Drift, Latency, PolicyCheck, RankFidelity, Replay, Reprojection, Rollouts, Screen
from perception_gap.schema.sections import (
    CameraModelSection,
    Config,
    Detection,
    EncoderEntry,
    Fid,
    FindingEntry,
    Maps,
    NonFinite,
    Pairs,
    SetInfo,
    SetStats,
)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Results(Section, Mapping[str, Any]):
    """A results.json: `version` and `findings` always, each other section where its command wrote it.

    Attributes:
        version: the perception-gap version that wrote it.
        findings: most urgent first.
        config: what the command was asked.
        sets: per set name, its domain, counts and skipped frames.
        pairs: how the sim and real sets pair up (`stats`, `run`).
        stats: per set name, its raw statistics.
        encoders: one entry per encoder.
        detection: box metrics, when boxes exist.
        fid: FID and KID (`run --inception-weights`).
        maps: mean luma maps (`stats`, `run`; None when no frame has a thumbnail).
        camera_model: the fitted real camera (`run`; None when not fitted).
        screen, drift: the section of that command.
        rollouts, rank_fidelity, latency: the evaluation commands' sections.
        policy_check, replay, reprojection: the geometry checks' sections.
        non_finite: numbers written as null because they were not finite.
        run_id: the catalog's `runs` row of this result.
    """

    version: str
    findings: list[FindingEntry]
    config: Config | None = optional()
    sets: dict[str, SetInfo] | None = optional()
    pairs: Pairs | None = optional()
    stats: dict[str, SetStats] | None = optional()
    encoders: list[EncoderEntry] | None = optional()
    detection: Detection | None = optional()
    fid: Fid | None = optional()
    maps: Maps | None = optional()
    camera_model: CameraModelSection | None = optional()
    screen: Screen | None = optional()
    drift: Drift | None = optional()
    rollouts: Rollouts | None = optional()
    rank_fidelity: RankFidelity | None = optional()
    latency: Latency | None = optional()
    policy_check: PolicyCheck | None = optional()
    replay: Replay | None = optional()
    reprojection: Reprojection | None = optional()
    non_finite: list[NonFinite] | None = optional()
    run_id: int | None = optional()

    # the read-only mapping of the JSON form, section by section
    def __getitem__(self, key: str) -> Any:
        if key not in self._key_order():
            raise KeyError(key)
        return self._value(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._key_order())

    def __len__(self) -> int:
        return len(self._key_order())

    def __contains__(self, key: object) -> bool:
        return key in self._key_order()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Results):
            return self.to_dict() == other.to_dict()
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]
