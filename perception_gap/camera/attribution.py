"""What closes each encoder's gap: the measured camera factors applied to sim frames, re-embedded.

For each encoder the gap is the distance between the sim and the real centroids of the sample's
embeddings, read in one fixed frame (`Ruler`: the embedding space centred on the sample, in units
of its spread), above a noise floor:

- paired (each sim frame against its own real frame): the floor is the pairs' own chance scatter
  (the standard error of the mean paired difference, `paired_floor`), removed in quadrature,
  gap = sqrt(max(D^2 - floor^2, 0)), each variant against its own scatter;
- unpaired: the real-vs-real floor of two halves of the real sample (by episode where there are
  enough), scaled to the sizes compared, subtracted as the headline does, gap = D - floor.

A counterfactual replaces the sim frames by the sim frames through some factors of the camera
model; a factor's **share** is the fraction of the gap it closes:

    share = (gap(sim) - gap(sim')) / gap(sim)

Each factor is applied alone, then cumulatively in urgency order (pipeline fixes first); the
cumulative steps form the waterfall, the last one is `all`, and `residual = 1 - all` is what the
camera does not explain (content, materials, lighting). Shares are not clipped: a factor that
moves the sim past the floor closes more than 1, one that moves it away closes less than 0.
Intervals come from a bootstrap over episodes (else pairs, else frames) in which every
counterfactual is read on the same draw; when the gap's own interval reaches below half its
estimate (`CLEAR_GAP`) the shares would read noise and are reported as 0 with a note.

Cost: the counterfactual frames are the sample's first `m` sim frames (m chosen so that all
variants together embed at most `BUDGET` times the sample's own frames: `m <= BUDGET * 2n / V`
for n pairs and V variants, at least `MIN_COUNTERFACTUAL`), transformed once and embedded by
every encoder, and cached in the catalog under a key derived from the frame's content hash and
the variant's factors.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from perception_gap.camera import ops
from perception_gap.camera.fit import resampling_units
from perception_gap.camera.model import CameraModel, apply_factors
from perception_gap.metrics.settings import LEVEL, REPLICATES

MAX_PAIRS = 256
BUDGET = 0.8  # variants' embeddings against the sample's own; decoding, fitting and transforming take the rest of 1.5x
MIN_COUNTERFACTUAL = 16
N_BOOT = REPLICATES["camera"]
CI_LEVEL = LEVEL
CLEAR_GAP = 0.5
OPS_VERSION = 1  # part of every counterfactual's cache key: bump when an operator changes

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Variant:
    """One counterfactual: the factors applied (`codes`), `alone` or `cumulative`."""

    kind: str
    codes: tuple[str, ...]

    def key(self, model: CameraModel) -> str:
        sub = model.only(self.codes)
        blob = json.dumps([OPS_VERSION, [f.to_dict() for f in sub.factors]], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:24]


def variants(model: CameraModel) -> list[Variant]:
    """Each factor alone, then the cumulative subsets past the first (urgency order)."""
    codes = model.codes()
    out = [Variant("alone", (c,)) for c in codes]
    out += [Variant("cumulative", tuple(codes[: k + 1])) for k in range(1, len(codes))]
    return out


def counterfactual_size(n: int, n_variants: int, paired: bool) -> int:
    """Sim frames re-embedded per variant: the budget shared by the variants (see the module docstring)."""
    if n_variants == 0:
        return 0
    ref = 2 * n if paired else n
    return int(min(n, max(MIN_COUNTERFACTUAL, math.floor(BUDGET * ref / n_variants))))


def derived_hash(content_hash: str, variant_key: str) -> str:
    """The cache key of a counterfactual frame: never a real content hash (prefixed)."""
    return "cf:" + hashlib.sha256(f"{content_hash}|{variant_key}".encode()).hexdigest()[:40]


def frame_seed(content_hash: str) -> int:
    return int(hashlib.sha256(content_hash.encode()).hexdigest()[:16], 16)


def make_variant_frames(frame: np.ndarray, content_hash: str, model: CameraModel,
                        vs: list[Variant]) -> list[np.ndarray]:
    """The frame through each variant's factors, uint8; sensor noise drawn from the frame's own
    seed, so two variants that both add noise add the same noise."""
    v = frame.astype(np.float32) * ops.LEVEL
    out = []
    for var in vs:
        rng = np.random.default_rng(frame_seed(content_hash))
        out.append(ops.to_u8(apply_factors(v, model.only(var.codes), rng)))
    return out


def _ci(s: np.ndarray) -> list[float]:
    """The engine's interval (`metrics.bootstrap.centred_ci`) of a statistic given as [estimate, replicates...]."""
    from perception_gap.metrics.bootstrap import centred_ci

    reps = s[1:][np.isfinite(s[1:])]
    if not reps.size or not np.isfinite(s[0]):
        return [math.nan, math.nan]
    lo, hi, _ = centred_ci(reps, float(s[0]), CI_LEVEL)
    return [round(lo, 4), round(hi, 4)]


