"""Ingest and catalog on a real DuckDB file: conventions, incremental re-index, bad input."""

from __future__ import annotations

import csv
import json
import os
import struct
import zlib
from pathlib import Path

import duckdb
import numpy as np
import pytest
from PIL import Image

from perception_gap.catalog import SCHEMA_VERSION, Catalog
from perception_gap.errors import CatalogError, InputError
from perception_gap.ingest import index_folder, index_manifest
from perception_gap.workflows.stats import compute_stats, load_set_records, stats_job


def img(seed: int, h: int = 48, w: int = 64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 3, y * 4, (x + y) * 2], -1) + rng.normal(0, 8, (h, w, 3)) + 30
    return np.clip(base, 0, 255).astype(np.uint8)


def write_frames(folder: Path, n: int, *, ext: str = "png", seed: int = 0) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        p = folder / f"frame_{i:03d}.{ext}"
        Image.fromarray(img(seed + i)).save(p)
        paths.append(p)
    return paths


def rows(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_index_folder_conventions(tmp_path):
    root = tmp_path / "sim"
    write_frames(root, 3)
    # nested episodes, depth in a depth/ subfolder and as a _depth sibling, arrays in both layouts
    (root / "ep1").mkdir()
    Image.fromarray(img(7)).save(root / "ep1" / "step_0005.png")
    (root / "depth").mkdir()
    Image.fromarray((np.full((48, 64), 1500)).astype(np.uint16)).save(root / "depth" / "frame_000.png")
    np.save(root / "frame_001_depth.npy", np.full((48, 64), 1.5, np.float32))
    np.save(root / "obs_hwc.npy", img(8).astype(np.float32) / 255)
    np.save(root / "obs_chw.npy", np.moveaxis(img(9), -1, 0))
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        rep = index_folder(cat, root, "sim", "sim")
    assert (rep.listed, rep.new, rep.usable, rep.skipped) == (6, 6, 6, ())
    got = {r[0]: r[1:] for r in rows(db, "SELECT pair_key, episode, step, depth_path IS NOT NULL, mode, dtype, channels FROM frames")}
    assert got["ep1/step_0005"][:2] == ("ep1", 5)
    assert got["frame_000"][2] and got["frame_001"][2] and not got["frame_002"][2]
    assert got["obs_hwc"][3:] == ("HWC", "float32", 3)
    assert got["obs_chw"][3:] == ("CHW", "uint8", 3)
    assert rows(db, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    # depth statistics go through the catalog too (one mean per depth map)
    with Catalog(db) as cat:
        compute_stats(cat, ["sim"], workers=1)
        recs = {f.pair_key: f for f in load_set_records(cat, "sim").frames}
    assert recs["frame_000"].depth.mean == pytest.approx(1500) and recs["frame_000"].depth.inferred_unit == "mm"
    assert recs["frame_001"].depth.mean == pytest.approx(1.5) and recs["frame_001"].depth.dropout == 0


def test_incremental_reindex_hashes_only_what_changed(tmp_path):
    root = tmp_path / "real"
    paths = write_frames(root, 5)
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_folder(cat, root, "real", "real")
        assert compute_stats(cat, ["real"], workers=1).computed == 5
        again = index_folder(cat, root, "real", "real")
        assert (again.new, again.changed, again.unchanged, again.vanished) == (0, 0, 5, 0)
        assert compute_stats(cat, ["real"], workers=1).computed == 0  # cached by content hash
        # change one file, delete one, add a byte-identical copy under a new name
        Image.fromarray(img(99)).save(paths[0])
        os.utime(paths[0], ns=(1, 1))
        paths[1].unlink()
        (root / "copy_of_2.png").write_bytes(paths[2].read_bytes())
        rep = index_folder(cat, root, "real", "real")
        assert (rep.new, rep.changed, rep.unchanged, rep.vanished) == (1, 1, 3, 1)
        assert compute_stats(cat, ["real"], workers=1).computed == 1  # only the changed content
    status = dict(rows(db, "SELECT pair_key, status FROM frames"))
    assert status["frame_001"] == "missing" and status["copy_of_2"] == "ok"
    assert rows(db, "SELECT count(*) FROM frame_stats")[0][0] == 6


def test_index_and_stats_open_the_catalog_a_few_times_not_once_a_step(tmp_path, monkeypatch):
    """Opening the DuckDB file costs 15-40 ms: `index` of a one-batch set opens it for the steps
    before reading, then once for the last batch and the steps after; `compute_stats` once to list
    what needs measuring and once a write. The results are those of one open per step."""
    root = tmp_path / "real"
    write_frames(root, 5)
    opens = []
    real_connect = Catalog._connect

    def counted(self):
        opens.append(self.path)
        return real_connect(self)

    with Catalog(tmp_path / "c.duckdb") as cat:
        monkeypatch.setattr(Catalog, "_connect", counted)
        rep = index_folder(cat, root, "real", "real")
        assert (len(opens), rep.new, rep.usable) == (2, 5, 5)
        assert compute_stats(cat, ["real"], workers=1).computed == 5
        assert len(opens) == 2 + 2
        again = index_folder(cat, root, "real", "real")  # nothing to read or write
        assert (len(opens), again.unchanged) == (4 + 2, 5)
    assert rows(tmp_path / "c.duckdb", "SELECT count(*) FROM frame_stats")[0][0] == 5


def _bad_files(root: Path) -> dict[str, str]:
    """name -> a fragment of the expected skip reason."""
    root.mkdir(parents=True, exist_ok=True)
    good = root / "good.jpg"
    Image.fromarray(img(1)).save(good, quality=90)
    (root / "zero.png").write_bytes(b"")
    (root / "text.png").write_text("this is not an image")
    (root / "trunc.jpg").write_bytes(good.read_bytes()[:300])
    buf = root / "full.png"
    Image.fromarray(img(2, 200, 200)).save(buf)
    (root / "trunc.png").write_bytes(buf.read_bytes()[:400])
    buf.unlink()
    (root / "folder.png").mkdir()
    np.save(root / "object.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(root / "fourd.npy", np.zeros((2, 3, 4, 5), np.float32))
    np.save(root / "empty.npy", np.zeros((0, 5, 3), np.float32))
    (root / "notes.yaml").write_text("a: 1\n")
    # a PNG header claiming 100000 x 100000 pixels: a decompression bomb
    ihdr = struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    idat = zlib.compress(b"\x00" * 64)
    (root / "bomb.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return {"zero.png": "zero-byte", "text.png": "not a readable image", "trunc.jpg": "truncated",
            "trunc.png": "truncated", "folder.png": "directory", "object.npy": "",
            "fourd.npy": "2-D or 3-D", "empty.npy": "empty", "notes.yaml": "unsupported file type",
            "bomb.png": "bomb"}


def test_bad_input_is_recorded_and_good_frames_kept(tmp_path):
    root = tmp_path / "bad"
    expected = _bad_files(root)
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        rep = index_folder(cat, root, "bad", "real")
        compute_stats(cat, ["bad"], workers=1)
        recs = load_set_records(cat, "bad")
        skipped = {Path(s["path"]).name: s["reason"] for s in cat.skipped_frames("bad")}
    assert [f.pair_key for f in recs.frames] == ["good"]
    assert set(skipped) == set(expected), skipped
    for name, fragment in expected.items():
        assert fragment.lower() in skipped[name].lower(), (name, skipped[name])
        assert "\n" not in skipped[name]
    assert rep.usable >= 1


def test_nan_npy_frame_is_kept_and_counted(tmp_path):
    root = tmp_path / "nan"
    root.mkdir()
    a = img(3).astype(np.float32) / 255
    a[:10] = np.nan
    np.save(root / "a.npy", a)
    with Catalog(tmp_path / "c.duckdb") as cat:
        index_folder(cat, root, "nan", "sim")
        compute_stats(cat, ["nan"], workers=1)
        (f,) = load_set_records(cat, "nan").frames
    assert f.image.nonfinite_frac == pytest.approx(10 / 48, abs=0.02)
    assert all(np.isfinite(f.image.mean))


def test_exif_orientation_applied_and_recorded(tmp_path):
    root = tmp_path / "exif"
    root.mkdir()
    a = img(4, 40, 80)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise on display
    Image.fromarray(a).save(root / "r.jpg", exif=exif, quality=95)
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_folder(cat, root, "exif", "real")
        compute_stats(cat, ["exif"], workers=1)
        (f,) = load_set_records(cat, "exif").frames
    assert rows(db, "SELECT width, height, exif_orientation FROM frames") == [(40, 80, 6)]
    assert (f.image.width, f.image.height) == (40, 80)


def test_sixteen_bit_png_not_truncated(tmp_path):
    import png

    root = tmp_path / "p16"
    root.mkdir()
    a = (img(5).astype(np.uint16) * 257 + 3)
    with open(root / "x.png", "wb") as fh:
        png.Writer(64, 48, greyscale=False, bitdepth=16).write(fh, a.reshape(48, -1).tolist())
    with Catalog(tmp_path / "c.duckdb") as cat:
        index_folder(cat, root, "p16", "real")
        compute_stats(cat, ["p16"], workers=1)
        (f,) = load_set_records(cat, "p16").frames
    assert f.image.dtype == "uint16" and f.image.nominal_max == 65535
    assert f.image.mean[0] == pytest.approx(a[..., 0].astype(float).mean(), rel=1e-9)


def test_duplicate_pair_keys_and_regex(tmp_path):
    root = tmp_path / "dup"
    root.mkdir()
    Image.fromarray(img(1)).save(root / "cam0_0001.png")
    Image.fromarray(img(2)).save(root / "cam1_0001.png")
    Image.fromarray(img(3)).save(root / "other.png")
    with Catalog(tmp_path / "c.duckdb") as cat:
        rep = index_folder(cat, root, "dup", "real", pair_regex=r"_(\d+)$")
    reasons = {Path(p).name: r for p, r in rep.skipped}
    assert "duplicate pair key '0001'" in reasons["cam1_0001.png"]
    assert "does not match --pair-regex" in reasons["other.png"]
    assert rep.usable == 1
    with Catalog(tmp_path / "c.duckdb") as cat, pytest.raises(InputError, match="pair-regex"):
        index_folder(cat, root, "dup2", "real", pair_regex="(")


def test_domain_conflict_and_unknown_set(tmp_path):
    root = tmp_path / "f"
    write_frames(root, 2)
    with Catalog(tmp_path / "c.duckdb") as cat:
        index_folder(cat, root, "s", "sim")
        with pytest.raises(InputError, match="already indexed as domain 'sim'"):
            index_folder(cat, root, "s", "real")
        with pytest.raises(InputError, match="Unknown set 'nope'"):
            stats_job(cat, "s", "nope")


def test_not_a_catalog(tmp_path):
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE t (x INT)")
    con.close()
    with pytest.raises(CatalogError, match="not a perception-gap catalog"):
        Catalog(other)


def _manifest_rows(tmp_path: Path) -> list[dict]:
    write_frames(tmp_path / "sim", 3, seed=0)
    write_frames(tmp_path / "real", 3, seed=10)
    out = []
    for dom in ("sim", "real"):
        for i in range(3):
            out.append({"set": f"m_{dom}", "domain": dom, "rgb": f"{dom}/frame_{i:03d}.png",
                        "pair_key": f"k{i}", "episode": "e0", "step": i,
                        "action": json.dumps([0.1 * i, -0.2]), "proprio_0": i, "proprio_1": 2 * i})
    return out


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_manifest_formats(tmp_path, fmt):
    data = _manifest_rows(tmp_path)
    path = tmp_path / f"m.{fmt}"
    if fmt == "csv":
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0]))
            w.writeheader()
            w.writerows(data)
    elif fmt == "jsonl":
        path.write_text("\n".join(json.dumps(r) for r in data))
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(data), path)
    with Catalog(tmp_path / "c.duckdb") as cat:
        reps = index_manifest(cat, path)
        assert sorted((r.set_name, r.usable) for r in reps) == [("m_real", 3), ("m_sim", 3)]
        compute_stats(cat, ["m_sim", "m_real"], workers=1)
        sim = load_set_records(cat, "m_sim")
    f2 = [f for f in sim.frames if f.pair_key == "k2"][0]
    assert f2.action == pytest.approx((0.2, -0.2)) and f2.proprio == (2.0, 4.0) and f2.episode == "e0"


