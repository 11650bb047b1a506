"""Manifests as users write them: paths outside the manifest's folder, duplicate columns, one
file listed 100,000 times, bad values (recorded skips with their reason), a byte-order mark, and
`--set`/`--domain` flags standing in for or contradicting the columns."""

from __future__ import annotations

import datetime
import json

import duckdb
from PIL import Image

from perception_gap import cli as pg_cli
from tests.cli_process import (
    clean,
    flat_frames,
    frame_folder,
    frames_dir,
    good_frame,
    ok,
    one_line,
    one_line_error,
    query,
    write_manifest,
)
from tests.in_process import here


def test_manifest_paths_outside_its_folder_absolute_and_missing_files(tmp_path, capfd):
    (tmp_path / "outside.png").write_bytes(b"")  # zero bytes: a skip for what it is, not for where it is
    Image.fromarray(good_frame(9)).save(tmp_path / "elsewhere.png")
    frames_dir(tmp_path / "m" / "a", 2)
    rows = [{"set": "s", "domain": "sim", "rgb": "a/f0.png", "pair_key": "0"},
            {"set": "s", "domain": "sim", "rgb": "../outside.png", "pair_key": "1"},
            {"set": "s", "domain": "sim", "rgb": str(tmp_path / "elsewhere.png"), "pair_key": "2"},
            {"set": "s", "domain": "sim", "rgb": "a/../../outside.png", "pair_key": "3"},
            {"set": "s", "domain": "sim", "rgb": "a/gone.png", "pair_key": "4"},
            {"set": "s", "domain": "sim", "rgb": "a/f1.png", "pair_key": "5", "depth": "../outside.png"}]
    m = write_manifest(tmp_path / "m" / "m.jsonl", rows)
    p = here(capfd, "index", "--manifest", m, "--db", tmp_path / "c.duckdb")
    clean(p)
    assert p.returncode == 0 and "2 usable, 4 skipped" in p.stdout, p.stdout
    assert "the same file is listed again (pair key '3')" in p.stdout  # a/../../outside.png is ../outside.png
    con = duckdb.connect(str(tmp_path / "c.duckdb"), read_only=True)
    got = dict(con.execute("SELECT pair_key, coalesce(error, status) FROM frames").fetchall())
    paths = dict(con.execute("SELECT pair_key, rgb_path FROM frames").fetchall())
    con.close()
    assert got["0"] == got["2"] == "ok" and paths["2"] == str(tmp_path / "elsewhere.png")
    assert got["1"] == "zero-byte file" and got["5"] == "depth: zero-byte file" and got["4"] == "file not found"
    assert not any("outside" in e for e in got.values())


def test_duplicate_manifest_columns_are_an_error_naming_the_column(tmp_path, capfd):
    frames_dir(tmp_path / "a", 2)
    (tmp_path / "m.csv").write_text("set,domain,rgb,pair_key,rgb\ns,sim,a/f0.png,0,a/f1.png\n")
    one_line_error(here(capfd, "index", "--manifest", tmp_path / "m.csv", "--db", tmp_path / "c.duckdb"),
                   "two columns named 'rgb'")
    (tmp_path / "m.jsonl").write_text('{"set": "s", "domain": "sim", "rgb": "a/f0.png", "pair_key": "0", "rgb": "a/f1.png"}\n')
    one_line_error(here(capfd, "index", "--manifest", tmp_path / "m.jsonl", "--db", tmp_path / "c.duckdb"),
                   "line 1", "key 'rgb' appears twice")
    assert not (tmp_path / "c.duckdb").exists() or not query(tmp_path / "c.duckdb", "SELECT * FROM frames")


def test_a_file_listed_100000_times_is_one_summary_line_and_counted_by_stats(tmp_path, capfd):
    frames_dir(tmp_path / "a", 3)
    rows = [{"set": "s", "domain": "sim", "rgb": "a/f0.png", "pair_key": str(i)} for i in range(100_000)]
    rows += [{"set": "s", "domain": "sim", "rgb": "a/f1.png", "pair_key": "x"},
             {"set": "r", "domain": "real", "rgb": "a/f2.png", "pair_key": "0"}]
    db = tmp_path / "c.duckdb"
    p = here(capfd, "index", "--manifest", write_manifest(tmp_path / "m.jsonl", rows), "--db", db)
    clean(p)
    assert p.returncode == 0, p.stderr
    assert "s (sim): 100001 listed" in p.stdout and "2 usable, 99999 skipped" in p.stdout, p.stdout
    again = [ln for ln in p.stdout.splitlines() if "listed again" in ln]
    # one line for the reason, grouped with its count and the file named (skips grouped by reason)
    want = ("  skipped 1 frame: the same file is listed again 99,999 more times (pair keys '1', '2', '3', ...); "
            f"its first listing (pair key '0') is kept: f0.png (in {tmp_path / 'a'})")
    assert again == [want], again
    p = here(capfd, "stats", "--sim", "s", "--real", "r", "--db", db, "--json", tmp_path / "s.json")
    clean(p)
    assert p.returncode == 0 and "2 usable of 100001 frames, 99999 skipped" in p.stdout, p.stdout
    info = json.loads((tmp_path / "s.json").read_text())["sets"]["s"]
    assert (info["n_frames"], info["n_usable"], info["n_skipped"]) == (100_001, 2, 99_999)
    assert [(s["path"], s["repeats"]) for s in info["skipped"]] == [(str(tmp_path / "a" / "f0.png"), 99_999)]
    # a listing without repeats clears them
    p = here(capfd, "index", "--manifest", write_manifest(tmp_path / "m.jsonl", rows[:1] + rows[-2:]), "--db", db, "-q")
    assert p.returncode == 0
    p = here(capfd, "stats", "--sim", "s", "--real", "r", "--db", db, "--json", tmp_path / "s.json", "-q")
    assert json.loads((tmp_path / "s.json").read_text())["sets"]["s"]["n_skipped"] == 0


