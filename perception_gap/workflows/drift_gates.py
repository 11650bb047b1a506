"""Drift gates: new production frames against a stored baseline (pure functions on arrays).

Every gate compares the *current* frames with the *baseline* frames and passes or fails
against a threshold from the configuration (`DEFAULT_CONFIG`, overridable by a TOML file).
Gates that measure a quantity with sampling noise (channel shifts, sharpness, depth dropout)
fail only when the bootstrap interval of the change lies entirely beyond the tolerance: a gate
fails when the data show the change is larger than allowed, not when noise might make it so.
This keeps false alarms rare on noisy sets (measured in tests/test_drift.py; README) while a
real shift of a few tenths of a stop on a few hundred frames still fails.

| gate | value | fails when |
|---|---|---|
| `format` | fraction of current frames whose size/dtype/channels differ from the baseline's usual one | > `format.max_fraction` |
| `channel_shift` | largest per-channel change of the median linear-light mean, in stops (log2) | CI beyond +-`channel_shift.max_stops` |
| `sharpness` | change of the median Laplacian energy, log2 (1 = twice as sharp) | CI beyond +-`sharpness.max_log2` |
| `depth_dropout` | change of the mean fraction of invalid depth pixels | CI above `depth_dropout.max_increase` |
| `embedding:ENC` | centroid distance (current vs baseline) / the baseline's own noise floor at the same sizes | > `embedding.max_ratio` |
| `domain_auc:ENC` | cross-validated AUC of a current-vs-baseline classifier | > `domain_auc.max_auc` |
| `detector_ap:SRC` | AP(baseline) - AP(current) of a detector against ground truth | > `detector_ap.max_drop` |
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap.errors import InputError, InsufficientData
from perception_gap.statistics.image import ImageStats

N_BOOT = 1000

# Documented defaults (README "Drift checks"); a TOML file given with --config overrides any of them.
DEFAULT_CONFIG: dict[str, dict[str, Any]] = {
    "format": {"enabled": True, "max_fraction": 0.01},
    "channel_shift": {"enabled": True, "max_stops": 0.25},
    "sharpness": {"enabled": True, "max_log2": 0.5},
    "depth_dropout": {"enabled": True, "max_increase": 0.05},
    "embedding": {"enabled": True, "max_ratio": 2.0},
    "domain_auc": {"enabled": True, "max_auc": 0.85},
    "detector_ap": {"enabled": True, "max_drop": 0.10},
    "bootstrap": {"n_boot": N_BOOT, "ci": 0.95, "random_state": 0},
}

DESCRIPTIONS = {
    "format": "share of current frames whose size, dtype or channel count differs from the baseline's usual one",
    "channel_shift": "largest change of a channel's median linear-light mean, in stops",
    "sharpness": "change of the median Laplacian energy, log2 (blur < 0, noise or sharpening > 0)",
    "depth_dropout": "change of the mean fraction of invalid (0/NaN/inf) depth pixels",
    "embedding": "centroid distance current vs baseline, in units of the baseline's own noise floor at these sizes",
    "domain_auc": "AUC of a classifier telling current from baseline frames (0.5 = indistinguishable)",
    "detector_ap": "AP drop of the detector against ground truth, baseline minus current",
}


def load_config(path: str | Path | None) -> dict[str, dict[str, Any]]:
    """The gate configuration: `DEFAULT_CONFIG` updated from a TOML file's tables.

    Raises:
        InputError: unreadable TOML, an unknown table or key, or a value of the wrong type.
    """
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    if path is None:
        return cfg
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    p = Path(path)
    try:
        with p.open("rb") as fh:
            user = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"Drift config {str(p)!r} does not exist.") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"Drift config {str(p)!r} is not valid TOML: {str(e).splitlines()[0]}") from None
    for table, values in user.items():
        if table not in cfg or not isinstance(values, dict):
            raise InputError(f"Drift config {str(p)!r}: unknown table [{table}] (known: {', '.join(cfg)}).")
        for key, value in values.items():
            if key not in cfg[table]:
                raise InputError(f"Drift config {str(p)!r}: unknown key {key!r} in [{table}] "
                                 f"(known: {', '.join(cfg[table])}).")
            want = type(cfg[table][key])
            ok = isinstance(value, bool) if want is bool else (
                isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
            if not ok:
                raise InputError(f"Drift config {str(p)!r}: [{table}] {key} must be a "
                                 f"{'boolean' if want is bool else 'finite number'}, got {value!r}.")
            cfg[table][key] = value
    return cfg


@dataclass(frozen=True)
class Gate:
    """One gate's outcome (`drift.gates[]` in results.json).

    Attributes:
        name: `channel_shift`, `embedding:efficientnet-lite0`, ...
        value: the measured value (see the module table); None when skipped.
        threshold: the configured limit.
        passed: False only when the gate failed (a skipped gate passes).
        status: `passed`, `failed` or `skipped`.
        ci: bootstrap interval of the value where one exists.
        detail: the numbers behind it.
        reason: why it was skipped.
    """

    name: str
    value: float | None
    threshold: float
    passed: bool
    status: str
    ci: dict[str, Any] | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        base = self.name.split(":")[0]
        return {"name": self.name, "value": self.value, "threshold": self.threshold, "passed": self.passed,
                "status": self.status, "ci": self.ci, "detail": self.detail, "reason": self.reason,
                "description": DESCRIPTIONS.get(base, "")}


def skipped(name: str, threshold: float, reason: str) -> Gate:
    return Gate(name=name, value=None, threshold=threshold, passed=True, status="skipped", reason=reason)


def _cluster_resample_stat(values: np.ndarray, labels: np.ndarray, stat, n_boot: int,
                           rng: np.random.Generator) -> np.ndarray:
    """(n_boot, ...) replicates of stat(values[rows]) with whole clusters drawn with replacement."""
    groups = [np.flatnonzero(labels == g) for g in range(int(labels.max()) + 1)]
    out = []
    for _ in range(n_boot):
        pick = rng.integers(len(groups), size=len(groups))
        rows = np.concatenate([groups[i] for i in pick])
        out.append(stat(values[rows]))
    return np.asarray(out)


def _labels(episodes: Sequence[Hashable] | None, n: int) -> np.ndarray:
    """Bootstrap clusters: episodes, or contiguous blocks within them when there are fewer than
    `MIN_EPISODES` (a one-episode side would otherwise give every replicate the same value)."""
    from perception_gap.metrics.resampling import resampling_labels

    return resampling_labels(episodes, n)


def _interval(reps: np.ndarray, estimate: float, level: float) -> tuple[float, float]:
    a = (1 - level) / 2
    lo, med, hi = np.quantile(reps, [a, 0.5, 1 - a])
    return estimate - float(med - lo), estimate + float(hi - med)  # centred on the estimate


def shift_gate(name: str, base: np.ndarray, cur: np.ndarray, base_eps: Sequence[Hashable] | None,
               cur_eps: Sequence[Hashable] | None, threshold: float, *, labels: Sequence[str] | None = None,
               reducer: str = "median", one_sided: bool = False, n_boot: int = N_BOOT, ci: float = 0.95,
               random_state: int = 0) -> Gate:
    """A change of a per-frame quantity (N, C) between baseline and current, per column.

    The change of column c is reducer(cur[:, c]) - reducer(base[:, c]); its interval comes from
    a cluster bootstrap of each side (episodes, or blocks of consecutive frames). The gate
    reports the column with the largest |change| and fails when that column's interval lies
    entirely beyond +-threshold (only above +threshold when `one_sided`).
    """
    base = np.asarray(base, dtype=np.float64).reshape(len(base), -1)
    cur = np.asarray(cur, dtype=np.float64).reshape(len(cur), -1)
    if len(base) < 2 or len(cur) < 2:
        return skipped(name, threshold, f"needs at least 2 frames a side, got {len(base)} baseline and {len(cur)} current")
    red = np.median if reducer == "median" else np.mean
    f = lambda a: red(a, axis=0)  # noqa: E731
    rng = np.random.default_rng(random_state)
    rb = _cluster_resample_stat(base, _labels(base_eps, len(base)), f, n_boot, rng)
    rc = _cluster_resample_stat(cur, _labels(cur_eps, len(cur)), f, n_boot, rng)
    est = f(cur) - f(base)
    reps = rc - rb
    cols = labels or [str(i) for i in range(base.shape[1])]
    per = {}
    failed_cols = []
    for c in range(base.shape[1]):
        lo, hi = _interval(reps[:, c], float(est[c]), ci)
        per[cols[c]] = {"change": float(est[c]), "low": lo, "high": hi}
        if lo > threshold or (not one_sided and hi < -threshold):
            failed_cols.append(cols[c])
    worst = max(range(base.shape[1]), key=lambda c: (est[c] if one_sided else abs(est[c])))
    w = per[cols[worst]]
    return Gate(name=name, value=w["change"], threshold=threshold, passed=not failed_cols,
                status="failed" if failed_cols else "passed", ci={"low": w["low"], "high": w["high"], "level": ci},
                detail={"per_channel": per, "failed": failed_cols, "column": cols[worst],
                        "baseline": [float(x) for x in f(base)], "current": [float(x) for x in f(cur)]})


def exposure_matrix(stats: Sequence[ImageStats]) -> np.ndarray:
    """(N, 3) per-frame log2 linear-light channel means (grayscale repeated), for `channel_shift`."""
    rows = []
    for s in stats:
        lin = s.lin_mean if s.lin_mean is not None else tuple(m / (s.nominal_max or 1.0) for m in s.mean)
        lin = list(lin)[:3]
        lin = lin * 3 if len(lin) == 1 else lin
        rows.append([math.log2(max(float(v), 1e-4)) for v in lin[:3]])
    return np.asarray(rows, dtype=np.float64).reshape(-1, 3)


def sharpness_vector(stats: Sequence[ImageStats]) -> np.ndarray:
    return np.asarray([[math.log2(max(float(s.sharpness), 1e-12))] for s in stats], dtype=np.float64).reshape(-1, 1)


FIXED_SIZE_SHARE = 0.95  # the baseline has a fixed frame size when its usual size covers this share of frames


def format_gate(base: Sequence[ImageStats], cur: Sequence[ImageStats], threshold: float) -> Gate:
    """Share of current frames whose dtype or channel count (and frame size, when the baseline has
    a fixed one) differ from the baseline's usual format.

    A camera stream has one format, and any change is a pipeline change. A baseline of mixed
    sizes (a photo collection) has no fixed size to hold the current frames to: then only dtype
    and channels are checked, and the detail says so.
    """
    if not base or not cur:
        return skipped("format", threshold, "no frame statistics on one side")
    sizes = Counter((s.width, s.height) for s in base)
    # ties broken by value, not by which frame came first: the gate must not depend on frame order
    usual_size, n_usual = min(sizes.items(), key=lambda kv: (-kv[1], kv[0]))
    fixed = n_usual / len(base) >= FIXED_SIZE_SHARE
    kinds = Counter((s.dtype, s.channels) for s in base)
    usual_kind = min(kinds.items(), key=lambda kv: (-kv[1], str(kv[0])))[0]

    def off(s: ImageStats) -> bool:
        return (s.dtype, s.channels) != usual_kind or (fixed and (s.width, s.height) != usual_size)

    frac = sum(off(s) for s in cur) / len(cur)
    fmt = lambda s: f"{s.width}x{s.height} {s.dtype} x{s.channels}"  # noqa: E731
    return Gate(name="format", value=frac, threshold=threshold, passed=frac <= threshold,
                status="passed" if frac <= threshold else "failed",
                detail={"baseline_usual": (f"{usual_size[0]}x{usual_size[1]} " if fixed else "") +
                        f"{usual_kind[0]} x{usual_kind[1]}",
                        "size_checked": fixed, "baseline_sizes": len(sizes),
                        "current_formats": dict(Counter(fmt(s) for s in cur).most_common(5))})


def embedding_gate(name: str, emb_base: np.ndarray, emb_cur: np.ndarray, base_eps: Sequence[Hashable] | None,
                   cur_eps: Sequence[Hashable] | None, threshold: float, *, random_state: int = 0) -> Gate:
    """Centroid distance current vs baseline over the baseline's own noise floor at matched sizes.

    The floor is the centroid distance between two halves of the baseline (episodes, or
    alternate blocks), rescaled to the sizes compared: sampling noise in a distance between two
    centroids grows like sqrt(1/n_1 + 1/n_2), so floor = d(halves) * sqrt((1/n_cur + 1/n_base) /
    (1/n_half1 + 1/n_half2)). A ratio near 1 is what two samples of the baseline's own
    distribution give.
    """
    from perception_gap.metrics import centroid_distance, noise_floor

    n_b, n_c = len(emb_base), len(emb_cur)
    try:
        cd = centroid_distance(emb_cur, emb_base, random_state=random_state)
        nf = noise_floor(emb_base, episodes=base_eps, random_state=random_state)
    except InsufficientData as e:
        return skipped(name, threshold, str(e))
    scale = math.sqrt((1 / n_c + 1 / n_b) / (1 / nf.n_a + 1 / nf.n_b))
    floor = nf.value_norm * scale
    if floor <= 0:
        return skipped(name, threshold, "the baseline's noise floor is 0 (identical frames)")
    ratio = cd.value_norm / floor
    return Gate(name=name, value=ratio, threshold=threshold, passed=ratio <= threshold,
                status="passed" if ratio <= threshold else "failed",
                detail={"centroid_distance_norm": cd.value_norm, "noise_floor_halves": nf.value_norm,
                        "noise_floor_matched": floor, "noise_floor_method": nf.method, "n_baseline": n_b,
                        "n_current": n_c})


def auc_gate(name: str, emb_base: np.ndarray, emb_cur: np.ndarray, base_eps: Sequence[Hashable] | None,
             cur_eps: Sequence[Hashable] | None, threshold: float, *, random_state: int = 0) -> Gate:
    """Grouped cross-validated AUC of a current-vs-baseline classifier."""
    from perception_gap.metrics import domain_auc

    try:
        auc = domain_auc(emb_cur, emb_base, episodes_sim=cur_eps, episodes_real=base_eps, random_state=random_state)
    except InsufficientData as e:
        return skipped(name, threshold, str(e))
    return Gate(name=name, value=auc.value, threshold=threshold, passed=auc.value <= threshold,
                status="passed" if auc.value <= threshold else "failed", detail=auc.to_dict())


def ap_gate(name: str, ap_base: float | None, ap_cur: float | None, threshold: float, **detail: Any) -> Gate:
    if ap_base is None or ap_cur is None:
        return skipped(name, threshold, "AP undefined on one side (no ground truth there)")
    drop = ap_base - ap_cur
    return Gate(name=name, value=drop, threshold=threshold, passed=drop <= threshold,
                status="passed" if drop <= threshold else "failed",
                detail={"ap_baseline": ap_base, "ap_current": ap_cur, **detail})


def check_config_value(cfg: dict[str, dict[str, Any]], table: str, key: str) -> float:
    v = cfg[table][key]
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise InputError(f"Expected a number for [{table}] {key}, got {v!r}.")
    return float(v)
