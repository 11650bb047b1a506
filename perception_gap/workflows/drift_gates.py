"""Drift gates: new production frames against a stored baseline (pure functions on arrays).

Every gate compares the *current* frames with the *baseline* frames and passes or fails
against a threshold from the configuration (`DEFAULT_CONFIG`, overridable by a TOML file).
Gates that measure a quantity with sampling noise (channel shifts, sharpness, depth dropout)
fail only when the bootstrap interval of the change lies entirely beyond the tolerance: a gate
fails when the data show the change is larger than allowed, not when noise might make it so.
This keeps false alarms rare on noisy sets (measured in tests/test_drift.py; README) while a
real shift of a few tenths of a stop on a few hundred frames still fails. A gate whose value
cannot be computed on these sets is `not computed` and does not pass (`perception_gap.gates`).

| gate | value | fails when |
|---|---|---|
| `format` | share of current frames whose size/dtype/channels differ from the baseline's usual one, minus the baseline's own share | > `format.max_fraction` and significant (binomial, p < 0.01) |
| `channel_shift` | largest per-channel change of the median linear-light mean, in stops (log2) | CI beyond +-`channel_shift.max_stops` |
| `sharpness` | change of the median Laplacian energy, log2 (1 = twice as sharp) | CI beyond +-`sharpness.max_log2` |
| `depth_dropout` | change of the mean fraction of invalid depth pixels | CI above `depth_dropout.max_increase` |
| `embedding:ENC` | centroid distance (current vs baseline) / the baseline's own noise floor at the same sizes | > `embedding.max_ratio` |
| `domain_auc:ENC` | cross-validated AUC of a current-vs-baseline classifier | > `domain_auc.max_auc` and the embedding ratio > `domain_auc.min_ratio` |
| `detector_ap:SRC` | AP(baseline) - AP(current) of a detector against ground truth | > `detector_ap.max_drop` |

Detectability is not drift: with a few hundred frames a classifier tells apart changes nobody
needs to act on (sigma = 2 sensor noise on clean frames: AUC 0.93). So the classifier gate also
needs an effect size above the baseline's own variation: the centroid distance over the size-
matched real-vs-real floor that the embedding gate reads. Every threshold's range is checked
(`THRESHOLD_RANGES`): a config outside it exits 2 with one line.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from perception_gap import gates
from perception_gap.errors import InputError, InsufficientData
from perception_gap.gates import Gate, make_gate
from perception_gap.metrics.bootstrap import centred_ci, cluster_replicates, on_rows
from perception_gap.metrics.resampling import WeightedMedian, check_pairs, cluster_counts, resampling_labels
from perception_gap.metrics.settings import REPLICATES
from perception_gap.statistics.image import ImageStats
from perception_gap.wording import finite

N_BOOT = REPLICATES["drift"]

# Documented defaults (README "Drift checks"); a TOML file given with --config overrides any of them.
DEFAULT_CONFIG: dict[str, dict[str, Any]] = {
    "format": {"enabled": True, "max_fraction": 0.01},
    "channel_shift": {"enabled": True, "max_stops": 0.25},
    "sharpness": {"enabled": True, "max_log2": 0.5},
    "sensor_noise": {"enabled": True, "max_levels": 2.0},
    "depth_dropout": {"enabled": True, "max_increase": 0.05},
    "embedding": {"enabled": True, "max_ratio": 2.0},
    "domain_auc": {"enabled": True, "max_auc": 0.85, "min_ratio": 2.0},
    "detector_ap": {"enabled": True, "max_drop": 0.10},
    "bootstrap": {"n_boot": N_BOOT, "ci": 0.95, "random_state": 0},
}

# (low, high, low included, high included, integer) per numeric setting; anything outside is refused.
THRESHOLD_RANGES: dict[tuple[str, str], tuple[float, float, bool, bool, bool]] = {
    ("format", "max_fraction"): (0.0, 1.0, True, True, False),
    ("channel_shift", "max_stops"): (0.0, 10.0, False, True, False),
    ("sharpness", "max_log2"): (0.0, 10.0, False, True, False),
    ("sensor_noise", "max_levels"): (0.0, 255.0, False, True, False),
    ("depth_dropout", "max_increase"): (0.0, 1.0, False, True, False),
    ("embedding", "max_ratio"): (0.0, 1e6, False, True, False),
    ("domain_auc", "max_auc"): (0.5, 1.0, True, True, False),
    ("domain_auc", "min_ratio"): (0.0, 1e6, True, True, False),
    ("detector_ap", "max_drop"): (0.0, 1.0, True, True, False),
    ("bootstrap", "n_boot"): (10, 100_000, True, True, True),
    ("bootstrap", "ci"): (0.0, 1.0, False, False, False),
    ("bootstrap", "random_state"): (0, 2**32 - 1, True, True, True),
}

DESCRIPTIONS = {
    "format": "share of current frames whose size, dtype or channel count differs from the baseline's usual one, "
              "beyond the baseline's own share of such frames",
    "channel_shift": "largest change of a channel's median linear-light mean, in stops",
    "sharpness": "change of the median Laplacian energy with each frame's own sensor noise removed, log2 "
                 "(blur < 0, sharpening > 0)",
    "sensor_noise": "change of the median sensor-noise sigma, luma 8-bit levels (noise within the tolerance is "
                    "not drift)",
    "depth_dropout": "change of the mean fraction of invalid (0/NaN/inf) depth pixels",
    "embedding": "centroid distance current vs baseline, in units of the baseline's own noise floor at these sizes",
    "domain_auc": "AUC of a classifier telling current from baseline frames (0.5 = indistinguishable); fails only "
                  "with an effect above the baseline's own variation (embedding ratio)",
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
    except IsADirectoryError:
        raise InputError(f"Expected `--config` to be a TOML file, got the directory {str(p)!r}.") from None
    except OSError as e:
        raise InputError(f"Cannot read drift config {str(p)!r}: {e.strerror or e}.") from None
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
            ok = isinstance(value, bool) if want is bool else finite(value)
            if not ok:
                raise InputError(f"Drift config {str(p)!r}: [{table}] {key} must be a "
                                 f"{'boolean' if want is bool else 'finite number'}, got {value!r}.")
            cfg[table][key] = value
    return validate_config(cfg, f"Drift config {str(p)!r}: ")


def validate_config(cfg: dict[str, dict[str, Any]], where: str = "Drift config: ") -> dict[str, dict[str, Any]]:
    """`cfg`, after checking every numeric setting against `THRESHOLD_RANGES`.

    Raises:
        InputError: one line naming the table, the key, the allowed range and the value.
    """
    for (table, key), (lo, hi, lo_in, hi_in, integer) in THRESHOLD_RANGES.items():
        v = cfg.get(table, {}).get(key)
        ok = finite(v)
        ok = ok and (lo <= v if lo_in else lo < v) and (v <= hi if hi_in else v < hi)
        if ok and integer and v != int(v):
            ok = False
        if not ok:
            span = f"{'[' if lo_in else '('}{lo:g}, {hi:g}{']' if hi_in else ')'}"
            raise InputError(f"{where}[{table}] {key} must be {'an integer ' if integer else ''}in {span}, got {v!r}.")
    return cfg


_INTERVAL_GATES = {"channel_shift", "sharpness", "sensor_noise", "depth_dropout"}


def interval_rule(threshold: float, level: float, one_sided: bool) -> str:
    """The rule of a gate decided on the bootstrap interval of a change (`shift_gate`)."""
    beyond = f"above +{threshold:g}" if one_sided else f"beyond \u00b1{threshold:g}"
    return f"fails when the {100 * level:g}% interval of the change lies entirely {beyond}"


def _rule(name: str, threshold: float, level: float = 0.95, min_ratio: float | None = None) -> str | None:
    """The deciding rule of a drift gate that is not the plain `value <= threshold` (None for those)."""
    base = name.split(":")[0]
    if base in _INTERVAL_GATES:
        return interval_rule(threshold, level, base == "depth_dropout")
    if base == "format":
        return f"fails when value > {threshold:g} and the excess is significant (binomial p < {FORMAT_ALPHA:g})"
    if base == "domain_auc":
        ratio = "domain_auc.min_ratio" if min_ratio is None else f"{min_ratio:g}"
        return f"fails when value > {threshold:g} and the embedding ratio > {ratio}"
    return None


def _gate(name: str, value: Any, threshold: float, **kw: Any) -> Gate:
    """A drift gate (see `perception_gap.gates.make_gate`), with its description and rule."""
    kw.setdefault("rule", _rule(name, threshold))
    return make_gate(name, value, threshold, description=DESCRIPTIONS.get(name.split(":")[0], ""), **kw)


def not_computed(name: str, threshold: float, reason: str) -> Gate:
    """A drift gate whose value could not be measured on these sets: it does not pass."""
    return gates.not_computed(name, threshold, reason, rule=_rule(name, threshold),
                              description=DESCRIPTIONS.get(name.split(":")[0], ""))


def skipped(name: str, threshold: float, reason: str) -> Gate:
    """A drift gate that does not apply to these sets (no depth maps in either)."""
    return gates.skipped(name, threshold, reason, rule=_rule(name, threshold),
                         description=DESCRIPTIONS.get(name.split(":")[0], ""))


def _side_replicates(values: np.ndarray, labels: np.ndarray, counts: np.ndarray, stat,
                     median: bool) -> list[np.ndarray | None]:
    """Replicates of stat(values[rows]) under the cluster draws `counts` (`median`: stat is the
    column median, read by `WeightedMedian` from the draw counts of every replicate at once)."""
    if not median:
        return cluster_replicates(on_rows(stat, values), labels, counts)
    w = counts[:, labels]
    reps = WeightedMedian(values).replicates(w)
    return [r if drawn else None for r, drawn in zip(reps, w.any(axis=1))]


def _cluster_resample_stat(values: np.ndarray, labels: np.ndarray, stat, n_boot: int,
                           rng: np.random.Generator, median: bool = False) -> np.ndarray:
    """(n_boot, ...) replicates of stat(values[rows]) with whole clusters drawn with replacement."""
    g = int(labels.max()) + 1
    reps = _side_replicates(values, labels, cluster_counts(g, n_boot, rng), stat, median)
    return np.asarray([r if r is not None else np.full(values.shape[1], np.nan) for r in reps])


def _paired_resample_stat(base: np.ndarray, cur: np.ndarray, base_labels: np.ndarray, pairs: np.ndarray, stat,
                          n_boot: int, rng: np.random.Generator, median: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Replicates of stat on both sides when current frames match baseline frames (pairs (P, 2) of
    (i_base, i_cur)): a paired current frame belongs to its baseline twin's cluster, unpaired ones
    to clusters of their own, and one draw of clusters serves both sides, so the scenes shared by
    both sides cancel in the difference. A replicate that draws no frame of a side is left out."""
    p = check_pairs(pairs, len(base), len(cur))
    g_b = int(base_labels.max()) + 1
    cur_labels = np.full(len(cur), -1)
    cur_labels[p[:, 1]] = base_labels[p[:, 0]]
    lone = cur_labels < 0  # unpaired current frames: one cluster each, numbered after the baseline's
    cur_labels[lone] = g_b + np.arange(int(lone.sum()))
    counts = cluster_counts(g_b + int(lone.sum()), n_boot, rng)
    both = [(rb, rc) for rb, rc in zip(_side_replicates(base, base_labels, counts, stat, median),
                                       _side_replicates(cur, cur_labels, counts, stat, median))
            if rb is not None and rc is not None]
    return np.asarray([rb for rb, _ in both]), np.asarray([rc for _, rc in both])


