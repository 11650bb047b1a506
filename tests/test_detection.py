"""Tests of perception_gap.detection against pycocotools run directly, numpy references and
constructed cases with known answers."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perception_gap.detection import (
    STAT_NAMES,
    Box,
    ap_difference_ci,
    clip_boxes,
    coco_summary,
    latching,
    mask_to_boxes,
    pair_flips,
    parse_coco,
)
from perception_gap.detection.bootstrap import _APAccumulator
from perception_gap.errors import InputError, InsufficientData

# -- real data: the official evaluator --------------------------------------------------------------

@pytest.fixture(scope="module")
def voc(shared_data):
    root = shared_data / "detection_voc100"
    if not root.is_dir():
        pytest.skip(f"{root} not found")
    gt = json.loads((root / "gts/coco_format_v1/instances_default.json").read_text())
    dt = json.loads((root / "dets/coco_format/coco_dets.json").read_text())
    return gt, dt


def _direct_cocoeval(gt_obj: dict, dt_obj: dict):
    """Reference: pycocotools on the files, det ids remapped to the GT's by file/category name."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    img = {i["file_name"]: i["id"] for i in gt_obj["images"]}
    cat = {c["name"]: c["id"] for c in gt_obj["categories"]}
    dimg = {i["id"]: i["file_name"] for i in dt_obj["images"]}
    dcat = {c["id"]: c["name"] for c in dt_obj["categories"]}
    res = [{"image_id": img[dimg[a["image_id"]]], "category_id": cat[dcat[a["category_id"]]],
            "bbox": a["bbox"], "score": a["score"]} for a in dt_obj["annotations"]]
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = copy.deepcopy(gt_obj)
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(res)
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def test_voc100_matches_official_evaluator(voc):
    gt_obj, dt_obj = voc
    g = parse_coco(gt_obj, kind="gt")
    d = parse_coco(dt_obj, kind="det")
    # the two files number images and categories differently: the join is by name
    assert d.category_names != {c["id"]: c["name"] for c in gt_obj["categories"]}
    assert len(g.boxes) == 100 and g.n_boxes == len(gt_obj["annotations"])
    assert d.n_boxes == len(dt_obj["annotations"])
    s = coco_summary(g.boxes, d.boxes, g.sizes, categories=g.categories)
    ref = _direct_cocoeval(gt_obj, dt_obj)
    for name, v in zip(STAT_NAMES, ref.stats):
        assert getattr(s, name) == (None if v == -1 else float(v)), name
    assert s.AP == pytest.approx(0.347, abs=5e-4)
    assert s.AP50 == pytest.approx(0.610, abs=5e-4)
    assert s.AP75 == pytest.approx(0.354, abs=5e-4)
    assert s.n_images == 100 and s.n_gt == len(gt_obj["annotations"]) and s.n_dets == len(dt_obj["annotations"])
    # per-class AP against the reference's precision array, by category name
    prec = ref.eval["precision"]
    for k, cid in enumerate(ref.params.catIds):
        name = ref.cocoGt.cats[cid]["name"]
        p = prec[:, :, k, 0, -1]
        want = float(np.mean(p[p > -1])) if (p > -1).any() else None
        assert s.per_class_ap[name] == want
    d_json = json.loads(json.dumps(s.to_dict()))
    assert d_json["AP"] == s.AP and set(STAT_NAMES) <= set(d_json)


