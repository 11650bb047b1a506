"""One frozen dataclass per results.json section of `stats` and `run` (docs/contract.md, docs/contract-additions.md);
the sections of `screen`, `drift` and the evaluation and geometry checks are in `schema.jobs`.

The fields are the keys the report, the command line and the contract read, typed; free-form
evidence stays `dict[str, Any]`, and keys not declared here are kept in each section's `extra`.
Where the engine has a result class of the same shape (`metrics.results.CI`,
`metrics.results.PairedCosine`, `findings.Finding`, `gates.Gate`), the section derives from it, so
its methods (`CI.contains`, ...) and documented attributes hold on what `load_results` reads; the
camera model section converts to the engine's `CameraModel` with `to_model()`.
A number may be None wherever it could be: JSON has no NaN, and a non-finite number is written as
null (listed under the top-level `non_finite`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from perception_gap.findings import SEVERITIES, Finding
from perception_gap.gates import DIRECTIONS
from perception_gap.gates import Gate as _Gate
from perception_gap.metrics.results import CI, PairedCosine
from perception_gap.schema.base import FROZEN as _FROZEN
from perception_gap.schema.base import Section, optional


@dataclasses.dataclass(**_FROZEN)
class BootstrapCI(Section, CI):
    """A cluster-bootstrap interval of an encoder metric (`metrics.results.CI`; centred percentile)."""


@dataclasses.dataclass(**_FROZEN)
class Interval(Section):
    """An interval with the keys every convention shares: `low`, `high`, and where known `level`, `n_boot`."""

    low: float | None
    high: float | None
    level: float | None = optional()
    n_boot: int | None = optional()


@dataclasses.dataclass(**_FROZEN)
class FindingEntry(Section, Finding):
    """A finding: `code`, `severity` (`bug` | `gap` | `info`), `title`, `evidence` (free form), `action`."""

    schema_required: ClassVar[tuple[str, ...]] = ("evidence", "action")
    schema_properties: ClassVar[dict[str, Any]] = {"severity": {"enum": list(SEVERITIES)},
                                                   "evidence": {"type": "object"}}


@dataclasses.dataclass(**_FROZEN)
class GateEntry(Section, _Gate):
    """One gate's outcome (`gates.Gate`): the same keys for every command's gates."""

    schema_properties: ClassVar[dict[str, Any]] = {
        "direction": {"enum": list(DIRECTIONS)},
        "status": {"enum": ["passed", "failed", "not computed", "skipped"]},
    }


@dataclasses.dataclass(**_FROZEN)
class NonFinite(Section):
    """A number that came out NaN or infinite, written as null: where (`path`), what it was, why null."""

    path: str
    value: str
    reason: str


@dataclasses.dataclass(**_FROZEN)
class Config(Section):
    """What the command was asked: the set names, encoders and settings (keys by command)."""

    kind: str | None = optional()
    sim: str | None = optional()
    real: str | None = optional()
    sims: list[str] | None = optional()
    baseline: str | None = optional()
    current: str | None = optional()
    encoders: list[Any] | None = optional()
    device: str | None = optional()
    precision: str | None = optional()
    random_state: int | None = optional()
    file: str | None = optional()


@dataclasses.dataclass(**_FROZEN)
class SetInfo(Section):
    """`sets[NAME]`: domain, frame counts, and the skipped frames with their reasons."""

    name: str
    domain: str | None
    n_frames: int
    n_usable: int
    n_skipped: int
    skipped: list[dict[str, Any]]
    tags: Any = optional()
    role: str | None = optional()
    reindexed: list[Any] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Pairs(Section):
    """How the two sets pair up by pair key; the unpaired keys listed (the first 50 of each side)."""

    n_pairs: int
    n_unpaired_sim: int
    n_unpaired_real: int
    unpaired_sim: list[Any]
    unpaired_real: list[Any]


@dataclasses.dataclass(**_FROZEN)
class SetStats(Section):
    """`stats[NAME]`: one set's raw image statistics (8-bit levels unless its dtype says otherwise)."""

    name: str
    domain: str | None
    n_frames: int
    n_images: int | None = optional()
    sizes: dict[str, Any] | None = optional()
    dtypes: dict[str, Any] | None = optional()
    channel_mean: list[float | None] | None = optional()
    channel_std: list[float | None] | None = optional()
    lum_mean: float | None = optional()
    sharpness: float | None = optional()
    jpeg_fraction: float | None = optional()
    channel_min: list[float | None] | None = optional()
    channel_max: list[float | None] | None = optional()
    lum_percentiles: dict[str, float | None] | None = optional()
    hf_ratio: float | None = optional()
    depth: dict[str, Any] | None = optional()
    action: dict[str, Any] | None = optional()
    proprio: dict[str, Any] | None = optional()
    n_depth: int | None = optional()
    modes: dict[str, Any] | None = optional()
    channels: int | None = optional()
    lin_mean: list[float | None] | None = optional()
    grad_ratio: float | None = optional()
    dup_frac: float | None = optional()
    blockiness: float | None = optional()
    nonfinite_frac: float | None = optional()
    channel_hist: dict[str, Any] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class MapSide(Section):
    """One side's mean maps: `mean_linear` (size x size), `radial`, `rows`, `cols` profiles."""

    mean_linear: list[Any]
    radial: list[Any]
    rows: list[Any]
    cols: list[Any]
    n_frames: int


