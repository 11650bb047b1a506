"""The Ray Data engine (`--engine ray`) against the local engine on the same frames.

One local Ray instance for the module (2 CPUs); a handful of tiny frames. Statistics must be
identical to the local engine's, embeddings within 1e-5; merging shards is idempotent and a
rerun after a partial shard set computes only what is missing. Skips when Ray is not installed,
except the test of the one-line error that `--engine ray` gives then.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from PIL import Image

from perception_gap import cli
from perception_gap.catalog import Catalog
from perception_gap.catalog.shards import shard_dir
from perception_gap.embed import embed_sets
from perception_gap.ingest import index_folder
from perception_gap.workflows.stats import compute_stats

ENCODERS = ["pixel"]  # a real network adds ~30 s of actor start-up (torch import) per encoder here


def scene(seed: int, h: int = 48, w: int = 64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 3 + seed * 11, y * 4, (x * y + seed) % 220], -1) + rng.normal(0, 6, (h, w, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> Path:
    """sim: PNG and JPEG frames, two with 16-bit depth maps, a float observation array (an encoder
    skip) and a corrupt file; real: PNG frames."""
    root = tmp_path_factory.mktemp("ray_frames")
    for dom, offset in (("sim", 0), ("real", 100)):
        d = root / dom
        d.mkdir()
        for i in range(6):
            img = Image.fromarray(scene(i + offset))
            if dom == "sim" and i % 2:
                img.save(d / f"f{i}.jpg", quality=85)
            else:
                img.save(d / f"f{i}.png")
        for i in range(2):
            depth = (np.arange(48 * 64).reshape(48, 64) * (i + 3) % 4000 + 300).astype(np.uint16)
            Image.fromarray(depth).save(d / f"f{i}_depth.png")
    np.save(root / "sim" / "f7.npy", (scene(7).astype(np.float32) / 255 - 0.5) / 0.5)
    (root / "sim" / "f8.png").write_bytes(b"\x89PNG\r\n\x1a\n not an image")
    return root


def _indexed(frames: Path, db: Path) -> Path:
    with Catalog(db) as cat:
        index_folder(cat, frames / "sim", "sim", "sim", depth_unit="mm")
        index_folder(cat, frames / "real", "real", "real", depth_unit="mm")
    return db


def _rows(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


STATS_SQL = "SELECT * FROM {} ORDER BY content_hash"
EMB_SQL = "SELECT content_hash, fingerprint, encoder, dim, vector FROM embeddings ORDER BY 1, 2"
SKIP_SQL = "SELECT * FROM embedding_skips ORDER BY 1, 2"


@pytest.fixture(scope="module")
def local_db(frames, tmp_path_factory) -> Path:
    """The reference: the local engine's statistics and embeddings of the frames."""
    db = _indexed(frames, tmp_path_factory.mktemp("local") / "c.duckdb")
    with Catalog(db) as cat:
        compute_stats(cat, ["sim", "real"], workers=1)
        embed_sets(cat, ENCODERS, ["sim", "real"], device="cpu", batch_size=4)
    return db


def test_ray_engine_matches_the_local_engine(ray_session, frames, local_db, tmp_path, capsys):
    db = _indexed(frames, tmp_path / "c.duckdb")
    out = tmp_path / "stats.json"
    assert cli.main(["stats", "--db", str(db), "--sim", "sim", "--real", "real", "--engine", "ray",
                     "--workers", "2", "--json", str(out), "-q"]) == 0
    assert cli.main(["embed", "--db", str(db), "--encoder", ",".join(ENCODERS), "--engine", "ray",
                     "--device", "cpu", "--batch-size", "4", "-q"]) == 0
    for table in ("frame_stats", "depth_stats"):  # statistics: exactly, every column
        ref = _rows(local_db, STATS_SQL.format(table))
        assert len(ref) >= 2 and _rows(db, STATS_SQL.format(table)) == ref, table
    ref, got = _rows(local_db, EMB_SQL), _rows(db, EMB_SQL)
    assert [r[:4] for r in got] == [r[:4] for r in ref] and len(ref) == 12
    diff = max(float(np.abs(np.array(a[4]) - np.array(b[4])).max()) for a, b in zip(got, ref))
    assert diff <= 1e-5, diff
    assert _rows(db, SKIP_SQL) == _rows(local_db, SKIP_SQL) and len(_rows(db, SKIP_SQL)) == 1  # the .npy
    assert not list(shard_dir(db).glob("*"))  # every shard merged and removed
    # the same results.json statistics as the local engine's `stats`
    local_out = tmp_path / "local.json"
    assert cli.main(["stats", "--db", str(local_db), "--sim", "sim", "--real", "real", "--json", str(local_out), "-q"]) == 0
    a, b = json.loads(out.read_text()), json.loads(local_out.read_text())
    assert a["stats"] == b["stats"] and a["findings"] == b["findings"]


