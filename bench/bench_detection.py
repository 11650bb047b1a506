"""Benchmark: `detection.coco_summary` against faster-coco-eval's own evaluation of the same boxes.

Two workloads: the voc100 GT + detections under ../shared/data (skipped when absent) and a
synthetic set (default 2,000 images, 8 categories, ~6 objects and ~12 detections per image).
The reference is what a user would run by hand on the in-memory COCO dicts with
faster-coco-eval: `COCO(dataset dict)`, `loadRes(results list)`, then `COCOeval_faster`
evaluate + accumulate + summarize. Ours is `coco_summary(gt_boxes, det_boxes)` from `Box`
dicts, which builds its own COCO objects and runs the same evaluator. pycocotools runs once
per workload as the reference of the numbers (equal up to 1e-12: faster-coco-eval's C++
accumulate differs from pycocotools' numpy in the last bit) and of the speed, for information.
Times are CPU seconds of this process (the machine is shared). Repeats alternate ours and
faster-coco-eval; the figure is the median of the per-repeat
ratios. It also times `ap_difference_ci` (default 2,000 pairs x 200 replicates).

    python bench/bench_detection.py                 # ~1 min
    python bench/bench_detection.py --images 5000 --repeat 3

A report, not a test: exits 0 whatever the figures, printing PASS/FAIL against the target
(ratio <= 1.2).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perception_gap.detection import STAT_NAMES, Box, ap_difference_ci, coco_summary, parse_coco  # noqa: E402

TARGET = 1.2


def _data_dir() -> Path:
    env = os.environ.get("PERCEPTION_GAP_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def synthetic(n_images: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    cats = [f"c{i}" for i in range(8)]
    gt, dets = {}, {}
    for i in range(n_images):
        g, d = [], []
        for _ in range(rng.integers(1, 12)):
            c = cats[rng.integers(len(cats))]
            w, h = rng.uniform(8, 200, 2)
            x, y = rng.uniform(0, 640 - w), rng.uniform(0, 480 - h)
            g.append(Box(c, (float(x), float(y), float(w), float(h))))
            if rng.random() < 0.8:
                j = rng.normal(0, 0.08 * min(w, h), 2)
                d.append(Box(c, (float(x + j[0]), float(y + j[1]), float(w), float(h)), float(rng.uniform(0.3, 1))))
        for _ in range(rng.integers(0, 6)):
            w, h = rng.uniform(8, 200, 2)
            d.append(Box(cats[rng.integers(len(cats))], (float(rng.uniform(0, 600)), float(rng.uniform(0, 440)),
                                                         float(w), float(h)), float(rng.uniform(0, 0.8))))
        gt[f"f{i:06d}.png"], dets[f"f{i:06d}.png"] = g, d
    return gt, dets


def to_coco(gt, dets):
    """Plain COCO dicts of the same boxes (what the reference evaluates)."""
    keys = list(gt)
    cats = sorted({b.category for v in gt.values() for b in v} | {b.category for v in dets.values() for b in v})
    cid = {c: i + 1 for i, c in enumerate(cats)}
    images = [{"id": i + 1, "file_name": k} for i, k in enumerate(keys)]
    anns, res = [], []
    for i, k in enumerate(keys):
        for b in gt[k]:
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": cid[b.category],
                         "bbox": list(b.bbox), "area": b.effective_area, "iscrowd": int(b.iscrowd)})
        for b in dets.get(k, ()):
            res.append({"image_id": i + 1, "category_id": cid[b.category], "bbox": list(b.bbox), "score": b.score})
    return {"images": images, "categories": [{"id": i, "name": c} for c, i in cid.items()],
            "annotations": anns}, res, cats


def reference(gt_obj, res):
    """faster-coco-eval, as its README shows, on the plain dicts."""
    from faster_coco_eval import COCO, COCOeval_faster

    def quiet(*_a, **_k):
        return None

    coco_gt = COCO(gt_obj, print_function=quiet)
    coco_dt = coco_gt.loadRes(res)
    ev = COCOeval_faster(coco_gt, coco_dt, "bbox", print_function=quiet)
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    return ev.stats


def pycocotools_stats(gt_obj, res):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = gt_obj
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(res)
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev.stats


def compare(label, gt, dets, repeat):
    gt_obj, res, cats = to_coco(gt, dets)
    coco_summary(gt, dets, categories=cats)  # warm the imports
    ratios, t_ours, t_ref = [], [], []
    for _ in range(repeat):
        t0 = time.process_time()
        stats = reference(gt_obj, res)
        t1 = time.process_time()
        s = coco_summary(gt, dets, categories=cats)
        t2 = time.process_time()
        t_ref.append(t1 - t0)
        t_ours.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    t0 = time.process_time()
    pyc = pycocotools_stats(gt_obj, res)
    t_pyc = time.process_time() - t0
    same = all((getattr(s, n) is None and v == -1) or getattr(s, n) == float(v) for n, v in zip(STAT_NAMES, stats))
    close = all((getattr(s, n) is None and v == -1) or abs(getattr(s, n) - float(v)) <= 1e-12
                for n, v in zip(STAT_NAMES, pyc))
    ratio = statistics.median(ratios)
    print(f"{label}: {len(gt)} images, {sum(map(len, gt.values()))} GT, {sum(map(len, dets.values()))} dets | "
          f"faster-coco-eval {statistics.median(t_ref):.3f} s, coco_summary {statistics.median(t_ours):.3f} s, "
          f"ratio {ratio:.2f}x (pycocotools {t_pyc:.3f} s) | 12 numbers identical to faster-coco-eval: {same}, "
          f"to pycocotools within 1e-12: {close} | AP {s.AP:.4f}")
    return ratio


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n-boot", type=int, default=200)
    a = ap.parse_args(argv)
    ratios = []
    root = _data_dir() / "detection_voc100"
    if root.is_dir():
        g = parse_coco(json.loads((root / "gts/coco_format_v1/instances_default.json").read_text()), kind="gt")
        d = parse_coco(json.loads((root / "dets/coco_format/coco_dets.json").read_text()), kind="det")
        ratios.append(compare("voc100", g.boxes, d.boxes, max(a.repeat, 5)))
    else:
        print(f"voc100 not found under {root}: synthetic only")
    gt, dets = synthetic(a.images)
    ratios.append(compare("synthetic", gt, dets, a.repeat))
    pairs = [(k, k) for k in gt]
    t0 = time.process_time()
    r = ap_difference_ci(gt, dets, gt, dets, pairs, n_boot=a.n_boot)
    print(f"ap_difference_ci: {len(pairs)} pairs, {a.n_boot} replicates: {time.process_time() - t0:.2f} s "
          f"(interval [{r.low:.4f}, {r.high:.4f}])")
    worst = max(ratios)
    print(f"coco_summary / faster-coco-eval: {worst:.2f}x (worst workload), target <= {TARGET}x: "
          f"{'PASS' if worst <= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