def test_manifest_errors(tmp_path):
    data = _manifest_rows(tmp_path)
    bad = tmp_path / "missing.jsonl"
    bad.write_text("\n".join(json.dumps({k: v for k, v in r.items() if k != "pair_key"}) for r in data))
    both = tmp_path / "both.jsonl"
    rows2 = [dict(r, set="x") for r in data]
    both.write_text("\n".join(json.dumps(r) for r in rows2))
    outside = tmp_path / "sub" / "out.jsonl"
    outside.parent.mkdir()
    outside.write_text(json.dumps(dict(data[0], rgb="../sim/frame_000.png")) + "\n" + json.dumps(dict(data[1], rgb="frame.png")))
    with Catalog(tmp_path / "c.duckdb") as cat:
        with pytest.raises(InputError, match="missing required column.*pair_key"):
            index_manifest(cat, bad)
        with pytest.raises(InputError, match="both domains"):
            index_manifest(cat, both)
        (rep,) = index_manifest(cat, outside)
        # `../sim/...` leaves the manifest's folder: accepted (the manifest is the user's own input)
        assert [r for _, r in rep.skipped] == ["file not found"] and rep.usable == 1
        # --root: relative paths start from another folder; the corrected listing replaces the set's rows
        fixed = tmp_path / "sub" / "fixed.jsonl"
        fixed.write_text("\n".join(json.dumps(dict(data[i], rgb=f"frame_00{i}.png")) for i in range(2)))
        (rep,) = index_manifest(cat, fixed, root=tmp_path / "real")
        assert (rep.usable, rep.skipped, rep.removed, rep.vanished) == (2, (), 2, 0)
        assert sorted(r["rgb_path"] for r in cat.existing_frames("m_sim").values() if r) == [
            str(tmp_path / "real" / f"frame_00{i}.png") for i in range(2)]
        with pytest.raises(InputError, match="--root.*not found"):
            index_manifest(cat, outside, root=tmp_path / "nowhere")