@dataclasses.dataclass(**_FROZEN)
class MapsPaired(Section):
    """`maps.paired`: the mean signed and absolute sim - real difference maps (size x size) over the pairs."""

    n_pairs: int | None = optional()
    mean_signed_diff: list[Any] | None = optional()
    mean_abs_diff: list[Any] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Maps(Section):
    """`maps`: the mean luma maps of both sides and their paired difference (linear light)."""

    size: int
    ring_edges: list[Any]
    sim: MapSide | None
    real: MapSide | None
    paired: MapsPaired | None
    orientation_applied: Any = optional()


@dataclasses.dataclass(**_FROZEN)
class CameraFactor(Section):
    """One fitted camera factor: `code`, `params` with their `units` and `ci`, `method`, `bug`."""

    code: str
    params: dict[str, Any]
    units: dict[str, str] = dataclasses.field(default_factory=dict)
    ci: dict[str, list[float | None]] = dataclasses.field(default_factory=dict)
    method: str = ""
    bug: bool = False


@dataclasses.dataclass(**_FROZEN)
class CameraModelSection(Section):
    """`camera_model`: the real camera's factors fitted against the sim (`to_model()` gives a `CameraModel`)."""

    format: str
    version: int
    sim: str | None
    real: str | None
    basis: str
    n: int
    factors: list[CameraFactor]
    not_modelled: list[dict[str, Any]]
    applies_to: str | None = optional()
    pipeline_order: list[str] | None = optional()
    sample: dict[str, Any] | None = optional()
    seconds: dict[str, Any] | None = optional()

    def to_model(self) -> Any:
        """The engine's `camera.model.CameraModel` (what `apply_camera_model` takes)."""
        from perception_gap.camera.model import CameraModel

        return CameraModel.from_dict(self.to_dict())


@dataclasses.dataclass(**_FROZEN)
class PairedCosineEntry(Section, PairedCosine):
    """`paired_cosine` (`metrics.results.PairedCosine`), with the report's `histogram` of the distances."""

    histogram: dict[str, list[Any]] | None = optional()
    clip_band: Any = optional()


@dataclasses.dataclass(**_FROZEN)
class MMDEntry(Section):
    """`mmd`: unbiased MMD^2 (RBF kernel) and its permutation p-value."""

    value: float | None
    p_value: float | None
    bandwidth: float | None = optional()
    n_permutations: int | None = optional()
    permutation: str | None = optional()


@dataclasses.dataclass(**_FROZEN)
class FrechetEntry(Section):
    """`frechet_distance`: the Frechet distance of the encoder's vectors, its interval and mean term."""

    value: float | None
    ci: BootstrapCI | None
    mean_term: float | None = optional()


@dataclasses.dataclass(**_FROZEN)
class KIDEntry(Section):
    """`kid`: the unbiased MMD^2 with the cubic polynomial kernel, averaged over subsets."""

    value: float | None
    ci: BootstrapCI | None
    std: float | None = optional()
    n_subsets: int | None = optional()
    subset_size: int | None = optional()


