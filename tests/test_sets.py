"""Catalog hygiene through the command line (`cli_main`: `cli.main` in-process): `sets`, `drop`, `rename`,
re-indexing a set from a corrected manifest, and read commands on a catalog that does not exist."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import duckdb
import pytest
from PIL import Image

from tests.cli_process import clean, cli_main, good_frame


def _folder(root: Path, n: int, seed: int = 0) -> Path:
    root.mkdir(parents=True)
    for i in range(n):
        Image.fromarray(good_frame(seed + i)).save(root / f"f{i}.png")
    return root


def _count(db: Path, sql: str, *params) -> int:
    con = duckdb.connect(str(db), read_only=True)
    n = con.execute(sql, list(params)).fetchone()[0]
    con.close()
    return n


def test_sets_drop_rename(tmp_path, capfd, caplog):
    cli = partial(cli_main, capfd, caplog)
    db = tmp_path / "c.duckdb"
    sim = _folder(tmp_path / "sim", 3)
    real = _folder(tmp_path / "real", 4, seed=10)
    (real / "broken.png").write_bytes(b"\x89PNG\r\n")
    p = cli("sets", "--db", db)
    assert p.returncode == 2 and not db.exists()
    clean(cli("index", sim, "--set", "sim", "--domain", "sim", "--db", db))
    clean(cli("index", real, "--set", "real", "--domain", "real", "--db", db))
    p = cli("sets", "--db", db, "--json", tmp_path / "sets.json")
    clean(p)
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["name", "domain", "frames", "usable", "skipped", "source"]
    assert lines[1].split()[:5] == ["real", "real", "5", "4", "1"] and lines[2].split()[:5] == ["sim", "sim", "3", "3", "0"]
    got = json.loads((tmp_path / "sets.json").read_text())["sets"]
    assert got[1] == {"name": "sim", "domain": "sim", "frames": 3, "usable": 3, "skipped": 0, "missing": 0,
                      "source": f"folder:{sim}", "tags": []}
    # boxes follow the set through rename and leave with it on drop
    coco = {"images": [{"id": 1, "file_name": "f0.png", "width": 64, "height": 48}],
            "categories": [{"id": 1, "name": "cube"}],
            "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10]}]}
    (tmp_path / "gt.json").write_text(json.dumps(coco))
    clean(p := cli("index", "--coco", tmp_path / "gt.json", "--set", "sim", "--source", "gt", "--db", db))
    assert p.returncode == 0, p.stderr
    clean(p := cli("rename", "sim", "sim_v2", "--db", db))
    assert p.returncode == 0 and "renamed set 'sim' to 'sim_v2'" in p.stdout
    assert _count(db, "SELECT count(*) FROM frames WHERE set_name = 'sim_v2'") == 3
    assert _count(db, "SELECT count(*) FROM annotations WHERE set_name = 'sim_v2'") == 1
    assert _count(db, "SELECT count(*) FROM frames WHERE set_name = 'sim'") == 0
    p = cli("stats", "--sim", "sim_v2", "--real", "real", "--db", db)
    clean(p)
    assert p.returncode == 0 and "sim set 'sim_v2'" in p.stdout
    for args, fragment in [(("rename", "sim_v2", "real"), "a set of that name exists"),
                           (("rename", "nope", "x"), "Unknown set 'nope' for OLD (known: real, sim_v2)"),
                           (("drop", "nope"), "Unknown set 'nope'"), (("rename", "real", " "), "non-empty set name")]:
        p = cli(*args, "--db", db)
        clean(p)
        assert p.returncode == 2 and fragment in p.stderr, (args, p.stderr)
    n_stats = _count(db, "SELECT count(*) FROM frame_stats")
    clean(p := cli("drop", "sim_v2", "--db", db))
    assert p.returncode == 0 and "dropped set 'sim_v2' (3 frames)" in p.stdout
    assert _count(db, "SELECT count(*) FROM frames WHERE set_name = 'sim_v2'") == 0
    assert _count(db, "SELECT count(*) FROM annotations") == 0
    assert _count(db, "SELECT count(*) FROM frame_stats") == n_stats  # the cache is by content: kept
    p = cli("sets", "--db", db)
    assert [ln.split()[0] for ln in p.stdout.splitlines()[1:]] == ["real"]
    # re-index under the dropped name: a fresh set, statistics served from the cache
    clean(cli("index", sim, "--set", "sim_v2", "--domain", "real", "--db", db))
    assert _count(db, "SELECT count(*) FROM frame_sets WHERE name = 'sim_v2' AND domain = 'real'") == 1


def test_reindexing_from_a_corrected_manifest_replaces_the_rows(tmp_path, capfd, caplog):
    cli = partial(cli_main, capfd, caplog)
    _folder(tmp_path / "data" / "a", 3)
    db = tmp_path / "c.duckdb"
    m = tmp_path / "m.jsonl"
    wrong = [{"set": "s", "domain": "sim", "rgb": f"data/b/f{i}.png", "pair_key": str(i)} for i in range(2)] + [
        {"set": "s", "domain": "sim", "rgb": "data/a/f2.png", "pair_key": "x"}]  # wrong folder, wrong key
    m.write_text("\n".join(json.dumps(r) for r in wrong))
    clean(p := cli("index", "--manifest", m, "--db", db))
    assert "1 usable, 2 skipped" in p.stdout
    fixed = [{"set": "s", "domain": "sim", "rgb": f"data/a/f{i}.png", "pair_key": str(i)} for i in range(2)]
    m.write_text("\n".join(json.dumps(r) for r in fixed))
    clean(p := cli("index", "--manifest", m, "--db", db))
    assert p.returncode == 0 and "0 vanished, 3 no longer listed (removed); 2 usable, 0 skipped" in p.stdout, p.stdout
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT pair_key, status FROM frames ORDER BY pair_key").fetchall()
    con.close()
    assert rows == [("0", "ok"), ("1", "ok")]  # no "file vanished" row for data/a/f2.png, which exists
    # a frame whose file is really gone is still recorded as vanished
    (tmp_path / "data" / "a" / "f1.png").unlink()
    m.write_text(json.dumps(fixed[0]))
    clean(p := cli("index", "--manifest", m, "--db", db))
    assert "1 vanished; 1 usable" in p.stdout, p.stdout


def test_repeats_follow_the_listing_through_rename_clean_reindex_and_drop(tmp_path):
    from perception_gap.catalog import Catalog
    from perception_gap.ingest.manifests import index_manifest

    _folder(tmp_path / "a", 2)
    m = tmp_path / "m.jsonl"
    rows = [{"set": "s", "domain": "sim", "rgb": "a/f0.png", "pair_key": k} for k in ("0", "x", "y")]
    m.write_text("\n".join(json.dumps(r) for r in rows + [{**rows[0], "rgb": "a/f1.png", "pair_key": "1"}]))
    with Catalog(tmp_path / "c.duckdb") as cat:
        (r,) = index_manifest(cat, m)
        assert (r.usable, r.n_skipped, r.repeats) == (2, 2, ((str(tmp_path / "a" / "f0.png"), 2),))
        cat.rename_set("s", "t")
        assert [x["repeats"] for x in cat.listing_repeats("t")] == [2] and cat.listing_repeats("s") == []
        m.write_text(json.dumps({**rows[0], "set": "t", "rgb": "a/f1.png", "pair_key": "1"}))  # f0 no longer listed
        (r,) = index_manifest(cat, m)
        assert (r.removed, r.usable, r.n_skipped, r.repeats) == (1, 1, 0, ())
        assert cat.listing_repeats("t") == []
        m.write_text("\n".join(json.dumps({**x, "set": "t"}) for x in rows))
        index_manifest(cat, m)
        cat.drop_set("t")
        assert cat.listing_repeats("t") == []


@pytest.mark.parametrize("args", [
    ("stats", "--sim", "a", "--real", "b"), ("sets",), ("drift", "--history"), ("embed", "--encoder", "pixel"),
    ("run", "--sim", "a", "--real", "b", "--out", "OUT"), ("screen", "--sim", "a,b", "--real", "c", "--out", "OUT"),
    ("drift", "--baseline", "a", "--current", "b", "--out", "OUT"), ("drop", "a"), ("rename", "a", "b"),
])
def test_read_commands_on_a_missing_catalog_exit_2_and_create_nothing(tmp_path, capfd, caplog, args):
    cli = partial(cli_main, capfd, caplog)
    db = tmp_path / "typo.duckdb"
    p = cli(*[str(tmp_path / "out") if a == "OUT" else a for a in args], "--db", db)
    clean(p)
    assert p.returncode == 2 and "does not exist" in p.stderr and "typo.duckdb" in p.stderr, p.stderr
    assert sorted(tmp_path.iterdir()) == []  # no catalog, no lock file, no output folder