def test_voc100_fast_ap_matches_pycocotools(voc):
    gt_obj, dt_obj = voc
    g = parse_coco(gt_obj, kind="gt")
    d = parse_coco(dt_obj, kind="det")
    keys = list(g.boxes)
    acc = _APAccumulator(g.boxes, d.boxes, keys, g.categories)
    ref = _direct_cocoeval(gt_obj, dt_obj)
    assert abs(acc.ap(range(len(keys))) - ref.stats[0]) < 1e-6
    # a duplicated draw equals COCOeval on copies of the images under fresh keys
    rng = np.random.default_rng(1)
    draw = rng.integers(0, len(keys), len(keys))
    gt_dup = {f"{keys[i]}#{n}": g.boxes[keys[i]] for n, i in enumerate(draw)}
    dt_dup = {f"{keys[i]}#{n}": d.boxes.get(keys[i], []) for n, i in enumerate(draw)}
    s = coco_summary(gt_dup, dt_dup, categories=g.categories)
    assert abs(acc.ap(draw) - s.AP) < 1e-6


def test_voc100_bare_results_list(voc):
    gt_obj, dt_obj = voc
    g = parse_coco(gt_obj, kind="gt")
    img = {i["file_name"]: i["id"] for i in gt_obj["images"]}
    cat = {c["name"]: c["id"] for c in gt_obj["categories"]}
    dimg = {i["id"]: i["file_name"] for i in dt_obj["images"]}
    dcat = {c["id"]: c["name"] for c in dt_obj["categories"]}
    res = [{"image_id": img[dimg[a["image_id"]]], "category_id": cat[dcat[a["category_id"]]],
            "bbox": a["bbox"], "score": a["score"]} for a in dt_obj["annotations"]]
    d = parse_coco(res, kind="det", image_names=g.image_names, category_names=g.category_names)
    s = coco_summary(g.boxes, d.boxes, categories=g.categories)
    assert s.AP == _direct_cocoeval(gt_obj, dt_obj).stats[0]


# -- constructed cases -------------------------------------------------------------------------------

def _scene(n_images=6, seed=0):
    rng = np.random.default_rng(seed)
    gt = {}
    for i in range(n_images):
        boxes = []
        for j in range(3):
            x, y = rng.uniform(0, 400), rng.uniform(0, 300)
            w, h = rng.uniform(40, 150), rng.uniform(40, 150)  # no "small" (< 32^2) box
            boxes.append(Box(["cat", "dog"][j % 2], (x, y, w, h)))
        gt[f"img{i}.png"] = boxes
    return gt


def _perfect(gt, score=0.9):
    return {k: [Box(b.category, b.bbox, score) for b in v] for k, v in gt.items()}


def test_perfect_detector_and_no_detections():
    gt = _scene()
    s = coco_summary(gt, _perfect(gt))
    assert s.AP == 1.0 and s.AP50 == 1.0 and s.AR100 == 1.0
    assert all(v == 1.0 for v in s.per_class_ap.values())
    s0 = coco_summary(gt, {})
    assert s0.AP == 0.0 and s0.AR100 == 0.0 and s0.n_dets == 0
    # empty buckets are None, never -1 or NaN
    assert s.APsmall is None and s.to_dict()["APsmall"] is None


def test_images_only_in_dets_are_ignored_and_counted():
    gt = _scene()
    dets = _perfect(gt)
    dets["extra.png"] = [Box("cat", (0, 0, 10, 10), 0.99)]
    s = coco_summary(gt, dets)
    assert s.AP == 1.0 and s.n_images_dets_only == 1 and s.n_dets_ignored == 1
    with pytest.raises(InsufficientData):
        coco_summary({}, dets)


def test_half_the_objects_missed_halves_recall():
    gt = _scene(n_images=4)
    dets = {k: [Box(b.category, b.bbox, 0.9) for b in v if b.category == "cat"] for k, v in gt.items()}
    s = coco_summary(gt, dets)
    assert s.per_class_ap["cat"] == 1.0 and s.per_class_ap["dog"] == 0.0
    assert s.AP == pytest.approx(0.5)


