"""The cached embedding stage on a real catalog with real encoders."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest
from PIL import Image

from perception_gap import cli, encoders
from perception_gap.catalog import Catalog
from perception_gap.embed import embed_sets
from perception_gap.errors import InputError
from perception_gap.ingest import index_folder

REPO = Path(__file__).resolve().parents[1]


def scene(seed: int, h: int = 60, w: int = 80) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 2 + seed * 7, y * 3, (x * y) % 200], -1) + rng.normal(0, 5, (h, w, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


@pytest.fixture()
def catalog(tmp_path):
    root = tmp_path / "frames"
    root.mkdir()
    for i in range(10):
        Image.fromarray(scene(i)).save(root / f"f{i:02d}.png")
    np.save(root / "normalized.npy", (scene(50).astype(np.float32) / 255 - 0.5) / 0.5)
    np.save(root / "raw_uint8.npy", scene(51))
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_folder(cat, root, "s", "sim")
    return db, root


def count(db: Path, sql: str) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def test_embed_is_cached_incremental_and_matches_direct_call(catalog):
    db, root = catalog
    with Catalog(db) as cat:
        (r,) = embed_sets(cat, ["pixel"], ["s"], device="cpu", batch_size=4)
        assert (r.todo, r.embedded, r.skipped) == (12, 11, 1) and r.model_loaded
        (r2,) = embed_sets(cat, ["pixel"], ["s"], device="cpu", batch_size=4)
        assert (r2.todo, r2.embedded, r2.model_loaded) == (0, 0, False)
        Image.fromarray(scene(77)).save(root / "new.png")
        index_folder(cat, root, "s", "sim")
        (r3,) = embed_sets(cat, ["pixel"], ["s"], device="cpu", batch_size=4)
        assert (r3.todo, r3.embedded) == (1, 1)
        meta, vecs = cat.load_embeddings("s", r.fingerprint)
        reasons = cat.embedding_skip_reasons("s", r.fingerprint)
    assert vecs.dtype == np.float32 and vecs.shape == (12, encoders.get_encoder("pixel").dim)
    assert [Path(x["path"]).name for x in reasons] == ["normalized.npy"]
    assert "normalized" in reasons[0]["reason"]
    # the stored vector is exactly what the encoder gives on the decoded frame
    direct = encoders.get_encoder("pixel").embed([np.asarray(Image.open(root / "f03.png").convert("RGB"))])[0]
    i = [m["pair_key"] for m in meta].index("f03")
    np.testing.assert_array_equal(vecs[i], direct)
    assert count(db, "SELECT count(*) FROM embeddings") == count(db, "SELECT count(DISTINCT content_hash) FROM embeddings")


def _direct_lite0(frames: list[np.ndarray]) -> np.ndarray:
    """EfficientNet-Lite0 features built here, not through the encoder class: timm's
    `tf_efficientnet_lite0` with the packaged weights loaded strictly, one frame per forward
    pass, contiguous layout, fp32, the same preprocessing description as the encoder's."""
    import timm
    import torch

    from perception_gap.encoders.efficientnet_lite import rename_state_dict
    from perception_gap.encoders.preprocessing import Preprocessing, preprocess_images

    enc = encoders.get_encoder("efficientnet-lite0")
    p = Preprocessing(size=(224, 224), interpolation="bicubic", resize_mode="shortest", crop_pct=0.875,
                      mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), input_scale=255.0)
    assert enc.preprocessing == p  # timm's pretrained cfg for tf_efficientnet_lite0
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False, num_classes=1000)
    state = torch.load(enc.weights_path(), map_location="cpu", weights_only=True)
    model.load_state_dict(rename_state_dict(state, model), strict=True)
    model.eval()
    out = []
    with torch.inference_mode():
        for f in frames:
            x = preprocess_images([f], p)
            assert x.shape == (1, 3, 224, 224) and -1.0 <= float(x.min()) and float(x.max()) <= 1.0
            out.append(model.forward_head(model.forward_features(x), pre_logits=True)[0].numpy())
    return np.stack(out)


def test_real_encoder_through_the_stage(catalog):
    db, root = catalog
    with Catalog(db) as cat:
        (r,) = embed_sets(cat, ["efficientnet-lite0"], None, device="cpu", batch_size=8)  # batches of 8 and 3
        assert r.embedded == 11 and r.dim == 1280
        meta, vecs = cat.load_embeddings("s", r.fingerprint)
    assert vecs.shape == (11, 1280) and np.isfinite(vecs).all()
    frames = [np.load(m["rgb_path"]) if m["rgb_path"].endswith(".npy")
              else np.asarray(Image.open(m["rgb_path"]).convert("RGB")) for m in meta]
    direct = _direct_lite0(frames)
    # Per frame, each stored vector is its own frame's forward pass. Tolerance: 1e-4 of the
    # vector's largest value, float32 rounding (batched, channels-last vs one by one, contiguous);
    # measured ~1e-6. Neighbouring frames differ by ~1e-1 of it, so a vector written under the
    # wrong hash, or a batch misaligned, fails.
    for i, m in enumerate(meta):
        scale = np.abs(direct[i]).max()
        np.testing.assert_allclose(vecs[i], direct[i], rtol=0, atol=1e-4 * scale, err_msg=m["pair_key"])
        others = np.delete(np.abs(direct - direct[i]).max(1), i)
        assert others.min() > 1e-2 * scale, m["pair_key"]


