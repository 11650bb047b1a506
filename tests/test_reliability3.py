"""Third reliability round, outside ingest: non-finite numbers, numeric flags, geometry inputs,
the drift format gate at large n, user code ending the process, manifest flags, set counts and
catalog paths. Every case goes through `cli.main` and checks the exit code and the one line on
stderr, or the JSON written."""

from __future__ import annotations

import json
import math
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from perception_gap import cli
from perception_gap.commands.output import dumps
from perception_gap.workflows import drift_gates


def _one_line(capsys, *needles: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


# --- numeric flags: finite and within range, or one line, exit 2 ------------------------------------


def _latency_log(path: Path, n: int = 60, period_s: float = 1 / 30) -> Path:
    lines = ["capture,inferred,actuated"]
    for i in range(n):
        t = i * period_s
        lines.append(f"{t:.6f},{t + 0.010:.6f},{t + 0.012:.6f}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("args, needle", [
    (["--fps", "nan"], "--fps"),
    (["--fps", "inf"], "--fps"),
    (["--fps", "1e-308"], "--fps"),
    (["--fps", "-30"], "--fps"),
    (["--fps", "30", "--max-p95-ms", "nan"], "--max-p95-ms"),
    (["--fps", "30", "--max-p95-ms", "-inf"], "--max-p95-ms"),
])
def test_latency_non_finite_or_extreme_flags_are_bad_input(tmp_path, capsys, args, needle):
    log = _latency_log(tmp_path / "t.csv")
    assert cli.main(["latency", str(log), *args, "--json", str(tmp_path / "r.json")]) == 2
    _one_line(capsys, needle, "expected")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("command, flag, value", [
    ("rank-fidelity", "--min-pearson", "nan"),
    ("rank-fidelity", "--min-pearson", "2"),
    ("rollouts", "--confidence", "1.5"),
    ("rollouts", "--max-drop", "inf"),
    ("replay", "--max-translation-m", "nan"),
    ("reprojection", "--max-mean-px", "inf"),
])
def test_gate_thresholds_must_be_finite(tmp_path, capsys, command, flag, value):
    f = tmp_path / "in.csv"
    f.write_text("x\n1\n")  # never read: the flag is refused while parsing
    assert cli.main([command, str(f), flag, value]) == 2
    _one_line(capsys, flag, repr(value))


@pytest.mark.parametrize("value", ["0", "1025", "1000000"])
def test_workers_is_bounded(tmp_path, capsys, value):
    assert cli.main(["sets", "--db", str(tmp_path / "c.duckdb"), "--workers", value]) == 2
    _one_line(capsys, "--workers", "[1, 1024]", repr(value))


@pytest.mark.parametrize("value", ["-1", "1", "199", "100001", "1e8"])
def test_rank_fidelity_n_boot_is_validated_and_capped(tmp_path, capsys, value):
    f = tmp_path / "rates.csv"
    f.write_text("policy,task,sim,real,n_sim,n_real\na,t,0.2,0.3,50,50\nb,t,0.6,0.5,50,50\n")
    assert cli.main(["rank-fidelity", str(f), "--n-boot", value]) == 2
    _one_line(capsys, "--n-boot", "[200, 100000]", repr(value))


def test_rank_fidelity_n_boot_at_the_minimum_gives_intervals(tmp_path):
    f = tmp_path / "rates.csv"
    f.write_text("policy,task,sim,real,n_sim,n_real\na,t,0.2,0.3,50,50\nb,t,0.6,0.5,50,50\nc,t,0.9,0.8,50,50\n")
    js = tmp_path / "r.json"
    assert cli.main(["rank-fidelity", str(f), "--n-boot", "200", "-q", "--json", str(js)]) == 0
    t = json.loads(js.read_text())["rank_fidelity"]["tasks"]["t"]
    assert t["pearson_ci"][0] <= t["pearson"] <= t["pearson_ci"][1] and t["pearson_ci"][0] < t["pearson_ci"][1]


# --- non-finite results: null with a reason -----------------------------------------------------------