def test_flips_known_answers():
    gt_sim = {"s": [Box("cup", (10, 10, 50, 50)), Box("cup", (200, 10, 50, 50))]}
    gt_real = {"r": [Box("cup", (205, 12, 50, 50)), Box("cup", (12, 11, 50, 50))]}  # listed in the other order
    det_sim = {"s": [Box("cup", (10, 10, 50, 50), 0.9), Box("cup", (200, 10, 50, 50), 0.9)]}
    det_real = {"r": [Box("cup", (205, 12, 50, 50), 0.9),  # right cup found
                      Box("cup", (12, 11, 50, 50), 0.3)]}   # left cup below threshold: missed
    sizes = {"s": (320, 240), "r": (320, 240)}
    f = pair_flips(gt_sim, det_sim, gt_real, det_real, [("s", "r")], sizes=sizes)
    assert (f.n_objects, f.sim_only, f.real_only, f.found_both, f.missed_both) == (2, 1, 0, 1, 0)
    assert f.sim_only_rate == 0.5 and f.recall_sim == 1.0 and f.recall_real == 0.5
    ex = f.examples[0]
    assert ex.kind == "sim_only" and ex.bbox_sim == (10, 10, 50, 50) and ex.bbox_real == (12, 11, 50, 50)
    # the reverse
    r = pair_flips(gt_real, det_real, gt_sim, det_sim, [("r", "s")], sizes=sizes)
    assert (r.sim_only, r.real_only) == (0, 1)
    # a wrong-category detection never finds an object
    det_wrong = {"r": [Box("plate", b.bbox, 0.9) for b in gt_real["r"]]}
    w = pair_flips(gt_sim, det_sim, gt_real, det_wrong, [("s", "r")])
    assert w.sim_only == 2
    with pytest.raises(InputError):
        pair_flips(gt_sim, det_sim, gt_real, det_real, [("s", "missing")])
    json.dumps(f.to_dict())


def test_latching_neighbour_and_wrong_class():
    a, b = (0, 0, 40, 40), (50, 0, 40, 40)
    gt = {"im": [Box("person", a), Box("person", b)]}
    # one box on A, and the box meant for B latched onto A as well: B is missed
    dets = {"im": [Box("person", a, 0.9), Box("person", (2, 0, 40, 40), 0.8)]}
    r = latching(gt, dets)
    assert (r.n_detections, r.n_true_positive, r.latching, r.duplicate) == (2, 1, 1, 0)
    assert r.examples[0].gt_bbox == a
    # a box spanning both neighbours
    r2 = latching(gt, {"im": [Box("person", (10, 0, 70, 40), 0.9)]})
    assert r2.latching == 1 and r2.n_true_positive == 0
    # both found, a second box on A: a duplicate, not latching
    r3 = latching(gt, {"im": [Box("person", a, 0.9), Box("person", b, 0.9), Box("person", (1, 0, 40, 40), 0.7)]})
    assert (r3.latching, r3.duplicate) == (0, 1)
    # another category's box on the object
    gt2 = {"im": [Box("cat", a)]}
    r4 = latching(gt2, {"im": [Box("dog", (1, 1, 40, 40), 0.9)]})
    assert (r4.wrong_class, r4.latching, r4.n_false_positive) == (1, 0, 1)
    assert r4.examples[0].gt_category == "cat"
    # below the score threshold: not counted
    r5 = latching(gt2, {"im": [Box("dog", a, 0.2)]})
    assert r5.n_detections == 0 and r5.latching_rate is None
    # far from anything: background
    r6 = latching(gt2, {"im": [Box("cat", (200, 200, 10, 10), 0.9)]})
    assert r6.background == 1 and r6.latching == 0


# -- geometry ---------------------------------------------------------------------------------------

def _mask_ref(m, background=0):
    out = {}
    for iid in np.unique(m):
        if iid == background:
            continue
        ys, xs = np.where(m == iid)
        out[int(iid)] = ((xs.min(), ys.min(), xs.max() + 1 - xs.min(), ys.max() + 1 - ys.min()), len(xs))
    return out


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(1, 40), st.integers(1, 8))
def test_mask_to_boxes_matches_numpy_reference(seed, h, w, n_ids):
    rng = np.random.default_rng(seed)
    m = rng.integers(0, n_ids + 1, size=(h, w)).astype(np.int32)
    ref = _mask_ref(m)
    got = mask_to_boxes(m)
    assert len(got) == len(ref)
    for box, (iid, (bbox, n)) in zip(got, sorted(ref.items())):
        assert box.bbox == tuple(float(v) for v in bbox) and box.area == n and box.category == "object"


