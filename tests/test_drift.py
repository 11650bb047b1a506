"""`drift`: gates of new frames against a stored baseline (real catalog, real pipeline) and the
false-alarm rate of the default thresholds over many real-vs-real splits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scenes import blur, render, scenes, write_set  # noqa: E402

import cli  # noqa: E402
from perception_gap.statistics.image import image_stats_pil  # noqa: E402
from perception_gap.workflows import drift_gates as drift  # noqa: E402

N = 40


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A baseline of 40 scenes and current sets: fresh noise on other scenes, and four shifts of them."""
    tmp = tmp_path_factory.mktemp("drift")
    sc = scenes(2 * N, seed=3)
    rng = np.random.default_rng(7)
    base = [render(s, 1.0, 0.01, rng) for s in sc[:N]]
    clean = [render(s, 1.0, 0.01, rng) for s in sc[N:]]
    variants = {
        "baseline": base,
        "clean": clean,
        "brighter": [render(s, 1.5, 0.01, rng) for s in sc[N:]],
        "cast": [render(s, (1.35, 1.0, 1.0), 0.01, rng) for s in sc[N:]],
        "blurred": [blur(a, 1.5) for a in clean],
        "swapped": [a[..., ::-1].copy() for a in clean],
    }
    db = str(tmp / "d.duckdb")
    for name, frames in variants.items():
        write_set(tmp / name, frames)
        assert cli.main(["index", str(tmp / name), "--set", name, "--domain", "real", "--db", db, "-q"]) == 0
    return tmp, db


_RUNS = iter(range(10_000))


def _drift(tmp: Path, db: str, current: str, *extra: str) -> tuple[int, dict]:
    out = tmp / f"out{next(_RUNS)}"
    rc = cli.main(["drift", "--baseline", "baseline", "--current", current, "--encoders", "pixel", "--out", str(out),
                   "--db", db, "-q", *extra])
    res = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    if res:  # written whether or not a gate failed
        assert (out / "report.html").exists()
    return rc, res


def _failed(res: dict) -> set[str]:
    return {g["name"] for g in res["drift"]["gates"] if g["status"] == "failed"}


def test_noise_only_current_passes(world):
    tmp, db = world
    rc, res = _drift(tmp, db, "clean")
    assert rc == 0 and res["drift"]["passed"] and _failed(res) == set()
    names = {g["name"] for g in res["drift"]["gates"]}
    assert {"format", "channel_shift", "sharpness", "embedding:pixel", "domain_auc:pixel"} <= names
    assert {g["name"]: g["status"] for g in res["drift"]["gates"]}["depth_dropout"] == "skipped"


@pytest.mark.parametrize("current, gate", [("brighter", "channel_shift"), ("cast", "channel_shift"),
                                           ("blurred", "sharpness"), ("swapped", "channel_shift")])
def test_shifts_fail_the_right_gate(world, current, gate):
    tmp, db = world
    rc, res = _drift(tmp, db, current)
    assert rc == 1 and not res["drift"]["passed"]
    assert gate in _failed(res)
    if current == "blurred":  # blur does not move the channel means
        assert "channel_shift" not in _failed(res)
    if current == "cast":
        g = next(g for g in res["drift"]["gates"] if g["name"] == "channel_shift")
        _, ref = _drift(tmp, db, "clean")  # the same scenes without the cast: the gain is the whole difference
        r0 = next(g for g in ref["drift"]["gates"] if g["name"] == "channel_shift")["detail"]["per_channel"]["R"]["change"]
        assert g["detail"]["failed"] == ["R"] and g["value"] - r0 == pytest.approx(np.log2(1.35), abs=0.06)
    if current == "swapped":
        g = next(g for g in res["drift"]["gates"] if g["name"] == "channel_shift")
        assert set(g["detail"]["failed"]) == {"R", "B"}
    assert res["findings"] and res["findings"][0]["code"].startswith("drift_")


