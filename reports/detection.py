"""The report's detection section: `detection` of results.json as table rows (formatting only).

Below the typed `Detection` section, the per-set summaries, the sim-vs-real differences, the flips
and the latching counts are free-form objects keyed by the COCO and flip names, read by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from perception_gap.reports.format import MISSING, ci, num, num_list, signed
from perception_gap.schema import Detection

COCO_NAMES = ("AP", "AP50", "AP75", "APsmall", "APmedium", "APlarge", "AR1", "AR10", "AR100", "ARsmall", "ARmedium", "ARlarge")


def _d(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else []


def detection_tables(det: Detection, lim: Mapping[str, Any]) -> dict[str, Any]:
    """The tables of the report's detection section (`lim`: the report's caps, `categories` and `examples`)."""
    n_ex = lim["examples"]
    summary, cols, per_class_src = [], [], []
    for set_name, by_source in (det.sets or {}).items():
        for source, s in (by_source or {}).items():
            s = s or {}
            summary.append({"set": set_name, "source": source, "cells": [num(s.get(k)) for k in COCO_NAMES],
                            "n_images": s.get("n_images"), "n_gt": s.get("n_gt"), "n_dets": s.get("n_dets")})
            cols.append(f"{set_name} / {source}")
            per_class_src.append(_d(s.get("per_class_ap")))
    cats = sorted({c for pc in per_class_src for c in pc}, key=str)
    per_class = [(c, [num(pc.get(c)) if c in pc else MISSING for pc in per_class_src]) for c in cats[: lim["categories"]]]
    diffs = []
    for src, d in (det.differences or {}).items():
        d = d or {}
        diffs.append({"source": src, "ap_sim": num(d.get("ap_sim")), "ap_real": num(d.get("ap_real")),
                      "estimate": signed(d.get("estimate")), "ci": ci(d.get("low"), d.get("high"), d.get("level")),
                      "n_pairs": d.get("n_pairs"), "method": d.get("method")})
    flips = []
    for src, f in (det.flips or {}).items():
        f = f or {}
        flips.append({"source": src,
                      "cells": [num(f.get(k)) for k in ("n_pairs", "n_objects", "found_both", "sim_only", "real_only",
                                                         "missed_both", "recall_sim", "recall_real")],
                      "examples": [{"kind": x.get("kind"), "category": x.get("category"), "sim_key": x.get("sim_key"),
                                    "real_key": x.get("real_key"), "bbox_sim": num_list(x.get("bbox_sim"), 1),
                                    "bbox_real": num_list(x.get("bbox_real"), 1)}
                                   for x in map(_d, _list(f.get("examples"))[:n_ex])]})
    latching = []
    for set_name, by_source in (det.latching or {}).items():
        for src, lr in _d(by_source).items():
            lr = _d(lr)
            latching.append({"set": set_name, "source": src,
                             "cells": [num(lr.get(k)) for k in ("n_detections", "n_true_positive", "n_false_positive",
                                                                 "latching", "wrong_class", "duplicate",
                                                                 "localization", "background")],
                             "examples": [{"key": x.get("key"), "kind": x.get("kind"), "category": x.get("category"),
                                           "score": num(x.get("score")), "gt_category": x.get("gt_category"),
                                           "iou": num(x.get("iou"))}
                                          for x in map(_d, _list(lr.get("examples"))[:n_ex])]})
    return {"summary": summary, "per_class_cols": cols, "per_class": per_class,
            "per_class_more": max(0, len(cats) - lim["categories"]), "differences": diffs, "flips": flips,
            "latching": latching}
