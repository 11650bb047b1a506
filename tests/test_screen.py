"""`screen`: which rendering is closer to real, with a paired bootstrap (real pipeline, real catalog)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scenes import render, scenes, write_set  # noqa: E402

from perception_gap import cli  # noqa: E402
from perception_gap.metrics.centroid import centroid_distance  # noqa: E402
from perception_gap.workflows.screening import rank_renderings, scene_clusters, shared_draws, view_distances  # noqa: E402
from tests.figures import capture, cell, check_stats_plots, html_tables, legend, lines, only, ticklabels  # noqa: E402


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("screen")
    sc = scenes()
    rng = np.random.default_rng(1)
    sets = {
        "real": ("real", [render(s, 1.0, 0.02, rng) for s in sc]),
        "close": ("sim", [render(s, 1.08) for s in sc]),
        "far": ("sim", [render(s, 1.45) for s in sc]),
        "close_copy": ("sim", [render(s, 1.08) for s in sc]),
    }
    db = str(tmp / "c.duckdb")
    for name, (dom, frames) in sets.items():
        write_set(tmp / name, frames)
        assert cli.main(["index", str(tmp / name), "--set", name, "--domain", dom, "--db", db, "-q"]) == 0
    return tmp, db


_RUNS = iter(range(10_000))


def _screen(tmp: Path, db: str, *extra: str) -> tuple[int, dict]:
    out = tmp / f"out{next(_RUNS)}"
    rc = cli.main(["screen", *extra, "--real", "real", "--encoders", "pixel", "--out", str(out), "--db", db, "-q",
                   "--n-boot", "400"])
    res = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    if res:
        assert (out / "report.html").exists()
    return rc, res


def _check_screen_plots(drawn, res):
    """The distance plot: each rendering on its own row (closest on top), each view's distance and
    CI at that row in the rendering's set colour, the view told by its marker and legend; the
    statistics plots by value, real as the reference colour."""
    from perception_gap.reports.plots import PALETTE

    colours = check_stats_plots(drawn, res)
    assert colours["real"] == PALETTE[0].lower()  # the reference set first, as in every report
    scr = res["screen"]
    (fig,) = only(drawn, "screen_distances")
    (ax,) = fig.axes
    rows = scr["ranking"]
    assert ticklabels(ax, "y") == [r["set"] for r in reversed(rows)]
    drawn_lines = lines(ax)
    marks = [ln for ln in drawn_lines if len(ln[0]) == 1]
    bars_ = [ln for ln in drawn_lines if len(ln[0]) == 2]
    assert len(marks) == len(bars_) == len(rows) * len(scr["views"])
    for j, view in enumerate(scr["views"]):
        for i, r in enumerate(rows):
            cell = r["per_view"][view]
            hit = [m for m in marks if m[0][0] == pytest.approx(cell["distance"])]
            assert len(hit) == 1, (r["set"], view)
            _, (y,), colour, _, marker = hit[0]
            assert round(y) == len(rows) - 1 - i and colour == colours[r["set"]] and marker == "osD^vP*X"[j]
            assert any(np.allclose(b[0], [cell["ci"]["low"], cell["ci"]["high"]]) and np.allclose(b[1], y)
                       and b[2] == colour for b in bars_), (r["set"], view)
    assert list(legend(ax)) == [f"view {v}" for v in scr["views"]]
    assert ax.get_xlabel().startswith("normalized centroid distance to real")


def _check_screen_table(html, scr):
    """The ranking table: each rendering's rank, distance and per-view distances, closest first."""
    table = html_tables(html)["screen-ranking"]
    assert table[0] == ["rank", "sim set", "distance [CI]", *scr["views"]]
    for row, r in zip(table[1:], scr["ranking"], strict=True):
        assert row[:2] == [str(r["rank"]), r["set"]]
        assert cell(row[2].split()[0]) == pytest.approx(r["distance"], rel=5e-3)
        assert [cell(c) for c in row[3:]] == pytest.approx([r["per_view"][v]["distance"] for v in scr["views"]],
                                                           rel=5e-3)


def test_known_difference_is_ranked_and_significant(catalog, monkeypatch):
    tmp, db = catalog
    drawn = capture(monkeypatch)
    rc, res = _screen(tmp, db, "--sim", "far", "--sim", "close")
    _check_screen_plots(drawn, res)
    newest = max(tmp.glob("out*"), key=lambda d: d.stat().st_mtime)
    _check_screen_table((newest / "report.html").read_text(), res["screen"])
    assert rc == 0
    scr = res["screen"]
    assert [r["set"] for r in scr["ranking"]] == ["close", "far"] and scr["closest"] == "close"
    assert scr["views"] == ["raw statistics", "pixel"]
    p = scr["pairwise"][0]
    assert p["significant"] and p["ci"]["low"] > 0
    for view in scr["views"]:  # both the statistics and the encoder see it
        assert p["per_view"][view]["significant"]
    codes = [f["code"] for f in res["findings"]]
    assert "screen_closer" in codes and "brightness" in codes  # the statistics also name the factor


def test_identical_renderings_are_not_significant(catalog):
    tmp, db = catalog
    rc, res = _screen(tmp, db, "--sim", "close", "--sim", "close_copy")
    assert rc == 0
    scr = res["screen"]
    p = scr["pairwise"][0]
    assert p["difference"] == 0 and not p["significant"] and scr["closest"] is None
    assert any(f["code"] == "screen_not_significant" for f in res["findings"])