def test_mask_to_boxes_categories_and_min_pixels():
    m = np.zeros((10, 10), np.uint16)
    m[2:5, 3:7] = 7   # 12 px
    m[8, 8] = 9       # 1 px speck
    m[0:2, 0:2] = 11  # not in the mapping
    boxes = mask_to_boxes(m, categories={7: "mug", 9: "spoon"}, min_pixels=2)
    assert boxes == [Box("mug", (3.0, 2.0, 4.0, 3.0), None, 12.0)]
    assert len(mask_to_boxes(m)) == 3
    assert mask_to_boxes(np.zeros((4, 4), int)) == []
    with pytest.raises(InputError):
        mask_to_boxes(np.zeros((4, 4), float))
    with pytest.raises(InputError):
        mask_to_boxes(np.zeros((2, 4, 4), int))


def test_clip_boxes_counts():
    boxes = [
        Box("a", (10, 10, 20, 20), area=300.0),    # inside: untouched
        Box("a", (-10, 10, 20, 20), area=400.0),   # half outside: clipped, area halved
        Box("a", (90, 90, 20, 20)),                # corner outside: clipped, area None
        Box("a", (200, 10, 20, 20)),               # wholly outside: dropped
        Box("a", (10, 10, 0, 20)),                 # zero width: dropped
        Box("a", (10, 10, -5, 20)),                # negative: dropped
    ]
    out, n_clip, n_drop = clip_boxes(boxes, 100, 100)
    assert (n_clip, n_drop, len(out)) == (2, 3, 3)
    assert out[0] is boxes[0]
    assert out[1].bbox == (0.0, 10.0, 10.0, 20.0) and out[1].area == 200.0
    assert out[2].bbox == (90.0, 90.0, 10.0, 10.0) and out[2].area is None
    with pytest.raises(InputError):
        clip_boxes(boxes, 0, 100)


# -- parsing ----------------------------------------------------------------------------------------

def _coco():
    return {
        "images": [{"id": 5, "file_name": "a.png", "width": 64, "height": 48},
                   {"id": 9, "file_name": "b.png"}],
        "categories": [{"id": 3, "name": "mug"}, {"id": 4, "name": "bowl"}],
        "annotations": [{"id": 1, "image_id": 5, "category_id": 3, "bbox": [1, 2, 3, 4], "area": 7.5, "iscrowd": 0},
                        {"id": 2, "image_id": 5, "category_id": 4, "bbox": [0, 0, 10, 10], "iscrowd": 1}],
    }


def test_parse_keeps_fields_and_keys_by_name():
    p = parse_coco(_coco(), kind="gt")
    assert p.boxes["a.png"] == [Box("mug", (1.0, 2.0, 3.0, 4.0), None, 7.5, False),
                                Box("bowl", (0.0, 0.0, 10.0, 10.0), None, None, True)]
    assert p.boxes["b.png"] == [] and p.n_images_without_boxes == 1
    assert p.sizes == {"a.png": (64, 48)} and p.categories == ["mug", "bowl"]
    assert (p.n_boxes, p.n_crowd) == (2, 1)
    obj = _coco()
    for a in obj["annotations"]:
        a["score"] = 0.25
    d = parse_coco(obj, kind="det")
    assert d.boxes["a.png"][0].score == 0.25
    bare = parse_coco([{"image_id": 9, "category_id": 4, "bbox": [1, 1, 2, 2], "score": 0.5}], kind="det",
                      image_names=p.image_names, category_names=p.category_names)
    assert bare.boxes == {"b.png": [Box("bowl", (1.0, 1.0, 2.0, 2.0), 0.5)]}


