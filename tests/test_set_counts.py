"""`sets` counts the skips that `stats` counts: repeats of one file and a bad frame, the same in both
commands' JSON. Through `cli.main`."""

from __future__ import annotations

import json

from perception_gap import cli
from tests.cli_process import flat_frames


def test_sets_counts_the_skips_stats_counts(tmp_path):
    names = flat_frames(tmp_path, 3)
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
