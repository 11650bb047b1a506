"""Reliability: a bad-input corpus through the real CLI, crash safety under kill -9, two writers on
one catalog, hostile content, no network socket during a run.

Every command runs as a subprocess of `python cli.py`, exactly as a user runs it, so a traceback
anywhere would show on stderr: none may.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import duckdb
import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from scenes import render, scenes  # noqa: E402

CLI = [sys.executable, str(REPO / "cli.py")]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=ENV)


def clean(p: subprocess.CompletedProcess) -> None:
    """No traceback, and an error is exactly one line."""
    assert "Traceback" not in p.stderr, p.stderr
    if p.returncode == 2:
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, p.stderr


def good_frame(i: int, h: int = 48, w: int = 64) -> np.ndarray:
    return render(scenes(1, h=h, w=w, seed=100 + i)[0], 1.0, 0.01, np.random.default_rng(i))


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def bad_corpus(root: Path) -> tuple[dict[str, str], list[str]]:
    """Write the file-level corpus into root: (bad file -> expected reason fragment, good files kept)."""
    root.mkdir(parents=True)
    good = []

    def keep(name: str, arr_or_img) -> None:
        p = root / name
        if isinstance(arr_or_img, np.ndarray) and name.endswith(".npy"):
            np.save(p, arr_or_img)
        else:
            (arr_or_img if isinstance(arr_or_img, Image.Image) else Image.fromarray(arr_or_img)).save(p)
        good.append(name)

    for i in range(4):
        keep(f"good_{i}.png", good_frame(i))
    keep("rgba.png", Image.fromarray(good_frame(10)).convert("RGBA"))
    keep("palette.png", Image.fromarray(good_frame(11)).convert("P"))
    keep("gray.png", Image.fromarray(good_frame(12)).convert("L"))
    keep("cmyk.jpg", Image.fromarray(good_frame(13)).convert("CMYK"))
    keep("rgb16.npy", good_frame(14).astype(np.uint16) * 257)
    import png  # pypng: Pillow cannot write 48-bit RGB PNGs
    a16 = good_frame(24).astype(np.uint16) * 257
    png.from_array(a16.reshape(a16.shape[0], -1), "RGB;16").save(str(root / "rgb48.png"))
    good.append("rgb48.png")
    keep("one_by_one.png", np.full((1, 1, 3), 128, np.uint8))
    keep("constant.png", np.full((48, 64, 3), 77, np.uint8))
    ex = Image.fromarray(good_frame(15))
    exif = ex.getexif()
    exif[0x0112] = 6  # rotate 90 on display
    ex.save(root / "exif_rotated.jpg", exif=exif)
    good.append("exif_rotated.jpg")
    nan = good_frame(16).astype(np.float32) / 255
    nan[:5] = np.nan
    keep("with_nan.npy", nan)
    inf = good_frame(17).astype(np.float32) / 255
    inf[:, :3] = np.inf
    keep("with_inf.npy", inf)
    keep("int64.npy", good_frame(18).astype(np.int64))
    keep("caf\u00e9_\u00fc\u65e5\u672c.png", good_frame(19))  # unicode name
    keep("quote'\" <b>&amp;.png", good_frame(20))  # markup and quotes in a name
    bad: dict[str, str] = {}
    (root / "zero.png").write_bytes(b"")
    bad["zero.png"] = "zero-byte"
    jpg = io.BytesIO()
    Image.fromarray(good_frame(21, 120, 160)).save(jpg, "JPEG", quality=90)
    (root / "trunc.jpg").write_bytes(jpg.getvalue()[:300])
    bad["trunc.jpg"] = "truncated"
    png = io.BytesIO()
    Image.fromarray(good_frame(22, 120, 160)).save(png, "PNG")
    (root / "trunc.png").write_bytes(png.getvalue()[:400])
    bad["trunc.png"] = "truncated"
    (root / "text.png").write_text("this is not an image")
    bad["text.png"] = "not a readable image"
    (root / "folder.png").mkdir()
    bad["folder.png"] = "directory"
    (root / "loop.png").symlink_to(root / "loop.png")
    bad["loop.png"] = "symbolic link"
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)
    (root / "bomb.png").write_bytes(b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
                                    + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + _png_chunk(b"IEND", b""))
    bad["bomb.png"] = "bomb"
    np.save(root / "empty.npy", np.zeros((0, 5, 3), np.float32))
    bad["empty.npy"] = "empty"
    np.save(root / "fourd.npy", np.zeros((2, 3, 4, 5), np.float32))
    bad["fourd.npy"] = "2-D or 3-D"
    np.save(root / "object.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    bad["object.npy"] = "dtype object"
    import pickle
    (root / "pickled.npy").write_bytes(pickle.dumps({"not": "an array"}))  # a pickle named .npy
    bad["pickled.npy"] = "npy"
    np.save(root / "complex.npy", np.zeros((8, 8, 3), np.complex64))
    bad["complex.npy"] = "dtype"
    (root / "notes.yaml").write_text("a: 1\n")
    bad["notes.yaml"] = "unsupported"
    bad_name = os.fsencode(str(root)) + b"/latin1_\xe9t\xe9.png"  # not valid UTF-8
    with open(bad_name, "wb") as fh:
        fh.write(png.getvalue())
    bad["latin1_"] = "utf-8"
    return bad, good


def _frames(db: Path, set_name: str) -> dict[str, tuple[str, str | None]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT rgb_path, status, error FROM frames WHERE set_name = ?", [set_name]).fetchall()
    finally:
        con.close()
    return {Path(p).name: (st, err) for p, st, err in rows}


def _real_set(root: Path, n: int = 12) -> Path:
    root.mkdir(parents=True)
    for i in range(n):
        Image.fromarray(good_frame(i)).save(root / f"good_{i}.png")
    return root


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    """The file-level corpus as a sim set, good frames as a real set, through index, stats and run."""
    tmp = tmp_path_factory.mktemp("corpus")
    bad, good = bad_corpus(tmp / "sim")
    _real_set(tmp / "real")
    db = tmp / "c.duckdb"
    steps = {
        "index_sim": cli("index", tmp / "sim", "--set", "sim", "--domain", "sim", "--db", db),
        "index_real": cli("index", tmp / "real", "--set", "real", "--domain", "real", "--db", db, "-q"),
        "stats": cli("stats", "--sim", "sim", "--real", "real", "--db", db, "--json", tmp / "stats.json", "-q"),
        "run": cli("run", "--sim", "sim", "--real", "real", "--db", db, "--encoders", "pixel,efficientnet-lite0",
                   "--out", tmp / "out", "-q"),
    }
    return tmp, db, bad, good, steps


def test_corpus_has_at_least_25_classes():
    """The file-level corpus here plus the set-level cases below: at least 25 classes of bad input."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        bad, good = bad_corpus(Path(d) / "c")
    odd_good = [g for g in good if not g.startswith("good_")]
    set_level = [t for t in globals() if t.startswith("test_bad_")]
    assert len(bad) + len(odd_good) + len(set_level) >= 25, (len(bad), len(odd_good), len(set_level))