def test_bad_manifest_values_are_recorded_skips_with_their_reason(tmp_path, capfd):
    frame_folder(tmp_path / "a", 0, 10)
    rows = [{"set": "m", "domain": "sim", "rgb": f"a/frame_{i:03d}.png", "pair_key": str(i)} for i in range(10)]
    rows[0].update(step=3, action=[0.5, 1])
    rows[1]["action"] = [1, None]
    rows[2]["action"] = [[1, 2], 3]
    rows[3]["step"] = float("inf")  # json.dumps writes Infinity, which json.loads reads back
    rows[4]["step"] = "1e400"
    rows[5]["step"] = 1e30
    rows[6]["step"] = [1, 2]
    rows[7]["step"] = "2024-01-01T00:00:00"
    rows[8]["proprio"] = "[1, [2]]"
    rows[9]["step"] = 2.5
    expected = {"1": "action[1] is null", "2": "action[0] is [1, 2]", "3": "'step' is 'inf'",
                "4": "'step' is '1e400'", "5": "outside the 64-bit range", "6": "(list)",
                "7": "expected a whole number", "8": "proprio[1] is [2]", "9": "'step' is '2.5'"}
    m = tmp_path / "m.jsonl"
    m.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    db = tmp_path / "c.duckdb"
    p = ok(here(capfd, "index", "--manifest", m, "--db", db))
    assert "1 usable, 9 skipped" in p.stdout, p.stdout
    got = dict(query(db, "SELECT pair_key, error FROM frames WHERE status <> 'ok'"))
    assert set(got) == set(expected)
    for key, fragment in expected.items():
        assert got[key].startswith("bad value:") and fragment in got[key], (key, got[key])
    assert query(db, "SELECT step, action FROM frames WHERE pair_key = '0'") == [(3, [0.5, 1.0])]
    # Parquet keeps types: a timestamp column as `step`
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"set": ["t", "t"], "domain": ["sim", "sim"], "pair_key": ["0", "1"],
                             "rgb": ["a/frame_000.png", "a/frame_001.png"],
                             "step": pa.array([datetime.datetime(2024, 1, 1)] * 2, pa.timestamp("us"))}),
                   tmp_path / "m.parquet")
    one_line_error(here(capfd, "index", "--manifest", tmp_path / "m.parquet", "--db", db),
                   "no usable frame", "2 skipped")
    assert {e for (e,) in query(db, "SELECT error FROM frames WHERE set_name = 't'")} == {
        "bad value: column 'step' is '2024-01-01 00:00:00' (datetime), expected a whole number"}


def test_csv_manifest_with_a_byte_order_mark(tmp_path, capfd):
    frame_folder(tmp_path / "a", 0, 3)
    m = tmp_path / "m.csv"
    m.write_text("set,domain,rgb,pair_key\n" + "".join(f"b,sim,a/frame_{i:03d}.png,{i}\n" for i in range(3)),
                 encoding="utf-8-sig")
    assert m.read_bytes().startswith(b"\xef\xbb\xbf")
    p = ok(here(capfd, "index", "--manifest", m, "--db", tmp_path / "c.duckdb"))
    assert "3 usable, 0 skipped" in p.stdout


def test_manifest_without_set_and_domain_columns_takes_the_flags(tmp_path):
    names = flat_frames(tmp_path, 3)
    m = tmp_path / "m.csv"
    m.write_text("rgb,pair_key\n" + "".join(f"{n},{n[:-4]}\n" for n in names))
    db = str(tmp_path / "c.duckdb")
    assert pg_cli.main(["index", "--manifest", str(m), "--set", "foo", "--domain", "real", "--db", db, "-q"]) == 0
    js = tmp_path / "sets.json"
    assert pg_cli.main(["sets", "--db", db, "--json", str(js), "-q"]) == 0
    (s,) = json.loads(js.read_text())["sets"]
    assert (s["name"], s["domain"], s["usable"]) == ("foo", "real", 3)


def test_manifest_without_set_column_and_without_flags_names_the_column(tmp_path, capsys):
    names = flat_frames(tmp_path, 2)
    m = tmp_path / "m.csv"
    m.write_text("rgb,pair_key,domain\n" + "".join(f"{n},{n[:-4]},sim\n" for n in names))
    assert pg_cli.main(["index", "--manifest", str(m), "--db", str(tmp_path / "c.duckdb")]) == 2
    one_line(capsys, "missing required column(s) set")


def test_flags_contradicting_the_manifest_columns_are_refused(tmp_path, capsys):
    names = flat_frames(tmp_path, 2)
    m = tmp_path / "m.csv"
    m.write_text("set,domain,rgb,pair_key\n" + "".join(f"a,sim,{n},{n[:-4]}\n" for n in names))
    db = tmp_path / "c.duckdb"
    assert pg_cli.main(["index", "--manifest", str(m), "--set", "foo", "--db", str(db)]) == 2
    one_line(capsys, "`set` column says 'a'", "`--set` says 'foo'", "drop `--set`")
    assert pg_cli.main(["index", "--manifest", str(m), "--domain", "real", "--db", str(db)]) == 2
    one_line(capsys, "`domain` column says 'sim'", "`--domain` says 'real'")
    # agreeing flags are accepted
    assert pg_cli.main(["index", "--manifest", str(m), "--set", "a", "--domain", "sim", "--db", str(db), "-q"]) == 0
    assert pg_cli.main(["index", "--manifest", str(m), "--pair-regex", "(.*)", "--db", str(db)]) == 2
    one_line(capsys, "--pair-regex goes with a folder PATH")
