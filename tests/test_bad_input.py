"""A bad-input corpus through the real CLI: every file-level fault a folder can hold (empty,
truncated, not an image, a directory, a symlink loop, a decompression bomb, odd arrays, names that
are not UTF-8...) beside frames that are odd but good, and set-level faults (manifests, empty and
unknown sets, catalogs, COCO files, one-frame and constant sets, depth). Each is a recorded skip
with its reason or a one-line error (exit 2), never a traceback, and every good frame is kept.

The file-level corpus goes through subprocesses of `python cli.py`, exactly as a user runs it.
The set-level cases run the same command lines in this process (tests/in_process.py: exit code,
stdout and stderr as a user sees them, logged warnings included).
"""

from __future__ import annotations

import io
import json
import os
import struct
import zlib
from pathlib import Path

import duckdb
import numpy as np
import pytest
from PIL import Image

from perception_gap.cli import main
from tests.cli_process import clean, cli, frames_dir, good_frame, one_line_error, write_manifest
from tests.in_process import here


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
    assert main(["index", str(tmp / "real"), "--set", "real", "--domain", "real", "--db", str(db), "-q"]) == 0
    steps = {
        "index_sim": cli("index", tmp / "sim", "--set", "sim", "--domain", "sim", "--db", db),
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

def test_bad_manifest_missing_columns(tmp_path, capfd):
    frames_dir(tmp_path / "a", 2)
    m = write_manifest(tmp_path / "m.jsonl", [{"set": "s", "rgb": "a/f0.png", "pair_key": "0"}])
    one_line_error(here(capfd, "index", "--manifest", m, "--db", tmp_path / "c.duckdb"),
                   "missing required column", "domain")


def test_bad_manifest_extra_columns_are_named_and_ignored(tmp_path, capfd):
    frames_dir(tmp_path / "a", 2)
    m = write_manifest(tmp_path / "m.jsonl", [{"set": "s", "domain": "sim", "rgb": f"a/f{i}.png", "pair_key": str(i),
                                           "dpeth": "typo.png", "action_0": 0.5} for i in range(2)])
    p = here(capfd, "index", "--manifest", m, "--db", tmp_path / "c.duckdb")
    clean(p)
    assert p.returncode == 0
    warn = [ln for ln in p.stderr.splitlines() if "ignored column" in ln]
    assert len(warn) == 1 and "dpeth" in warn[0] and "action_0" not in warn[0], p.stderr
    assert "2 usable" in p.stdout


def test_bad_duplicate_pair_keys_keep_the_first(tmp_path, capfd):
    frames_dir(tmp_path / "a", 3)
    m = write_manifest(tmp_path / "m.jsonl", [{"set": "s", "domain": "sim", "rgb": f"a/f{i}.png", "pair_key": "same"}
                                          for i in range(3)])
    p = here(capfd, "index", "--manifest", m, "--db", tmp_path / "c.duckdb")
    clean(p)
    assert p.returncode == 0 and "1 usable, 2 skipped" in p.stdout
    # the two skips share their reason: one grouped line with the count and both files
    lines = [ln for ln in p.stdout.splitlines() if "duplicate pair key 'same'" in ln]
    assert len(lines) == 1 and "skipped 2 frames" in lines[0] and "f1.png, f2.png" in lines[0], p.stdout


def test_bad_empty_set_and_unknown_set(tmp_path, capfd):
    (tmp_path / "empty").mkdir()
    one_line_error(here(capfd, "index", tmp_path / "empty", "--set", "e", "--domain", "sim",
                        "--db", tmp_path / "c.duckdb"), "no usable frame")
    only_bad = tmp_path / "only_bad"
    only_bad.mkdir()
    (only_bad / "x.png").write_bytes(b"")
    one_line_error(here(capfd, "index", only_bad, "--set", "b", "--domain", "sim", "--db", tmp_path / "c.duckdb"),
                   "no usable frame", "1 skipped")
    one_line_error(here(capfd, "stats", "--sim", "nope", "--real", "e", "--db", tmp_path / "c.duckdb"), "nope")
    one_line_error(here(capfd, "index", tmp_path / "does_not_exist", "--set", "x", "--domain", "sim",
                        "--db", tmp_path / "c.duckdb"), "does_not_exist")


def test_bad_catalog_file(tmp_path, capfd):
    (tmp_path / "text.duckdb").write_text("not a database")
    frames_dir(tmp_path / "a", 1)
    one_line_error(here(capfd, "index", tmp_path / "a", "--set", "s", "--domain", "sim",
                        "--db", tmp_path / "text.duckdb"), "catalog")


def test_bad_coco_malformed_and_boxes_outside_the_image(tmp_path, capfd):
    frames_dir(tmp_path / "a", 2)
    db = tmp_path / "c.duckdb"
    assert here(capfd, "index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db, "-q").returncode == 0
    (tmp_path / "broken.json").write_text('{"images": [{"id": 1, "file_name": "f0.png"}], "annotations": [')
    one_line_error(here(capfd, "index", "--coco", tmp_path / "broken.json", "--set", "s", "--source", "gt", "--db", db),
                   "json")
    (tmp_path / "shape.json").write_text(json.dumps({"images": "nope", "annotations": 3}))
    one_line_error(here(capfd, "index", "--coco", tmp_path / "shape.json", "--set", "s", "--source", "gt", "--db", db))
    coco = {"images": [{"id": 1, "file_name": "f0.png", "width": 64, "height": 48},
                       {"id": 2, "file_name": "f1.png", "width": 64, "height": 48}],
            "categories": [{"id": 1, "name": "cube"}],
            "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [50, 40, 30, 30]},      # partly out
                            {"id": 2, "image_id": 2, "category_id": 1, "bbox": [500, 400, 10, 10]},    # wholly out
                            {"id": 3, "image_id": 2, "category_id": 1, "bbox": [5, 5, 10, 10]}]}
    (tmp_path / "gt.json").write_text(json.dumps(coco))
    p = here(capfd, "index", "--coco", tmp_path / "gt.json", "--set", "s", "--source", "gt", "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    assert "clipped 1" in p.stdout.replace(":", "") or "1 clipped" in p.stdout, p.stdout
    assert "dropped 1" in p.stdout.replace(":", "") or "1 dropped" in p.stdout, p.stdout
    con = duckdb.connect(str(db), read_only=True)
    boxes = [tuple(b) for (b,) in con.execute("SELECT bbox FROM annotations ORDER BY bbox[1]").fetchall()]
    con.close()
    assert boxes == [(5.0, 5.0, 10.0, 10.0), (50.0, 40.0, 14.0, 8.0)]


def test_bad_single_frame_and_constant_images_run_to_the_end(tmp_path, capfd):
    """A one-frame set and sets of constant frames: `run` completes, says what it could not measure,
    and writes no NaN (results.json is strict JSON)."""
    db = tmp_path / "c.duckdb"
    for name, dom in (("one_sim", "sim"), ("one_real", "real")):
        (tmp_path / name).mkdir()
        Image.fromarray(good_frame(0)).save(tmp_path / name / "k.png")
        assert here(capfd, "index", tmp_path / name, "--set", name, "--domain", dom, "--db", db, "-q").returncode == 0
    p = here(capfd, "run", "--sim", "one_sim", "--real", "one_real", "--encoders", "pixel", "--out", tmp_path / "o1",
             "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "o1" / "results.json").read_text())
    assert any(f["code"] == "insufficient_data" for f in res["findings"])
    for name, dom, level in (("flat_sim", "sim", 90), ("flat_real", "real", 90)):
        (tmp_path / name).mkdir()
        for i in range(6):
            Image.fromarray(np.full((48, 64, 3), level, np.uint8)).save(tmp_path / name / f"k{i}.png")
        assert here(capfd, "index", tmp_path / name, "--set", name, "--domain", dom, "--db", db, "-q").returncode == 0
    p = here(capfd, "run", "--sim", "flat_sim", "--real", "flat_real", "--encoders", "pixel", "--out", tmp_path / "o2",
             "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    json.loads((tmp_path / "o2" / "results.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


def test_bad_depth_all_zero_nan_and_wrong_dtype(tmp_path, capfd):
    """All-zero and NaN depth are measured as dropout (a finding), an unreadable depth map is a recorded skip."""
    root = tmp_path / "m"
    frames_dir(root / "sim", 6)
    frames_dir(root / "real", 6)
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
    p = here(capfd, "index", "--manifest", write_manifest(root / "m.jsonl", rows), "--db", db)
    clean(p)
    assert p.returncode == 0
    assert "depth: unsupported array dtype" in p.stdout, p.stdout
    p = here(capfd, "stats", "--sim", "dsim", "--real", "dreal", "--db", db, "--json", tmp_path / "s.json")
    clean(p)
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "s.json").read_text())
    dropout = [f for f in res["findings"] if f["code"] == "depth_dropout"]
    assert dropout and dropout[0]["evidence"]["real_dropout"] == pytest.approx(1.0)