def test_corpus_no_traceback_and_exit_0(corpus_run):
    *_, steps = corpus_run
    for name, p in steps.items():
        clean(p)
        assert p.returncode == 0, (name, p.stderr)


def test_corpus_every_bad_file_is_a_recorded_skip_with_its_reason(corpus_run):
    tmp, db, bad, good, steps = corpus_run
    stats = json.loads((tmp / "stats.json").read_text())
    reasons = {Path(s["path"]).name: s["reason"] for s in stats["sets"]["sim"]["skipped"]}
    for name, fragment in bad.items():
        hit = [k for k in reasons if k.startswith(name)]
        assert len(hit) == 1, (name, sorted(reasons))
        assert fragment.lower() in reasons[hit[0]].lower(), (name, reasons[hit[0]])
        assert "\n" not in reasons[hit[0]] and len(reasons[hit[0]]) < 300
    assert len(reasons) == len(bad), sorted(set(reasons) - {k for k in reasons for b in bad if k.startswith(b)})
    # the index command itself lists them, one line each
    out = steps["index_sim"].stdout
    assert f"{len(bad) - 1} skipped" in out  # the truncated PNG decodes its header fine: found by `stats`


def test_corpus_every_good_frame_is_kept(corpus_run):
    tmp, db, bad, good, _ = corpus_run
    rows = _frames(db, "sim")
    for name in good:
        assert rows[name][0] == "ok", (name, rows[name])
    stats = json.loads((tmp / "stats.json").read_text())
    assert stats["sets"]["sim"]["n_usable"] == len(good)
    assert stats["sets"]["sim"]["n_usable"] + stats["sets"]["sim"]["n_skipped"] == stats["sets"]["sim"]["n_frames"]
    # EXIF orientation applied: the 64x48 frame (orientation 6) is catalogued as it displays, 48x64
    con = duckdb.connect(str(db), read_only=True)
    size = con.execute("SELECT width, height, exif_orientation FROM frames WHERE rgb_path LIKE '%exif_rotated.jpg'").fetchone()
    con.close()
    assert size == (48, 64, 6), size
    res = json.loads((tmp / "out" / "results.json").read_text())
    assert res["sets"]["sim"]["n_usable"] == len(good)
    assert (tmp / "out" / "report.html").stat().st_size > 10_000


