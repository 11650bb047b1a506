"""Linear probes: does a frozen embedding keep what the policy needs?

An encoder can close the sim-real gap by throwing everything away. A probe fits a ridge
regression from frozen embeddings to what the policy must read off the frame (demonstrated
actions, or proprioception/pose where there are no actions) and reports R^2 three ways:

- `sim_to_sim`: grouped K-fold on the sim set (folds by episode, so a test episode is never
  seen in training), R^2 of the pooled out-of-fold predictions;
- `real_to_real`: the same on the real set;
- `sim_to_real`: trained on all sim frames, tested on all real frames (transfer).

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
from sklearn.metrics import r2_score
from sklearn.model_selection import GroupKFold

from perception_gap.errors import InputError, InsufficientData
from perception_gap.metrics.projection import MAX_N_COMPONENTS, Rows, fit_projection
from perception_gap.metrics.resampling import cluster_keys, factorize
from perception_gap.metrics.validation import CHUNK_ROWS, check_embedding_pair, check_int, draw_seed, make_rng
from perception_gap.results import Result, json_safe

log = logging.getLogger(__name__)

ALPHAS = tuple(float(a) for a in np.logspace(-3, 5, 9))  # 1e-3 .. 1e5 (features: PCA scores of standardized inputs)
PROBE_N_COMPONENTS = 128
PROBE_SPLITS = 5
INNER_SPLITS = 3
MIN_PROBE_FRAMES = 8
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
        n_splits: folds (1 for train-on-sim, test-on-real).
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
    """

    sim_to_sim: ProbeScore
    real_to_real: ProbeScore
    sim_to_real: ProbeScore
    n_targets: int
    n_components: int

    name: ClassVar[str] = "probe"
    unit: ClassVar[str] = "R^2"
    higher_is_gap: ClassVar[bool] = False  # higher R^2 = more of what the policy needs is kept

    @property
    def transfer_drop(self) -> float | None:
        """sim_to_sim R^2 minus sim_to_real R^2: what crossing the gap costs the policy."""
        if self.sim_to_sim.r2 is None or self.sim_to_real.r2 is None:
            return None
        return self.sim_to_sim.r2 - self.sim_to_real.r2

    def to_dict(self) -> dict[str, Any]:
        """Contract shape: `sim_to_sim`, `real_to_real`, `sim_to_real` as plain R^2, details under `detail`."""
        return {
            "sim_to_sim": json_safe(self.sim_to_sim.r2),
            "real_to_real": json_safe(self.real_to_real.r2),
            "sim_to_real": json_safe(self.sim_to_real.r2),
            "transfer_drop": json_safe(self.transfer_drop),
            "n_targets": self.n_targets,
            "n_components": self.n_components,
            "detail": {k: getattr(self, k).to_dict() for k in ("sim_to_sim", "real_to_real", "sim_to_real")},
        }


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
    per: list[float | None] = []
    for j in range(y_true.shape[1]):
        t = y_true[:, j]
        scale = max(1.0, float(np.mean(t)) ** 2)
        if float(np.var(t)) <= _CONST_TOL * scale:
            per.append(None)
        else:
            per.append(float(r2_score(t, y_pred[:, j])))
    known = [v for v in per if v is not None]
    return (float(np.mean(known)) if known else None), tuple(per)


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


def _within(feats: np.ndarray, y: np.ndarray, groups: np.ndarray, rng: np.random.Generator,
            alphas: tuple[float, ...], side: str) -> ProbeScore:
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise InsufficientData("Expected at least 2 episodes (or blocks) in the "
                               f"{side} set for a held-out probe, got {n_groups}.")
    folds = GroupKFold(n_splits=min(PROBE_SPLITS, n_groups), shuffle=True, random_state=draw_seed(rng))
    pred = np.empty_like(y)
    chosen, n_train = [], 0
    for train, test in folds.split(feats, y, groups):
        ridge = _fit_ridge(feats[train], y[train], groups[train], alphas, rng)
        pred[test] = ridge.predict(feats[test]).reshape(len(test), y.shape[1])
        chosen.append(float(ridge.alpha))
        n_train = max(n_train, len(train))
    r2, per = _score(y, pred)
    return ProbeScore(r2=r2, r2_per_dim=per, n_train=n_train, n_test=len(y), n_splits=folds.get_n_splits(),
                      alphas=tuple(chosen))


def probe(emb_sim: np.ndarray, y_sim: np.ndarray, emb_real: np.ndarray, y_real: np.ndarray, *,
          episodes_sim: Sequence[Hashable] | None = None, episodes_real: Sequence[Hashable] | None = None,
          n_components: int = PROBE_N_COMPONENTS, alphas: Sequence[float] = ALPHAS,
          random_state: int | np.random.Generator | None = 0) -> ProbeResult:
    """Ridge probes from frozen embeddings to targets: sim->sim, real->real, sim->real.

    Args:
        emb_sim: (N_sim, D) sim embeddings, N_sim >= 8.
        y_sim: (N_sim,) or (N_sim, T) targets (actions, or proprio/pose), own units.
        emb_real: (N_real, D) real embeddings, N_real >= 8.
        y_real: (N_real,) or (N_real, T) targets, the same T and units as `y_sim`.
        episodes_sim, episodes_real: optional length-N episode ids per side.
        n_components: PCA components before the ridge, in [1, MAX_N_COMPONENTS]; default 128.
        alphas: ridge penalties to choose from (positive); default 1e-3 .. 1e5.
        random_state: seed.

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
    try:
        al = tuple(float(a) for a in np.atleast_1d(np.asarray(alphas, dtype=np.float64)))
    except (TypeError, ValueError):
        al = ()
    if not al or not all(np.isfinite(a) and a > 0 for a in al):
        raise InputError(f"Expected `alphas` a non-empty sequence of positive numbers, got {alphas!r}.")
    rng = make_rng(random_state)
    g_sim = factorize(cluster_keys(episodes_sim, len(sim), "sim", "episodes_sim")[0])
    g_real = factorize(cluster_keys(episodes_real, len(real), "real", "episodes_real")[0])

    proj_sim = fit_projection([Rows(sim)], n_components, rng)
    f_sim = proj_sim.transform(Rows(sim))  # (N_sim, k) float64
    s2s = _within(f_sim, ys, g_sim, rng, al, "sim")
    ridge = _fit_ridge(f_sim, ys, g_sim, al, rng)
    del f_sim  # one domain's features in memory at a time
    pred = np.empty_like(yr)
    for s in range(0, len(real), CHUNK_ROWS):  # real frames through the sim projection, chunk by chunk
        rows = Rows(real, np.arange(s, min(s + CHUNK_ROWS, len(real))))
        pred[s:s + len(rows)] = ridge.predict(proj_sim.transform(rows)).reshape(len(rows), yr.shape[1])
    r2, per = _score(yr, pred)
    proj_real = fit_projection([Rows(real)], n_components, rng)
    r2r = _within(proj_real.transform(Rows(real)), yr, g_real, rng, al, "real")
    s2r = ProbeScore(r2=r2, r2_per_dim=per, n_train=len(sim), n_test=len(real), n_splits=1,
                     alphas=(float(ridge.alpha),))
    log.debug("probe: sim->sim %s, real->real %s, sim->real %s", s2s.r2, r2r.r2, s2r.r2)
    return ProbeResult(sim_to_sim=s2s, real_to_real=r2r, sim_to_real=s2r, n_targets=ys.shape[1],
                       n_components=proj_sim.k)
