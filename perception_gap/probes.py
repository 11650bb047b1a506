"""Linear probes: does a frozen embedding keep what the policy needs?

An encoder can close the sim-real gap by throwing everything away. A probe fits a ridge
regression from frozen embeddings to what the policy must read off the frame (demonstrated
actions, or proprioception/pose where there are no actions) and reports R^2 three ways:

- `sim_to_sim`: grouped K-fold on the sim set (folds by episode, so a test episode is never
  seen in training), R^2 of the pooled out-of-fold predictions;
- `sim_to_real`: the same folds and the same fitted ridges, scored on the real frames of each
  fold's held-out episodes (train on the sim frames of the training episodes, test on the real
  frames of the others). An episode id shared by sim and real frames (paired twins) is one
  group; a real episode with no sim twin is dealt to a fold at random (no ridge ever saw any of
  its frames). With real frames identical to the sim ones, `sim_to_real` equals `sim_to_sim`
  exactly, so `transfer_drop` = sim_to_sim - sim_to_real is the domain effect alone, not the
  difference between in-sample and held-out scores;
- `real_to_real`: grouped K-fold on the real set.

`transfer_drop` comes with a CI from a bootstrap over held-out episodes: the fitted fold models
stay fixed and the out-of-fold predictions are resampled by episode (`transfer_drop_ci`);
episodes shared by sim and real are drawn together for both sides (a paired design), otherwise
each side draws its own, with the few-episode fallbacks of `metrics.resampling_units`.

R^2 is 1 for a perfect read-out, 0 for predicting the test mean, and unbounded below: a ridge
extrapolating off its training distribution can read -4,000,000. Below `R2_DISPLAY_FLOOR` (-1)
the number says nothing more than "worse than predicting the mean"; results keep the number
and flag it (`r2_below_floor`), and text and reports show the words.

Model: StandardScaler -> PCA (at most `PROBE_N_COMPONENTS` = 128 components, for speed and
stability on 512-1280-D embeddings) -> Ridge. The scaler and PCA are label-free; they are
fitted once per domain on that domain's frames (at most `metrics.MAX_FIT_ROWS` = 20,000 of
them, a seeded subset), exactly as the centroid distance fits its projection, and every frame
is projected once, in chunks. They see the held-out frames' embeddings but never a target, so
no target leaks; sim->real uses the sim projection only, so no real frame shapes what the
sim-trained probe sees. Refitting them per fold would cost 11 PCA fits per probe (~65 GFLOP
each at 20,000 x 1280) for no gain in honesty. Only the ridge is fitted per fold, on every
training frame, its alpha chosen from `ALPHAS` by grouped 3-fold cross-validation inside the
training frames (`choose_alpha`: RidgeCV's criterion, mean R^2 over folds, in closed form from
one eigendecomposition per fold; RidgeCV's own grid search refits every alpha and fold, and
its leave-one-out default would pick too small an alpha, since neighbouring frames are
near-duplicates).

R^2 per target dimension is sklearn's `r2_score`; the overall R^2 is their plain mean
(sklearn's "uniform_average") over the non-constant target dimensions: targets come in mixed
units (radians, metres, a gripper in [0, 1]), and "variance_weighted" would let whichever
dimension has the largest numbers dominate. A target dimension that is constant on a test set
has no R^2: it is reported as None and left out of the overall figure (None if every
dimension is constant). Episodes follow `perception_gap.metrics` (ids, None = unknown,
contiguous blocks where unknown).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.linear_model import Ridge, RidgeCV
from sklearn.model_selection import GroupKFold
from threadpoolctl import threadpool_limits

from perception_gap.errors import InputError, InsufficientData
from perception_gap.metrics.bootstrap import centred_ci
from perception_gap.metrics.projection import MAX_N_COMPONENTS, Rows, fit_projection
from perception_gap.metrics.resampling import Units, cluster_keys, factorize, resampling_units, unit_weights
from perception_gap.metrics.results import CI
from perception_gap.metrics.settings import LEVEL, REPLICATES
from perception_gap.metrics.validation import check_embedding_pair, check_int, check_level, draw_seed, make_rng
from perception_gap.results import Result, json_safe

log = logging.getLogger(__name__)

ALPHAS = tuple(float(a) for a in np.logspace(-3, 5, 9))  # 1e-3 .. 1e5 (features: PCA scores of standardized inputs)
PROBE_N_COMPONENTS = 128
PROBE_SPLITS = 5
INNER_SPLITS = 3
MIN_PROBE_FRAMES = 8
# Below this R^2 a number says no more than "worse than predicting the mean" (shown in words).
R2_DISPLAY_FLOOR = -1.0
# A target dimension whose test variance is below this fraction of its squared scale is constant.
_CONST_TOL = 1e-12


@dataclass(frozen=True)
class ProbeScore(Result):
    """R^2 of one train/test arrangement.

    Attributes:
        r2: mean R^2 over the non-constant target dimensions; None if all are constant.
        r2_per_dim: R^2 per target dimension (None for a constant one).
        n_train: training frames per ridge fit (the largest fold).
        n_test: frames scored.
        n_splits: folds (sim_to_real shares sim_to_sim's folds and fitted ridges).
        alphas: ridge alpha chosen in each fit.
    """

    r2: float | None
    r2_per_dim: tuple[float | None, ...]
    n_train: int
    n_test: int
    n_splits: int
    alphas: tuple[float, ...]

    name: ClassVar[str] = "probe_r2"
    unit: ClassVar[str] = "R^2 (1 = perfect, 0 = predicting the mean, can be negative)"
    higher_is_gap: ClassVar[bool] = False


@dataclass(frozen=True)
class ProbeResult(Result):
    """Linear-probe R^2 within sim, within real, and from sim to real.

    Attributes:
        sim_to_sim, real_to_real, sim_to_real: the three scores.
        n_targets: target dimensions.
        n_components: PCA components of the sim projection (min(n_components, D, N_sim - 1,
            numerical rank)).
        transfer_drop_ci: CI of `transfer_drop` from the bootstrap over held-out episodes
            (fold models fixed, out-of-fold predictions resampled by episode); None when no
            replicate could be scored.
        n_shared_groups: episodes (or pair groups) holding both sim and real frames: held out
            for both sides at once.
    """

    sim_to_sim: ProbeScore
    real_to_real: ProbeScore
    sim_to_real: ProbeScore
    n_targets: int
    n_components: int
    transfer_drop_ci: CI | None = None
    n_shared_groups: int = 0

    name: ClassVar[str] = "probe"
    unit: ClassVar[str] = "R^2"
    higher_is_gap: ClassVar[bool] = False  # higher R^2 = more of what the policy needs is kept

    @property
    def transfer_drop(self) -> float | None:
        """sim_to_sim R^2 minus sim_to_real R^2: what crossing the gap costs the policy."""
        if self.sim_to_sim.r2 is None or self.sim_to_real.r2 is None:
            return None
        return self.sim_to_sim.r2 - self.sim_to_real.r2

    @property
    def r2_below_floor(self) -> dict[str, bool]:
        """Per score: True when its R^2 is below `R2_DISPLAY_FLOOR` (shown as "worse than predicting the mean")."""
        return {k: below_display_floor(getattr(self, k).r2) for k in SCORES}

    def to_dict(self) -> dict[str, Any]:
        """Contract shape: `sim_to_sim`, `real_to_real`, `sim_to_real` as plain R^2, details under `detail`."""
        return {
            "sim_to_sim": json_safe(self.sim_to_sim.r2),
            "real_to_real": json_safe(self.real_to_real.r2),
            "sim_to_real": json_safe(self.sim_to_real.r2),
            "transfer_drop": json_safe(self.transfer_drop),
            "transfer_drop_ci": self.transfer_drop_ci.to_dict() if self.transfer_drop_ci is not None else None,
            "r2_below_floor": self.r2_below_floor,
            "r2_display_floor": R2_DISPLAY_FLOOR,
            "protocol": PROTOCOL,
            "n_shared_groups": self.n_shared_groups,
            "n_targets": self.n_targets,
            "n_components": self.n_components,
            "detail": {k: getattr(self, k).to_dict() for k in SCORES},
        }


SCORES = ("sim_to_sim", "real_to_real", "sim_to_real")
PROTOCOL = ("grouped folds by episode; sim_to_real: ridges fitted on the sim frames of the training episodes, "
            "scored on the real frames of the held-out episodes; transfer_drop CI: bootstrap over held-out "
            "episodes with the fold models fixed")


def below_display_floor(r2: float | None) -> bool:
    """True when an R^2 is below `R2_DISPLAY_FLOOR` (-1): it reads only as "worse than predicting the mean"."""
    return r2 is not None and r2 < R2_DISPLAY_FLOOR


def describe_r2(r2: float | None, digits: int = 2) -> str:
    """An R^2 for text output: the number, or "worse than predicting the mean" below -1; "-" when None."""
    if r2 is None:
        return "-"
    return "worse than predicting the mean" if below_display_floor(r2) else f"{r2:.{digits}f}"


def _check_targets(y: Any, n: int, name: str) -> np.ndarray:
    a = np.asarray(y)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or len(a) != n or a.shape[1] < 1:
        raise InputError(f"Expected `{name}` of shape ({n},) or ({n}, T), got shape {np.shape(y)}.")
    if a.dtype.kind not in "fiub":
        raise InputError(f"Expected `{name}` of a real numeric dtype, got {a.dtype}.")
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise InputError(f"Expected finite values in `{name}`, found NaN or inf "
                         f"in {int((~np.isfinite(a)).any(axis=1).sum())} rows.")
    return a


def _score(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[float | None, tuple[float | None, ...]]:
    """(mean R^2 over non-constant dimensions, R^2 per dimension): 1 - SSE / SST per column, as
    sklearn's `r2_score` computes it for a non-constant target (tests compare the two)."""
    mean = y_true.mean(axis=0)
    sst = ((y_true - mean) ** 2).sum(axis=0)
    sse = ((y_true - y_pred) ** 2).sum(axis=0)
    const = sst / len(y_true) <= _CONST_TOL * np.maximum(1.0, mean ** 2)
    per = tuple(None if c else float(1.0 - e / t) for c, e, t in zip(const, sse, sst))
    known = [v for v in per if v is not None]
    return (float(np.mean(known)) if known else None), per


def choose_alpha(feats: np.ndarray, y: np.ndarray, groups: np.ndarray, alphas: Sequence[float], *,
                 random_state: int | np.random.Generator | None = 0) -> float:
    """The ridge alpha with the best mean R^2 over grouped inner folds.

    The criterion is that of `RidgeCV(alphas, cv=<the same grouped folds>)` (mean over folds
    of the uniform-average R^2; the first alpha on ties), evaluated in closed form: one
    eigendecomposition X'X = V diag(lam) V' of each centred training fold serves every alpha
    (w = V diag(1 / (lam + alpha)) V' X'y). With fewer than 2 groups it falls back to RidgeCV's
    leave-one-out choice.

    Args:
        feats: (N, k) features.
        y: (N, T) targets.
        groups: (N,) group per frame; folds never split a group.
        alphas: candidate penalties.
        random_state: seed of the group shuffle.

    Returns:
        The chosen alpha.
    """
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        return float(RidgeCV(alphas=tuple(alphas)).fit(feats, y).alpha_)
    folds = GroupKFold(n_splits=min(INNER_SPLITS, n_groups), shuffle=True,
                       random_state=draw_seed(make_rng(random_state)))
    al = np.asarray(alphas, dtype=np.float64)
    scores = np.zeros(len(al))
    for train, val in folds.split(feats, y, groups):
        x_mean, y_mean = feats[train].mean(axis=0), y[train].mean(axis=0)
        xc = feats[train] - x_mean
        lam, vecs = np.linalg.eigh(xc.T @ xc)
        lam = np.clip(lam, 0.0, None)
        proj_y = vecs.T @ (xc.T @ (y[train] - y_mean))  # (k, T)
        del xc
        x_val = (feats[val] - x_mean) @ vecs
        y_val = y[val]
        sst = ((y_val - y_val.mean(axis=0)) ** 2).sum(axis=0)
        for i, a in enumerate(al):
            sse = ((y_val - (x_val @ (proj_y / (lam + a)[:, None]) + y_mean)) ** 2).sum(axis=0)
            # r2_score's conventions for a constant validation target: 1 if exact, else 0.
            r2 = np.where(sst > 0, 1.0 - sse / np.where(sst > 0, sst, 1.0), np.where(sse == 0, 1.0, 0.0))
            scores[i] += r2.mean()
    return float(al[int(np.argmax(scores))])


def _fit_ridge(feats: np.ndarray, y: np.ndarray, groups: np.ndarray, alphas: tuple[float, ...],
               rng: np.random.Generator) -> Ridge:
    return Ridge(alpha=choose_alpha(feats, y, groups, alphas, random_state=rng)).fit(feats, y)


def _folds(groups: np.ndarray, rng: np.random.Generator, side: str) -> list[tuple[np.ndarray, np.ndarray]]:
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise InsufficientData("Expected at least 2 episodes (or blocks) in the "
                               f"{side} set for a held-out probe, got {n_groups}.")
    folds = GroupKFold(n_splits=min(PROBE_SPLITS, n_groups), shuffle=True, random_state=draw_seed(rng))
    return list(folds.split(groups, groups, groups))


def _cross_fit(feats: np.ndarray, y: np.ndarray, groups: np.ndarray, rng: np.random.Generator,
               alphas: tuple[float, ...], side: str, other: np.ndarray | None = None,
               other_groups: np.ndarray | None = None) -> tuple[ProbeScore, np.ndarray, np.ndarray | None]:
    """Grouped K-fold ridges on one side: (score, out-of-fold predictions, predictions on `other`).

    `other` (M, k) are frames of the other domain through the same projection; each is predicted
    by the ridge of the fold that holds its group out (a group absent from `groups` is dealt to a
    fold at random), so no ridge ever predicts a frame of an episode it was trained on.
    """
    folds = _folds(groups, rng, side)
    pred = np.empty_like(y)
    fold_of_other = None
    if other is not None and other_groups is not None:
        fold_of_group = {}
        for f, (_, test) in enumerate(folds):
            fold_of_group.update((int(g), f) for g in np.unique(groups[test]))
        unseen = [int(g) for g in np.unique(other_groups) if int(g) not in fold_of_group]
        for i, g in enumerate(rng.permutation(unseen) if unseen else []):
            fold_of_group[int(g)] = i % len(folds)
        fold_of_other = np.array([fold_of_group[int(g)] for g in other_groups], dtype=np.int64)
        pred_other = np.empty((len(other), y.shape[1]))
    chosen, n_train = [], 0
    for f, (train, test) in enumerate(folds):
        ridge = _fit_ridge(feats[train], y[train], groups[train], alphas, rng)
        pred[test] = ridge.predict(feats[test]).reshape(len(test), y.shape[1])
        if fold_of_other is not None:
            rows = np.flatnonzero(fold_of_other == f)
            if len(rows):
                pred_other[rows] = ridge.predict(other[rows]).reshape(len(rows), y.shape[1])
        chosen.append(float(ridge.alpha))
        n_train = max(n_train, len(train))
    r2, per = _score(y, pred)
    score = ProbeScore(r2=r2, r2_per_dim=per, n_train=n_train, n_test=len(y), n_splits=len(folds),
                       alphas=tuple(chosen))
    return score, pred, (pred_other if fold_of_other is not None else None)


def _drop_units(keys_s: list[Hashable], keys_r: list[Hashable], episodes_sim: Sequence[Hashable] | None,
                episodes_real: Sequence[Hashable] | None, pairs: np.ndarray | None) -> Units:
    """Resampling units of the transfer-drop bootstrap: `resampling_units`, except that with enough
    episodes (whole clusters, not blocks within few episodes) those shared by sim and real are one
    unit, drawn for both sides at once."""
    units = resampling_units(episodes_sim, episodes_real, len(keys_s), len(keys_r), pairs)
    if units.paired or units.how == "episode blocks" or not set(keys_s) & set(keys_r):
        return units
    lab = factorize(list(keys_s) + list(keys_r))
    return Units(lab[:len(keys_s)], lab[len(keys_s):], int(lab.max()) + 1, "shared episodes", True)


def transfer_drop_ci(y_sim: np.ndarray, pred_sim: np.ndarray, y_real: np.ndarray, pred_real: np.ndarray,
                     units: Units, *, estimate: float, n_boot: int = REPLICATES["probe"], ci: float = LEVEL,
                     random_state: int | np.random.Generator | None = 0) -> CI | None:
    """Centred percentile CI of R^2(sim out-of-fold) - R^2(real held-out) over resampled units.

    The fitted ridges stay fixed: each replicate redraws the held-out frames by unit (episodes,
    or blocks / matched pairs when episodes are few) and rescores both sides, so the interval
    says how much the drop depends on which episodes were held out, not how the ridges would
    change with other training episodes.

    Args:
        y_sim, pred_sim: (N_sim, T) sim targets and out-of-fold predictions.
        y_real, pred_real: (N_real, T) real targets and predictions of the held-out ridges.
        units: resampling units of both sides.
        estimate: the full-set drop the interval is centred on.
        n_boot: replicates.
        ci: coverage in (0, 1).
        random_state: seed.

    Returns:
        CI, or None when fewer than half of the replicates could be scored.
    """
    level = check_level(ci)
    rng = make_rng(random_state)
    reps = []
    for _ in range(n_boot):
        w = unit_weights(units, rng)
        idx_s = np.repeat(np.arange(len(y_sim)), w[units.sim])
        idx_r = np.repeat(np.arange(len(y_real)), w[units.real])
        if len(idx_s) < 2 or len(idx_r) < 2:
            continue
        r_ss, r_sr = _score(y_sim[idx_s], pred_sim[idx_s])[0], _score(y_real[idx_r], pred_real[idx_r])[0]
        if r_ss is not None and r_sr is not None:
            reps.append(r_ss - r_sr)
    if len(reps) * 2 < n_boot:
        return None
    lo, hi, bias = centred_ci(np.asarray(reps), estimate, level)
    return CI(low=lo, high=hi, level=level, n_boot=len(reps), n_clusters_sim=len(np.unique(units.sim)),
              n_clusters_real=len(np.unique(units.real)), clusters=units.how, bias=bias, method="centred percentile, "
              "held-out episodes resampled with the fold models fixed")


def probe(emb_sim: np.ndarray, y_sim: np.ndarray, emb_real: np.ndarray, y_real: np.ndarray, *,
          episodes_sim: Sequence[Hashable] | None = None, episodes_real: Sequence[Hashable] | None = None,
          n_components: int = PROBE_N_COMPONENTS, alphas: Sequence[float] = ALPHAS,
          random_state: int | np.random.Generator | None = 0, pairs: np.ndarray | None = None,
          n_boot: int = REPLICATES["probe"], ci: float = LEVEL) -> ProbeResult:
    """Ridge probes from frozen embeddings to targets: sim->sim, real->real, sim->real (held out).

    Args:
        emb_sim: (N_sim, D) sim embeddings, N_sim >= 8.
        y_sim: (N_sim,) or (N_sim, T) targets (actions, or proprio/pose), own units.
        emb_real: (N_real, D) real embeddings, N_real >= 8.
        y_real: (N_real,) or (N_real, T) targets, the same T and units as `y_sim`.
        episodes_sim, episodes_real: optional length-N episode ids per side; an id on both sides
            is one group (held out for both at once).
        n_components: PCA components before the ridge, in [1, MAX_N_COMPONENTS]; default 128.
        alphas: ridge penalties to choose from (positive); default 1e-3 .. 1e5.
        random_state: seed.
        pairs: optional (P, 2) matched (i_sim, i_real) pairs; with few episodes the transfer-drop
            bootstrap draws a pair's frames together.
        n_boot: transfer-drop bootstrap replicates, in [10, 100000]; default 200.
        ci: the transfer drop's interval level; default 0.95.

    Returns:
        ProbeResult.
    """
    sim, real = check_embedding_pair(emb_sim, emb_real)
    ys = _check_targets(y_sim, len(sim), "y_sim")
    yr = _check_targets(y_real, len(real), "y_real")
    if ys.shape[1] != yr.shape[1]:
        raise InputError("Expected `y_sim` and `y_real` with the same number of "
                         f"target dimensions, got {ys.shape[1]} and {yr.shape[1]}.")
    if len(sim) < MIN_PROBE_FRAMES or len(real) < MIN_PROBE_FRAMES:
        raise InsufficientData(f"Expected at least {MIN_PROBE_FRAMES} frames per side "
                               f"for the probes, got {len(sim)} sim and {len(real)} real.")
    n_components = check_int("n_components", n_components, 1, MAX_N_COMPONENTS)
    n_boot = check_int("n_boot", n_boot, 10, 100_000)
    try:
        al = tuple(float(a) for a in np.atleast_1d(np.asarray(alphas, dtype=np.float64)))
    except (TypeError, ValueError):
        al = ()
    if not al or not all(np.isfinite(a) and a > 0 for a in al):
        raise InputError(f"Expected `alphas` a non-empty sequence of positive numbers, got {alphas!r}.")
    rng = make_rng(random_state)
    keys_s = cluster_keys(episodes_sim, len(sim), "sim", "episodes_sim")[0]
    keys_r = cluster_keys(episodes_real, len(real), "real", "episodes_real")[0]
    shared = factorize(keys_s + keys_r)  # one numbering: an episode on both sides is one group
    g_sim, g_real_shared = shared[:len(sim)], shared[len(sim):]
    g_real = factorize(keys_r)

    proj_sim = fit_projection([Rows(sim)], n_components, rng)
    f_sim = proj_sim.transform(Rows(sim))  # (N_sim, k) float64
    f_real_via_sim = proj_sim.transform(Rows(real))  # the real frames as the sim-trained ridges see them
    with threadpool_limits(limits=1, user_api="blas"):  # k x k factorizations: extra threads only spin-wait
        s2s, pred_ss, pred_sr = _cross_fit(f_sim, ys, g_sim, rng, al, "sim", f_real_via_sim, g_real_shared)
    del f_sim, f_real_via_sim
    assert pred_sr is not None
    r2, per = _score(yr, pred_sr)
    s2r = ProbeScore(r2=r2, r2_per_dim=per, n_train=s2s.n_train, n_test=len(real), n_splits=s2s.n_splits,
                     alphas=s2s.alphas)
    proj_real = fit_projection([Rows(real)], n_components, rng)
    f_real = proj_real.transform(Rows(real))
    with threadpool_limits(limits=1, user_api="blas"):
        r2r = _cross_fit(f_real, yr, g_real, rng, al, "real")[0]
    drop_ci = None
    if s2s.r2 is not None and s2r.r2 is not None:
        units = _drop_units(keys_s, keys_r, episodes_sim, episodes_real, pairs)
        drop_ci = transfer_drop_ci(ys, pred_ss, yr, pred_sr, units, estimate=s2s.r2 - s2r.r2, n_boot=n_boot,
                                   ci=ci, random_state=rng)
    log.debug("probe: sim->sim %s, real->real %s, sim->real %s", s2s.r2, r2r.r2, s2r.r2)
    return ProbeResult(sim_to_sim=s2s, real_to_real=r2r, sim_to_real=s2r, n_targets=ys.shape[1],
                       n_components=proj_sim.k, transfer_drop_ci=drop_ci,
                       n_shared_groups=len(set(keys_s) & set(keys_r)))
