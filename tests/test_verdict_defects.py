"""Verdicts a new user met that were wrong or silent, each through the command line.

Value ranges named with the wrong factor, encoder refusals read as too few frames, mixed frame
sizes passing, sets given in the wrong roles, steps that repeat within an episode, a negligible
detector AP difference raised as a gap, and a screen whose views disagree called "not
significant".
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap import cli


def scene(seed: int, h: int = 96, w: int = 128) -> np.ndarray:
    """A float scene in [0, 255] that reaches both ends of the range (clipped highlights)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([80 + 140 * np.sin(x / 9 + seed), 90 + 90 * np.cos(y / 7), 60 + (x + y) % 50 * 4], -1)
    return np.clip(a + rng.normal(0, 3, (h, w, 3)), 0, 255)


def cli_run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def index(capsys, db: Path, folder: Path, name: str, domain: str, *extra: str) -> str:
    code, out, err = cli_run(["index", str(folder), "--set", name, "--domain", domain, "--db", str(db), *extra], capsys)
    assert code == 0, err
    return out + err


def findings_of(path: Path) -> list[dict]:
    return json.loads(path.read_text())["findings"]


# -- value ranges and encoder refusals -------------------------------------------------------------

@pytest.fixture()
def float_sets(tmp_path):
    """sim: float32 arrays in [0, 255]; real: the same scenes as float32 in [0, 1], 2% darker
    (a real camera's exposure differs a little): the ratio is 255, not 257."""
    for side in ("sim", "real"):
        (tmp_path / side).mkdir()
    rng = np.random.default_rng(0)
    for i in range(8):
        a = scene(i)
        np.save(tmp_path / "sim" / f"f{i:02d}.npy", a.astype(np.float32))
        b = np.clip(a + rng.normal(0, 2, a.shape), 0, 255) * 0.98 / 255
        np.save(tmp_path / "real" / f"f{i:02d}.npy", b.astype(np.float32))
    db = tmp_path / "c.duckdb"
    return tmp_path, db


def test_value_range_names_the_observed_ranges_and_x255(float_sets, capsys):
    root, db = float_sets
    index(capsys, db, root / "sim", "sim", "sim")
    index(capsys, db, root / "real", "real", "real")
    js = root / "stats.json"
    code, out, err = cli_run(["stats", "--sim", "sim", "--real", "real", "--db", str(db), "--json", str(js)], capsys)
    assert code == 0, err
    f = next(f for f in findings_of(js) if f["code"] == "value_range")
    assert f["evidence"]["sim_range"] == "float32 [0, 255]" and f["evidence"]["real_range"] == "float32 [0, 1]"
    assert "x255" in f["title"] and "x257" not in f["title"] and "65535" not in f["title"]
    assert "values 0 to 255" in f["title"] and "values 0 to 0.98" in f["title"]
    assert "divide sim by 255" in f["action"]
    assert "x255" in out


def test_encoder_refusal_names_the_dtype_not_more_frames(float_sets, capsys):
    root, db = float_sets
    index(capsys, db, root / "sim", "sim", "sim")
    index(capsys, db, root / "real", "real", "real")
    code, out, err = cli_run(["run", "--sim", "sim", "--real", "real", "--db", str(db), "--encoders", "pixel",
                              "--out", str(root / "out"), "--quiet"], capsys)
    assert code == 0, err
    infos = [f for f in findings_of(root / "out" / "results.json") if f["code"] == "insufficient_data"]
    assert not [f for f in infos if "Index more frames" in f["action"]], infos
    refusals = {f["evidence"]["side"]: f for f in infos if f["evidence"].get("metric") == "all metrics"}
    assert set(refusals) == {"sim", "real"}
    for f in refusals.values():
        assert "float32" in f["title"] and "8- or 16-bit" in f["title"]
        assert f["evidence"]["dtypes"] == {"float32": 8}
        assert "round(x * 255)" in f["action"]


# -- mixed frame sizes -----------------------------------------------------------------------------