def test_dumps_writes_non_finite_numbers_as_null_and_names_them():
    text = dumps({"a": {"b": [1.0, math.nan]}, "c": np.float64(math.inf), "d": np.array([-math.inf, 2.0])})
    res = json.loads(text)
    assert res["a"]["b"] == [1.0, None] and res["c"] is None and res["d"] == [None, 2.0]
    assert [(x["path"], x["value"]) for x in res["non_finite"]] == [("a.b[1]", "nan"), ("c", "inf"), ("d[0]", "-inf")]
    assert all("null" in x["reason"] for x in res["non_finite"])
    assert "non_finite" not in json.loads(dumps({"a": 1.0}))


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """Six sim/real pairs of 6x8 frames with 2-d proprio, indexed from a manifest."""
    root = tmp_path_factory.mktemp("rel3")
    rng = np.random.default_rng(0)
    lines = ["set,domain,rgb,pair_key,proprio"]
    for i in range(6):
        img = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        for dom in ("sim", "real"):
            Image.fromarray(img).save(root / f"{dom}{i}.png")
            lines.append(f'{dom},{dom},{dom}{i}.png,p{i},"[{i * 0.1}, 0.5]"')
    (root / "m.csv").write_text("\n".join(lines) + "\n")
    db = str(root / "c.duckdb")
    assert cli.main(["index", "--manifest", str(root / "m.csv"), "--db", db, "-q"]) == 0
    return root, db


def test_an_overflowing_statistic_is_written_as_null_with_its_path(catalog, tmp_path):
    """Actions of +-1e308 are finite, but their spread overflows: written as null, not a crash."""
    root, db = catalog
    (tmp_path / "huge.py").write_text(
        "import torch\n"
        "def policy(images, proprio):\n"
        "    sign = torch.where(proprio[:, :1] > 0.25, 1.0, -1.0).double()\n"
        "    return torch.cat([sign * 1e308, proprio.double()], dim=1)\n")
    js = tmp_path / "r.json"
    rc = cli.main(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
                   f"{tmp_path / 'huge.py'}:policy", "--json", str(js), "-q"])
    assert rc == 0
    res = json.loads(js.read_text())
    assert res["policy_check"]["per_dim"][0]["sim_std"] is None
    paths = [x["path"] for x in res["non_finite"]]
    assert "policy_check.per_dim[0].sim_std" in paths and "policy_check.per_dim[0].real_std" in paths


# --- user code ending the process -----------------------------------------------------------------------


@pytest.mark.parametrize("body, needle", [
    ("    import sys\n    sys.exit(0)\n", "sys.exit(0)"),
    ("    raise SystemExit(3)\n", "sys.exit(3)"),
    ("    class Stop(BaseException):\n        pass\n    raise Stop()\n", "raise Stop"),
])
def test_a_policy_ending_the_process_is_one_line_exit_2(catalog, tmp_path, capsys, body, needle):
    _, db = catalog
    (tmp_path / "quits.py").write_text("def policy(images, proprio):\n" + body)
    js = tmp_path / "r.json"
    rc = cli.main(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
                   f"{tmp_path / 'quits.py'}:policy", "--json", str(js)])
    assert rc == 2 and not js.exists()
    _one_line(capsys, needle, "running the policy", "--policy")


def test_a_policy_module_exiting_on_import_is_one_line_exit_2(catalog, tmp_path, capsys):
    _, db = catalog
    (tmp_path / "quits_early.py").write_text("import sys\nsys.exit(0)\ndef policy(images, proprio):\n    pass\n")
    rc = cli.main(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
                   f"{tmp_path / 'quits_early.py'}:policy"])
    assert rc == 2
    _one_line(capsys, "sys.exit(0)", "loading `--policy`")


# --- replay and reprojection inputs -----------------------------------------------------------------------


def _replay_rows(n: int = 6) -> list[dict]:
    rows = []
    for s in range(n):
        for dom, dx in (("sim", 0.0), ("real", 0.001 * s)):
            rows.append({"episode": "e", "step": s, "domain": dom, "x": 0.1 * s + dx, "y": 0.0, "z": 0.2,
                         "qw": 1.0, "qx": 0.0, "qy": 0.0, "qz": 0.0})
    return rows


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_replay_row_missing_a_column_after_the_first_is_one_line(tmp_path, capsys):
    rows = _replay_rows()
    del rows[5]["qz"]
    assert cli.main(["replay", str(_jsonl(tmp_path / "r.jsonl", rows))]) == 2
    _one_line(capsys, "Row 6", "missing qz")


