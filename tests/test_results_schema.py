"""The typed results.json (perception_gap.schema): a real run read and written back unchanged, the
JSON Schema exported from the same classes, and that schema rejecting a wrong type in a fixed field."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path

import pytest

import perception_gap as pg
from perception_gap.camera.model import CameraModel, Factor
from perception_gap.cli import main
from perception_gap.demo import build_demo
from perception_gap.errors import InputError
from perception_gap.findings import Finding
from perception_gap.metrics.results import CI
from perception_gap.schema import CameraModelSection, EncoderEntry, Results, validate_results
from perception_gap.schema.__main__ import main as schema_main
from perception_gap.schema.export import schema_text

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_FILE = ROOT / "docs" / "results.schema.json"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    """`run` on a tiny clean demo (pixel encoder), through the command line: its output folder."""
    root = tmp_path_factory.mktemp("schema_demo")
    files = build_demo(root / "data", n_episodes=3, steps=4, size=(96, 72))
    db = str(root / "gap.duckdb")
    assert main(["index", "--manifest", str(files.manifest), "--db", db, "--quiet"]) == 0
    for path, name, source in ((files.sim_coco, files.sim_set, "colour"), (files.real_coco, files.real_set, "colour"),
                               (files.real_gt_coco, files.real_set, "gt")):
        assert main(["index", "--coco", str(path), "--set", name, "--source", source, "--db", db, "--quiet"]) == 0
    # the camera stage (about half the run's time) is left out: the section tested below from a model
    assert main(["run", "--sim", files.sim_set, "--real", files.real_set, "--encoders", "pixel", "--no-attribution",
                 "--out", str(root / "out"), "--db", db, "--quiet"]) == 0
    return root / "out"


def test_a_run_reads_typed_and_writes_back_unchanged(demo_run, tmp_path):
    data = json.loads((demo_run / "results.json").read_text(encoding="utf-8"))
    res = pg.load_results(demo_run)
    assert isinstance(res, Results)
    assert res.to_dict() == data and list(res.to_dict()) == list(data)  # same keys, same order
    # typed sections, built from the engine's own result classes
    enc = res.encoders[0]
    assert isinstance(enc, EncoderEntry) and enc.name == "pixel" and enc.dim == data["encoders"][0]["dim"]
    assert isinstance(enc.centroid_distance_norm_ci, CI) and enc.centroid_distance_norm_ci.contains(enc.centroid_distance_norm)
    assert all(isinstance(f, Finding) for f in res.findings) and res.findings[0].code == data["findings"][0]["code"]
    assert data["camera_model"] is None and res.camera_model is None  # --no-attribution: null, as the contract says
    assert data["encoders"][0]["rank"] is None and "rank" in res.encoders[0].to_dict()  # null stays null
    assert res.detection.sets[res.config.real]["colour"]["AP"] == data["detection"]["sets"][res.config.real]["colour"]["AP"]
    assert res.sets[res.config.sim].n_frames == 12 and res.pairs.n_pairs == 12
    # the dict form its callers read
    assert res["findings"] == data["findings"] and res.get("fid") is None and "fid" not in res
    assert dict(res) == data and res == data and len(res) == len(data)
    # written again as it is: the same results.json
    pg.write_outputs(res, tmp_path / "again")
    assert json.loads((tmp_path / "again" / "results.json").read_text(encoding="utf-8")) == data


def test_keys_a_newer_version_adds_are_kept(demo_run):
    data = json.loads((demo_run / "results.json").read_text(encoding="utf-8"))
    data["encoders"][0]["future_metric"] = {"value": 1.5}
    data["findings"][0]["evidence"]["future"] = [1, None]
    data["future_section"] = {"n": 3}
    res = Results.from_dict(data)
    assert res.encoders[0].extra == {"future_metric": {"value": 1.5}} and res.extra == {"future_section": {"n": 3}}
    assert res.to_dict() == data
    validate_results(data, schema_file=SCHEMA_FILE)


def test_the_camera_model_section_gives_the_engine_s_camera_model():
    model = CameraModel((Factor("brightness", {"stops": 0.5}, {"stops": [0.4, 0.6]}, "pairs"),
                         Factor("compression", {"quality": 90, "subsampling": "4:2:0"})), "pairs", 12, (), "sim", "real")
    section = {**model.to_dict(), "sample": {"n": 12, "max_pairs": 256, "paired": True, "skipped": []}}
    typed = CameraModelSection.from_dict(section)
    assert typed.factors[0].units["stops"] and typed.to_dict() == section
    assert typed.to_model() == model


def test_the_schema_rejects_a_wrong_type_in_a_fixed_field(demo_run):
    data = json.loads((demo_run / "results.json").read_text(encoding="utf-8"))
    validate_results(data, schema_file=SCHEMA_FILE)
    for change, where in ((lambda d: d["encoders"][0].update(dim="816"), r"\$\.encoders\[0\]\.dim"),
                          (lambda d: d["findings"][0].update(severity="fatal"), r"\$\.findings\[0\]\.severity"),
                          (lambda d: d["sets"][d["config"]["sim"]].update(n_frames=12.5), r"n_frames"),
                          (lambda d: d["encoders"][0]["centroid_distance_norm_ci"].update(low="0.1"), r"\.low"),
                          (lambda d: d.pop("version"), r"'version' is a required property")):
        bad = copy.deepcopy(data)
        change(bad)
        with pytest.raises(InputError, match=where):
            validate_results(bad, schema_file=SCHEMA_FILE)
    # a non-finite number is written as null: null stays valid wherever a number is
    data["encoders"][0]["domain_auc"] = None
    validate_results(data, schema_file=SCHEMA_FILE)


def test_load_results_names_a_missing_section_key():
    with tempfile.TemporaryDirectory() as folder:  # outside tmp_path: the suite's own check would fail it
        (Path(folder) / "results.json").write_text(json.dumps({"version": "0.1.0", "findings": [{"code": "x"}]}))
        with pytest.raises(InputError, match=r"results\.json\.findings\[0\]` to have the key 'severity'") as e:
            pg.load_results(folder)
    assert "\n" not in str(e.value)


def test_the_schema_file_is_current():
    assert SCHEMA_FILE.read_text(encoding="utf-8") == schema_text(), (
        "run: python -m perception_gap.schema --write docs/results.schema.json")
    assert schema_main(["--check", str(SCHEMA_FILE)]) == 0


def test_the_suite_check_names_a_results_json_that_does_not_match():
    from results_schema_check import check_results_files

    with tempfile.TemporaryDirectory() as folder:  # outside tmp_path: the suite's own check would see it too
        (Path(folder) / "results.json").write_text(json.dumps({"version": 1, "findings": []}))
        with pytest.raises(AssertionError, match=r"results\.json: .*\$\.version"):
            check_results_files(Path(folder))
