"""The camera stage of `run` and the `camera-model` job: sample, fit, attribute.

`camera_stage` samples at most `MAX_PAIRS` pairs (or frames per side when the sets share no pair
keys) among the frames every encoder embedded, decodes them once, fits the camera model
(`perception_gap.camera.fit`) and attributes each encoder's gap to its factors
(`perception_gap.camera.attribution`). `camera_model_job` fits the model alone, from the
statistics' findings, for `perception-gap camera-model`.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import numpy as np

from perception_gap.camera.attribution import MAX_PAIRS, Sample, attribute
from perception_gap.camera.fit import fit_camera_model
from perception_gap.camera.model import CameraModel
from perception_gap.camera.texture import JpegInfo
from perception_gap.catalog import Catalog
from perception_gap.pairing import pair_by_key

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]
CAMERA_MODEL_FILE = "camera_model.json"
MIN_FRAMES = 4  # per side: the fit needs 3 pairs, the floor two real frames a half
MAX_DECODED_BYTES = 1536 * 2**20  # the sample's decoded frames (256 pairs of 640 x 480 take 450 MiB)


def _item(r: dict[str, Any]) -> tuple:
    return (r["content_hash"], r["container_path"] or r["rgb_path"], r["member"], r["frame_index"], r["container_hash"])


def sample(catalog: Catalog, sim: str, real: str, fingerprints: list[str], *, max_pairs: int = MAX_PAIRS,
           random_state: int = 0) -> tuple[Sample, dict[str, tuple]]:
    """At most `max_pairs` pairs (by pair key; else frames per side) among frames embedded by every
    encoder, in a seeded random order (the counterfactual frames are the first ones).

    Returns:
        (Sample, {content hash: decode item}).
    """
    with catalog.session():
        rs, rr = catalog.embedded_frames(sim, fingerprints), catalog.embedded_frames(real, fingerprints)
    rng = np.random.default_rng(random_state)
    pairing = pair_by_key([s["pair_key"] for s in rs], [r["pair_key"] for r in rr])
    pairing.log_duplicates(f"camera sample {sim!r} vs {real!r}")
    pairs = [(rs[i], rr[j]) for i, j in pairing.pairs]
    items = {r["content_hash"]: _item(r) for r in rs + rr}
    # decoded frames are held once for the fit: the sample shrinks to stay within MAX_DECODED_BYTES
    per = [3 * (r["width"] or 0) * (r["height"] or 0) for r in rs + rr]
    mean_frame = max(float(np.mean(per)) if per else 1.0, 1.0)
    max_pairs = max(MIN_FRAMES, min(max_pairs, int(MAX_DECODED_BYTES / (2 * mean_frame))))
    if len(pairs) >= 8:
        pick = [pairs[i] for i in rng.permutation(len(pairs))[:max_pairs]]
        return Sample([s["content_hash"] for s, _ in pick], [r["content_hash"] for _, r in pick],
                      [s["episode"] for s, _ in pick], [r["episode"] for _, r in pick], True, max_pairs), items
    ps = [rs[i] for i in rng.permutation(len(rs))[:max_pairs]]
    pr = [rr[i] for i in rng.permutation(len(rr))[:max_pairs]]
    return Sample([s["content_hash"] for s in ps], [r["content_hash"] for r in pr], [s["episode"] for s in ps],
                  [r["episode"] for r in pr], False, max_pairs), items


def _quality(path: str) -> tuple[float | None, str]:
    """IJG quality and chroma subsampling of a JPEG file (None when it is not one)."""
    from PIL import Image

    from perception_gap.statistics.texture import jpeg_quality

    try:
        with Image.open(path) as im:
            if im.format != "JPEG":
                return None, "4:4:4"
            from PIL.JpegImagePlugin import get_sampling

            sub = {0: "4:4:4", 1: "4:2:2", 2: "4:2:0"}.get(get_sampling(im), "4:2:0")
            return jpeg_quality(getattr(im, "quantization", None)), sub
    except (OSError, ValueError):
        return None, "4:4:4"


def jpeg_info(sim_items: list[tuple], real_items: list[tuple], limit: int = 16) -> JpegInfo:
    """What the sampled files say about compression (the median quality of up to `limit` files a side)."""
    def side(items: list[tuple]) -> tuple[float | None, str]:
        files = [i[1] for i in items if i[2] is None][:limit]
        got = [_quality(p) for p in files]
        qs = [q for q, _ in got if q is not None]
        if not files or len(qs) < len(files) / 2:
            return None, "4:4:4"
        subs = [s for q, s in got if q is not None]
        return float(np.median(qs)), max(set(subs), key=subs.count)

    rq, rsub = side(real_items)
    sq, _ = side(sim_items)
    return JpegInfo(real_quality=rq, sim_quality=sq, subsampling=rsub)


def fit_from_sample(catalog: Catalog, sim: str, real: str, smp: Sample, items: dict[str, tuple],
                    findings: list[dict[str, Any]], random_state: int = 0
                    ) -> tuple[CameraModel, dict[str, np.ndarray], list[dict[str, str]]]:
    """Decode the sample, fit the model: (model, decoded sim frames by hash, skips)."""
    from perception_gap.embed import decode_frames

    want = list(dict.fromkeys(smp.sim_hashes + smp.real_hashes))
    decoded = decode_frames([items[h] for h in want])
    skips = [{"content_hash": h, "reason": v} for h, v in decoded.items() if isinstance(v, str)]
    ok = {h: v for h, v in decoded.items() if not isinstance(v, str)}
    if smp.paired:
        keep = [i for i, (s, r) in enumerate(zip(smp.sim_hashes, smp.real_hashes)) if s in ok and r in ok]
        smp.sim_hashes[:] = [smp.sim_hashes[i] for i in keep]
        smp.real_hashes[:] = [smp.real_hashes[i] for i in keep]
        smp.episodes_sim[:] = [smp.episodes_sim[i] for i in keep]
        smp.episodes_real[:] = [smp.episodes_real[i] for i in keep]
    else:
        ks = [i for i, h in enumerate(smp.sim_hashes) if h in ok]
        kr = [i for i, h in enumerate(smp.real_hashes) if h in ok]
        smp.sim_hashes[:], smp.episodes_sim[:] = [smp.sim_hashes[i] for i in ks], [smp.episodes_sim[i] for i in ks]
        smp.real_hashes[:], smp.episodes_real[:] = [smp.real_hashes[i] for i in kr], [smp.episodes_real[i] for i in kr]
    jp = jpeg_info([items[h] for h in smp.sim_hashes], [items[h] for h in smp.real_hashes])
    model = fit_camera_model([ok[h] for h in smp.sim_hashes], [ok[h] for h in smp.real_hashes], paired=smp.paired,
                             episodes_sim=smp.episodes_sim, episodes_real=smp.episodes_real, findings=findings,
                             jpeg=jp, random_state=random_state, sim_name=sim, real_name=real)
    return model, {h: ok[h] for h in smp.sim_hashes}, skips


def camera_stage(catalog: Catalog, sim: str, real: str, findings: list[dict[str, Any]], encoders: list[Any], *,
                 progress: Progress | None = None, random_state: int = 0, batch_size: int = 32
                 ) -> tuple[dict[str, Any] | None, dict[str, dict[str, Any]]]:
    """(the `camera_model` section, {encoder name: attribution}); (None, {}) when the sample is too small
    (under `MIN_FRAMES` a side)."""
    if not encoders:
        return None, {}
    t0 = time.perf_counter()
    smp, items = sample(catalog, sim, real, [e.fingerprint for e in encoders], random_state=random_state)
    if min(len(smp.sim_hashes), len(smp.real_hashes)) < MIN_FRAMES:
        return None, {}
    model, frames, skips = fit_from_sample(catalog, sim, real, smp, items, findings, random_state)
    t1 = time.perf_counter()

    def vectors(enc: Any, hashes: list[str]) -> dict[str, np.ndarray]:
        cf = [h for h in hashes if h.startswith("cf:")]
        with catalog.session():
            return {**catalog.vectors_by_hash(enc.fingerprint, [h for h in hashes if not h.startswith("cf:")]),
                    **catalog.vectors_by_hash(enc.fingerprint, cf, counterfactual=True)}

    def store(enc: Any, keys: list[str], vec: np.ndarray) -> None:
        catalog.write_counterfactuals(enc.name, enc.fingerprint, keys, vec)

    attr = attribute(encoders, model, smp, frames, vectors=vectors, store=store, progress=progress,
                     random_state=random_state, batch_size=batch_size)
    t2 = time.perf_counter()
    log.info("camera stage: sample and fit %.1fs, attribution %.1fs (%d encoders)", t1 - t0, t2 - t1, len(encoders))
    section = {**model.to_dict(), "sample": {"n": len(smp.sim_hashes), "max_pairs": smp.max_pairs,
                                             "paired": smp.paired, "skipped": skips},
               "seconds": {"sample_and_fit": round(t1 - t0, 2), "attribution": round(t2 - t1, 2)}}
    return section, attr


def camera_model_job(catalog: Catalog, sim: str, real: str, *, workers: int | None = None, random_state: int = 0,
                     progress: Progress | None = None) -> tuple[CameraModel, dict[str, Any]]:
    """The camera model of two indexed sets, from their statistics and a sample of their frames
    (no encoder): (model, the statistics' results)."""
    from perception_gap.workflows.stats import stats_job

    res = stats_job(catalog, sim, real, workers=workers, progress=progress)
    smp, items = sample(catalog, sim, real, [], random_state=random_state)
    model, _, _ = fit_from_sample(catalog, sim, real, smp, items, res["findings"], random_state)
    return model, res
