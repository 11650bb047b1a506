"""The detection part of a run: each detector against ground truth on sim and on real frames.

Reads the boxes stored in the catalog, hands them to the pure functions of
`perception_gap.detection` and turns the result into the `detection` section of results.json
and its findings (`detector_gap`, `self_inflicted_gap`). A significant AP difference under the
practical size (`detection.practical`), with no flip, is a `detector_gap` of severity `info`.
"""

from __future__ import annotations

from typing import Any

from perception_gap import detection
from perception_gap.catalog import Catalog
from perception_gap.detection import Box
from perception_gap.errors import InsufficientData
from perception_gap.findings import Finding
from perception_gap.metrics.settings import Resampling
from perception_gap.pairing import pair_by_key


def boxes_from_rows(per_frame: dict[str, list[dict[str, Any]]]) -> dict[str, list[Any]]:
    return {path: [Box(category=b["category"], bbox=tuple(b["bbox"]), score=b["score"], area=b["area"],
                       iscrowd=b["iscrowd"]) for b in boxes] for path, boxes in per_frame.items()}


# Detector-on-sim against sim ground truth below this AP means the policy's sim input (ground
# truth) and hardware input (the detector) differ materially.
SELF_INFLICTED_AP = 0.9


def _detector_gap(source: str, ap_s: float, ap_r: float, d: dict[str, Any], flips: Any) -> Finding:
    """The `detector_gap` of a significant AP difference: a gap, or an info when the difference is
    under the practical size with no flip and overlapping recall intervals (`detection.practical`)."""
    low, high = d["low"], d["high"]
    worse = "real" if low > 0 else "sim"
    size = detection.practical_size(ap_s, ap_r, flips)
    ev = {"source": source, "ap_sim": ap_s, "ap_real": ap_r, "ci": d, "flips": flips.to_dict(),
          "practical": size.to_dict()}
    measured = (f"Detector {source!r} reaches AP {ap_s:.3f} on sim but {ap_r:.3f} on real "
                f"(difference 95% CI {low:+.3f} to {high:+.3f})")
    if size.negligible:
        rs = size.recall_sim_ci
        return Finding(
            code="detector_gap", severity="info",
            title=(f"{measured}: worse on {worse} by {abs(size.ap_difference):.3f}, under the practical size "
                   f"{size.size:g}, with no object found on one side and missed on the other of its pair "
                   f"({size.n_objects} objects; recall 95% CI {rs[0]:.2f}-{rs[1]:.2f} on sim, overlapping real's)"),
            evidence=ev,
            action=("No retraining is called for: the detector finds the same objects on both sides and the AP "
                    f"difference is under {size.size:g}; compare box tightness per class only if the policy "
                    "reads box edges."),
            score=float(abs(ap_s - ap_r)))
    return Finding(
        code="detector_gap", severity="gap", title=f"{measured}; it is worse on {worse}", evidence=ev,
        action=("Train or fine-tune the detector on real frames (or randomize the sim appearance it "
                "sees); " + (f"look first at the {flips.sim_only} object(s) found in sim but lost on real "
                             "(flip examples)." if flips.sim_only else
                             "no object is found in sim and lost on real at its matching frame, so compare "
                             "per-class AP and box quality instead.")) if worse == "real" else
               "The detector does worse on sim frames: check the sim's rendering of the objects it misses.",
        score=float(abs(ap_s - ap_r)))