def _png(path: Path, w: int, h: int, seed: int) -> None:
    a = scene(seed, h=h, w=w)
    Image.fromarray(a.astype(np.uint8)).save(path)


def test_mixed_sim_sizes_against_a_uniform_real_folder_are_named(tmp_path, capsys):
    """sim mixes 160x120, 80x60, 320x180 and 120x160 (the issue's 640x480, 320x240, 1280x720 and
    480x640 at a quarter scale); its most common size is the real one's."""
    for side in ("sim", "real"):
        (tmp_path / side).mkdir()
    sizes = [(160, 120)] * 3 + [(80, 60), (320, 180), (120, 160), (160, 120), (80, 60)]
    for i, (w, h) in enumerate(sizes):
        _png(tmp_path / "sim" / f"f{i:02d}.png", w, h, i)
        _png(tmp_path / "real" / f"f{i:02d}.png", 160, 120, i)
    db = tmp_path / "c.duckdb"
    index(capsys, db, tmp_path / "sim", "sim", "sim")
    index(capsys, db, tmp_path / "real", "real", "real")
    js = tmp_path / "stats.json"
    code, out, err = cli_run(["stats", "--sim", "sim", "--real", "real", "--db", str(db), "--json", str(js)], capsys)
    assert code == 0, err
    f = next(f for f in findings_of(js) if f["code"] == "resolution")
    ev = f["evidence"]
    assert (ev["n_pairs_size_differs"], ev["n_pairs_orientation_differs"]) == (4, 1)
    assert ev["sim_sizes"] == {"160x120": 4, "80x60": 2, "320x180": 1, "120x160": 1}
    assert "4 of 8 pairs" in f["title"] and "120x160 (1, portrait)" in f["title"]
    assert "real is 160x120 throughout" in f["title"]
    assert "Frame sizes differ in 4 of 8 pairs" in out


# -- roles against indexed domains, and where steps came from ------------------------------------

