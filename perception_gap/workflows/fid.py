"""FID and KID of the reference implementations, from a local FID Inception weights file.

`run --inception-weights FILE` embeds both sets through `fid-inception:FILE` (pytorch-fid's
FID Inception v3, `perception_gap.encoders.fid_inception`), cached like any encoder's vectors,
and measures the Frechet distance and KID of those 2048-d pool features with the same functions
and the same episode-grouped bootstrap as every encoder's `frechet_distance` and `kid`. The
Frechet distance is the exact one (`metrics.frechet`: the trace of the matrix square root as a
nuclear norm); pytorch-fid's `calculate_frechet_distance` (scipy `sqrtm`, plus a 1e-6 diagonal
offset when the product is singular) gives the same number to its rounding when there are more
frames than dimensions, and a rounding-dependent approximation of it otherwise. The section is
results.json's `fid` (docs/contract-additions.md); the encoder ranking never reads it.
"""

from __future__ import annotations

from typing import Any, Callable

from perception_gap.catalog import Catalog
from perception_gap.embed import load_encoder
from perception_gap.errors import InsufficientData
from perception_gap.metrics import frechet_distance_ci, kid_ci
from perception_gap.metrics.settings import Resampling
from perception_gap.pairing import pair_by_key
from perception_gap.schema.sections import FrechetEntry, KIDEntry

FID_PREFIX = "fid-inception:"
IMPLEMENTATION = ("pytorch-fid FID Inception v3 (TF-ported weights, FID blocks): 2048-d final average pool; "
                  "frames resized to 299 x 299 bilinear (float, align_corners False), scaled to [-1, 1]")


def fid_encoder(weights: str, *, device: str = "auto", precision: str = "fp32") -> Any:
    """The FID Inception encoder of a weights file, checked now (one-line `InputError` otherwise:
    a missing file, a pickle that would run code, another network's state dict). `run` keeps the
    reference's fp32 whatever its `--precision`."""
    return load_encoder(FID_PREFIX + str(weights), device=device, precision=precision)


def fid_section(catalog: Catalog, sim: str, real: str, encoder: Any, *, groups: Callable[..., list[Any]],
                random_state: int = 0, resampling: Resampling = Resampling()) -> dict[str, Any]:
    """results.json's `fid` for two sets already embedded through `encoder` (a `fid_encoder`).

    Args:
        groups: (frames of one side, frames of the other) -> cluster id per frame, the resampling
            units of `run` (`workflows.run._groups`: episodes, else matched pairs).

    Returns:
        {value, ci, mean_term, kid {value, ci, std, n_subsets, subset_size}, n_sim, n_real, dim,
        weights, weights_sha256, reference_weights, fingerprint, implementation, insufficient};
        value/ci None (and `insufficient` saying why) when a side has fewer than two frames.
    """
    meta_s, emb_s = catalog.load_embeddings(sim, encoder.fingerprint)
    meta_r, emb_r = catalog.load_embeddings(real, encoder.fingerprint)
    out: dict[str, Any] = {
        "value": None, "ci": None, "mean_term": None, "kid": None, "n_sim": len(meta_s), "n_real": len(meta_r),
        "dim": encoder.dim, "weights": encoder.weights, "weights_sha256": encoder.weights_sha256,
        "reference_weights": encoder.reference_weights, "fingerprint": encoder.fingerprint,
        "implementation": IMPLEMENTATION, "insufficient": None,
    }
    grp_s, grp_r = groups(meta_s, meta_r), groups(meta_r, meta_s)
    pairing = pair_by_key([m["pair_key"] for m in meta_s], [m["pair_key"] for m in meta_r])
    pairing.log_duplicates(f"{encoder.name} embeddings")
    pairs = pairing.array()
    try:
        boot = {"n_boot": resampling.n("distance"), "ci": resampling.ci()}
        fd = frechet_distance_ci(emb_s, emb_r, episodes_sim=grp_s, episodes_real=grp_r, random_state=random_state, **boot,
                                 pairs=pairs)
        kd = kid_ci(emb_s, emb_r, episodes_sim=grp_s, episodes_real=grp_r, random_state=random_state, pairs=pairs,
                    **boot)
    except InsufficientData as e:
        out["insufficient"] = str(e)
        return out
    out.update(FrechetEntry.from_result(fd).to_dict(), kid=KIDEntry.from_result(kd).to_dict())
    return out