def detection_results(catalog: Catalog, sim: str, real: str, *, random_state: int = 0,
                      resampling: Resampling = Resampling()) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The `detection` part of results.json and its findings; (None, []) when no set has boxes.

    A figure that the boxes cannot give (ground truth with no object on one side) is listed under
    `not_measurable` with its reason, and as an `insufficient_data` finding; the rest still stands.
    """
    with catalog.session():
        ann = {sim: catalog.load_annotations(sim), real: catalog.load_annotations(real)}
    if not ann[sim] and not ann[real]:
        return None, []
    sizes = {name: {p: (w, h) for p, _k, w, h in catalog.frame_sizes(name)} for name in (sim, real)}
    keys = {name: {p: k for p, k, _w, _h in catalog.frame_sizes(name)} for name in (sim, real)}
    out: dict[str, Any] = {"sets": {}, "differences": {}, "flips": {}, "latching": {}, "not_measurable": {}}
    findings: list[Finding] = []
    gts = {name: boxes_from_rows(ann[name]["gt"]) for name in (sim, real) if "gt" in ann[name]}
    for name in (sim, real):
        out["sets"][name] = {}
        gt = gts.get(name)
        if gt is None:
            continue
        for source, per_frame in sorted(ann[name].items()):
            if source == "gt":
                continue
            dets = boxes_from_rows(per_frame)
            try:
                summary = detection.coco_summary(gt, dets, {p: sizes[name][p] for p in gt if p in sizes[name]})
            except InsufficientData as e:
                out["not_measurable"][f"AP of {source!r} on {name!r}"] = str(e)
                continue
            out["sets"][name][source] = summary.to_dict()
            out["latching"].setdefault(name, {})[source] = detection.latching(gt, dets).to_dict()
    path_s, path_r = list(keys[sim]), list(keys[real])
    pairing = pair_by_key([keys[sim][p] for p in path_s], [keys[real][p] for p in path_r])
    pairing.log_duplicates(f"detection {sim!r} vs {real!r}")
    pairs = [(path_s[i], path_r[j]) for i, j in pairing.pairs]
    for source in sorted(set(out["sets"].get(sim, {})) & set(out["sets"].get(real, {}))):
        ds = boxes_from_rows(ann[sim][source])
        dr = boxes_from_rows(ann[real][source])
        pp = [(a, b) for a, b in pairs if a in gts[sim] and b in gts[real]]
        if not pp:
            continue
        flips = detection.pair_flips(gts[sim], ds, gts[real], dr, pp, sizes={**sizes[sim], **sizes[real]})
        out["flips"][source] = flips.to_dict()
        try:
            diff = detection.ap_difference_ci(gts[sim], ds, gts[real], dr, pp, random_state=random_state,
                                              n_boot=resampling.n("detection"), ci=resampling.ci())
        except InsufficientData as e:  # e.g. ground truth with no box on one side: the rest still stands
            out["not_measurable"][f"sim-vs-real AP difference of {source!r}"] = str(e)
            continue
        d = diff.to_dict()
        out["differences"][source] = d
        ap_s, ap_r = out["sets"][sim][source].get("AP"), out["sets"][real][source].get("AP")
        low, high = d.get("low"), d.get("high")
        if ap_s is not None and ap_r is not None and low is not None and (low > 0 or high < 0):
            findings.append(_detector_gap(source, ap_s, ap_r, d, flips))
    if sim in gts:
        for source, summ in sorted(out["sets"][sim].items()):
            ap = summ.get("AP")
            if ap is not None and ap < SELF_INFLICTED_AP:
                findings.append(Finding(
                    code="self_inflicted_gap", severity="gap",
                    title=f"In sim, detector {source!r} reaches only AP {ap:.3f} against the sim's own ground truth: "
                          "if the policy is fed ground truth in sim and this detector on hardware, its input "
                          "changes between the two",
                    evidence={"source": source, "ap_sim": ap, "threshold": SELF_INFLICTED_AP},
                    action="Train the policy on detector output in sim (run the detector in the loop), or give the "
                           "hardware policy the same interface as in sim; this gap is self-inflicted.",
                    score=float(SELF_INFLICTED_AP - ap)))
    findings.extend(Finding(
        code="insufficient_data", severity="info", title=f"Detection {what} not computed: {reason}",
        evidence={"metric": f"detection {what}", "reason": reason},
        action="Give ground-truth boxes on both sides (at least one object in the paired frames of each).",
        score=0.0) for what, reason in sorted(out["not_measurable"].items()))
    return out, findings