@dataclass
class Ruler:
    """The fixed frame every counterfactual is read in: the embedding space itself, centred on the
    sample and divided by the sample's spread (its root mean square distance to the pooled centroid),
    so that distances are unit-free; shares, being ratios, do not depend on the unit at all.

    Not the headline's PCA and per-component min-max: that recipe gives a low-variance component the
    weight of the main ones, and a counterfactual that moves along it (a vignette nudging a few
    histogram bins of the pixel baseline) would read as a large move while the embeddings barely
    changed."""

    mean: np.ndarray
    scale: float

    def z(self, emb: np.ndarray) -> np.ndarray:
        return (emb.astype(np.float64) - self.mean) / self.scale

    def dist(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Euclidean distance between mean rows (..., D) of two sides."""
        d = a - b
        return np.sqrt((d * d).sum(-1))


def ruler(emb_sim: np.ndarray, emb_real: np.ndarray) -> Ruler:
    """The ruler of a sample: centred on its pooled sim and real embeddings, in units of their spread."""
    x = np.vstack([emb_sim, emb_real]).astype(np.float64)
    mu = x.mean(0)
    spread = float(np.sqrt(((x - mu) ** 2).sum(1).mean()))
    return Ruler(mu, spread if spread > 0 else 1.0)


def _weighted_mean(z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(B, n) weights x (n, k) rows -> (B, k) weighted means."""
    return (w @ z) / np.maximum(w.sum(1, keepdims=True), 1e-12)


def draws(units: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(N_BOOT + 1, n) frame weights: row 0 the sample itself, then cluster-bootstrap draws of the units."""
    g = int(units.max()) + 1
    c = rng.multinomial(g, np.full(g, 1.0 / g), size=N_BOOT).astype(np.float64)
    return np.vstack([np.ones((1, g)), c])[:, units]


def floor_draws(r: Ruler, z_real: np.ndarray, half_a: np.ndarray, half_b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The real-vs-real floor under each draw: the distance between the two halves' weighted centroids."""
    wa, wb = np.zeros_like(w), np.zeros_like(w)
    wa[:, half_a], wb[:, half_b] = w[:, half_a], w[:, half_b]
    return r.dist(_weighted_mean(z_real, wa), _weighted_mean(z_real, wb))


def paired_floor(r: Ruler, d: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The floor of a paired comparison under each draw: the distance the pairs' own scatter gives
    by chance, i.e. the standard error of the mean paired difference per component, read with the
    ruler. Both sides show the same scenes, so the real-vs-real floor of two halves (different
    scenes) does not apply; with no difference at all it is 0."""
    tot = np.maximum(w.sum(1, keepdims=True), 1e-12)
    mean = (w @ d) / tot
    var = np.maximum((w @ (d * d)) / tot - mean * mean, 0.0)
    return np.sqrt((var / np.maximum(tot, 1.0)).sum(1))


def shares(r: Ruler, z_sim: np.ndarray, z_real: np.ndarray, z_vars: list[np.ndarray], ws: np.ndarray,
           wr: np.ndarray, floor: np.ndarray | None) -> dict[str, Any]:
    """Each side's gap above its floor under each draw (ws for sim rows, wr for real rows), and the
    share of the sim's gap each variant closes.

    Unpaired (`floor` given, the real-vs-real floor): gap = D - floor, as the engine's headline.
    Paired (`floor` None; z_sim[i] pairs with z_real[i], ws is wr): the floor is the pairs' own
    chance scatter (`paired_floor`), removed in quadrature, gap = sqrt(max(D^2 - floor^2, 0)): noise
    adds to a distance in quadrature, and each variant is read against its own scatter.
    """
    mr = _weighted_mean(z_real, wr)

    def gap(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d = r.dist(_weighted_mean(z, ws), mr)
        if floor is not None:
            return d, floor, d - floor
        f = paired_floor(r, z - z_real, ws)
        return d, f, np.sqrt(np.maximum(d * d - f * f, 0.0))

    d0, f0, g0 = gap(z_sim)
    gv = [gap(zv)[2] for zv in z_vars]
    with np.errstate(divide="ignore", invalid="ignore"):
        sh = [np.where(g0 > 1e-9, (g0 - g) / g0, np.nan) for g in gv]
    return {"d0": d0, "floor": f0, "gap": g0, "dv": gv, "shares": sh}


def attribution_entry(model: CameraModel, vs: list[Variant], res: dict[str, Any], *, n_pairs: int, m: int,
                      paired: bool) -> dict[str, Any]:
    """The `encoders[i].attribution` record (docs/contract-additions.md) from `shares`' output."""
    d0, floor, gap = res["d0"], res["floor"], res["gap"]
    # shares divide by the gap: it must be known to within a factor of two (its interval's lower
    # end at least half the estimate), or every share would read its noise
    clear = bool(gap[0] > 0 and _ci(gap)[0] >= CLEAR_GAP * gap[0])
    base = {"n_pairs": n_pairs,
            "n_counterfactual": m, "n_variants": len(vs), "basis": "pairs" if paired else "sets",
            "metric": "Euclidean centroid distance of the embeddings, in units of the sample's spread",
            "distance": round(float(d0[0]), 4), "floor": round(float(floor[0]), 4),
            "gap_above_floor": round(float(gap[0]), 4), "gap_ci": _ci(gap), "clear_gap": clear}
    by = {v: i for i, v in enumerate(vs)}
    codes = model.codes()

    def share(i: int) -> tuple[float, list[float]]:
        s = res["shares"][i]
        return (round(float(s[0]), 4), _ci(s)) if clear else (0.0, [0.0, 0.0])

    factors = []
    prev = np.zeros(N_BOOT + 1)
    for k, f in enumerate(model.factors):
        alone = share(by[Variant("alone", (f.code,))])
        ci_idx = by[Variant("cumulative", tuple(codes[: k + 1]))] if k else by[Variant("alone", (f.code,))]
        cum = res["shares"][ci_idx]
        step = cum - prev
        factors.append({"code": f.code, "params": dict(f.params), "share": alone[0], "ci": alone[1],
                        "cumulative": round(float(cum[0]), 4) if clear else 0.0,
                        "cumulative_ci": _ci(cum) if clear else [0.0, 0.0],
                        "step": round(float(step[0]), 4) if clear else 0.0,
                        "step_ci": _ci(step) if clear else [0.0, 0.0]})
        prev = cum
    if factors and clear:
        last = prev
        all_ = {"share": round(float(last[0]), 4), "ci": _ci(last)}
        residual = {"share": round(1.0 - float(last[0]), 4), "ci": _ci(1.0 - last)}
    elif clear:
        all_, residual = {"share": 0.0, "ci": [0.0, 0.0]}, {"share": 1.0, "ci": [1.0, 1.0]}
    else:
        all_, residual = {"share": 0.0, "ci": [0.0, 0.0]}, {"share": 0.0, "ci": [0.0, 0.0]}
    note = None if clear else ("no gap clearly above the noise floor in the sample (its interval's lower end under "
                               "half the estimate): nothing to attribute")
    return {**base, "factors": factors, "all": all_, "residual": residual, "note": note}


@dataclass
class Sample:
    """The frames attribution reads: sampled pairs (or frames per side) with their embeddings' keys.

    sim_hashes/real_hashes: content hashes in sample order (paired: sim_hashes[i] pairs with
    real_hashes[i]); episodes per side; max_pairs: the cap the sample was drawn under (`MAX_PAIRS`,
    lower for large frames).
    """

    sim_hashes: list[str]
    real_hashes: list[str]
    episodes_sim: list[Any]
    episodes_real: list[Any]
    paired: bool
    max_pairs: int = MAX_PAIRS


def attribute(encoders: list[Any], model: CameraModel, sample: Sample, sim_frames: dict[str, np.ndarray], *,
              vectors: Callable[[Any, list[str]], dict[str, np.ndarray]],
              store: Callable[[Any, list[str], np.ndarray], None],
              progress: Progress | None = None, random_state: int = 0,
              batch_size: int = 32) -> dict[str, dict[str, Any]]:
    """`attribution` per encoder name (see the module docstring).

    Args:
        encoders: loaded engine encoders (name, fingerprint, preprocess, encode).
        model: the fitted camera model.
        sample: what to read; its first `counterfactual_size(...)` sim frames are transformed.
        sim_frames: decoded uint8 frames by content hash (at least the counterfactual ones).
        vectors: (encoder, hashes) -> {hash: vector} already cached (originals and counterfactuals).
        store: (encoder, hashes, (N, D) vectors) -> None, caches new counterfactual vectors.
    """
    from perception_gap.encoders.base import output_problem
    from perception_gap.errors import InputError

    vs = variants(model)
    n = len(sample.sim_hashes)
    m = counterfactual_size(n, len(vs), sample.paired)
    cf = [h for h in sample.sim_hashes[:m] if h in sim_frames][:m]
    keys = [v.key(model) for v in vs]
    todo: dict[str, list[tuple[str, int, int]]] = {}  # encoder name -> [(derived hash, frame i, variant j)]
    have: dict[str, dict[str, np.ndarray]] = {}
    for enc in encoders:
        want = [derived_hash(h, k) for h in cf for k in keys]
        got = vectors(enc, want) if want else {}
        have[enc.name] = got
        todo[enc.name] = [(derived_hash(h, k), i, j) for i, h in enumerate(cf) for j, k in enumerate(keys)
                          if derived_hash(h, k) not in got]
    frames_needed = sorted({i for t in todo.values() for _, i, _ in t})
    total = len(frames_needed)
    done = 0
    step = max(1, batch_size // max(1, len(vs)))
    for b0 in range(0, total, step):
        idx = frames_needed[b0:b0 + step]
        made = {i: make_variant_frames(sim_frames[cf[i]], cf[i], model, vs) for i in idx}
        for enc in encoders:
            items = [(dh, i, j) for dh, i, j in todo[enc.name] if i in made]
            if not items:
                continue
            vec = enc.encode(enc.preprocess([made[i][j] for _, i, j in items]))
            problem = output_problem(enc.name, vec, len(items), enc.dim)
            if problem is not None:
                raise InputError(problem)
            store(enc, [dh for dh, _, _ in items], vec)
            have[enc.name].update({dh: v for (dh, _, _), v in zip(items, vec)})
        done += len(idx)
        if progress:
            progress(done, total)
    out = {}
    for enc in encoders:
        out[enc.name] = _one(enc, model, vs, keys, sample, cf, have[enc.name], vectors, random_state)
    return out


def _one(enc: Any, model: CameraModel, vs: list[Variant], keys: list[str], sample: Sample, cf: list[str],
         have: dict[str, np.ndarray], vectors: Callable[[Any, list[str]], dict[str, np.ndarray]],
         random_state: int) -> dict[str, Any]:
    from perception_gap.metrics.centroid import noise_floor_halves

    orig = vectors(enc, list(dict.fromkeys(sample.sim_hashes + sample.real_hashes)))
    es = np.array([orig[h] for h in sample.sim_hashes if h in orig])
    er = np.array([orig[h] for h in sample.real_hashes if h in orig])
    n = len(sample.sim_hashes)
    if len(es) < 4 or len(er) < 4 or len(es) != n or len(er) != len(sample.real_hashes):
        return {"note": "embeddings missing for part of the sample", "factors": [], "all": None, "residual": None,
                "n_pairs": n if sample.paired else None}
    r = ruler(es, er)
    zs, zr = r.z(es), r.z(er)
    m = len(cf)
    z_vars = [r.z(np.array([have[derived_hash(h, k)] for h in cf])) for k in keys]
    rng = np.random.default_rng(random_state)
    if m == 0:  # an empty model: the gap is still read (on the frames a variant would have used)
        m = min(len(zs), len(zr) if sample.paired else len(zs), MIN_COUNTERFACTUAL)
    if sample.paired:  # each counterfactual frame against its own real partner, same draws
        ws = draws(resampling_units(sample.episodes_sim[:m], m), rng)
        res = shares(r, zs[:m], zr[:m], z_vars, ws, ws, None)
    else:
        half_a, half_b, _, _ = noise_floor_halves(len(er), sample.episodes_real)
        w_all = draws(resampling_units(sample.episodes_real, len(er)), rng)
        # the halves' distance, scaled to the sizes compared (m sim frames against every real one):
        # sampling noise in a centroid distance goes as sqrt(1/n_a + 1/n_b)
        scale = math.sqrt((1 / m + 1 / len(er)) / (1 / len(half_a) + 1 / len(half_b)))
        floor = scale * floor_draws(r, zr, half_a, half_b, w_all)
        res = shares(r, zs[:m], zr, z_vars, draws(resampling_units(sample.episodes_sim[:m], m), rng), w_all, floor)
    return attribution_entry(model, vs, res, n_pairs=n, m=m, paired=sample.paired)