@pytest.mark.parametrize("value", [1e308, -1e300, 1e7])
def test_replay_pose_beyond_any_workspace_is_one_line(tmp_path, capsys, value):
    rows = _replay_rows()
    rows[3]["x"] = value
    assert cli.main(["replay", str(_jsonl(tmp_path / "r.jsonl", rows)), "--json", str(tmp_path / "o.json")]) == 2
    _one_line(capsys, "Row 4", "`x` to be a finite number")


def test_replay_of_sane_rows_still_measures(tmp_path):
    js = tmp_path / "o.json"
    assert cli.main(["replay", str(_jsonl(tmp_path / "r.jsonl", _replay_rows())), "--json", str(js), "-q"]) == 0
    per_step = json.loads(js.read_text())["replay"]["translation_error"]["per_step"]
    np.testing.assert_allclose(per_step, [0.001 * s for s in range(6)], atol=1e-12)


def _camera(**over) -> dict:
    cam = {"width": 640, "height": 480, "K": [[500, 0, 320], [0, 500, 240], [0, 0, 1]],
           "dist": [0, 0, 0, 0, 0], "T_base_cam": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]}
    cam.update(over)
    return cam


def _reprojection(tmp_path: Path, sim: dict, grid: dict | None = None) -> Path:
    spec = {"sim": sim, "real": _camera(), "grid": grid or {"min": [-0.1, -0.1, 0.5], "max": [0.1, 0.1, 0.7],
                                                            "step": 0.05}}
    f = tmp_path / "cams.json"
    f.write_text(json.dumps(spec, allow_nan=True))  # Infinity and NaN as Python's json writes them
    return f


@pytest.mark.parametrize("sim, needle", [
    (_camera(width=math.inf), "sim.width"),
    (_camera(height=math.nan), "sim.height"),
    (_camera(width=1e12), "sim.width"),
    (_camera(dist=[[0.1, 0.0], [0.0]]), "sim.dist"),
    (_camera(dist=[0.1, "a", 0, 0]), "sim.dist"),
    (_camera(dist=[-1e308, 1e308, 0, 0, 1e308]), "sim.dist"),  # its monotonic range needed roots of infinities
    (_camera(K=[[1e308, 0, 320], [0, 1e308, 240], [0, 0, 1]]), "sim.K"),
    (_camera(T_base_cam=[[1, 0, 0, 1e308], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]), "sim.T_base_cam"),
])
def test_bad_camera_fields_are_one_line(tmp_path, capsys, sim, needle):
    assert cli.main(["reprojection", str(_reprojection(tmp_path, sim))]) == 2
    _one_line(capsys, needle)


@pytest.mark.parametrize("grid", [
    {"min": [0, 0, 0], "max": [1, 1, 1], "step": 1e-300},  # 1e300 points per axis: int64 wraps
    {"min": [0, 0, 0], "max": [1, 1, 1], "step": 5e-7},  # 2e6 per axis: the product wraps past 2**63
])
def test_a_grid_whose_point_count_overflows_is_refused(tmp_path, capsys, grid):
    assert cli.main(["reprojection", str(_reprojection(tmp_path, _camera(), grid))]) == 2
    _one_line(capsys, "grid points", "grid.step")


def test_grid_bounds_and_known_points_beyond_any_workspace_are_refused(tmp_path, capsys):
    far = {"min": [-1e308, 0, 0], "max": [1e308, 1, 1], "step": 1.0}  # the span itself overflows
    assert cli.main(["reprojection", str(_reprojection(tmp_path, _camera(), far))]) == 2
    _one_line(capsys, "grid.min", "1e+06 m")
    f = _reprojection(tmp_path, _camera())
    spec = json.loads(f.read_text())
    spec["points"] = [{"xyz": [0, 0, 1], "pixel": [1e308, 0]}]
    f.write_text(json.dumps(spec))
    assert cli.main(["reprojection", str(f)]) == 2
    _one_line(capsys, "`points`", "1e+308 px")


