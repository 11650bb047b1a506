"""Paired cosine distance 1 - cos(e_sim, e_real) at matched pair keys, against mismatched pairs."""

from __future__ import annotations

import logging

import numpy as np

from perception_gap.errors import InputError, InsufficientData
from perception_gap.metrics.results import PairedCosine
from perception_gap.metrics.validation import CHUNK_ROWS, check_embedding_pair

log = logging.getLogger(__name__)


def pair_cosine_distances(emb_sim: np.ndarray, emb_real: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """(P,) 1 - cos(e_sim[i], e_real[j]) for each matched pair (i, j); 0-norm vectors give 1.

    The per-pair values behind `paired_cosine`, e.g. to show the worst pairs.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    u = np.asarray(emb_sim, dtype=np.float64)[pairs[:, 0]]
    v = np.asarray(emb_real, dtype=np.float64)[pairs[:, 1]]
    nu = np.linalg.norm(u, axis=1)
    nv = np.linalg.norm(v, axis=1)
    denom = np.where((nu > 0) & (nv > 0), nu * nv, 1.0)
    cos = np.clip(np.einsum("ij,ij->i", u, v) / denom, -1.0, 1.0)
    return 1.0 - cos


def paired_cosine(emb_sim: np.ndarray, emb_real: np.ndarray, pairs: np.ndarray, *,
                  random_state: int | np.random.Generator | None = 0) -> PairedCosine:
    """Cosine distance 1 - cos at matched pairs, against the mismatched-pairs reference.

    `shuffled_mean` is the exact expectation of the mean over a uniformly random derangement
    of the real sides: the mean of 1 - cos(u_i, v_j) over all i != j, computed in O(P D) as
    1 - ((sum_i u_i) . (sum_j v_j) - sum_i u_i . v_i) / (P (P - 1)) on unit vectors. It is
    therefore deterministic; `random_state` is accepted for a uniform signature only.

    Args:
        emb_sim: (N_sim, D) sim embeddings.
        emb_real: (N_real, D) real embeddings.
        pairs: (P, 2) integer (i_sim, i_real) rows, P >= 2.

    Returns:
        PairedCosine.
    """
    del random_state  # deterministic: the shuffled reference is an exact expectation
    sim, real = check_embedding_pair(emb_sim, emb_real)
    p = np.asarray(pairs)
    if p.size == 0:
        p = p.reshape(0, 2)
    if p.ndim != 2 or p.shape[1] != 2 or (p.size and p.dtype.kind not in "iu"):
        raise InputError("Expected `pairs` an integer array of shape (P, 2), "
                         f"got shape {p.shape} of dtype {p.dtype}.")
    if len(p) < 2:
        raise InsufficientData(f"Expected at least 2 matched pairs for the paired cosine distance, got {len(p)}.")
    for col, emb, side in ((0, sim, "sim"), (1, real, "real")):
        if p[:, col].min() < 0 or p[:, col].max() >= len(emb):
            raise InputError(f"Expected {side} indices of `pairs` in [0, {len(emb) - 1}], "
                             f"got values in [{p[:, col].min()}, {p[:, col].max()}].")
    n = len(p)
    cos = np.empty(n)
    sum_u = np.zeros(sim.shape[1])
    sum_v = np.zeros(sim.shape[1])
    n_zero = 0
    for s in range(0, n, CHUNK_ROWS):
        u = np.asarray(sim[p[s:s + CHUNK_ROWS, 0]], dtype=np.float64)
        v = np.asarray(real[p[s:s + CHUNK_ROWS, 1]], dtype=np.float64)
        nu = np.linalg.norm(u, axis=1)
        nv = np.linalg.norm(v, axis=1)
        n_zero += int(((nu == 0) | (nv == 0)).sum())
        u /= np.where(nu > 0, nu, 1.0)[:, None]  # a zero vector stays zero: cos 0
        v /= np.where(nv > 0, nv, 1.0)[:, None]
        cos[s:s + len(u)] = np.einsum("ij,ij->i", u, v)
        sum_u += u.sum(axis=0)
        sum_v += v.sum(axis=0)
    if n_zero:
        log.warning("%d of %d pairs have an all-zero embedding; their cosine counts as 0", n_zero, n)
    np.clip(cos, -1.0, 1.0, out=cos)
    dist = 1.0 - cos
    off_diag = (float(sum_u @ sum_v) - float(cos.sum())) / (n * (n - 1))
    return PairedCosine(mean=float(dist.mean()), median=float(np.median(dist)), p90=float(np.percentile(dist, 90)),
                        shuffled_mean=float(min(2.0, max(0.0, 1.0 - off_diag))), n_pairs=n, n_zero_norm=n_zero)