@dataclasses.dataclass(**_FROZEN)
class ProbeEntry(Section):
    """`probe`: R^2 of ridge probes sim->sim, real->real and held-out sim->real, and the transfer drop."""

    target: str | None = optional()
    sim_to_sim: float | None
    real_to_real: float | None
    sim_to_real: float | None
    transfer_drop: float | None = optional()
    transfer_drop_ci: BootstrapCI | None = optional()
    r2_below_floor: dict[str, Any] | None = optional()
    r2_display_floor: float | None = optional()
    protocol: str | None = optional()
    n_shared_groups: int | None = optional()
    n_targets: int | None = optional()
    per_dim: dict[str, list[float | None]] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class AttributionFactor(Section):
    """One camera factor's share of an encoder's gap: alone, cumulative and the waterfall's step."""

    code: str
    params: dict[str, Any]
    share: float | None
    ci: list[float | None] | None
    cumulative: float | None = optional()
    cumulative_ci: list[float | None] | None = optional()
    step: float | None = optional()
    step_ci: list[float | None] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class AttributionTotal(Section):
    """`attribution.all` / `attribution.residual`: a share of the gap above the floor and its interval."""

    share: float | None = optional()
    ci: list[float | None] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Attribution(Section):
    """`encoders[i].attribution`: what share of the gap above the floor the camera factors close."""

    factors: list[AttributionFactor] = dataclasses.field(default_factory=list)
    all: AttributionTotal | None = optional()
    residual: AttributionTotal | None = optional()
    n_pairs: int | None = optional()
    basis: str | None = optional()
    metric: str | None = optional()
    distance: float | None = optional()
    floor: float | None = optional()
    gap_above_floor: float | None = optional()
    gap_ci: list[float | None] | None = optional()
    clear_gap: bool | None = optional()
    note: str | None = optional()
    n_counterfactual: int | None = optional()


@dataclasses.dataclass(**_FROZEN)
class EncoderEntry(Section):
    """`encoders[i]`: one encoder's gap metrics (`run`), or its identity only (`screen`, `drift`)."""

    name: str
    dim: int
    encoder: str | None = optional()
    family: str | None = optional()
    fingerprint: str | None = optional()
    preprocessing: dict[str, Any] | None = optional()
    n_sim: int | None = optional()
    n_real: int | None = optional()
    centroid_distance: float | None = optional()
    centroid_distance_norm: float | None = optional()
    centroid_distance_norm_ci: BootstrapCI | None = optional()
    centroid_distance_k: int | None = optional()
    noise_floor: float | None = optional()
    noise_floor_method: str | None = optional()
    paired_cosine: PairedCosineEntry | None = optional()
    domain_auc: float | None = optional()
    mmd: MMDEntry | None = optional()
    frechet_distance: FrechetEntry | None = optional()
    kid: KIDEntry | None = optional()
    probe: ProbeEntry | None = optional()
    probe_informative: bool | None = optional()
    reference: bool | None = optional()
    gap_above_floor: float | None = optional()
    rank: int | None = optional()
    ranking_basis: str | None = optional()
    pareto_front: bool | None = optional()
    attribution: Attribution | None = optional()
    insufficient: dict[str, str] | None = optional()
    worst_pairs: list[dict[str, Any]] | None = optional()
    pca_2d: dict[str, Any] | None = optional()
    skipped: list[Any] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Detection(Section):
    """`detection`: COCO summary numbers per set and detector source, sim-vs-real differences and flips."""

    sets: dict[str, dict[str, dict[str, Any]]]
    differences: dict[str, dict[str, Any]] | None = optional()
    flips: dict[str, dict[str, Any]] | None = optional()
    latching: dict[str, Any] | None = optional()
    not_measurable: dict[str, Any] | None = optional()


@dataclasses.dataclass(**_FROZEN)
class Fid(Section):
    """`fid`: FID and KID on pytorch-fid's Inception v3 features (`run --inception-weights`)."""

    value: float | None
    ci: Interval | None = optional()
    mean_term: float | None = optional()
    kid: dict[str, Any] | None = optional()
    n_sim: int | None = optional()
    n_real: int | None = optional()
    dim: int | None = optional()
    weights: str | None = optional()
    weights_sha256: str | None = optional()
    reference_weights: bool | None = optional()
    fingerprint: str | None = optional()
    implementation: str | None = optional()
    insufficient: str | None = optional()
