"""Ranking, perception findings and the whole `run` job on real catalogs and real encoders."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest
from PIL import Image

from perception_gap import cli
from perception_gap.catalog import Catalog
from perception_gap.diagnoses.perception import perception_findings
from perception_gap.findings import Finding
from perception_gap.ingest import index_manifest
from perception_gap.ranking import (
    EncoderScore,
    clip_band,
    is_reference,
    pareto_layers,
    probe_informative,
    rank_encoders,
    ranking_basis,
)
from perception_gap.workflows.run import run_job

# -- ranking: known answers ---------------------------------------------------------------------

def test_pareto_front_and_rank():
    scores = [EncoderScore("a", gap=0.10, probe=0.9), EncoderScore("b", gap=0.05, probe=0.5),
              EncoderScore("c", gap=0.20, probe=0.4)]  # dominated by a (farther and worse probe)
    layers = pareto_layers(scores)
    assert {s.name for s in layers[0]} == {"a", "b"} and [s.name for s in layers[1]] == ["c"]
    ranked = rank_encoders(scores)
    assert [r.name for r in ranked] == ["b", "a", "c"]
    assert [r.rank for r in ranked] == [1, 2, 3] and not ranked[-1].on_front
    # order of input does not matter
    assert [r.name for r in rank_encoders(scores[::-1])] == ["b", "a", "c"]


def test_uninformative_probe_ranks_on_gap_alone():
    """A probe with sim->sim R^2 <= 0 (or none) does not rank: comparisons with it use the gap alone."""
    a, b = EncoderScore("a", gap=0.10, probe=0.9), EncoderScore("b", gap=0.05, probe=0.5)
    u = EncoderScore("u", gap=0.07, probe=-3.0, probe_informative=probe_informative(-0.2))
    assert probe_informative(-0.2) is False and probe_informative(0.3) is True and probe_informative(None) is None
    ranked = rank_encoders([a, b, u])
    # u beats a on gap (its poor probe does not count), b beats u on gap; a and b stay a front
    assert [r.name for r in ranked] == ["b", "u", "a"]
    assert [ranking_basis(s) for s in (a, u, EncoderScore("n", gap=0.1))] == ["gap and probe", "gap alone", "gap alone"]
    # as a probe, -3.0 would have put u behind a (a dominates nothing, u dominated by b): the flag matters
    assert [r.name for r in rank_encoders([a, b, EncoderScore("u", gap=0.07, probe=-3.0)])] == ["b", "a", "u"]
    assert is_reference("pixel") and not is_reference("imagenet")


def test_clip_bands():
    assert [clip_band(x) for x in (0.1, 0.22, 0.27, 0.4)] == ["stable", "watch", "intervene", "widen_randomization"]


def _entry(name, d, lo, hi, floor, probe=None, family="imagenet", cos=None):
    return {"name": name, "family": family, "centroid_distance_norm": d,
            "centroid_distance_norm_ci": {"low": lo, "high": hi}, "noise_floor": floor,
            "probe": {"sim_to_real": probe} if probe is not None else None,
            "paired_cosine": {"mean": cos} if cos is not None else None}


def test_perception_findings_known_cases():
    bright = Finding("brightness", "gap", "Sim is 0.5 stops brighter than real.", {"stops": 0.5}, "x", 1.0)
    # every encoder far above its floor -> the gap lives in the images, named by the statistics
    far = [_entry("a", 0.4, 0.35, 0.45, 0.05), _entry("b", 0.3, 0.25, 0.33, 0.04)]
    codes = {f.code: f for f in perception_findings(far, [bright])}
    assert "appearance_gap" in codes and "light intensity" in codes["appearance_gap"].action
    # one encoder clearly closer (CIs apart) and keeps its probe -> swap to it
    choose = [_entry("a", 0.10, 0.08, 0.12, 0.09, probe=0.8), _entry("b", 0.30, 0.25, 0.35, 0.09, probe=0.82)]
    f = {x.code: x for x in perception_findings(choose, [])}
    assert f["encoder_choice"].evidence["encoder"] == "a" and "Swap to encoder a" in f["encoder_choice"].action
    # ... but not when it throws away what the probe needs
    lossy = [_entry("a", 0.10, 0.08, 0.12, 0.09, probe=0.1), _entry("b", 0.30, 0.25, 0.35, 0.09, probe=0.8)]
    assert "encoder_choice" not in {x.code for x in perception_findings(lossy, [])}
    # ... nor when the CIs overlap
    overlap = [_entry("a", 0.10, 0.05, 0.26, 0.09), _entry("b", 0.30, 0.25, 0.35, 0.09)]
    assert "encoder_choice" not in {x.code for x in perception_findings(overlap, [])}
    # without probe targets nothing shows the closer encoder keeps what the policy needs: info only
    noprobe = [_entry("a", 0.10, 0.08, 0.12, 0.09), _entry("b", 0.30, 0.25, 0.35, 0.09)]
    f = {x.code: x for x in perception_findings(noprobe, [])}
    assert f["encoder_choice"].severity == "info" and "probe" in f["encoder_choice"].action
    # the weights-free pixel baseline is a reference, never recommended
    base = [_entry("px", 0.01, 0.0, 0.02, 0.09, probe=0.9, family="pixel"), _entry("b", 0.30, 0.25, 0.35, 0.09, probe=0.8)]
    assert "encoder_choice" not in {x.code for x in perception_findings(base, [])}
    # CLIP thresholds apply to CLIP-family encoders only
    clip = [_entry("c", 0.1, 0.09, 0.11, 0.1, family="clip", cos=0.33), _entry("e", 0.1, 0.09, 0.11, 0.1, cos=0.9)]
    cf = [x for x in perception_findings(clip, []) if x.code == "clip_cosine"]
    assert len(cf) == 1 and cf[0].evidence["encoder"] == "c" and cf[0].evidence["band"] == "widen_randomization"
    # plumbing bugs open -> perception is flagged as measured through them
    bug = Finding("channel_swap", "bug", "swap", {}, "fix", 1.0)
    assert "perception_after_plumbing" in {x.code for x in perception_findings(far, [bug])}


# -- the whole run on generated, paired, episodic data with actions ---------------------------

def scene(seed: int, h: int = 72, w: int = 96) -> tuple[np.ndarray, list[float]]:
    """A textured scene whose two blob positions are the 'action' a policy must read."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([60 + 40 * np.sin(x / 7.0), 70 + 30 * np.cos(y / 5.0), 90 + 0 * x], -1).astype(np.float64)
    cx, cy = rng.uniform(15, w - 15), rng.uniform(15, h - 15)
    img[(x - cx) ** 2 + (y - cy) ** 2 < 80] = (230, 40, 40)
    return np.clip(img + rng.normal(0, 2, img.shape), 0, 255).astype(np.uint8), [cx / w, cy / h]


