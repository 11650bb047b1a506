"""Ground truth with no box on one side: the run is still written, the AP difference is reported
as not measurable (with its reason) instead of a number, and the report says so."""

from __future__ import annotations

import json

import pytest

from tests.cli_process import N_PAIR as N
from tests.cli_process import copy_catalog, indexed_pair, ok
from tests.in_process import here


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two indexed sets (sim, real) in a catalog on the ordinary disk, and their reference statistics."""
    return indexed_pair(tmp_path_factory)


def _coco(n: int, boxes: bool, scores: bool = False) -> dict:
    images = [{"id": i + 1, "file_name": f"frame_{i:03d}.png", "width": 64, "height": 48} for i in range(n)]
    anns = [{"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": [10, 10, 20, 16],
             **({"score": 0.9} if scores else {})} for i in range(n)] if boxes else []
    return {"images": images, "categories": [{"id": 1, "name": "cube"}], "annotations": anns}


def test_ground_truth_with_no_box_on_one_side_still_writes_the_run(world, tmp_path, capfd):
    db = copy_catalog(world, tmp_path / "c.duckdb")
    files = {"gt_sim": _coco(N, True), "gt_real": _coco(N, False), "det": _coco(N, True, scores=True)}
    for name, body in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(body))
    for set_name in ("sim", "real"):
        ok(here(capfd, "index", "--coco", tmp_path / "det.json", "--set", set_name, "--source", "yolo", "--db", db,
                "-q"))
        ok(here(capfd, "index", "--coco", tmp_path / f"gt_{set_name}.json", "--set", set_name, "--source", "gt",
                "--db", db, "-q"))
    out = tmp_path / "out"
    p = ok(here(capfd, "run", "--sim", "sim", "--real", "real", "--encoders", "pixel", "--no-attribution", "--out", out,
                "--db", db))
    res = json.loads((out / "results.json").read_text())
    assert (out / "report.html").stat().st_size > 10_000
    det = res["detection"]
    assert det["sets"]["sim"]["yolo"]["AP"] == pytest.approx(1.0)  # detections equal to the ground truth
    assert det["differences"] == {}
    assert det["not_measurable"] == {"sim-vs-real AP difference of 'yolo'":
                                     "ap_difference_ci: a side has no ground-truth objects in the pairs."}
    titles = [f["title"] for f in res["findings"] if f["code"] == "insufficient_data"]
    assert any("AP difference of 'yolo' not computed" in t for t in titles), titles
    assert "AP difference of &#39;yolo&#39; not computed" in (out / "report.html").read_text()
    assert res["encoders"][0]["name"] == "pixel" and "not computed" in p.stdout