def _uint8_sets(tmp_path: Path, names: dict[str, str], n: int = 8) -> None:
    """Folders of PNG frames (file stems f00, f01, ...), sub-folder names as given."""
    rng = np.random.default_rng(1)
    for folder in names.values():
        (tmp_path / folder).mkdir(parents=True)
        for i in range(n):
            a = np.clip(scene(i, 48, 64) + rng.normal(0, 2, (48, 64, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(a).save(tmp_path / folder / f"f{i:02d}.png")


def test_sets_given_against_their_indexed_domains_are_warned(tmp_path, capsys):
    _uint8_sets(tmp_path, {"a": "render", "b": "camera"})
    db = tmp_path / "c.duckdb"
    index(capsys, db, tmp_path / "render", "render", "sim")
    index(capsys, db, tmp_path / "camera", "camera", "real")
    js = tmp_path / "stats.json"
    # a process of its own: the warning line reaches stderr through the CLI's logging set-up
    proc = subprocess.run([sys.executable, "-m", "perception_gap.cli", "stats", "--sim", "camera", "--real", "render",
                           "--db", str(db), "--json", str(js), "--quiet"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    warned = [line for line in proc.stderr.splitlines() if "WARNING" in line and "indexed as" in line]
    assert len(warned) == 1, proc.stderr
    assert "'camera' is given as --sim but was indexed as real" in warned[0]
    f = next(f for f in findings_of(js) if f["code"] == "set_roles")
    assert f["severity"] == "info" and "swapped" in f["title"]
    assert {s["set"]: s["indexed_domain"] for s in f["evidence"]["sets"]} == {"camera": "real", "render": "sim"}
    # given the right way round: no word
    code, _, err = cli_run(["stats", "--sim", "render", "--real", "camera", "--db", str(db), "--json", str(js)], capsys)
    assert code == 0, err
    assert not [f for f in findings_of(js) if f["code"] == "set_roles"]


def test_steps_repeating_within_an_episode_are_warned_with_their_source(tmp_path, capsys, caplog):
    """A real folder of one episode whose file names end in a heading angle (0, 90, 180, 270)."""
    _uint8_sets(tmp_path, {"sim": "sim/ep0"})
    rng = np.random.default_rng(2)
    (tmp_path / "real" / "ep0").mkdir(parents=True)
    for i in range(8):
        a = np.clip(scene(i, 48, 64) + rng.normal(0, 2, (48, 64, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(a).save(tmp_path / "real" / "ep0" / f"f{i:02d}_heading{90 * (i % 4)}.png")
    db = tmp_path / "c.duckdb"
    index(capsys, db, tmp_path / "sim", "sim", "sim")
    said = index(capsys, db, tmp_path / "real", "real", "real")
    assert "steps were read from the last number in each file name and repeat" in said
    js = tmp_path / "stats.json"
    with caplog.at_level(logging.WARNING):
        code, out, err = cli_run(["stats", "--sim", "sim", "--real", "real", "--db", str(db), "--json", str(js)],
                                 capsys)
    assert code == 0, err
    warned = [r.getMessage() for r in caplog.records
              if r.levelno == logging.WARNING and "repeat within an episode" in r.getMessage()]
    assert len(warned) == 1 and "'real'" in warned[0], caplog.text
    res = json.loads(js.read_text())
    assert res["sets"]["real"]["step_source"] == "the last number in each file name"
    assert res["sets"]["real"]["repeated_steps"] == 8 and res["sets"]["sim"]["repeated_steps"] == 0
    f = next(f for f in res["findings"] if f["code"] == "repeated_steps")
    assert f["severity"] == "info" and f["evidence"]["set"] == "real"
    assert f["evidence"]["n_frames_repeated"] == 8 and f["evidence"]["n_steps_repeated"] == 4
    assert "the last number in each file name" in f["title"]


# -- detector AP difference of no practical size ---------------------------------------------------

def _coco(keys: list[str], boxes: dict[str, list[tuple]], *, results: bool) -> dict:
    """A COCO object of (category, bbox[, score]) boxes per key (file `<key>.png`, 80x60); a
    detection without its own score gets 0.9."""
    cats = {"red": 7, "blue": 9}
    images = [{"id": i + 1, "file_name": f"{k}.png", "width": 80, "height": 60} for i, k in enumerate(keys)]
    anns = []
    for i, k in enumerate(keys):
        for cat, bbox, *score in boxes[k]:
            a = {"id": len(anns) + 1, "image_id": i + 1, "category_id": cats[cat], "bbox": bbox,
                 "area": bbox[2] * bbox[3], "iscrowd": 0}
            if results:
                a["score"] = score[0] if score else 0.9
            anns.append(a)
    return {"images": images, "annotations": anns, "categories": [{"id": v, "name": n} for n, v in cats.items()]}


def test_detector_ap_difference_under_the_practical_size_is_info(tmp_path, capsys):
    """20 pairs, the same objects found on both sides; on 4 real frames the blue box sits half a
    pixel off (IoU 0.935: missed only at the 0.95 threshold). AP differs by 0.01, the
    bootstrap interval excludes 0, no object flips: an info, not a gap telling the team to retrain."""
    rng = np.random.default_rng(3)
    keys = [f"f{i:02d}" for i in range(20)]
    gt: dict[str, list] = {}
    for side in ("sim", "real"):
        (tmp_path / side).mkdir()
    for k in keys:
        img = np.full((60, 80, 3), 120, np.uint8) + rng.integers(0, 10, (60, 80, 3), dtype=np.uint8)
        gt[k] = []
        for cat, colour in (("red", (220, 30, 30)), ("blue", (30, 30, 220))):
            x, y = int(rng.integers(2, 58)), int(rng.integers(2, 38))
            img[y:y + 15, x:x + 15] = colour
            gt[k].append((cat, [float(x), float(y), 15.0, 15.0]))
        for side in ("sim", "real"):
            Image.fromarray(img).save(tmp_path / side / f"{k}.png")
    # the off boxes score lowest, so their misses at 0.95 rank after every hit (no precision dip)
    off = {k: [(c, [b[0] + 0.5, *b[1:]], 0.8) if c == "blue" else (c, b) for c, b in gt[k]] for k in keys[::5]}
    files = {"gt.json": _coco(keys, gt, results=False), "sim_dets.json": _coco(keys, gt, results=True),
             "real_dets.json": _coco(keys, {**gt, **off}, results=True)}
    for name, obj in files.items():
        (tmp_path / name).write_text(json.dumps(obj))
    db = tmp_path / "c.duckdb"
    for side in ("sim", "real"):
        index(capsys, db, tmp_path / side, side, side)
        for source, f in (("gt", "gt.json"), ("yolo", f"{side}_dets.json")):
            code, _, err = cli_run(["index", "--coco", str(tmp_path / f), "--set", side, "--source", source,
                                    "--db", str(db)], capsys)
            assert code == 0, err
    code, out, err = cli_run(["run", "--sim", "sim", "--real", "real", "--db", str(db), "--encoders", "pixel",
                              "--out", str(tmp_path / "out")], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    diff = res["detection"]["differences"]["yolo"]
    assert res["detection"]["flips"]["yolo"]["sim_only"] == res["detection"]["flips"]["yolo"]["real_only"] == 0
    assert diff["low"] > 0 and diff["estimate"] == pytest.approx(0.01, abs=0.002)  # significant, and small
    f = next(f for f in res["findings"] if f["code"] == "detector_gap")
    assert f["severity"] == "info", f["title"]
    assert "under the practical size 0.02" in f["title"] and "No retraining" in f["action"]
    assert f["evidence"]["practical"]["negligible"] is True and f["evidence"]["practical"]["recall_overlap"] is True
    assert "[info] detector_gap" in out


# -- screen views that disagree --------------------------------------------------------------------

def test_screen_names_the_views_that_disagree(tmp_path, capsys):
    """'soft' is real without its noise, blurred: the statistics (sharpness, noise) put it far, the
    pixel encoder (content at 64x64) close. 'bright' is real 1.3x brighter with its noise: the
    reverse. Each view is sure, the average is not: the screen must say so, not "not significant"."""
    import sys as _sys

    _sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scenes import blur, render, scenes, write_set

    sc = scenes()
    rng, rng2 = np.random.default_rng(1), np.random.default_rng(2)
    sets = {"real": ("real", [render(s, 1.0, 0.02, rng) for s in sc]),
            "soft": ("sim", [blur(render(s, 1.0), 1.5) for s in sc]),
            "bright": ("sim", [render(s, 1.3, 0.02, rng2) for s in sc])}
    db = tmp_path / "c.duckdb"
    for name, (dom, frames) in sets.items():
        write_set(tmp_path / name, frames)
        index(capsys, db, tmp_path / name, name, dom)
    out_dir = tmp_path / "out"
    code, out, err = cli_run(["screen", "--sim", "soft", "--sim", "bright", "--real", "real", "--encoders", "pixel",
                              "--out", str(out_dir), "--db", str(db), "--n-boot", "400"], capsys)
    assert code == 0, err
    res = json.loads((out_dir / "results.json").read_text())
    (p,) = res["screen"]["pairwise"]
    assert not p["significant"] and p["views_disagree"] and p["verdict"] == "views disagree"
    assert p["prefer"] == {"bright": ["raw statistics"], "soft": ["pixel"]}
    said = next(line for line in out.splitlines() if "closer than" in line)
    assert "not significant on average, but the views disagree: " in said, out
    assert "raw statistics prefers 'bright'" in said and "pixel prefers 'soft'" in said
    f = next(f for f in res["findings"] if f["code"] == "screen_views_disagree")
    assert "raw statistics prefers 'bright'" in f["title"] and "pixel prefers 'soft'" in f["title"]
    assert not [f for f in res["findings"] if f["code"] == "screen_not_significant"]
    html = (out_dir / "report.html").read_text()
    assert "but the views disagree: " in html
    assert "raw statistics prefers bright" in html and "pixel prefers soft" in html
