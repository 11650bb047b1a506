"""Boxes into the catalog (COCO files, instance masks) and the detection part of `run`."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap import cli
from perception_gap.catalog import Catalog
from perception_gap.errors import InputError
from perception_gap.ingest import index_folder
from perception_gap.ingest.annotations import attach_coco, attach_masks
from perception_gap.workflows.detection import detection_results

COCO_NAMES = ("AP", "AP50", "AP75", "APsmall", "APmedium", "APlarge",
              "AR1", "AR10", "AR100", "ARsmall", "ARmedium", "ARlarge")


def _pycocotools_reference(gt_path: Path, det_path: Path) -> list[float]:
    """The official evaluator on the files, after remapping the detections' image and category
    ids to the ground truth's by file name and category name."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    gt_json = json.loads(gt_path.read_text())
    det_json = json.loads(det_path.read_text())
    img_id = {im["file_name"]: im["id"] for im in gt_json["images"]}
    cat_id = {c["name"]: c["id"] for c in gt_json["categories"]}
    det_img = {im["id"]: im["file_name"] for im in det_json["images"]}
    det_cat = {c["id"]: c["name"] for c in det_json["categories"]}
    results = [{"image_id": img_id[det_img[a["image_id"]]], "category_id": cat_id[det_cat[a["category_id"]]],
                "bbox": a["bbox"], "score": a["score"]} for a in det_json["annotations"]]
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(gt_path))
        ev = COCOeval(gt, gt.loadRes(results), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return [float(x) for x in ev.stats]


def test_voc100_through_the_catalog_matches_the_official_evaluator(shared_data, tmp_path):
    root = shared_data / "detection_voc100"
    gt_path = root / "gts" / "coco_format_v1" / "instances_default.json"
    det_path = root / "dets" / "coco_format" / "coco_dets.json"
    with Catalog(tmp_path / "c.duckdb") as cat:
        index_folder(cat, root / "images", "voc", "real")
        g = attach_coco(cat, gt_path, "voc", "gt")
        d = attach_coco(cat, det_path, "voc", "yolo")
        from perception_gap import detection
        from perception_gap.workflows.detection import boxes_from_rows as _boxes

        ann = cat.load_annotations("voc")
        sizes = {p: (w, h) for p, _k, w, h in cat.frame_sizes("voc")}
        summary = detection.coco_summary(_boxes(ann["gt"]), _boxes(ann["yolo"]), sizes).to_dict()
    assert g.n_images == 100 and g.n_boxes == 273 and not g.unmatched
    assert d.n_boxes + d.n_dropped == 452
    ref = _pycocotools_reference(gt_path, det_path)
    for name, value in zip(COCO_NAMES, ref):
        got = summary[name]
        assert (got is None and value < 0) or got == pytest.approx(value, abs=1e-9), name
    assert (summary["AP"], summary["AP50"], summary["AP75"]) == pytest.approx((0.347, 0.610, 0.354), abs=5e-4)


def _scene_with_objects(seed: int, h: int = 60, w: int = 80):
    """An RGB frame with two coloured squares and its instance-id mask (1 = red, 2 = blue)."""
    rng = np.random.default_rng(seed)
    img = np.full((h, w, 3), 120, np.uint8) + rng.integers(0, 10, (h, w, 3), dtype=np.uint8)
    mask = np.zeros((h, w), np.uint8)
    for inst, colour in ((1, (220, 30, 30)), (2, (30, 30, 220))):
        x, y = int(rng.integers(2, w - 22)), int(rng.integers(2, h - 22))
        img[y:y + 15, x:x + 15] = colour
        mask[y:y + 15, x:x + 15] = inst
    return img, mask


def _make_sets(tmp: Path, n: int = 8) -> dict[str, dict[str, np.ndarray]]:
    masks = {}
    for dom in ("sim", "real"):
        (tmp / dom).mkdir()
        (tmp / f"{dom}_masks").mkdir()
    for i in range(n):
        img, mask = _scene_with_objects(i)
        for dom in ("sim", "real"):
            Image.fromarray(img).save(tmp / dom / f"f{i}.png")
            Image.fromarray(mask).save(tmp / f"{dom}_masks" / f"f{i}.png")
        masks[f"f{i}"] = mask
    return masks


def _detector_file(tmp: Path, dom: str, masks: dict[str, np.ndarray], *, miss_blue_every: int = 0,
                   jitter: float = 0.0) -> Path:
    """A COCO results file from 'detecting' the masks (optionally missing blue objects)."""
    images, anns = [], []
    for i, (key, mask) in enumerate(sorted(masks.items())):
        images.append({"id": 1000 + i, "file_name": f"{key}.png", "width": mask.shape[1], "height": mask.shape[0]})
        for inst, name, cid in ((1, "red", 7), (2, "blue", 9)):
            if inst == 2 and miss_blue_every and i % miss_blue_every == 0:
                continue
            ys, xs = np.nonzero(mask == inst)
            x0, y0 = xs.min() + jitter, ys.min() + jitter
            anns.append({"id": len(anns) + 1, "image_id": 1000 + i, "category_id": cid,
                         "bbox": [float(x0), float(y0), float(xs.max() + 1 - xs.min()), float(ys.max() + 1 - ys.min())],
                         "score": 0.9})
    path = tmp / f"{dom}_dets.json"
    path.write_text(json.dumps({"images": images, "annotations": anns,
                                "categories": [{"id": 7, "name": "red"}, {"id": 9, "name": "blue"}]}))
    return path


def test_masks_to_boxes_and_detection_in_run(tmp_path):
    masks = _make_sets(tmp_path)
    cats = tmp_path / "cats.json"
    cats.write_text(json.dumps({"1": "red", "2": "blue"}))
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_folder(cat, tmp_path / "sim", "sim", "sim")
        index_folder(cat, tmp_path / "real", "real", "real")
        from perception_gap.ingest.annotations import load_mask_categories

        for dom in ("sim", "real"):
            r = attach_masks(cat, tmp_path / f"{dom}_masks", dom, categories=load_mask_categories(cats))
            assert (r.n_images, r.n_boxes) == (8, 16)
        gt = cat.load_annotations("sim")["gt"]
        box = next(b for p, bs in gt.items() if p.endswith("f0.png") for b in bs if b["category"] == "red")
        ys, xs = np.nonzero(masks["f0"] == 1)
        assert box["bbox"] == (xs.min(), ys.min(), xs.max() + 1 - xs.min(), ys.max() + 1 - ys.min())
        attach_coco(cat, _detector_file(tmp_path, "sim", masks), "sim", "colour")
        attach_coco(cat, _detector_file(tmp_path, "real", masks, miss_blue_every=1), "real", "colour")
        det, findings = detection_results(cat, "sim", "real")
    assert set(det["sets"]["sim"]["colour"]) >= set(COCO_NAMES)
    assert det["sets"]["sim"]["colour"]["AP"] == pytest.approx(1.0)
    assert det["sets"]["real"]["colour"]["AP"] < 0.6  # every blue object missed
    assert det["flips"]["colour"]["sim_only"] == 8
    codes = {f.code for f in findings}
    assert "detector_gap" in codes and "self_inflicted_gap" not in codes
    gap = next(f for f in findings if f.code == "detector_gap")
    assert "look first at the 8 object(s) found in sim but lost on real" in gap.action


def test_detector_gap_action_without_sim_only_flips(tmp_path):
    """Real boxes shifted by 1 px: every object still found at IoU 0.5 (no flip), AP over IoU
    0.5:0.95 lower on real; the action must not send the reader to flipped pairs."""
    from perception_gap.ingest.annotations import load_mask_categories

    masks = _make_sets(tmp_path)
    cats = tmp_path / "cats.json"
    cats.write_text(json.dumps({"1": "red", "2": "blue"}))
    with Catalog(tmp_path / "c.duckdb") as cat:
        index_folder(cat, tmp_path / "sim", "sim", "sim")
        index_folder(cat, tmp_path / "real", "real", "real")
        for dom in ("sim", "real"):
            attach_masks(cat, tmp_path / f"{dom}_masks", dom, categories=load_mask_categories(cats))
        attach_coco(cat, _detector_file(tmp_path, "sim", masks), "sim", "colour")
        attach_coco(cat, _detector_file(tmp_path, "real", masks, jitter=1), "real", "colour")
        det, findings = detection_results(cat, "sim", "real")
    assert det["flips"]["colour"]["sim_only"] == 0
    gap = next(f for f in findings if f.code == "detector_gap")
    assert "worse on real" in gap.title and "flipped" not in gap.action and "look first" not in gap.action
    assert "no object is found in sim and lost on real" in gap.action


def test_self_inflicted_gap_when_the_detector_is_off_in_sim(tmp_path):
    masks = _make_sets(tmp_path, n=6)
    with Catalog(tmp_path / "c.duckdb") as cat:
        index_folder(cat, tmp_path / "sim", "sim", "sim")
        index_folder(cat, tmp_path / "real", "real", "real")
        attach_masks(cat, tmp_path / "sim_masks", "sim")
        attach_coco(cat, _detector_file(tmp_path, "sim", masks, jitter=4.0), "sim", "colour")
        det, findings = detection_results(cat, "sim", "real")
    f = next(x for x in findings if x.code == "self_inflicted_gap")
    assert f.evidence["ap_sim"] < 0.9 and "detector output in sim" in f.action


def test_bad_coco_input(tmp_path, capsys):
    masks = _make_sets(tmp_path, n=2)
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_folder(cat, tmp_path / "sim", "sim", "sim")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code = cli.main(["index", "--coco", str(bad), "--set", "sim", "--source", "gt", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and "not valid JSON" in err and err.count("\n") == 1
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"images": [{"id": 1, "file_name": "zzz.png"}], "annotations": [],
                                 "categories": []}))
    code = cli.main(["index", "--coco", str(other), "--set", "sim", "--source", "gt", "--db", str(db)])
    assert code == 2 and "matches a frame" in capsys.readouterr().err
    # some images unknown: reported, the rest attached
    path = _detector_file(tmp_path, "sim", {**masks, "ghost": masks["f0"]})
    code = cli.main(["index", "--coco", str(path), "--set", "sim", "--source", "det", "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 0 and "1 unmatched" in out and "ghost.png" in out
    with Catalog(db) as cat, pytest.raises(InputError):
        attach_coco(cat, path, "nope", "det")
