"""The typed results.json: one frozen dataclass per section, and the JSON Schema exported from them.

`Results.from_dict(json.load(f))` (what `perception_gap.load_results` returns) reads a results.json
of any command; `to_dict()` writes it back, unknown keys included. `results_schema()` is the JSON
Schema of the same classes, written to docs/results.schema.json by
`python -m perception_gap.schema --write docs/results.schema.json`; `validate_results(obj)` checks
a results.json against it (needs the `jsonschema` package).
"""

from perception_gap.schema.base import Section, optional
from perception_gap.schema.export import results_schema, validate_results
from perception_gap.schema.jobs import (
    Drift,
    Latency,
    PolicyCheck,
    RankFidelity,
    Replay,
    Reprojection,
    RolloutGroup,
    Rollouts,
    Screen,
    ScreenRank,
)
from perception_gap.schema.results import Results
from perception_gap.schema.sections import (
    Attribution,
    AttributionFactor,
    BootstrapCI,
    CameraFactor,
    CameraModelSection,
    Config,
    Detection,
    EncoderEntry,
    Fid,
    FindingEntry,
    FrechetEntry,
    GateEntry,
    Interval,
    KIDEntry,
    Maps,
    MapSide,
    MMDEntry,
    NonFinite,
    PairedCosineEntry,
    Pairs,
    ProbeEntry,
    SetInfo,
    SetStats,
)

__all__ = [
    "Attribution", "AttributionFactor", "BootstrapCI", "CameraFactor", "CameraModelSection", "Config", "Detection",
    "Drift", "EncoderEntry", "Fid", "FindingEntry", "FrechetEntry", "GateEntry", "Interval", "KIDEntry", "Latency",
    "MapSide", "Maps", "MMDEntry", "NonFinite", "PairedCosineEntry", "Pairs", "PolicyCheck", "ProbeEntry",
    "RankFidelity", "Replay", "Reprojection", "Results", "RolloutGroup", "Rollouts", "Screen", "ScreenRank",
    "Section", "SetInfo", "SetStats", "optional", "results_schema", "validate_results",
]
