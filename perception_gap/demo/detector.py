"""The demo's colour-segmentation detector, ground-truth boxes from instance masks, and COCO files."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

from perception_gap.demo.scene import OBJECTS


def colour_detect(rgb: np.ndarray, *, min_pixels: int = 12, sat_min: int = 110, val_min: int = 40,
                  hue_tol: int = 20) -> list[tuple[str, tuple[float, float, float, float], float]]:
    """Boxes of each demo object by its colour: (name, (x, y, w, h), score).

    Threshold each object's hue (PIL HSV, saturation >= sat_min, value >= val_min), keep the
    largest connected component, box it; the score is the component's share of its box.
    """
    from scipy.ndimage import find_objects, label

    hsv = np.asarray(Image.fromarray(np.ascontiguousarray(rgb)).convert("HSV"), dtype=np.int32)
    hue, sat, val = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    vivid = (sat >= sat_min) & (val >= val_min)
    out = []
    for name, _t, _s, _c, target in OBJECTS:
        dh = np.abs(hue - target)
        dh = np.minimum(dh, 256 - dh)
        lab, n = label(vivid & (dh <= hue_tol))
        if n == 0:
            continue
        counts = np.bincount(lab.ravel())[1:]
        best = int(np.argmax(counts))
        if counts[best] < min_pixels:
            continue
        sl = find_objects(lab)[best]
        y0, y1, x0, x1 = sl[0].start, sl[0].stop, sl[1].start, sl[1].stop
        score = float(counts[best]) / float((y1 - y0) * (x1 - x0))
        out.append((name, (float(x0), float(y0), float(x1 - x0), float(y1 - y0)), round(min(1.0, score), 4)))
    return out


def mask_boxes(ids: np.ndarray) -> list[tuple[str, tuple[float, float, float, float], float]]:
    from perception_gap.detection import mask_to_boxes

    cats = {i + 1: o[0] for i, o in enumerate(OBJECTS)}
    return [(b.category, tuple(float(v) for v in b.bbox), float(b.area)) for b in mask_to_boxes(ids, categories=cats)]


def coco_json(images: list[tuple[str, int, int, list]], kind: str) -> dict[str, Any]:
    cats = [{"id": i + 1, "name": o[0]} for i, o in enumerate(OBJECTS)]
    cid = {c["name"]: c["id"] for c in cats}
    imgs, anns = [], []
    for iid, (name, w, h, boxes) in enumerate(images, 1):
        imgs.append({"id": iid, "file_name": name, "width": w, "height": h})
        for cat, bbox, extra in boxes:
            a = {"id": len(anns) + 1, "image_id": iid, "category_id": cid[cat], "bbox": list(bbox)}
            if kind == "det":
                a["score"] = extra
                a["area"] = bbox[2] * bbox[3]
            else:
                a["area"] = extra
                a["iscrowd"] = 0
            anns.append(a)
    return {"images": imgs, "annotations": anns, "categories": cats}