def test_identical_cameras_reproject_to_zero(tmp_path):
    js = tmp_path / "r.json"
    assert cli.main(["reprojection", str(_reprojection(tmp_path, _camera())), "--json", str(js), "-q"]) == 0
    res = json.loads(js.read_text())["reprojection"]
    assert res["mean"] == 0.0 and res["n_points"] == 125 and "non_finite" not in json.loads(js.read_text())


# --- drift's format gate at large n ----------------------------------------------------------------------


def _exact_tail(k: int, n: int, p: Fraction) -> float:
    """P(X >= k), X ~ Binomial(n, p), in exact rational arithmetic (an independent reference),
    summed over the shorter side of k."""
    def term(i: int) -> Fraction:
        return math.comb(n, i) * p ** i * (1 - p) ** (n - i)

    if k > n // 2:
        return float(sum(term(i) for i in range(k, n + 1)))
    return float(1 - sum(term(i) for i in range(k)))


@pytest.mark.parametrize("k", [1, 20, 35, 60, 1200])
def test_binomial_tail_past_a_thousand_frames_matches_exact_arithmetic(k):
    p = Fraction(1, 60)
    got = drift_gates.binomial_tail(k, 1200, float(p))
    want = _exact_tail(k, 1200, p)
    assert math.isfinite(got) and got == pytest.approx(want, rel=1e-9, abs=1e-300)


def test_binomial_tail_edges():
    assert drift_gates.binomial_tail(0, 5000, 0.3) == 1.0
    assert drift_gates.binomial_tail(1, 5000, 0.0) == 0.0
    assert drift_gates.binomial_tail(3, 100_000, 1e-5) == pytest.approx(_exact_tail(3, 100_000, Fraction(1, 100_000)),
                                                                        rel=1e-9)


