"""Baseline samples (perception_gap.catalog.baselines): drawn by content, cached while the baseline is
unchanged, drawn again when it changes, and what a drift check reads on the baseline side past its size."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scenes import render, scenes, write_set  # noqa: E402

from perception_gap import cli  # noqa: E402
from perception_gap.catalog import Catalog  # noqa: E402
from perception_gap.statistics.image import image_stats_pil  # noqa: E402
from perception_gap.workflows import drift_gates as dr  # noqa: E402
from perception_gap.workflows.drift import drift_job  # noqa: E402


def _rows(set_name: str, idx, tag: str = "") -> list[dict]:
    return [{"set_name": set_name, "rgb_path": f"/f/{i:04d}.png", "content_hash": f"h{i}{tag}", "episode": f"e{i // 10}",
             "step": i % 10, "pair_key": f"k{i}", "status": "ok"} for i in idx]


def _catalog(path: Path, idx, name: str = "b") -> Catalog:
    cat = Catalog(path)
    cat.ensure_set(name, "real")
    cat.write_frames(_rows(name, idx))
    return cat


def test_sample_is_cached_and_drawn_again_when_the_baseline_changes(tmp_path):
    cat = _catalog(tmp_path / "c.duckdb", range(60))
    first = cat.baseline_sample("b", 12, seed=0)
    assert not first.cached and len(first.paths) == 12 == len(set(first.paths))
    assert set(first.paths) <= {f"/f/{i:04d}.png" for i in range(60)} and first.n_frames == 60
    again = cat.baseline_sample("b", 12, seed=0)
    assert again.cached and again.paths == first.paths and again.digest == first.digest
    # the same frames written in another order give the same digest and the same sample
    other = _catalog(tmp_path / "o.duckdb", range(59, -1, -1))
    o = other.baseline_sample("b", 12, seed=0)
    assert o.digest == first.digest and set(o.paths) == set(first.paths)
    assert set(cat.baseline_sample("b", 12, seed=1).paths) != set(first.paths)  # another seed, another sample
    # a frame added: drawn again, and the sample is a bottom-k: the old frames kept are a subset of the old sample
    cat.write_frames(_rows("b", [60]))
    grown = cat.baseline_sample("b", 12, seed=0)
    assert not grown.cached and grown.n_frames == 61 and grown.digest != first.digest
    assert len(set(grown.paths) - set(first.paths)) <= 1
    assert cat.baseline_sample("b", 12, seed=0).cached
    # a frame re-indexed with other content (same path, same count): drawn again
    cat.write_frames(_rows("b", [3], tag="x"))
    assert not cat.baseline_sample("b", 12, seed=0).cached
    # a frame removed
    cat.remove_frames("b", ["/f/0007.png"])
    gone = cat.baseline_sample("b", 12, seed=0)
    assert not gone.cached and gone.n_frames == 60 and "/f/0007.png" not in gone.paths
    # a set no larger than the size is read whole and nothing is stored
    small = cat.baseline_sample("b", 60, seed=0)
    assert small.paths is None and small.n_used == 60 and not small.cached
    assert cat.con.execute("SELECT count(*) FROM baseline_samples WHERE size = 60").fetchone()[0] == 0
    # a renamed set keeps its content, so its sample; a dropped set takes its samples with it
    cat.rename_set("b", "b2")
    assert cat.baseline_sample("b2", 12, seed=0).cached
    cat.drop_set("b2")
    assert cat.con.execute("SELECT count(*) FROM baseline_samples").fetchone()[0] == 0


def test_load_with_paths_reads_exactly_those_frames(tmp_path):
    cat = _catalog(tmp_path / "c.duckdb", range(30))
    hashes = [f"h{i}" for i in range(30)]
    vec = np.arange(30 * 4, dtype=np.float32).reshape(30, 4)
    cat.write_embeddings("enc", "fp", hashes, vec)
    keep = ("/f/0002.png", "/f/0017.png", "/f/0029.png")
    meta, arr = cat.load_embeddings("b", "fp", keep)
    assert [m["rgb_path"] for m in meta] == list(keep)
    np.testing.assert_array_equal(arr, vec[[2, 17, 29]])
    assert sorted(r["rgb_path"] for r in cat.load_frames("b", keep)) == list(keep)
    assert len(cat.load_frames("b")) == 30 and len(cat.load_embeddings("b", "fp")[0]) == 30


def _embeddings_one_join(cat: Catalog, set_name: str, fp: str, paths=None):
    """The one-query read `load_embeddings` used before it read keys, then vectors by rowid (the reference)."""
    from perception_gap.catalog.baselines import paths_table

    sample = paths_table(paths or ())  # noqa: F841 (DuckDB reads it by name)
    only = "" if paths is None else "AND f.rgb_path IN (SELECT p FROM sample) "
    tbl = cat.con.sql(
        "SELECT f.pair_key, f.episode, f.step, f.rgb_path, f.action, f.proprio, e.vector FROM frames f "
        "JOIN embeddings e ON e.content_hash = f.content_hash AND e.fingerprint = $fp "
        f"WHERE f.set_name = $set AND f.status = 'ok' {only}ORDER BY f.episode NULLS FIRST, f.step NULLS FIRST, f.rgb_path",
        params={"fp": fp, "set": set_name}).to_arrow_table()
    return tbl.drop_columns(["vector"]).to_pylist(), np.asarray(tbl.column("vector").to_pylist(), np.float32)


def test_load_embeddings_reads_keys_then_vectors_like_one_join(tmp_path):
    rng = np.random.default_rng(0)
    cat = Catalog(tmp_path / "c.duckdb")
    with cat.session():
        for name in ("a", "b"):
            cat.ensure_set(name, "real")
        # set b's frames: out of order, two frames sharing content, one frame never embedded,
        # one whose content has a vector under another fingerprint only
        rows = _rows("b", range(40))
        rows[5]["content_hash"] = rows[6]["content_hash"] = "shared"
        rows[9]["episode"] = None
        cat.write_frames(rows[::-1])
        cat.write_frames([{**r, "set_name": "a", "content_hash": f"a{i}"} for i, r in enumerate(_rows("a", range(25)))])
        vec = {h: rng.standard_normal(6).astype(np.float32) for h in [f"h{i}" for i in range(40)] + ["shared"]}
        vec.update({f"a{i}": rng.standard_normal(6).astype(np.float32) for i in range(25)})
        order = list(vec)
        rng.shuffle(order)
        skip = {"h12", "h20"}  # h12: no vector at all; h20: only under fingerprint fp2
        for lo in range(0, len(order), 7):  # the two sets' rows interleaved over several writes
            hs = [h for h in order[lo:lo + 7] if h not in skip]
            cat.write_embeddings("enc", "fp", hs, np.stack([vec[h] for h in hs]))
            cat.write_embeddings("enc", "fp2", hs, np.stack([vec[h] + 1 for h in hs]))
        cat.write_embeddings("enc", "fp2", ["h20"], vec["h20"][None])
        keep = ("/f/0005.png", "/f/0006.png", "/f/0009.png", "/f/0012.png", "/f/0031.png", "/f/0003.png")
        for args in (("b", "fp"), ("b", "fp2"), ("a", "fp"), ("b", "fp", keep), ("b", "fp2", keep), ("b", "none")):
            meta, arr = cat.load_embeddings(*args)
            ref_meta, ref_arr = _embeddings_one_join(cat, *args)
            assert meta == ref_meta and len(meta) == len(arr)
            if len(ref_arr):
                np.testing.assert_array_equal(arr, ref_arr)
            else:  # no vector under that fingerprint: an empty array, as before
                assert args[1] == "none" and arr.size == 0
        meta, arr = cat.load_embeddings("b", "fp")
        assert len(meta) == 38 and {"/f/0012.png", "/f/0020.png"}.isdisjoint(m["rgb_path"] for m in meta)
        at = {m["rgb_path"]: i for i, m in enumerate(meta)}
        np.testing.assert_array_equal(arr[at["/f/0005.png"]], vec["shared"])  # both frames of the shared content
        np.testing.assert_array_equal(arr[at["/f/0006.png"]], vec["shared"])
        np.testing.assert_array_equal(arr[at["/f/0031.png"]], vec["h31"])


def test_sampled_reads_bound_duckdb_memory_and_restore_it(tmp_path):
    from perception_gap.catalog.baselines import SAMPLE_READ_MEMORY, bounded_read

    cat = _catalog(tmp_path / "c.duckdb", range(10))
    cat.write_embeddings("enc", "fp", [f"h{i}" for i in range(10)], np.ones((10, 3), np.float32))
    with cat.session():
        def limit() -> str:
            return cat.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]

        default = limit()
        assert SAMPLE_READ_MEMORY == "1GB" and default != "953.6 MiB"
        with bounded_read(cat.con, sampled=True):
            assert limit() == "953.6 MiB"  # 10^9 bytes
        assert limit() == default  # restored after a sampled read
        with pytest.raises(ZeroDivisionError), bounded_read(cat.con, sampled=True):
            raise ZeroDivisionError
        assert limit() == default  # and after a failed one
        with bounded_read(cat.con, sampled=False):
            assert limit() == default  # a whole-set read is not bounded
        assert len(cat.load_embeddings("b", "fp", ("/f/0001.png",))[0]) == 1 and len(cat.load_frames("b", ("/f/0001.png",))) == 1
        assert limit() == default


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """A 16-frame baseline whose frames differ in brightness (so the sample's median is not the set's) and 8 current frames."""
    tmp = tmp_path_factory.mktemp("bs")
    sc = scenes(24, h=24, w=32, seed=5)
    rng = np.random.default_rng(1)
    write_set(tmp / "base", [render(s, 0.5 + 0.06 * i, 0.01, rng) for i, s in enumerate(sc[:16])])
    write_set(tmp / "cur", [render(s, 1.0, 0.01, rng) for s in sc[16:]])
    db = str(tmp / "d.duckdb")
    for name in ("base", "cur"):
        assert cli.main(["index", str(tmp / name), "--set", name, "--domain", "real", "--db", db, "-q"]) == 0
    return tmp, db


def test_drift_reads_the_cached_sample_of_a_large_baseline(sets):
    tmp, db = sets
    with Catalog(db) as cat:
        whole = drift_job(cat, "base", "cur", encoder_names=[], workers=1)
        res = drift_job(cat, "base", "cur", encoder_names=[], workers=1, baseline_sample=7)
        again = drift_job(cat, "base", "cur", encoder_names=[], workers=1, baseline_sample=7)
        kept = cat.baseline_sample("base", 7, seed=0).paths
    assert whole["drift"]["baseline_sample"] == {"n_frames": 16, "n_used": 16, "size": 20_000, "seed": 0,
                                                 "sampled": False, "cached": False}
    s = res["drift"]["baseline_sample"]
    assert (s["n_used"], s["sampled"], s["cached"]) == (7, True, False) and again["drift"]["baseline_sample"]["cached"]
    # the baseline side of the channel gate is the median over the sampled files, measured afresh from the pixels
    ref = np.median(dr.exposure_matrix([image_stats_pil(Image.open(p).convert("RGB")) for p in kept]), axis=0)
    full = np.median(dr.exposure_matrix([image_stats_pil(Image.open(p).convert("RGB"))
                                         for p in sorted((tmp / "base").glob("*.png"))]), axis=0)
    gate = {g["name"]: g for g in res["drift"]["gates"]}["channel_shift"]
    np.testing.assert_allclose(gate["detail"]["baseline"], ref, atol=1e-6)
    assert np.abs(ref - full).max() > 0.01  # the sample's median is not the whole set's: the check can fail
    assert again["drift"]["gates"] == res["drift"]["gates"]
    assert res["sets"]["base"]["n_usable"] == 16  # the set itself is reported whole