def test_fail_if_worse_gates(catalog):
    tmp, db = catalog
    rc, res = _screen(tmp, db, "--sim", "close,far", "--fail-if-worse", "close")
    assert rc == 1 and res["screen"]["worse_than_baseline"] == ["far"] and res["screen"]["passed"] is False
    assert any(f["code"] == "screen_worse" for f in res["findings"])
    rc, res = _screen(tmp, db, "--sim", "close,far", "--fail-if-worse", "far")
    assert rc == 0 and res["screen"]["passed"] is True
    rc, _ = _screen(tmp, db, "--sim", "close,far", "--fail-if-worse", "nope")
    assert rc == 2


def test_bad_usage_exits_2(catalog, capsys):
    tmp, db = catalog
    assert _screen(tmp, db, "--sim", "close")[0] == 2
    assert _screen(tmp, db, "--sim", "close", "--sim", "unknown")[0] == 2
    assert _screen(tmp, db, "--sim", "close", "--sim", "real")[0] == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith("perception-gap: error") or "Error" not in line for line in err)


def test_results_history_in_catalog(catalog):
    import duckdb

    tmp, db = catalog
    _screen(tmp, db, "--sim", "far", "--sim", "close")
    with duckdb.connect(db, read_only=True) as con:
        rows = con.execute("SELECT s.scope, s.value FROM results s JOIN runs r USING (run_id) "
                           "WHERE r.kind = 'screen' AND s.name = 'distance'").fetchall()
    assert {"screen:close", "screen:far"} <= {r[0] for r in rows}


# -- the math, against independent references -------------------------------------------------------------

def test_one_sim_equals_published_centroid_distance():
    rng = np.random.default_rng(0)
    sim, real = rng.normal(0.3, 1, (60, 20)), rng.normal(0, 1, (50, 20))
    clusters = scene_clusters({"s": [f"k{i}" for i in range(60)], "r": [f"k{i}" for i in range(50)]},
                              {"s": [None] * 60, "r": [None] * 50}, "r")
    draws, index = shared_draws(clusters, n_boot=50)
    v = view_distances("x", {"s": sim, "r": real}, clusters, "r", draws=draws, labels_index=index)
    assert v.values["s"] == pytest.approx(centroid_distance(sim, real).value_norm, rel=1e-9)


def test_paired_clusters_share_scenes_and_episodes():
    c = scene_clusters({"a": ["k1", "k2", "x"], "r": ["k1", "k2", "y"]},
                       {"a": [None, None, None], "r": ["e1", None, "e9"]}, "r")
    # one episode is too few to resample whole: it is cut into blocks of its keys
    assert c["a"][0] == c["r"][0] and c["a"][0][0] == ("episode", "e1")
    assert c["a"][1] == c["r"][1] == ("scene", "k2")
    assert c["a"][2] != c["r"][2]


def test_rank_renderings_orders_and_brackets():
    rng = np.random.default_rng(3)
    real = rng.normal(0, 1, (80, 10))
    a = real + 0.2 + rng.normal(0, 0.1, real.shape)
    b = real + 1.0 + rng.normal(0, 0.1, real.shape)
    keys = [f"k{i}" for i in range(80)]
    clusters = scene_clusters({"a": keys, "b": keys, "r": keys}, {n: [None] * 80 for n in "abr"}, "r")
    draws, index = shared_draws(clusters, n_boot=300)
    v = view_distances("x", {"a": a, "b": b, "r": real}, clusters, "r", draws=draws, labels_index=index)
    out = rank_renderings([v], ["b", "a"], baseline="a")
    assert out["closest"] == "a" and out["worse_than_baseline"] == ["b"]
    r0 = out["ranking"][0]
    assert r0["ci"]["low"] <= r0["distance"] <= r0["ci"]["high"]
    assert all(0 <= r["distance"] <= 1 for r in out["ranking"])


def test_one_episode_sets_screen(tmp_path):
    """A one-episode set (every frame in one sub-folder) screens: blocks within the episode are
    the bootstrap's units, so one episode is not refused for having too few scenes."""
    sc = scenes(24, seed=5)
    rng = np.random.default_rng(2)
    db = str(tmp_path / "one.duckdb")
    for name, dom, frames in (("real", "real", [render(s, 1.0, 0.02, rng) for s in sc]),
                              ("close", "sim", [render(s, 1.08) for s in sc]),
                              ("far", "sim", [render(s, 1.45) for s in sc])):
        write_set(tmp_path / name / "episode_0", frames)
        assert cli.main(["index", str(tmp_path / name), "--set", name, "--domain", dom, "--db", db, "-q"]) == 0
    rc, res = _screen(tmp_path, db, "--sim", "far", "--sim", "close")
    assert rc == 0, res
    scr = res["screen"]
    assert scr["n_scenes"] >= 10  # ~16 blocks of one episode, not 1 cluster
    assert [r["set"] for r in scr["ranking"]] == ["close", "far"] and scr["significant"]
    ci = scr["ranking"][0]["ci"]
    assert ci["low"] < scr["ranking"][0]["distance"] < ci["high"]  # not collapsed to a point


def test_scene_clusters_cut_few_episodes_into_blocks():
    keys = [f"k{i:02d}" for i in range(32)]
    c = scene_clusters({"a": keys, "r": keys}, {"a": [None] * 32, "r": ["e0"] * 16 + ["e1"] * 16}, "r")
    assert c["a"] == c["r"]  # a shared key has the same block in every set
    assert len(set(c["r"])) == 16 and not set(c["r"][:16]) & set(c["r"][16:])  # blocks never span episodes
    assert all(c["r"][i] == c["r"][i + 1] for i in range(0, 32, 2))  # contiguous: 2 keys a block
    many = scene_clusters({"a": keys, "r": keys}, {"a": [None] * 32, "r": [f"e{i // 4}" for i in range(32)]}, "r")
    assert len(set(many["r"])) == 8  # 8 episodes: whole episodes, as before