def test_rerun_after_a_partial_shard_set_adds_only_what_is_missing(ray_session, frames, local_db, tmp_path):
    from perception_gap.engines.ray_engine import RayEngine, stats_task

    db = _indexed(frames, tmp_path / "c.duckdb")
    folder = shard_dir(db)
    with Catalog(db) as cat:
        todo = cat.hashes_needing_stats(["sim", "real"])
        n_depth = len(cat.hashes_needing_depth_stats(["sim", "real"]))
    # a run that died: one task's shard written (the first 5 frames), and written twice (a retried task)
    res = stats_task({"task": [json.dumps([todo[:5]])]}, table="frame_stats", folder=str(folder))
    (shard,) = res["shard"]
    shutil.copy(shard, folder / "frame_stats-retried.parquet")
    dead, live = folder / "frame_stats-dead.parquet.tmp", folder / "frame_stats-live.parquet.tmp"
    dead.write_bytes(b"half a shard")  # a killed writer's leftover, from before the run ...
    os.utime(dead, (time.time() - 3600, time.time() - 3600))
    live.write_bytes(b"being written")  # ... and one a task may still be writing: kept
    with Catalog(db) as cat, RayEngine(cat, workers=2) as eng:
        assert eng.merged == 5  # both copies merged, each row once
        assert eng.removed == 1 and not dead.exists() and live.exists()
        assert len(cat.hashes_needing_stats(["sim", "real"])) == len(todo) - 5
        done = compute_stats(cat, ["sim", "real"], runner=eng.stats_runner)
        assert done.computed == len(todo) - 5 + n_depth and n_depth == 2
        assert cat.merge_shards([]) == 0
    assert _rows(db, STATS_SQL.format("frame_stats")) == _rows(local_db, STATS_SQL.format("frame_stats"))
    # merging a shard again (a crash between merge and delete) inserts nothing
    again = stats_task({"task": [json.dumps([todo[:3]])]}, table="frame_stats", folder=str(folder))["shard"][0]
    with Catalog(db) as cat:
        assert cat.merge_shards([again, again]) == 0


def test_engine_ray_without_ray_is_one_line_error(frames, tmp_path, monkeypatch, capsys):
    db = _indexed(frames, tmp_path / "c.duckdb")
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as when not installed
    assert cli.main(["stats", "--db", str(db), "--sim", "sim", "--real", "real", "--engine", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'perception-gap[ray]'" in err, err
    assert cli.main(["drift", "--db", str(db), "--baseline", "sim", "--current", "real", "--out", str(tmp_path / "d"),
                     "--engine", "ray", "-q"]) == 2
    assert "pip install 'perception-gap[ray]'" in capsys.readouterr().err
    assert cli.main(["embed", "--db", str(db), "--encoder", "pixel", "--address", "auto"]) == 2
    assert "--engine ray" in capsys.readouterr().err


def test_group_tasks_keeps_chunks_whole_and_feeds_every_worker():
    from perception_gap.engines.ray_engine import group_tasks

    chunks = [[("h", i, j) for j in range(n)] for i, n in enumerate([32, 32, 5, 32, 100, 32])]  # 233 frames
    flat = [x for c in chunks for x in c]
    big = group_tasks(chunks, workers=1, target=64)  # a chunk that would pass 64 frames opens a task
    assert [sum(map(len, t)) for t in big] == [64, 37, 100, 32]
    assert [x for t in big for c in t for x in c] == flat and all(c in chunks for t in big for c in t)
    assert [sum(map(len, t)) for t in group_tasks(chunks, workers=4, target=1000)] == [32, 37, 32, 100, 32]  # <= 233 / 4
    assert len(group_tasks(chunks, workers=1)) == 1 and group_tasks([], workers=2) == []


def test_unreachable_address_is_a_one_line_error_at_once(frames, tmp_path, capsys):
    pytest.importorskip("ray")
    db = _indexed(frames, tmp_path / "c.duckdb")
    for addr, words in (("127.0.0.1:1", "Cannot connect to the Ray cluster"), ("head-without-port", "host:port")):
        t = time.monotonic()
        assert cli.main(["stats", "--db", str(db), "--sim", "sim", "--real", "real", "--engine", "ray",
                         "--address", addr]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err and addr in err, err
        assert time.monotonic() - t < 10  # Ray itself retries 127.0.0.1:1 for more than a minute


def test_drift_with_the_ray_engine_gates_as_the_local_engine(ray_session, frames, local_db, tmp_path):
    """Statistics gates only (`--encoders none`): the embedding runner is the one `embed` and
    `run` use, tested above; a second encoder actor pool would add ~30 s here."""
    db = _indexed(frames, tmp_path / "c.duckdb")
    cfg = tmp_path / "gates.toml"
    cfg.write_text("[bootstrap]\nn_boot = 100\n")
    args = ["drift", "--baseline", "sim", "--current", "real", "--encoders", "none", "--config", str(cfg), "-q"]
    res = {}
    for name, cat, extra in (("ray", db, ["--engine", "ray"]), ("local", local_db, [])):
        out = tmp_path / f"{name}.json"
        assert cli.main([*args, "--db", str(cat), "--out", str(tmp_path / name), "--json", str(out), *extra]) in (0, 1)
        res[name] = {g["name"]: g for g in json.loads(out.read_text())["drift"]["gates"]}
    assert res["ray"] == res["local"] and {"format", "channel_shift", "depth_dropout"} <= res["ray"].keys()
    for table in ("frame_stats", "depth_stats"):
        assert _rows(db, STATS_SQL.format(table)) == _rows(local_db, STATS_SQL.format(table))
    assert not list(shard_dir(db).glob("*"))