def test_config_overrides_and_bad_config(world, tmp_path):
    tmp, db = world
    cfg = tmp_path / "gates.toml"
    cfg.write_text("[channel_shift]\nmax_stops = 5.0\n[sharpness]\nenabled = false\n[embedding]\nmax_ratio = 100.0\n"
                   "[domain_auc]\nmax_auc = 1.0\n")
    rc, res = _drift(tmp, db, "brighter", "--config", str(cfg))
    assert rc == 0, _failed(res)
    assert "sharpness" not in {g["name"] for g in res["drift"]["gates"]}
    for text in ("[channel_shift]\nmax_stop = 1\n", "[nope]\nx = 1\n", "[channel_shift]\nmax_stops = 'a'\n", "not toml ["):
        cfg.write_text(text)
        assert _drift(tmp, db, "clean", "--config", str(cfg))[0] == 2
    assert _drift(tmp, db, "clean", "--config", str(tmp_path / "missing.toml"))[0] == 2


def test_history_records_every_check(world, capsys):
    tmp, db = world
    _drift(tmp, db, "clean")
    rc, res = _drift(tmp, db, "blurred")
    hist = res["drift"]["history"]
    assert len(hist) >= 2 and hist[-1]["current"] == "blurred" and hist[-1]["passed"] is False
    assert "sharpness" in hist[-1]["failed"] and hist[-2]["passed"] is True
    capsys.readouterr()
    assert cli.main(["drift", "--history", "--baseline", "baseline", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "blurred" in out and "FAILED: " in out
    assert cli.main(["drift", "--baseline", "baseline", "--db", db, "-q"]) == 2  # no --current/--out


def test_current_dir_indexes_incrementally(world, tmp_path):
    tmp, db = world
    new = write_set(tmp_path / "today", [render(s, 1.0, 0.01, np.random.default_rng(1)) for s in scenes(10, seed=9)])
    out = tmp_path / "o"
    args = ["drift", "--baseline", "baseline", "--current", "today", "--current-dir", str(new), "--encoders", "pixel",
            "--out", str(out), "--db", db, "-q"]
    assert cli.main(args) in (0, 1)
    Image.fromarray(render(scenes(1, seed=10)[0])).save(new / "late.png")
    assert cli.main(args) in (0, 1)
    res = json.loads((out / "results.json").read_text())
    assert res["sets"]["today"]["n_frames"] == 11


# -- gate math -----------------------------------------------------------------------------------------------

def test_shift_gate_known_answers():
    rng = np.random.default_rng(0)
    base = rng.normal(0, 0.05, (200, 3))
    same = rng.normal(0, 0.05, (200, 3))
    moved = same + np.array([0.5, 0.0, -0.5])
    g = drift.shift_gate("x", base, same, None, None, 0.25, labels=["R", "G", "B"])
    assert g.passed and abs(g.value) < 0.05
    g = drift.shift_gate("x", base, moved, None, None, 0.25, labels=["R", "G", "B"])
    assert not g.passed and set(g.detail["failed"]) == {"R", "B"}
    assert g.ci["low"] <= g.value <= g.ci["high"]
    per = g.detail["per_channel"]["R"]
    assert per["change"] == pytest.approx(np.median(moved[:, 0]) - np.median(base[:, 0]))
    # one-sided: a fall never fails
    g = drift.shift_gate("d", base[:, :1], base[:, :1] - 1, None, None, 0.05, one_sided=True, reducer="mean")
    assert g.passed
    assert drift.shift_gate("x", base[:1], same, None, None, 0.25).status == "skipped"


def test_embedding_gate_reads_near_one_on_null_and_high_on_shift():
    rng = np.random.default_rng(1)
    pool = rng.normal(0, 1, (600, 32))
    g = drift.embedding_gate("e", pool[:400], pool[400:], None, None, 3.0)
    assert g.passed and 0.4 < g.value < 1.6
    g = drift.embedding_gate("e", pool[:400], pool[400:] + 0.8, None, None, 3.0)
    assert not g.passed


def test_format_gate():
    a = image_stats_pil(Image.new("RGB", (64, 48)))
    b = image_stats_pil(Image.new("RGB", (32, 24)))
    assert drift.format_gate([a] * 5, [a] * 5, 0.01).passed
    g = drift.format_gate([a] * 5, [a] * 3 + [b] * 2, 0.01)
    assert not g.passed and g.value == pytest.approx(0.4)
    # a mixed-size baseline (a photo collection) holds no frame size; dtype and channels still count
    g = drift.format_gate([a, b] * 3, [b] * 4, 0.01)
    assert g.passed and g.detail["size_checked"] is False
    gray = image_stats_pil(Image.new("L", (64, 48)))
    assert not drift.format_gate([a, b] * 3, [gray] * 4, 0.01).passed


# -- false alarms of the default thresholds ------------------------------------------------------------------

def _null_checks(stats, embs: dict[str, np.ndarray], n_splits: int, seed: int) -> list[set[str]]:
    """Failed gates per random split of one real set into baseline and current halves, default thresholds."""
    cfg = drift.load_config(None)
    out = []
    n = len(stats)
    for k in range(n_splits):
        perm = np.random.default_rng(seed + k).permutation(n)
        b, c = np.sort(perm[: n // 2]), np.sort(perm[n // 2:])
        sb, sc = [stats[i] for i in b], [stats[i] for i in c]
        gates = [drift.format_gate(sb, sc, cfg["format"]["max_fraction"]),
                 drift.shift_gate("channel_shift", drift.exposure_matrix(sb), drift.exposure_matrix(sc), None, None,
                                  cfg["channel_shift"]["max_stops"], random_state=k),
                 drift.shift_gate("sharpness", drift.sharpness_vector(sb), drift.sharpness_vector(sc), None, None,
                                  cfg["sharpness"]["max_log2"], random_state=k)]
        for name, e in embs.items():
            gates.append(drift.embedding_gate(f"embedding:{name}", e[b], e[c], None, None, cfg["embedding"]["max_ratio"]))
            gates.append(drift.auc_gate(f"domain_auc:{name}", e[b], e[c], None, None, cfg["domain_auc"]["max_auc"]))
        out.append({g.name for g in gates if g.status == "failed"})
    return out


def test_default_thresholds_false_alarm_rate(shared_data):
    """Random real-vs-real splits of (a) 100 real PASCAL VOC photos with EfficientNet-Lite0 and the pixel
    baseline and (b) 80 generated camera frames: at most 5% of checks may raise any alarm."""
    import encoders

    paths = sorted((shared_data / "detection_voc100" / "images").glob("*.jpg"))
    assert len(paths) == 100
    imgs = [np.asarray(Image.open(p).convert("RGB")) for p in paths]
    voc_stats = [image_stats_pil(Image.fromarray(a)) for a in imgs]
    voc_embs = {"efficientnet-lite0": encoders.get_encoder("efficientnet-lite0", device="cpu").embed(imgs),
                "pixel": encoders.get_encoder("pixel").embed(imgs)}
    rng = np.random.default_rng(5)
    gen = [render(s, 1.0, 0.01, rng) for s in scenes(80, seed=11)]
    gen_stats = [image_stats_pil(Image.fromarray(a)) for a in gen]
    gen_embs = {"pixel": encoders.get_encoder("pixel").embed(gen)}
    checks = _null_checks(voc_stats, voc_embs, 30, seed=100) + _null_checks(gen_stats, gen_embs, 30, seed=200)
    alarms = [c for c in checks if c]
    rate = len(alarms) / len(checks)
    print(f"false-alarm rate {rate:.3f} over {len(checks)} real-vs-real checks; alarms: {alarms}")
    assert rate <= 0.05