def make_manifest(tmp: Path, *, n_ep: int = 6, per_ep: int = 8, real_gain: float = 1.0, episodes: bool = True) -> Path:
    rows = []
    rng = np.random.default_rng(0)
    for dom in ("sim", "real"):
        (tmp / dom).mkdir(parents=True, exist_ok=True)
    for e in range(n_ep):
        for s in range(per_ep):
            seed = e * 100 + s
            img, act = scene(seed)
            # both sides carry their own sensor noise (a clean pair differs by noise only), rounded
            sim = np.clip(np.rint(img + rng.normal(0, 2, img.shape)), 0, 255).astype(np.uint8)
            Image.fromarray(sim).save(tmp / "sim" / f"{seed}.png")
            real = np.clip(np.rint(img.astype(np.float64) * real_gain + rng.normal(0, 2, img.shape)), 0, 255).astype(np.uint8)
            Image.fromarray(real).save(tmp / "real" / f"{seed}.png")
            for dom in ("sim", "real"):
                rows.append({"set": f"{dom}_set", "domain": dom, "rgb": f"{dom}/{seed}.png", "pair_key": str(seed),
                             "episode": f"ep{e}" if episodes else "", "step": s, "action": json.dumps(act)})
    path = tmp / "manifest.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def test_run_clean_pair_contract_and_storage(tmp_path):
    db = tmp_path / "c.duckdb"
    with Catalog(db) as cat:
        index_manifest(cat, make_manifest(tmp_path))
        res = run_job(cat, "sim_set", "real_set", encoder_names=["pixel"], device="cpu")
    assert set(res) >= {"sets", "findings", "encoders", "config", "version"}
    (e,) = res["encoders"]
    for key in ("name", "dim", "centroid_distance", "centroid_distance_norm", "centroid_distance_norm_ci",
                "noise_floor", "paired_cosine", "domain_auc", "mmd", "probe", "rank"):
        assert key in e, key
    assert set(e["paired_cosine"]) >= {"mean", "median", "p90", "shuffled_mean"}
    assert set(e["probe"]) >= {"sim_to_sim", "real_to_real", "sim_to_real", "transfer_drop", "transfer_drop_ci"}
    for dist in ("frechet_distance", "kid"):  # standard distribution distances with episode-bootstrap CIs
        assert e[dist]["ci"]["low"] <= e[dist]["value"] <= e[dist]["ci"]["high"], dist
    assert e["frechet_distance"]["value"] > 0 and e["probe"]["r2_below_floor"]["sim_to_real"] is False
    # the pixel baseline is a reference row, never ranked
    assert e["rank"] is None and e["reference"] and e["ranking_basis"] == "reference"
    assert e["noise_floor_method"] == "episodes" and e["probe_informative"] is True
    hist = e["paired_cosine"]["histogram"]
    assert sum(hist["counts"]) == e["paired_cosine"]["n_pairs"] and len(hist["edges"]) == len(hist["counts"]) + 1
    assert len(e["pca_2d"]["sim"]) == 48 and len(e["pca_2d"]["real"][0]) == 2
    worst = [w["cosine_distance"] for w in e["worst_pairs"]]
    assert len(worst) == 12 and worst == sorted(worst, reverse=True)
    assert worst[0] >= e["paired_cosine"]["p90"] and Path(e["worst_pairs"][0]["sim_path"]).exists()
    assert 0 <= e["centroid_distance_norm"] <= 1
    # matched pairs are much closer than shuffled ones; noise only: no domain signal, no bug
    assert e["paired_cosine"]["mean"] < e["paired_cosine"]["shuffled_mean"]
    assert e["domain_auc"] < 0.75
    assert e["probe"]["sim_to_real"] > 0.5  # the blob position survives the pixel encoder
    assert not [f for f in res["findings"] if f["severity"] == "bug"]
    json.dumps(res, allow_nan=False)  # strictly JSON: no NaN passed off as a number
    con = duckdb.connect(str(db), read_only=True)
    stored = con.execute("SELECT value FROM results WHERE run_id = ? AND name = 'centroid_distance_norm'",
                         [res["run_id"]]).fetchone()[0]
    con.close()
    assert stored == pytest.approx(e["centroid_distance_norm"])