def test_drift_with_1200_current_frames_and_one_grey_frame(tmp_path):
    """The case that crashed: a 1,200-frame current set with one greyscale frame, against a
    baseline holding one in sixty (the tail's sum overflowed a float at that rate)."""
    rng = np.random.default_rng(1)
    for name, n in (("base", 60), ("cur", 1200)):
        (tmp_path / name).mkdir()
        for i in range(n):
            a = rng.integers(90, 160, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(a).save(tmp_path / name / f"{i:04d}.png")
    for name in ("base", "cur"):
        Image.fromarray(np.full((8, 8), 128, np.uint8)).save(tmp_path / name / "0000.png")
    db = str(tmp_path / "d.duckdb")
    for name in ("base", "cur"):
        assert cli.main(["index", str(tmp_path / name), "--set", name, "--domain", "real", "--db", db, "-q"]) == 0
    out = tmp_path / "o"
    rc = cli.main(["drift", "--baseline", "base", "--current", "cur", "--encoders", "none", "--out", str(out),
                   "--db", db, "-q"])
    res = json.loads((out / "results.json").read_text())
    fmt = next(g for g in res["drift"]["gates"] if g["name"] == "format")
    # 1 odd frame in 1200 where the baseline has 1 in 60: fewer than expected, the gate passes
    assert fmt["passed"] and fmt["value"] == pytest.approx(1 / 1200 - 1 / 60) and rc in (0, 1)
    assert fmt["detail"]["p_value"] == pytest.approx(1 - (59 / 60) ** 1200, rel=1e-9)


# --- latency and rank-fidelity findings ----------------------------------------------------------------


def test_a_unit_that_contradicts_fps_is_a_finding(tmp_path):
    log = _latency_log(tmp_path / "t.csv")  # seconds, 30 Hz
    js = tmp_path / "r.json"
    assert cli.main(["latency", str(log), "--fps", "30", "--unit", "ms", "--json", str(js), "-q"]) == 0
    res = json.loads(js.read_text())
    f = next(x for x in res["findings"] if x["code"] == "latency_unit")
    assert f["severity"] == "bug" and f["evidence"]["unit_that_fits"] == "s"
    assert f["evidence"]["period_over_tick"] == pytest.approx(1e-3, rel=1e-3)
    assert res["latency"]["end_to_end"]["p50"] == pytest.approx(0.012, rel=1e-6)  # what the wrong unit gives
    assert cli.main(["latency", str(log), "--fps", "30", "--json", str(js), "-q"]) == 0
    assert "latency_unit" not in [x["code"] for x in json.loads(js.read_text())["findings"]]
    # every fifth tick logged: a ratio of 5 stays within the tenfold tolerance
    assert cli.main(["latency", str(_latency_log(tmp_path / "t5.csv", period_s=5 / 30)), "--fps", "30",
                     "--json", str(js), "-q"]) == 0
    assert json.loads(js.read_text())["findings"] == []


def test_latency_with_one_named_stage_is_one_line(tmp_path, capsys):
    assert cli.main(["latency", str(_latency_log(tmp_path / "t.csv")), "--fps", "30", "--stages", "capture"]) == 2
    _one_line(capsys, "--stages", "at least two", "capture")


def test_rank_fidelity_finding_below_the_documented_defaults(tmp_path):
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("policy,task,sim,real\na,t,0.1,0.15\nb,t,0.4,0.45\nc,t,0.7,0.8\n")
    bad.write_text("policy,task,sim,real\na,t,0.1,0.8\nb,t,0.4,0.45\nc,t,0.7,0.15\n")
    js = tmp_path / "r.json"
    assert cli.main(["rank-fidelity", str(good), "--json", str(js), "-q"]) == 0
    assert json.loads(js.read_text())["findings"] == []
    assert cli.main(["rank-fidelity", str(bad), "--json", str(js), "-q"]) == 0  # a finding, not a gate
    (f,) = json.loads(js.read_text())["findings"]
    assert f["code"] == "rank_fidelity" and f["evidence"]["min_pearson"] == 0.7 and f["evidence"]["max_mmrv"] == 0.1
    assert f["evidence"]["mean_pearson"] < 0 and f["evidence"]["mean_mmrv"] > 0.1


def test_rank_fidelity_help_documents_the_finding_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["rank-fidelity", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "below 0.7" in out and "above 0.1" in out


# --- manifest flags, set counts, catalog paths -------------------------------------------------------------


def _frames(folder: Path, n: int) -> list[str]:
    folder.mkdir(exist_ok=True)
    names = []
    for i in range(n):
        Image.fromarray(np.full((4, 4, 3), 40 * i, np.uint8)).save(folder / f"f{i}.png")
        names.append(f"f{i}.png")
    return names


def test_manifest_without_set_and_domain_columns_takes_the_flags(tmp_path):
    names = _frames(tmp_path, 3)
    m = tmp_path / "m.csv"
    m.write_text("rgb,pair_key\n" + "".join(f"{n},{n[:-4]}\n" for n in names))
    db = str(tmp_path / "c.duckdb")
    assert cli.main(["index", "--manifest", str(m), "--set", "foo", "--domain", "real", "--db", db, "-q"]) == 0
    js = tmp_path / "sets.json"
    assert cli.main(["sets", "--db", db, "--json", str(js), "-q"]) == 0
    (s,) = json.loads(js.read_text())["sets"]
    assert (s["name"], s["domain"], s["usable"]) == ("foo", "real", 3)


def test_manifest_without_set_column_and_without_flags_names_the_column(tmp_path, capsys):
    names = _frames(tmp_path, 2)
    m = tmp_path / "m.csv"
    m.write_text("rgb,pair_key,domain\n" + "".join(f"{n},{n[:-4]},sim\n" for n in names))
    assert cli.main(["index", "--manifest", str(m), "--db", str(tmp_path / "c.duckdb")]) == 2
    _one_line(capsys, "missing required column(s) set")


def test_flags_contradicting_the_manifest_columns_are_refused(tmp_path, capsys):
    names = _frames(tmp_path, 2)
    m = tmp_path / "m.csv"
    m.write_text("set,domain,rgb,pair_key\n" + "".join(f"a,sim,{n},{n[:-4]}\n" for n in names))
    db = tmp_path / "c.duckdb"
    assert cli.main(["index", "--manifest", str(m), "--set", "foo", "--db", str(db)]) == 2
    _one_line(capsys, "`set` column says 'a'", "`--set` says 'foo'", "drop `--set`")
    assert cli.main(["index", "--manifest", str(m), "--domain", "real", "--db", str(db)]) == 2
    _one_line(capsys, "`domain` column says 'sim'", "`--domain` says 'real'")
    # agreeing flags are accepted
    assert cli.main(["index", "--manifest", str(m), "--set", "a", "--domain", "sim", "--db", str(db), "-q"]) == 0
    assert cli.main(["index", "--manifest", str(m), "--pair-regex", "(.*)", "--db", str(db)]) == 2
    _one_line(capsys, "--pair-regex goes with a folder PATH")


def test_sets_counts_the_skips_stats_counts(tmp_path):
    names = _frames(tmp_path, 3)
    (tmp_path / "broken.png").write_bytes(b"not a png")
    rows = [f"{dom},{dom},{n},{n[:-4]}" for dom in ("sim", "real") for n in names]
    rows += ["sim,sim,f0.png,again"] * 40 + ["real,real,broken.png,bad"]  # 40 repeats of one file, one bad frame
    m = tmp_path / "m.csv"
    m.write_text("set,domain,rgb,pair_key\n" + "\n".join(rows) + "\n")
    db = str(tmp_path / "c.duckdb")
    cli.main(["index", "--manifest", str(m), "--db", db, "-q"])
    stats_js, sets_js = tmp_path / "stats.json", tmp_path / "sets.json"
    assert cli.main(["stats", "--sim", "sim", "--real", "real", "--db", db, "--json", str(stats_js), "-q"]) in (0, 1)
    assert cli.main(["sets", "--db", db, "--json", str(sets_js), "-q"]) == 0
    by_stats = json.loads(stats_js.read_text())["sets"]
    by_sets = {s["name"]: s for s in json.loads(sets_js.read_text())["sets"]}
    for name in ("sim", "real"):
        assert by_sets[name]["skipped"] + by_sets[name]["missing"] == by_stats[name]["n_skipped"], name
        assert by_sets[name]["frames"] == by_stats[name]["n_frames"], name
    assert by_sets["sim"]["skipped"] == 40 and by_sets["real"]["skipped"] == 1


def test_a_db_that_is_not_a_regular_file_is_refused_before_any_lock(tmp_path, capsys):
    fifo = tmp_path / "fifo.duckdb"
    os.mkfifo(fifo)
    _frames(tmp_path / "frames", 1)
    for db in (str(fifo), os.devnull):
        had_lock = os.path.exists(db + ".lock")
        assert cli.main(["index", str(tmp_path / "frames"), "--set", "s", "--domain", "sim", "--db", db]) == 2
        _one_line(capsys, "`--db`", repr(db), "FIFO" if db == str(fifo) else "character device")
        assert os.path.exists(db + ".lock") == had_lock
    assert cli.main(["sets", "--db", str(fifo)]) == 2
    _one_line(capsys, "FIFO")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.duckdb", "frames"]


@pytest.mark.parametrize("name, text, needle", [
    ("rates.csv", "policy,task,sim,real,n_sim,n_real\na,t,0.2,0.3,1e300,50\nb,t,0.6,0.5,50,50\n", "`n_sim`"),
    ("rates.jsonl", '{"policy": "a", "task": "t", "sim": 0.2, "real": 0.3, "n_sim": 1' + "0" * 400 + ', "n_real": 5}\n'
     '{"policy": "b", "task": "t", "sim": 0.6, "real": 0.5, "n_sim": 5, "n_real": 5}\n', "`n_sim`"),
])
def test_rank_fidelity_counts_beyond_any_rollout_log_are_one_line(tmp_path, capsys, name, text, needle):
    f = tmp_path / name
    f.write_text(text)
    assert cli.main(["rank-fidelity", str(f)]) == 2
    _one_line(capsys, needle, "Row 1")


def test_rollouts_episode_length_beyond_any_rollout_is_one_line(tmp_path, capsys):
    f = tmp_path / "r.csv"
    f.write_text("policy,task,domain,success,episode_length\na,t,sim,1,1e308\na,t,sim,0,1.7e308\n"
                 "a,t,real,1,10\na,t,real,0,5\n")
    assert cli.main(["rollouts", str(f)]) == 2
    _one_line(capsys, "`episode_length`", "Row 1")