def _break(path, value):
    obj = _coco()
    node = obj
    for k in path[:-1]:
        node = node[k]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


@pytest.mark.parametrize("obj, kind, needle", [
    (_break(("images",), KeyError), "gt", "`images`"),
    (_break(("annotations", 0, "bbox"), [1, 2, 3]), "gt", "bbox"),
    (_break(("annotations", 0, "bbox"), [1, 2, float("nan"), 4]), "gt", "finite"),
    (_break(("annotations", 0, "bbox"), "1,2,3,4"), "gt", "bbox"),
    (_break(("annotations", 0, "image_id"), 77), "gt", "image id 77"),
    (_break(("annotations", 0, "category_id"), 99), "gt", "category id 99"),
    (_break(("annotations", 0, "bbox"), KeyError), "gt", "`bbox`"),
    (_break(("images", 1, "file_name"), "a.png"), "gt", "twice"),
    (_break(("images", 0, "file_name"), KeyError), "gt", "file_name"),
    (_break(("annotations", 0, "area"), float("inf")), "gt", "area"),
    (_coco(), "det", "`score`"),
    ([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1]}], "det", "`score`"),
    ([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "score": float("nan")}], "det", "score"),
    ([1, 2], "det", "detection [0]"),
    ([], "gt", "ground-truth dict"),
    ("nope", "det", "str"),
])
def test_malformed_coco_raises_one_line(obj, kind, needle):
    with pytest.raises(InputError) as e:
        parse_coco(obj, kind=kind)
    msg = str(e.value)
    assert needle in msg and "\n" not in msg


# -- bootstrap ----------------------------------------------------------------------------------------

def _degrade(dets, seed=0, p_drop=0.5, jitter=12.0):
    rng = np.random.default_rng(seed)
    out = {}
    for k, v in dets.items():
        out[k] = [Box(b.category, (b.bbox[0] + rng.normal(0, jitter), b.bbox[1] + rng.normal(0, jitter),
                                   b.bbox[2], b.bbox[3]), b.score)
                  for b in v if rng.random() > p_drop]
    return out


def test_ap_difference_ci_identical_and_degraded():
    gt = _scene(n_images=30, seed=3)
    rng = np.random.default_rng(5)
    # a decent but imperfect detector: small jitter, varied scores
    dets = {k: [Box(b.category, (b.bbox[0] + rng.normal(0, 2), b.bbox[1] + rng.normal(0, 2), b.bbox[2], b.bbox[3]),
                    float(rng.uniform(0.3, 1.0))) for b in v] for k, v in gt.items()}
    pairs = [(k, k) for k in gt]
    same = ap_difference_ci(gt, dets, gt, dets, pairs, n_boot=100)
    assert same.estimate == 0.0 and same.contains(0.0) and same.high - same.low < 1e-12
    assert same.ap_sim == pytest.approx(coco_summary(gt, dets).AP, abs=1e-6)
    worse = ap_difference_ci(gt, dets, gt, _degrade(dets), pairs, n_boot=100)
    assert worse.estimate > 0.2 and worse.low > 0 and worse.low <= worse.estimate <= worse.high
    assert worse.ap_real == pytest.approx(coco_summary(gt, _degrade(dets)).AP, abs=1e-6)
    assert worse.n_valid == 100 and math.isfinite(json.loads(json.dumps(worse.to_dict()))["low"])
    # same seed, same interval
    assert ap_difference_ci(gt, dets, gt, _degrade(dets), pairs, n_boot=100) == worse
    with pytest.raises(InputError):
        ap_difference_ci(gt, dets, gt, dets, pairs, n_boot=0)
    with pytest.raises(InsufficientData):
        ap_difference_ci(gt, dets, gt, dets, pairs[:1])
