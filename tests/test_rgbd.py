"""Depth as users store it: `color/` + `depth/` folders, `.pgm`/`.pfm`/`.tiff`/EXR depth maps, and
the warnings when depth was asked for and not found; through the real CLI where it matters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import numpy as np
import OpenEXR
import pytest
from PIL import Image

from perception_gap.catalog import Catalog
from perception_gap.ingest.folders import list_folder
from perception_gap.workflows.stats import compute_stats
from tests.cli_process import clean, cli, good_frame


def frames(db: Path, set_name: str) -> dict[str, dict]:
    con = duckdb.connect(str(db), read_only=True)
    cur = con.execute("SELECT pair_key, episode, rgb_path, depth_path, status, error, format FROM frames "
                      "WHERE set_name = ?", [set_name])
    names = [c[0] for c in cur.description]
    out = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    con.close()
    return out


def write_exr(path: Path, depth: np.ndarray, channel: str = "Z") -> Path:
    with OpenEXR.File({"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage},
                      {channel: depth.astype(np.float32)}) as f:
        f.write(str(path))
    return path


def test_color_and_depth_folders_pair_by_stem_on_the_shared_rgbd_set(tmp_path, shared_data):
    src = shared_data / "rgbd"
    db = tmp_path / "c.duckdb"
    p = cli("index", src / "color", "--set", "colour_only", "--domain", "real", "--db", db)  # no depth/ under color/
    clean(p)
    p = cli("index", src, "--set", "rgbd", "--domain", "real", "--depth-unit", "mm", "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    got = frames(db, "rgbd")
    for i in range(5):
        f = got[f"{i:05d}"]  # color/00000.jpg pairs as 00000, like a flat folder's frame
        assert f["rgb_path"] == str(src / "color" / f"{i:05d}.jpg") and f["episode"] is None
        assert f["depth_path"] == str(src / "depth" / f"{i:05d}.png") and f["status"] == "ok"
    # other_formats/: NYU_color.ppm + NYU_depth.pgm; the .pgm is a depth map, never an RGB frame
    assert got["other_formats/NYU_color"]["depth_path"] == str(src / "other_formats" / "NYU_depth.pgm")
    assert not any(k.endswith("_depth") for k in got)
    assert "warning" not in p.stderr  # every usable frame has its depth map, every depth map its frame
    p = cli("stats", "--sim", "colour_only", "--real", "rgbd", "--db", db, "--json", tmp_path / "s.json")
    clean(p)
    res = json.loads((tmp_path / "s.json").read_text())
    assert res["pairs"]["n_pairs"] == 5
    depth = res["stats"]["rgbd"]["depth"]
    assert depth["inferred_units"] == {"mm": 8} and depth["dtypes"]["uint16"] == 7  # NYU's 16-bit PGM decodes as int32
    # reference: the first depth map's median, read independently
    ref = np.asarray(Image.open(src / "depth" / "00000.png")).astype(np.float64)
    assert 500 < np.median(ref[ref > 0]) < 5000


def test_depth_unit_without_depth_warns_and_is_recorded(tmp_path):
    root = tmp_path / "flat"
    root.mkdir()
    for i in range(3):
        Image.fromarray(good_frame(i)).save(root / f"f{i}.png")
    Image.fromarray(np.full((48, 64), 1500, np.uint16)).save(root / "f0_depth.png")
    (tmp_path / "orphans" / "depth").mkdir(parents=True)
    Image.fromarray(good_frame(5)).save(tmp_path / "orphans" / "a.png")
    Image.fromarray(np.full((48, 64), 900, np.uint16)).save(tmp_path / "orphans" / "depth" / "b.png")
    db = tmp_path / "c.duckdb"
    p = cli("index", root, "--set", "s", "--domain", "real", "--depth-unit", "mm", "--db", db)
    clean(p)
    assert p.returncode == 0
    warn = [ln for ln in p.stderr.splitlines() if "warning" in ln]
    assert len(warn) == 1 and "no depth map was found for 2 of 3 usable frame(s)" in warn[0], p.stderr
    p = cli("index", tmp_path / "orphans", "--set", "o", "--domain", "real", "--db", db)
    clean(p)
    assert "1 depth map(s) matched no RGB frame (e.g. depth/b.png)" in p.stderr, p.stderr
    with Catalog(db) as cat:  # the report carries them too
        from perception_gap.ingest import index_folder

        rep = index_folder(cat, root, "s", "real", depth_unit="mm")
    assert rep.warnings and "2 of 3" in rep.warnings[0]
    p = cli("index", root, "--set", "s", "--domain", "real", "--depth-unit", "mm", "--db", db, "-q")
    assert p.stderr == "" and p.stdout == ""


def test_pgm_pfm_tiff_and_exr_depth_next_to_their_frames(tmp_path):
    root = tmp_path / "ep"
    (root / "rgb").mkdir(parents=True)
    (root / "depth").mkdir()
    depth = (np.arange(48 * 64, dtype=np.float64).reshape(48, 64) % 97 + 500)
    for i, ext in enumerate(("pgm", "pfm", "tiff", "exr")):
        Image.fromarray(good_frame(i)).save(root / "rgb" / f"{i}.png")
        d = root / "depth" / f"{i}.{ext}"
        if ext == "pgm":
            Image.fromarray(depth.astype(np.uint16)).save(d)
        elif ext == "exr":
            write_exr(d, depth / 1000)
        else:
            Image.fromarray((depth / 1000).astype(np.float32), "F").save(d)
    Image.fromarray(good_frame(9)).save(root / "x_depth.jpg")  # a depth map's name on a lossy image
    scan = list_folder(tmp_path)
    by_key = {e.pair_key: e for e in scan.entries}
    assert sorted(by_key) == ["ep/0", "ep/1", "ep/2", "ep/3", "ep/x_depth"] and not scan.unmatched_depth
    assert "named as a depth map" in by_key["ep/x_depth"].error
    with Catalog(tmp_path / "c.duckdb") as cat:
        from perception_gap.ingest import index_folder

        rep = index_folder(cat, tmp_path, "s", "sim")
        assert rep.usable == 4
        compute_stats(cat, ["s"], workers=1)
        got = {r["pair_key"]: r for r in cat.load_frames("s")}
    # reference: numpy on the array that was written (mm for the PGM, metres for the others)
    assert got["ep/0"]["dep_percentiles"][2] == pytest.approx(np.percentile(depth, 50), abs=1)
    for k in ("ep/1", "ep/2", "ep/3"):
        assert got[k]["dep_dtype"] == "float32" and got[k]["dep_inferred_unit"] == "m"
        assert got[k]["dep_percentiles"][2] == pytest.approx(np.percentile(depth / 1000, 50), abs=2e-3)
        assert got[k]["episode"] == "ep"


def test_exr_depth_from_a_folder_and_a_manifest(tmp_path, shared_data):
    real = shared_data / "cleargrasp" / "real-val" / "d435"
    scenes = sorted(p.name.split("-")[0] for p in real.glob("*-transparent-rgb-img.jpg"))[:2]
    assert scenes
    # folder: the real RealSense EXR depth (metres, with holes) copied beside its frame, and a tiny EXR
    root = tmp_path / "f"
    root.mkdir()
    for s in scenes:
        shutil.copy(real / f"{s}-transparent-rgb-img.jpg", root / f"{s}.jpg")
        shutil.copy(real / f"{s}-transparent-depth-img.exr", root / f"{s}_depth.exr")
    Image.fromarray(good_frame(1)).save(root / "tiny.png")
    write_exr(root / "tiny_depth.exr", np.full((48, 64), 0.75))
    db = tmp_path / "c.duckdb"
    p = cli("index", root, "--set", "folder", "--domain", "real", "--depth-unit", "m", "--db", db)
    clean(p)
    assert p.returncode == 0 and "3 usable, 0 skipped" in p.stdout and "warning" not in p.stderr, p.stdout + p.stderr
    # manifest: absolute paths straight into the shared data (outside the manifest's folder)
    rows = [{"set": "manifest", "domain": "real", "rgb": str(real / f"{s}-transparent-rgb-img.jpg"), "pair_key": s,
             "depth": str(real / f"{s}-transparent-depth-img.exr"), "depth_unit": "m"} for s in scenes]
    m = tmp_path / "m" / "m.jsonl"
    m.parent.mkdir()
    m.write_text("\n".join(json.dumps(r) for r in rows))
    p = cli("index", "--manifest", m, "--db", db)
    clean(p)
    assert p.returncode == 0 and f"{len(scenes)} usable, 0 skipped" in p.stdout, p.stdout + p.stderr
    with Catalog(db) as cat:
        compute_stats(cat, ["folder", "manifest"], workers=1)
        fold = {r["pair_key"]: r for r in cat.load_frames("folder")}
        man = {r["pair_key"]: r for r in cat.load_frames("manifest")}
    assert fold["tiny"]["dep_percentiles"] == pytest.approx([0.75] * 5) and fold["tiny"]["dep_dropout"] == 0
    with OpenEXR.File(str(real / f"{scenes[0]}-transparent-depth-img.exr")) as f:
        ref = np.asarray(next(iter(f.channels().values())).pixels, np.float64)
    ref = ref[..., 0] if ref.ndim == 3 else ref
    valid = ref[np.isfinite(ref) & (ref > 0)]
    for got in (fold[scenes[0]], man[scenes[0]]):
        assert got["dep_error"] is None and got["dep_inferred_unit"] == "m"
        assert got["dep_dropout"] == pytest.approx(1 - valid.size / ref.size, abs=0.02)  # README: valid 0.51-0.86
        assert got["dep_percentiles"][2] == pytest.approx(np.median(valid), rel=0.05)