def test_run_names_an_appearance_gap(tmp_path):
    with Catalog(tmp_path / "c.duckdb") as cat:
        index_manifest(cat, make_manifest(tmp_path, real_gain=0.55))
        res = run_job(cat, "sim_set", "real_set", encoder_names=["pixel"], device="cpu")
    codes = [f["code"] for f in res["findings"]]
    assert "brightness" in codes
    (e,) = res["encoders"]
    assert e["domain_auc"] > 0.9
    assert e["centroid_distance_norm"] > 2 * e["noise_floor"]
    gap = next(f for f in res["findings"] if f["code"] == "appearance_gap")
    # the action names the camera factor the counterfactual measured, by its share, never depth
    assert "exposure -" in gap["action"] and "closes" in gap["action"] and "depth" not in gap["action"]
    assert gap["evidence"]["attribution"]["all"]["share"] > 0.8


def test_paired_frames_without_episodes_keep_twins_in_one_fold(tmp_path):
    """Unknown episodes: a scene's sim and real frames must share a fold, or the classifier
    recognizes the scene instead of the domain (the AUC then falls below 0.5 on a real shift)."""
    with Catalog(tmp_path / "c.duckdb") as cat:
        index_manifest(cat, make_manifest(tmp_path, real_gain=0.7, episodes=False))
        res = run_job(cat, "sim_set", "real_set", encoder_names=["pixel"], device="cpu")
    (e,) = res["encoders"]
    assert e["domain_auc"] > 0.9


def test_cli_run_writes_results(tmp_path, capsys):
    db = tmp_path / "c.duckdb"
    man = make_manifest(tmp_path, n_ep=4, per_ep=5)
    assert cli.main(["index", "--manifest", str(man), "--db", str(db), "-q"]) == 0
    out = tmp_path / "out"
    code = cli.main(["run", "--sim", "sim_set", "--real", "real_set", "--encoders", "pixel", "--out", str(out),
                     "--db", str(db), "--device", "cpu", "--json", str(tmp_path / "copy.json")])
    text = capsys.readouterr().out
    assert code == 0 and "pixel" in text and "results:" in text
    res = json.loads((out / "results.json").read_text())
    assert res == json.loads((tmp_path / "copy.json").read_text())
    html = (out / "report.html").read_text()
    assert "Worst pairs" in html and "sim_set" in html and "http://" not in html
    assert html.count('alt="encoder plot"') == 3  # gap vs probe, PCA scatter, paired-cosine histogram
    assert res["encoders"][0]["name"] == "pixel"
    code = cli.main(["run", "--sim", "sim_set", "--real", "nope", "--out", str(out), "--db", str(db)])
    assert code == 2