def test_a_new_fingerprint_re_embeds(catalog, monkeypatch):
    from perception_gap.encoders import registry

    db, _ = catalog
    name = "pixel-8-test"
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # registration undone after the test
    encoders.register_encoder(name, lambda **kw: encoders.PixelEncoder(thumb_size=8, **kw))
    with Catalog(db) as cat:
        (a,) = embed_sets(cat, ["pixel"], None, device="cpu")
        (b,) = embed_sets(cat, [name], None, device="cpu")
    assert a.fingerprint != b.fingerprint and b.embedded == 11


def test_failure_mid_run_keeps_finished_batches_and_rerun_completes(catalog, monkeypatch):
    db, _ = catalog
    calls = {"n": 0}
    real_encode = encoders.PixelEncoder.encode

    def flaky(self, batch):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated crash in the second batch")
        return real_encode(self, batch)

    monkeypatch.setattr(encoders.PixelEncoder, "encode", flaky)
    with Catalog(db) as cat, pytest.raises(RuntimeError, match="simulated"):
        embed_sets(cat, ["pixel"], None, device="cpu", batch_size=4)
    assert count(db, "SELECT count(*) FROM embeddings") == 4  # the first batch only, whole
    monkeypatch.setattr(encoders.PixelEncoder, "encode", real_encode)
    with Catalog(db) as cat:
        (r,) = embed_sets(cat, ["pixel"], None, device="cpu", batch_size=4)
    assert r.embedded == 7
    assert count(db, "SELECT count(*) FROM embeddings") == 11
    assert count(db, "SELECT count(*) FROM (SELECT content_hash FROM embeddings GROUP BY ALL HAVING count(*) > 1)") == 0


def test_vectors_are_stored_in_writes_of_whole_batches(catalog, monkeypatch):
    import perception_gap.embed as embed_mod

    db, _ = catalog
    with Catalog(db) as cat:
        (ref,) = embed_sets(cat, ["pixel"], None, device="cpu", batch_size=4)
        want = dict(cat.con.execute("SELECT content_hash, vector FROM embeddings").fetchall())
        cat.con.execute("DELETE FROM embeddings")
    writes: list[int] = []
    real_write = Catalog.write_embeddings

    def counted(self, encoder, fingerprint, hashes, vectors, skips=()):
        writes.append(len(hashes))
        return real_write(self, encoder, fingerprint, hashes, vectors, skips)

    monkeypatch.setattr(Catalog, "write_embeddings", counted)
    monkeypatch.setattr(embed_mod, "EMBED_WRITE_EVERY", 8)
    monkeypatch.setattr(embed_mod, "EMBED_WRITE_INTERVAL_S", 0.0)  # rows alone decide
    with Catalog(db) as cat:
        (r,) = embed_sets(cat, ["pixel"], None, device="cpu", batch_size=4)
        got = dict(cat.con.execute("SELECT content_hash, vector FROM embeddings").fetchall())
    # 11 frames in batches of 4: two whole batches (8 frames) a write, then the last 3
    assert r.embedded == ref.embedded == 11 and writes == [8, 3]
    assert got.keys() == want.keys() and all(np.array_equal(got[h], want[h]) for h in want)


def test_the_stage_gives_a_light_encoder_one_thread_and_restores_the_count(catalog, monkeypatch):
    import torch

    from perception_gap import encoders

    db, _ = catalog
    seen: list[int] = []
    real = encoders.PixelEncoder._forward

    def spy(self, model, batch):
        seen.append(torch.get_num_threads())
        return real(self, model, batch)

    monkeypatch.setattr(encoders.PixelEncoder, "_forward", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with Catalog(db) as cat:
            (r,) = embed_sets(cat, ["pixel"], None, device="cpu", batch_size=4)
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert r.embedded == 11 and seen and set(seen) == {1} and after == 2


def test_kill_9_then_rerun_leaves_one_row_per_frame(tmp_path, capsys):
    """`embed` killed once it has stored vectors (a process of its own); the rerun (here, in-process)
    completes with one row per frame."""
    n = 120
    root = tmp_path / "many"
    root.mkdir()
    for i in range(n):
        Image.fromarray(scene(i)).save(root / f"f{i:03d}.png")
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_folder(cat, root, "m", "real")
    proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), "embed", "--encoder", "pixel", "--db", str(db),
                             "--batch-size", "8", "-q", "--device", "cpu"])
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
        try:
            if count(db, "SELECT count(*) FROM embeddings") > 0:
                break
        except duckdb.Error:
            pass  # the writer holds the lock; keep polling
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert cli.main(["embed", "--encoder", "pixel", "--db", str(db), "--device", "cpu"]) == 0, capsys.readouterr().err
    assert count(db, "SELECT count(*) FROM embeddings") == n
    assert count(db, "SELECT count(DISTINCT content_hash) FROM embeddings") == n


def test_unknown_encoder_and_set_are_one_line_errors(catalog, capsys):
    db, _ = catalog
    with Catalog(db) as cat:
        with pytest.raises(InputError, match="efficientnet-lite0"):
            embed_sets(cat, ["nope"], None)
        with pytest.raises(InputError, match="Unknown set 'zzz'"):
            embed_sets(cat, ["pixel"], ["zzz"])
    code = cli.main(["embed", "--encoder", "nope", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "pixel" in err


def test_cli_encoders_and_embed(catalog, capsys, tmp_path):
    db, _ = catalog
    js = tmp_path / "enc.json"
    assert cli.main(["encoders", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "efficientnet-lite0" in out and "open_clip:ARCH:PRETRAINED" in out
    listed = json.loads(js.read_text())
    assert {e["name"] for e in listed} == set(encoders.list_encoders())
    assert all(e["weights_available"] for e in listed)
    assert cli.main(["embed", "--encoder", "pixel", "--set", "s", "--db", str(db), "--device", "cpu"]) == 0
    assert "11 embedded, 1 skipped" in capsys.readouterr().out