def _labels(episodes: Sequence[Hashable] | None, n: int) -> np.ndarray:
    """Bootstrap clusters: episodes, or contiguous blocks within them when there are fewer than
    `MIN_EPISODES` (a one-episode side would otherwise give every replicate the same value)."""
    return resampling_labels(episodes, n)


def shift_gate(name: str, base: np.ndarray, cur: np.ndarray, base_eps: Sequence[Hashable] | None,
               cur_eps: Sequence[Hashable] | None, threshold: float, *, labels: Sequence[str] | None = None,
               reducer: str = "median", one_sided: bool = False, n_boot: int = N_BOOT, ci: float = 0.95,
               random_state: int = 0, pairs: np.ndarray | None = None) -> Gate:
    """A change of a per-frame quantity (N, C) between baseline and current, per column.

    The change of column c is reducer(cur[:, c]) - reducer(base[:, c]); its interval comes from
    a cluster bootstrap of each side (episodes, or blocks of consecutive frames; blocks within
    episodes when there are fewer than 5). With `pairs` (P, 2) of (i_base, i_cur) (current
    frames of the same scenes, matched by pair key) one draw serves both sides. The gate
    reports the column with the largest |change| and fails when that column's interval lies
    entirely beyond +-threshold (only above +threshold when `one_sided`).
    """
    base = np.asarray(base, dtype=np.float64).reshape(len(base), -1)
    cur = np.asarray(cur, dtype=np.float64).reshape(len(cur), -1)
    if len(base) < 2 or len(cur) < 2:
        return not_computed(name, threshold,
                            f"needs at least 2 frames a side, got {len(base)} baseline and {len(cur)} current")
    red = np.median if reducer == "median" else np.mean
    f = lambda a: red(a, axis=0)  # noqa: E731
    rng = np.random.default_rng(random_state)
    med = reducer == "median" and bool(np.isfinite(base).all() and np.isfinite(cur).all())
    if pairs is not None and len(pairs):
        rb, rc = _paired_resample_stat(base, cur, _labels(base_eps, len(base)), np.asarray(pairs), f, n_boot, rng,
                                       median=med)
    else:
        rb = _cluster_resample_stat(base, _labels(base_eps, len(base)), f, n_boot, rng, median=med)
        rc = _cluster_resample_stat(cur, _labels(cur_eps, len(cur)), f, n_boot, rng, median=med)
    est = f(cur) - f(base)
    reps = rc - rb
    cols = labels or [str(i) for i in range(base.shape[1])]
    per = {}
    failed_cols = []
    for c in range(base.shape[1]):
        lo, hi, _ = centred_ci(reps[:, c], float(est[c]), ci)
        per[cols[c]] = {"change": float(est[c]), "low": lo, "high": hi}
        if lo > threshold or (not one_sided and hi < -threshold):
            failed_cols.append(cols[c])
    worst = max(range(base.shape[1]), key=lambda c: (est[c] if one_sided else abs(est[c])))
    w = per[cols[worst]]
    return _gate(name, w["change"], threshold, failed=bool(failed_cols), rule=interval_rule(threshold, ci, one_sided),
                 ci={"low": w["low"], "high": w["high"], "level": ci}, reason="the change is not finite",
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


# White noise of sigma (fraction of full scale) adds 20 sigma^2 to the mean squared 4-neighbour
# Laplacian (weights -4, 1, 1, 1, 1): the sharpness gate measures what is left, so a camera that
# got a little noisier is the `sensor_noise` gate's business (sigma-2 RGB noise raised the raw
# Laplacian energy of smooth frames 1.48x, past the sharpness tolerance).
LAPLACIAN_NOISE_GAIN = 20.0


def sharpness_vector(stats: Sequence[ImageStats]) -> np.ndarray:
    """(N, 1) per-frame log2 Laplacian energy with the frame's own white-noise share removed (floored at 5%)."""
    rows = []
    for s in stats:
        lap = float(s.sharpness)
        if s.noise_sigma is not None:
            lap = max(lap - LAPLACIAN_NOISE_GAIN * float(s.noise_sigma) ** 2, 0.05 * lap)
        rows.append([math.log2(max(lap, 1e-12))])
    return np.asarray(rows, dtype=np.float64).reshape(-1, 1)


def noise_vector(stats: Sequence[ImageStats]) -> np.ndarray:
    """(N, 1) per-frame sensor-noise sigma in luma 8-bit levels (frames without the statistic left out)."""
    return np.asarray([[255.0 * float(s.noise_sigma)] for s in stats if s.noise_sigma is not None],
                      dtype=np.float64).reshape(-1, 1)


FIXED_SIZE_SHARE = 0.95  # the baseline has a fixed frame size when its usual size covers this share of frames


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p) (1 when k <= 0).

    scipy's survival function works through the regularized incomplete beta function, so it
    stays finite for any `n` (a sum of `comb(n, i) * p**i` terms overflows a float past
    about a thousand frames).
    """
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    from scipy.stats import binom  # imported when a format gate runs: drift's other gates need no scipy

    return float(binom.sf(k - 1, n, p))


FORMAT_ALPHA = 0.01  # the format gate fails only when the excess of odd frames is this unlikely by chance


def format_gate(base: Sequence[ImageStats], cur: Sequence[ImageStats], threshold: float) -> Gate:
    """Share of current frames whose dtype or channel count (and frame size, when the baseline has
    a fixed one) differ from the baseline's usual format, beyond the baseline's own share.

    A camera stream has one format, and any change is a pipeline change. But a baseline may hold
    a few odd frames itself (one greyscale frame in sixty): a current set with the same share
    has not drifted. The value is the current share minus the baseline's; the gate fails when
    it exceeds `threshold` and the current count of odd frames is unlikely (binomial tail below
    `FORMAT_ALPHA`) at the baseline's own rate. A baseline of mixed sizes (a photo collection)
    has no fixed size to hold the current frames to: then only dtype and channels are checked,
    and the detail says so.
    """
    if not base or not cur:
        return not_computed("format", threshold, "no frame statistics on one side")
    sizes = Counter((s.width, s.height) for s in base)
    # ties broken by value, not by which frame came first: the gate must not depend on frame order
    usual_size, n_usual = min(sizes.items(), key=lambda kv: (-kv[1], kv[0]))
    fixed = n_usual / len(base) >= FIXED_SIZE_SHARE
    kinds = Counter((s.dtype, s.channels) for s in base)
    usual_kind = min(kinds.items(), key=lambda kv: (-kv[1], str(kv[0])))[0]

    def off(s: ImageStats) -> bool:
        return (s.dtype, s.channels) != usual_kind or (fixed and (s.width, s.height) != usual_size)

    k_cur = sum(off(s) for s in cur)
    share_base = sum(off(s) for s in base) / len(base)
    excess = k_cur / len(cur) - share_base
    p_value = binomial_tail(k_cur, len(cur), share_base)
    failed = excess > threshold and p_value < FORMAT_ALPHA
    fmt = lambda s: f"{s.width}x{s.height} {s.dtype} x{s.channels}"  # noqa: E731
    return _gate("format", excess, threshold, failed=failed,
                 detail={"baseline_usual": (f"{usual_size[0]}x{usual_size[1]} " if fixed else "") +
                        f"{usual_kind[0]} x{usual_kind[1]}",
                        "current_share": k_cur / len(cur), "baseline_share": share_base, "p_value": p_value,
                        "size_checked": fixed, "baseline_sizes": len(sizes),
                        "current_formats": dict(Counter(fmt(s) for s in cur).most_common(5))})


def floor_ratio(emb_base: np.ndarray, emb_cur: np.ndarray, base_eps: Sequence[Hashable] | None, *,
                random_state: int = 0) -> tuple[float, dict[str, Any]]:
    """Centroid distance current vs baseline over the baseline's own noise floor at matched sizes.

    The floor is the centroid distance between two halves of the baseline (episodes, or
    alternate blocks), rescaled to the sizes compared: sampling noise in a distance between two
    centroids grows like sqrt(1/n_1 + 1/n_2), so floor = d(halves) * sqrt((1/n_cur + 1/n_base) /
    (1/n_half1 + 1/n_half2)). A ratio near 1 is what two samples of the baseline's own
    distribution give.

    Returns:
        (ratio, detail); the ratio is inf when the floor is 0 (identical baseline frames) and the
        distance is not.

    Raises:
        InsufficientData: too few frames for the distance or the floor.
    """
    from perception_gap.metrics import centroid_distance, noise_floor

    n_b, n_c = len(emb_base), len(emb_cur)
    cd = centroid_distance(emb_cur, emb_base, random_state=random_state)
    nf = noise_floor(emb_base, episodes=base_eps, random_state=random_state)
    floor = nf.value_norm * math.sqrt((1 / n_c + 1 / n_b) / (1 / nf.n_a + 1 / nf.n_b))
    ratio = cd.value_norm / floor if floor > 0 else (0.0 if cd.value_norm == 0 else math.inf)
    return ratio, {"centroid_distance_norm": cd.value_norm, "noise_floor_halves": nf.value_norm,
                   "noise_floor_matched": floor, "noise_floor_method": nf.method, "n_baseline": n_b, "n_current": n_c}


def shared_floor_ratio(emb_base: np.ndarray, emb_cur: np.ndarray, base_eps: Sequence[Hashable] | None, *,
                       random_state: int = 0) -> tuple[float, dict[str, Any]] | InsufficientData:
    """`floor_ratio` computed once for the embedding and classifier gates (`floor=`): its result, or
    the `InsufficientData` it raised (each gate handles that its own way)."""
    try:
        return floor_ratio(emb_base, emb_cur, base_eps, random_state=random_state)
    except InsufficientData as e:
        return e


def _floor(floor: tuple[float, dict[str, Any]] | InsufficientData | None, *args: Any, **kw: Any) -> tuple[float, dict[str, Any]]:
    if floor is None:
        return floor_ratio(*args, **kw)
    if isinstance(floor, InsufficientData):
        raise floor
    return floor


def embedding_gate(name: str, emb_base: np.ndarray, emb_cur: np.ndarray, base_eps: Sequence[Hashable] | None,
                   cur_eps: Sequence[Hashable] | None, threshold: float, *, random_state: int = 0,
                   floor: tuple[float, dict[str, Any]] | InsufficientData | None = None) -> Gate:
    """`floor_ratio` of current vs baseline against `threshold` (see `floor_ratio`; `floor`: its
    result already computed by `shared_floor_ratio` on the same arrays)."""
    try:
        ratio, detail = _floor(floor, emb_base, emb_cur, base_eps, random_state=random_state)
    except InsufficientData as e:
        return not_computed(name, threshold, str(e))
    if detail["noise_floor_matched"] <= 0:
        return not_computed(name, threshold, "the baseline's noise floor is 0 (identical frames)")
    return _gate(name, ratio, threshold, detail=detail, reason="the distance ratio is not finite")


def auc_gate(name: str, emb_base: np.ndarray, emb_cur: np.ndarray, base_eps: Sequence[Hashable] | None,
             cur_eps: Sequence[Hashable] | None, threshold: float, *, min_ratio: float = 0.0,
             random_state: int = 0, floor: tuple[float, dict[str, Any]] | InsufficientData | None = None) -> Gate:
    """Grouped cross-validated AUC of a current-vs-baseline classifier, gated on effect size too.

    Fails when the AUC exceeds `threshold` *and* the shift is larger than the baseline's own
    variation: `floor_ratio` above `min_ratio` (0 = the AUC alone, the old behaviour). A
    classifier detects small consistent changes (sensor noise on clean frames) long before they
    move the frames beyond what the baseline itself spans.
    """
    from perception_gap.metrics import domain_auc

    try:
        auc = domain_auc(emb_cur, emb_base, episodes_sim=cur_eps, episodes_real=base_eps, random_state=random_state)
    except InsufficientData as e:
        return not_computed(name, threshold, str(e))
    detail: dict[str, Any] = {**auc.to_dict(), "min_ratio": min_ratio, "effect_ratio": None}
    big = True
    if min_ratio > 0:
        try:
            ratio, _ = _floor(floor, emb_base, emb_cur, base_eps, random_state=random_state)
            detail["effect_ratio"] = ratio if math.isfinite(ratio) else None
            big = ratio > min_ratio
        except InsufficientData as e:  # no floor to size the effect against: the AUC alone decides
            detail["effect_ratio_skipped"] = str(e)
    failed = auc.value > threshold and big
    return _gate(name, auc.value, threshold, failed=failed, rule=_rule(name, threshold, min_ratio=min_ratio),
                 detail=detail, reason="the AUC is not finite")


def ap_gate(name: str, ap_base: float | None, ap_cur: float | None, threshold: float, **detail: Any) -> Gate:
    if ap_base is None or ap_cur is None:
        return not_computed(name, threshold, "AP undefined on one side (no ground truth there)")
    return _gate(name, ap_base - ap_cur, threshold, detail={"ap_baseline": ap_base, "ap_current": ap_cur, **detail})


def check_config_value(cfg: dict[str, dict[str, Any]], table: str, key: str) -> float:
    v = cfg[table][key]
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise InputError(f"Expected a number for [{table}] {key}, got {v!r}.")
    return float(v)