def test_corpus_skips_reach_the_report(corpus_run):
    tmp, _, bad, _, _ = corpus_run
    html = (tmp / "out" / "report.html").read_text()
    for fragment in ("zero-byte file", "decompression bomb refused", "is a directory", "not valid UTF-8"):
        assert fragment in html
    assert "latin1_\\xe9t\\xe9.png" in html  # an undecodable name is shown with its bytes escaped


# -- set-level bad input: each a clear one-line error (exit 2) or a recorded skip ----------------------------

def _one_line_error(p: subprocess.CompletedProcess, *fragments: str) -> None:
    clean(p)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    for f in fragments:
        assert f.lower() in p.stderr.lower(), p.stderr


def _manifest(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _frames_dir(root: Path, n: int, seed: int = 0) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        Image.fromarray(good_frame(seed + i)).save(root / f"f{i}.png")
        names.append(f"f{i}.png")
    return names


def test_bad_manifest_missing_columns(tmp_path):
    _frames_dir(tmp_path / "a", 2)
    m = _manifest(tmp_path / "m.jsonl", [{"set": "s", "rgb": "a/f0.png", "pair_key": "0"}])
    _one_line_error(cli("index", "--manifest", m, "--db", tmp_path / "c.duckdb"), "missing required column", "domain")


def test_bad_manifest_extra_columns_are_named_and_ignored(tmp_path):
    _frames_dir(tmp_path / "a", 2)
    m = _manifest(tmp_path / "m.jsonl", [{"set": "s", "domain": "sim", "rgb": f"a/f{i}.png", "pair_key": str(i),
                                           "dpeth": "typo.png", "action_0": 0.5} for i in range(2)])
    p = cli("index", "--manifest", m, "--db", tmp_path / "c.duckdb")
    clean(p)
    assert p.returncode == 0
    warn = [ln for ln in p.stderr.splitlines() if "ignored column" in ln]
    assert len(warn) == 1 and "dpeth" in warn[0] and "action_0" not in warn[0], p.stderr
    assert "2 usable" in p.stdout


def test_manifest_paths_outside_its_folder_absolute_and_missing_files(tmp_path):
    (tmp_path / "outside.png").write_bytes(b"")  # zero bytes: a skip for what it is, not for where it is
    Image.fromarray(good_frame(9)).save(tmp_path / "elsewhere.png")
    _frames_dir(tmp_path / "m" / "a", 2)
    rows = [{"set": "s", "domain": "sim", "rgb": "a/f0.png", "pair_key": "0"},
            {"set": "s", "domain": "sim", "rgb": "../outside.png", "pair_key": "1"},
            {"set": "s", "domain": "sim", "rgb": str(tmp_path / "elsewhere.png"), "pair_key": "2"},
            {"set": "s", "domain": "sim", "rgb": "a/../../outside.png", "pair_key": "3"},
            {"set": "s", "domain": "sim", "rgb": "a/gone.png", "pair_key": "4"},
            {"set": "s", "domain": "sim", "rgb": "a/f1.png", "pair_key": "5", "depth": "../outside.png"}]
    m = _manifest(tmp_path / "m" / "m.jsonl", rows)
    p = cli("index", "--manifest", m, "--db", tmp_path / "c.duckdb")
    clean(p)
    assert p.returncode == 0 and "2 usable, 4 skipped" in p.stdout, p.stdout
    assert "the same file is listed again (pair key '3')" in p.stdout  # a/../../outside.png is ../outside.png
    con = duckdb.connect(str(tmp_path / "c.duckdb"), read_only=True)
    got = dict(con.execute("SELECT pair_key, coalesce(error, status) FROM frames").fetchall())
    paths = dict(con.execute("SELECT pair_key, rgb_path FROM frames").fetchall())
    con.close()
    assert got["0"] == got["2"] == "ok" and paths["2"] == str(tmp_path / "elsewhere.png")
    assert got["1"] == "zero-byte file" and got["5"] == "depth: zero-byte file" and got["4"] == "file not found"
    assert not any("outside" in e for e in got.values())


def test_bad_duplicate_pair_keys_keep_the_first(tmp_path):
    _frames_dir(tmp_path / "a", 3)
    m = _manifest(tmp_path / "m.jsonl", [{"set": "s", "domain": "sim", "rgb": f"a/f{i}.png", "pair_key": "same"}
                                          for i in range(3)])
    p = cli("index", "--manifest", m, "--db", tmp_path / "c.duckdb")
    clean(p)
    assert p.returncode == 0 and "1 usable, 2 skipped" in p.stdout
    # the two skips share their reason: one grouped line with the count and both files
    lines = [ln for ln in p.stdout.splitlines() if "duplicate pair key 'same'" in ln]
    assert len(lines) == 1 and "skipped 2 frames" in lines[0] and "f1.png, f2.png" in lines[0], p.stdout


def test_bad_empty_set_and_unknown_set(tmp_path):
    (tmp_path / "empty").mkdir()
    _one_line_error(cli("index", tmp_path / "empty", "--set", "e", "--domain", "sim", "--db", tmp_path / "c.duckdb"),
                    "no usable frame")
    only_bad = tmp_path / "only_bad"
    only_bad.mkdir()
    (only_bad / "x.png").write_bytes(b"")
    _one_line_error(cli("index", only_bad, "--set", "b", "--domain", "sim", "--db", tmp_path / "c.duckdb"),
                    "no usable frame", "1 skipped")
    _one_line_error(cli("stats", "--sim", "nope", "--real", "e", "--db", tmp_path / "c.duckdb"), "nope")
    _one_line_error(cli("index", tmp_path / "does_not_exist", "--set", "x", "--domain", "sim",
                        "--db", tmp_path / "c.duckdb"), "does_not_exist")


def test_bad_catalog_file(tmp_path):
    (tmp_path / "text.duckdb").write_text("not a database")
    _frames_dir(tmp_path / "a", 1)
    _one_line_error(cli("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", tmp_path / "text.duckdb"),
                    "catalog")


def test_bad_coco_malformed_and_boxes_outside_the_image(tmp_path):
    _frames_dir(tmp_path / "a", 2)
    db = tmp_path / "c.duckdb"
    assert cli("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db, "-q").returncode == 0
    (tmp_path / "broken.json").write_text('{"images": [{"id": 1, "file_name": "f0.png"}], "annotations": [')
    _one_line_error(cli("index", "--coco", tmp_path / "broken.json", "--set", "s", "--source", "gt", "--db", db), "json")
    (tmp_path / "shape.json").write_text(json.dumps({"images": "nope", "annotations": 3}))
    _one_line_error(cli("index", "--coco", tmp_path / "shape.json", "--set", "s", "--source", "gt", "--db", db))
    coco = {"images": [{"id": 1, "file_name": "f0.png", "width": 64, "height": 48},
                       {"id": 2, "file_name": "f1.png", "width": 64, "height": 48}],
            "categories": [{"id": 1, "name": "cube"}],
            "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [50, 40, 30, 30]},      # partly out
                            {"id": 2, "image_id": 2, "category_id": 1, "bbox": [500, 400, 10, 10]},    # wholly out
                            {"id": 3, "image_id": 2, "category_id": 1, "bbox": [5, 5, 10, 10]}]}
    (tmp_path / "gt.json").write_text(json.dumps(coco))
    p = cli("index", "--coco", tmp_path / "gt.json", "--set", "s", "--source", "gt", "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    assert "clipped 1" in p.stdout.replace(":", "") or "1 clipped" in p.stdout, p.stdout
    assert "dropped 1" in p.stdout.replace(":", "") or "1 dropped" in p.stdout, p.stdout
    con = duckdb.connect(str(db), read_only=True)
    boxes = [tuple(b) for (b,) in con.execute("SELECT bbox FROM annotations ORDER BY bbox[1]").fetchall()]
    con.close()
    assert boxes == [(5.0, 5.0, 10.0, 10.0), (50.0, 40.0, 14.0, 8.0)]


def test_bad_single_frame_and_constant_images_run_to_the_end(tmp_path):
    """A one-frame set and sets of constant frames: `run` completes, says what it could not measure,
    and writes no NaN (results.json is strict JSON)."""
    db = tmp_path / "c.duckdb"
    for name, dom in (("one_sim", "sim"), ("one_real", "real")):
        (tmp_path / name).mkdir()
        Image.fromarray(good_frame(0)).save(tmp_path / name / "k.png")
        assert cli("index", tmp_path / name, "--set", name, "--domain", dom, "--db", db, "-q").returncode == 0
    p = cli("run", "--sim", "one_sim", "--real", "one_real", "--encoders", "pixel", "--out", tmp_path / "o1", "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "o1" / "results.json").read_text())
    assert any(f["code"] == "insufficient_data" for f in res["findings"])
    for name, dom, level in (("flat_sim", "sim", 90), ("flat_real", "real", 90)):
        (tmp_path / name).mkdir()
        for i in range(6):
            Image.fromarray(np.full((48, 64, 3), level, np.uint8)).save(tmp_path / name / f"k{i}.png")
        assert cli("index", tmp_path / name, "--set", name, "--domain", dom, "--db", db, "-q").returncode == 0
    p = cli("run", "--sim", "flat_sim", "--real", "flat_real", "--encoders", "pixel", "--out", tmp_path / "o2", "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    json.loads((tmp_path / "o2" / "results.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


def test_bad_depth_all_zero_nan_and_wrong_dtype(tmp_path):
    """All-zero and NaN depth are measured as dropout (a finding), an unreadable depth map is a recorded skip."""
    root = tmp_path / "m"
    _frames_dir(root / "sim", 6)
    _frames_dir(root / "real", 6)
    (root / "depth").mkdir()
    rows = []
    for i in range(6):
        d_sim = np.full((48, 64), 1.0, np.float32)
        np.save(root / "depth" / f"s{i}.npy", d_sim)
        d_real = np.zeros((48, 64), np.float32) if i < 3 else np.full((48, 64), np.nan, np.float32)
        np.save(root / "depth" / f"r{i}.npy", d_real)
        rows.append({"set": "dsim", "domain": "sim", "rgb": f"sim/f{i}.png", "pair_key": str(i), "depth": f"depth/s{i}.npy",
                     "depth_unit": "m"})
        rows.append({"set": "dreal", "domain": "real", "rgb": f"real/f{i}.png", "pair_key": str(i), "depth": f"depth/r{i}.npy",
                     "depth_unit": "m"})
    np.save(root / "depth" / "bad.npy", np.array(["a", "b"]))
    Image.fromarray(good_frame(40)).save(root / "real" / "extra.png")
    rows.append({"set": "dreal", "domain": "real", "rgb": "real/extra.png", "pair_key": "x", "depth": "depth/bad.npy"})
    db = tmp_path / "c.duckdb"
    p = cli("index", "--manifest", _manifest(root / "m.jsonl", rows), "--db", db)
    clean(p)
    assert p.returncode == 0
    assert "depth: unsupported array dtype" in p.stdout, p.stdout
    p = cli("stats", "--sim", "dsim", "--real", "dreal", "--db", db, "--json", tmp_path / "s.json")
    clean(p)
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "s.json").read_text())
    dropout = [f for f in res["findings"] if f["code"] == "depth_dropout"]
    assert dropout and dropout[0]["evidence"]["real_dropout"] == pytest.approx(1.0)


# -- crash safety: kill -9 at random points, rerun, nothing lost or doubled ----------------------------------

N_CRASH = 300  # frames a side: enough that every command is mid-work for most of its lifetime
N_TINY = 12_000  # 8x8 frames for `index`: three catalog batches (ingest.BATCH = 4096)


def _count(db: Path, sql: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute(sql).fetchone()[0])
    finally:
        con.close()


def _crash_cmd(kind: str, tmp: Path, db: Path, out: Path) -> list[str]:
    if kind == "index":
        return ["index", str(tmp / "tiny"), "--set", "tiny", "--domain", "sim", "--db", str(db), "-q"]
    if kind == "manifest":
        return ["index", "--manifest", str(tmp / "m.jsonl"), "--db", str(db), "-q"]
    if kind == "embed":
        return ["embed", "--encoder", "pixel", "--db", str(db), "-q", "--batch-size", "16", "--device", "cpu"]
    return ["run", "--sim", "csim", "--real", "creal", "--encoders", "pixel", "--db", str(db), "--out", str(out), "-q"]


@pytest.fixture(scope="module")
def crash_world(tmp_path_factory):
    """Frames for two sets, a template catalog with them indexed, a finished run's outputs, and how long
    each command takes when left alone."""
    tmp = tmp_path_factory.mktemp("crash")
    rows = []
    rng = np.random.default_rng(0)
    for side, dom in (("csim", "sim"), ("creal", "real")):
        (tmp / side).mkdir()
        for i, s in enumerate(scenes(N_CRASH, h=48, w=64, seed=7 if dom == "sim" else 8)):
            Image.fromarray(render(s, 1.0 if dom == "sim" else 0.9, 0.01, rng)).save(tmp / side / f"k{i:04d}.png",
                                                                                      compress_level=1)
            rows.append({"set": side, "domain": dom, "rgb": f"{side}/k{i:04d}.png", "pair_key": f"k{i:04d}",
                         "episode": f"e{i // 20}", "action": [float(i % 7), float(i % 3)]})
    _manifest(tmp / "m.jsonl", rows)
    (tmp / "tiny").mkdir()
    for i in range(N_TINY):
        Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(tmp / "tiny" / f"t{i:05d}.png",
                                                                           compress_level=0)
    durations = {}
    template = tmp / "template.duckdb"
    assert cli(*_crash_cmd("manifest", tmp, template, tmp)).returncode == 0
    for kind in ("index", "embed", "run"):
        db = tmp / f"full_{kind}.duckdb"
        if kind != "index":
            db.write_bytes(template.read_bytes())
        t0 = time.perf_counter()
        p = cli(*_crash_cmd(kind, tmp, db, tmp / "full_out"))
        durations[kind] = time.perf_counter() - t0
        assert p.returncode == 0, p.stderr
    return tmp, template, durations


# random kill points: three for `index`, two for `embed`, one for `run` (its rerun is the longest;
# the catalog writers it shares with `index` and `embed` are killed at their own points there)
@pytest.mark.parametrize("kind, seed", [(k, s) for k, n in (("index", 3), ("embed", 2), ("run", 1)) for s in range(n)])
def test_kill_9_at_a_random_point_then_rerun_completes_exactly(crash_world, tmp_path, kind, seed):
    tmp, template, durations = crash_world
    db = tmp_path / "c.duckdb"
    out = tmp_path / "out"
    if kind == "run":  # a previous run's outputs exist: a killed run must leave them whole
        out.mkdir()
        for name in ("results.json", "report.html"):
            (out / name).write_bytes((tmp / "full_out" / name).read_bytes())
    fraction = float(np.random.default_rng(seed * 10 + len(kind)).uniform(0.15, 0.9))
    for attempt in range(4):  # the machine's load varies: if it finished before the kill, kill earlier
        if kind != "index":
            db.write_bytes(template.read_bytes())
        else:
            db.unlink(missing_ok=True)
        delay = fraction * durations[kind] / 2 ** attempt
        proc = subprocess.Popen(CLI + _crash_cmd(kind, tmp, db, out), env=ENV, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the command and any worker processes it started
        proc.wait()
        if proc.returncode != 0:
            break
    print(f"{kind} seed {seed}: killed at {delay:.2f} s of {durations[kind]:.2f} s, exit {proc.returncode}")
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    if kind == "run":
        json.loads((out / "results.json").read_text())  # the old file or the new one, never a partial one
        assert (out / "report.html").read_text().rstrip().endswith("</html>")
    p = cli(*_crash_cmd(kind, tmp, db, out))
    clean(p)
    assert p.returncode == 0, p.stderr
    if kind == "index":
        assert _count(db, "SELECT count(*) FROM frames WHERE set_name = 'tiny' AND status = 'ok'") == N_TINY
        assert _count(db, "SELECT count(DISTINCT rgb_path) FROM frames") == N_TINY
        return
    for side in ("csim", "creal"):
        assert _count(db, f"SELECT count(*) FROM frames WHERE set_name = '{side}' AND status = 'ok'") == N_CRASH
    assert _count(db, "SELECT count(*) - count(DISTINCT (set_name, rgb_path)) FROM frames") == 0
    assert _count(db, "SELECT count(*) FROM embeddings") == _count(
        db, "SELECT count(DISTINCT content_hash) FROM frames WHERE status = 'ok'")
    assert _count(db, "SELECT count(*) - count(DISTINCT (content_hash, fingerprint)) FROM embeddings") == 0
    if kind == "run":
        assert _count(db, "SELECT count(*) FROM frame_stats") == _count(
            db, "SELECT count(DISTINCT content_hash) FROM frames WHERE status = 'ok'")
        res = json.loads((out / "results.json").read_text())
        assert res["sets"]["csim"]["n_usable"] == N_CRASH
        # a killed run stored nothing half-way: every stored run has its figures
        assert _count(db, "SELECT count(*) FROM runs r WHERE NOT EXISTS "
                          "(SELECT 1 FROM results s WHERE s.run_id = r.run_id)") == 0


# -- concurrency: one writer at a time, readers keep working -------------------------------------------------

def test_two_writers_and_readers_on_one_catalog(crash_world, tmp_path):
    tmp, template, _ = crash_world
    db = tmp_path / "c.duckdb"
    db.write_bytes(template.read_bytes())
    writer = subprocess.Popen(CLI + ["embed", "--encoder", "pixel", "--db", str(db), "-q", "--batch-size", "8",
                                     "--device", "cpu"], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    lock = db.with_name(db.name + ".lock")
    deadline = time.time() + 60
    while time.time() < deadline and not (lock.exists() and lock.read_text().strip()):
        time.sleep(0.02)
    assert writer.poll() is None, "the writer finished before the test could race it"
    # a second writer fails at once, naming the holder
    second = cli("index", "--manifest", tmp / "m.jsonl", "--db", db)
    _one_line_error(second, "being written by", f"pid {writer.pid}", "embed", "--wait")
    # a second writer that may wait starts now and finishes after the first
    waiting = subprocess.Popen(CLI + ["index", "--manifest", str(tmp / "m.jsonl"), "--db", str(db), "--wait", "300"],
                               env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # readers keep working while the writer writes, and see its progress
    seen = []
    while writer.poll() is None and len(seen) < 40:
        r = cli("drift", "--history", "--db", db)
        clean(r)
        assert r.returncode == 0, r.stderr
        con = None
        for _ in range(200):  # a plain DuckDB reader: in between the writer's batches
            try:
                con = duckdb.connect(str(db), read_only=True)
                break
            except duckdb.IOException:
                time.sleep(0.02)
        assert con is not None
        seen.append(con.execute("SELECT count(*) FROM embeddings").fetchone()[0])
        con.close()
    out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err
    assert len(seen) >= 2 and seen[-1] > seen[0], seen  # read during the write, and the count grew
    out, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0 and "Traceback" not in err, err
    assert out.count(f"{N_CRASH} listed, 0 new, 0 changed, {N_CRASH} unchanged") == 2, out  # it ran, after the writer
    n = _count(db, "SELECT count(DISTINCT content_hash) FROM frames WHERE status = 'ok'")
    assert _count(db, "SELECT count(*) FROM embeddings") == n == 2 * N_CRASH
    assert _count(db, "SELECT count(*) FROM frames") == 2 * N_CRASH
    assert not lock.exists()  # released: the lock file removed with the last writer


def test_lock_is_released_when_the_holder_is_killed(tmp_path):
    """flock dies with its process: a kill -9'd writer never leaves a stale lock."""
    _frames_dir(tmp_path / "a", 3)
    db = tmp_path / "c.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, %r)\n"
        "from perception_gap.catalog import Catalog\n"
        "c = Catalog(%r); print('held', flush=True); time.sleep(600)") % (str(REPO), str(db))],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    _one_line_error(cli("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db), f"pid {holder.pid}")
    t0 = time.perf_counter()
    _one_line_error(cli("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db, "--wait", "1"),
                    "after waiting 1 s")
    assert time.perf_counter() - t0 >= 1.0
    holder.kill()
    holder.wait()
    p = cli("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr


# -- hostile content, end to end -----------------------------------------------------------------------------

XSS = '"><script>console.error("XSS-script")</script><img src=x onerror=console.error("XSS-img")>'
XSS_FILE = '"><img src=x onerror=console.error("XSS-file")>'  # no "/" in a file name


def _hostile_world(tmp: Path) -> tuple[Path, str, str, str]:
    """Paired sets whose set names, file names, tags, detector name and COCO categories carry markup."""
    sim, real, det = "sim" + XSS, "real" + XSS, "det" + XSS
    db = tmp / "c.duckdb"
    rng = np.random.default_rng(3)
    for folder, name, dom, gain in (("s", sim, "sim", 1.0), ("r", real, "real", 0.8)):
        (tmp / folder / "ep0").mkdir(parents=True)
        for i, s in enumerate(scenes(10, h=48, w=64, seed=21)):
            Image.fromarray(render(s, gain, 0.01, rng)).save(tmp / folder / "ep0" / f"{XSS_FILE}{i}.png")
        (tmp / folder / "ep0" / f"{XSS_FILE}_broken.png").write_bytes(b"")  # a skipped, listed file
        p = cli("index", tmp / folder, "--set", name, "--domain", dom, "--tags", "t" + XSS.replace(",", ";"),
                "--db", db, "-q")
        assert p.returncode == 0, p.stderr
        coco = {"images": [{"id": i, "file_name": f"{XSS_FILE}{i}.png", "width": 64, "height": 48} for i in range(10)],
                "categories": [{"id": 1, "name": "cat" + XSS}],
                "annotations": [{"id": i, "image_id": i, "category_id": 1, "bbox": [10, 10, 20, 15]} for i in range(10)]}
        (tmp / f"{folder}_gt.json").write_text(json.dumps(coco))
        dets = dict(coco, annotations=[dict(a, score=0.9, bbox=[11 + (dom == "real") * 6, 10, 20, 15])
                                       for a in coco["annotations"]])
        (tmp / f"{folder}_det.json").write_text(json.dumps(dets))
        for src, f in (("gt", f"{folder}_gt.json"), (det, f"{folder}_det.json")):
            p = cli("index", "--coco", tmp / f, "--set", name, "--source", src, "--db", db, "-q")
            assert p.returncode == 0, p.stderr
    return db, sim, real, det


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_hostile_names_end_to_end_are_escaped_and_run_nothing_in_a_browser(tmp_path):
    from test_report import _page_load_audit

    db, sim, real, det = _hostile_world(tmp_path)
    p = cli("run", "--sim", sim, "--real", real, "--encoders", "pixel", "--out", tmp_path / "out", "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert det in res["detection"]["sets"][sim]
    pages = [tmp_path / "out" / "report.html"]
    p = cli("drift", "--baseline", real, "--current", sim, "--encoders", "pixel", "--out", tmp_path / "drift", "--db", db)
    clean(p)
    assert p.returncode in (0, 1), p.stderr
    pages.append(tmp_path / "drift" / "report.html")
    for page in pages:
        html = page.read_text()
        console, urls, dom = _page_load_audit(tmp_path, page)
        assert console == [] and urls == [], (page, console, urls)  # nothing ran, logged or fetched
        for doc in (html, dom):
            assert re.findall(r"(?i)<script", doc) == [], page
            assert re.findall(r"(?i)<img[^>]*onerror", doc) == [], page
        assert "&lt;script&gt;console.error(" in html  # shown as text
    html = pages[0].read_text()
    for shown in ("sim&#34;&gt;&lt;script&gt;", "det&#34;&gt;&lt;script&gt;", "cat&#34;&gt;&lt;script&gt;",
                  "t&#34;&gt;&lt;script&gt;", "&#34;&gt;&lt;img src=x onerror=console.error(&#34;XSS-file&#34;)&gt;"):
        assert shown in html, shown  # set, detector, category, tag and file names all reach the page, escaped


# -- offline: a full run opens no network socket -------------------------------------------------------------

_AUDIT = r"""
import socket, sys
sys.path.insert(0, {repo!r})
log = open({log!r}, "a", buffering=1)
def hook(event, args):
    if event == "socket.__new__" and args[1] not in (socket.AF_UNIX,):
        log.write(f"socket {{args[1]!r}}\n")
    elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo", "socket.gethostbyname"):
        addr = args[1] if len(args) > 1 else args
        if not (isinstance(addr, (str, bytes)) and event in ("socket.connect", "socket.bind")):  # AF_UNIX paths
            log.write(f"{{event}} {{addr!r}}\n")
sys.addaudithook(hook)
{body}
"""


def _audited(tmp: Path, body: str, log: Path) -> subprocess.CompletedProcess:
    code = _AUDIT.format(repo=str(REPO), log=str(log), body=body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=ENV)


def test_a_full_run_opens_no_network_socket(crash_world, tmp_path):
    tmp, _, _ = crash_world
    log = tmp_path / "net.log"
    # known answer for the audit itself: a socket and a name lookup are caught
    p = _audited(tmp_path, "import socket\ns = socket.socket()\ntry:\n    socket.getaddrinfo('localhost', 80)\n"
                           "except OSError:\n    pass\n", log)
    assert p.returncode == 0, p.stderr
    assert "socket" in log.read_text() and "getaddrinfo" in log.read_text()
    log.unlink()
    # 60 frames a side of the crash world (3 episodes each), indexed and analysed in the audited process:
    # index, statistics, embeddings through a real encoder, metrics, probes and the report
    rows = [json.loads(line) for line in (tmp / "m.jsonl").read_text().splitlines()]
    manifest = _manifest(tmp / "m60.jsonl", [r for r in rows if int(r["pair_key"][1:]) < 60])
    db = tmp_path / "c.duckdb"
    index = ["index", "--manifest", str(manifest), "--db", str(db), "-q"]
    argv = ["run", "--sim", "csim", "--real", "creal", "--db", str(db), "--out", str(tmp_path / "out"), "-q",
            "--encoders", "pixel,efficientnet-lite0"]
    p = _audited(tmp_path, f"import cli\nassert cli.main({index!r}) == 0\nsys.exit(cli.main({argv!r}))", log)
    clean(p)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "report.html").exists()
    assert not log.exists() or log.read_text() == "", log.read_text()
