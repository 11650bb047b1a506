"""A frame file changed after `index` never poisons the catalog's cache of its old content: the
statistics and embeddings of every set sharing that content stay exactly what a fresh catalog of
the same files gives; a file replaced by a FIFO is a skip, not a hang. Through the command line:
in-process (`cli_main`) where the numbers are the point, as `python cli.py` with a timeout where a
hang would be."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from functools import partial
from pathlib import Path

import numpy as np
from PIL import Image

from tests.cli_process import clean, cli, cli_main, query

T = 120  # seconds: every command here finishes in a few


def _blake(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


def _noise_frames(root: Path, n: int, mean: float, seed: int) -> None:
    root.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(np.clip(rng.normal(mean, 6, (48, 64, 3)), 0, 255).astype(np.uint8)).save(root / f"f{i}.png")


def _embeddings(db: Path) -> dict[str, np.ndarray]:
    """Pixel-encoder vectors of every frame, by path."""
    rows = query(db, "SELECT f.rgb_path, e.vector FROM frames f JOIN embeddings e ON e.content_hash = f.content_hash "
                      "WHERE f.status = 'ok' AND e.encoder = 'pixel'")
    return {p: np.asarray(v) for p, v in rows}


def _index(main, db: Path, sets: dict[str, Path]) -> None:
    for name, root in sets.items():
        p = main("index", root, "--set", name, "--domain", "sim" if name == "a" else "real", "--db", db, "-q")
        clean(p)
        assert p.returncode == 0, p.stderr


def test_a_file_changed_after_index_never_poisons_the_cache_of_its_old_content(tmp_path, capfd, caplog):
    """Sets a and b share content; a/f0.png is rewritten after `index`, then again before `embed`.
    Set b must be measured as it is (about 49, not 250), a/f0 as it is now, and every number
    and embedding must be exactly what a fresh catalog of the same files gives."""
    main = partial(cli_main, capfd, caplog)
    a, b = tmp_path / "a", tmp_path / "b"
    _noise_frames(a, 4, 49, seed=0)
    shutil.copytree(a, b)  # identical content: one content hash per pair, shared by both sets
    db = tmp_path / "c.duckdb"
    _index(main, db, {"a": a, "b": b})
    old_hash = _blake(a / "f0.png")
    Image.fromarray(np.full((48, 64, 3), 250, np.uint8)).save(a / "f0.png")  # changed after index
    p = main("stats", "--sim", "a", "--real", "b", "--db", db, "--json", tmp_path / "s.json")
    clean(p)
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "s.json").read_text())
    assert res["sets"]["a"]["reindexed"] == [str(a / "f0.png")] and "re-indexed 1 frame" in p.stdout
    assert res["sets"]["b"]["reindexed"] == []
    # the catalog knows a/f0.png by its new content; the old hash keeps the old content's numbers
    assert query(db, "SELECT content_hash FROM frames WHERE rgb_path = ?", [str(a / "f0.png")])[0][0] == _blake(a / "f0.png")
    means = dict(query(db, "SELECT content_hash, mean FROM frame_stats"))
    truth = np.asarray(Image.open(b / "f0.png"), np.float64).reshape(-1, 3).mean(axis=0)  # independent reference
    np.testing.assert_allclose(means[old_hash], truth, atol=1.0)
    np.testing.assert_allclose(means[_blake(a / "f0.png")], [250, 250, 250])
    assert max(res["stats"]["b"]["channel_max"]) < 120  # nothing of the 250-frame reached set b
    np.testing.assert_allclose(res["stats"]["b"]["channel_mean"], 49, atol=2)

    # changed again before `embed`: embeddings are checked the same way
    Image.fromarray(np.full((48, 64, 3), 200, np.uint8)).save(a / "f0.png")
    p = main("embed", "--encoder", "pixel", "--db", db, "-q")
    clean(p)
    assert p.returncode == 0, p.stderr
    p = main("stats", "--sim", "a", "--real", "b", "--db", db, "--json", tmp_path / "s.json", "-q")
    res = json.loads((tmp_path / "s.json").read_text())

    # a fresh catalog of the same files is the reference for every number, embeddings included
    fresh = tmp_path / "fresh.duckdb"
    _index(main, fresh, {"a": a, "b": b})
    for args in (("embed", "--encoder", "pixel"), ("stats", "--sim", "a", "--real", "b", "--json", tmp_path / "f.json")):
        p = main(*args, "--db", fresh, "-q")
        assert p.returncode == 0, p.stderr
    ref = json.loads((tmp_path / "f.json").read_text())
    assert res["stats"] == ref["stats"] and res["findings"] == ref["findings"]
    got, want = _embeddings(db), _embeddings(fresh)
    assert sorted(got) == sorted(want) and len(got) == 8
    for path in want:
        np.testing.assert_array_equal(got[path], want[path], err_msg=path)
    assert not np.array_equal(got[str(a / "f0.png")], got[str(b / "f0.png")])

    # indexing again finds nothing to do: the catalog already holds the new content
    p = main("index", a, "--set", "a", "--domain", "sim", "--db", db)
    assert p.returncode == 0 and "0 changed, 4 unchanged" in p.stdout, p.stdout


def test_a_file_replaced_by_a_fifo_after_index_is_a_skip_not_a_hang(tmp_path, capfd, caplog):
    a, b = tmp_path / "a", tmp_path / "b"
    _noise_frames(a, 3, 49, seed=1)
    _noise_frames(b, 3, 60, seed=2)
    db = tmp_path / "c.duckdb"
    _index(partial(cli_main, capfd, caplog), db, {"a": a, "b": b})
    (a / "f1.png").unlink()
    os.mkfifo(a / "f1.png")
    p = cli("stats", "--sim", "a", "--real", "b", "--db", db, "--json", tmp_path / "s.json", timeout=T)
    clean(p)
    assert p.returncode == 0, p.stderr
    skipped = json.loads((tmp_path / "s.json").read_text())["sets"]["a"]["skipped"]
    assert [(Path(s["path"]).name, s["reason"]) for s in skipped] == [("f1.png", "is a FIFO (named pipe), not a regular file")]
