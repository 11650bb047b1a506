"""`stats` on action vectors a set cannot be compared on as they are: a sim set mixing 3-d and 7-d
actions (`control_dims`), and a 1e307x scale between the sides (`control_scale`, measured without
overflow: no numpy warning)."""

from __future__ import annotations

import json
import warnings

import numpy as np
from PIL import Image

from perception_gap.cli import main

N = 12


def _stats(tmp_path, sim_actions, real_actions) -> dict:
    """Index identical random frames on both sides with these per-frame actions; stats results.json."""
    rng = np.random.default_rng(3)
    rows = []
    for i in range(N):
        img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
        for dom, act in (("sim", sim_actions[i]), ("real", real_actions[i])):
            Image.fromarray(img).save(tmp_path / f"{dom}{i}.png")
            rows.append({"set": dom, "domain": dom, "rgb": f"{dom}{i}.png", "pair_key": f"p{i:02d}",
                         "action": [float(x) for x in act]})
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = str(tmp_path / "c.duckdb")
    assert main(["index", "--manifest", str(tmp_path / "m.jsonl"), "--db", db, "-q"]) == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["stats", "--db", db, "--sim", "sim", "--real", "real", "--json", str(tmp_path / "r.json"),
                     "-q"]) == 0
    numeric = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not numeric, numeric
    return json.loads((tmp_path / "r.json").read_text())


def _only(res: dict, code: str) -> dict:
    found = [f for f in res["findings"] if f["code"] == code]
    assert len(found) == 1, [(f["code"], f["title"]) for f in res["findings"]]
    return found[0]


def test_a_sim_set_mixing_action_lengths_is_named(tmp_path):
    """Frames p00, p03, p06, p09 carry 3-d actions, the other 8 sim frames 7-d: no finding used to
    name it (the set read as 7-d). Real is 7-d throughout, equal to sim where both are 7-d."""
    act = np.random.default_rng(0).normal(size=(N, 7))
    sim = [a[:3] if i % 3 == 0 else a for i, a in enumerate(act)]
    f = _only(_stats(tmp_path, sim, act), "control_dims")
    assert f["severity"] == "bug"
    assert f["title"] == "Sim action vectors mix lengths 7-d (8 frames), 3-d (4 frames); only the 7-d ones are compared."
    ev = f["evidence"]
    assert (ev["field"], ev["sim_dims"], ev["real_dims"]) == ("action", 7, 7)
    assert ev["sim_lengths"] == {"7": 8, "3": 4} and ev["real_lengths"] == {"7": 12}
    assert ev["sim_odd_frames"] == ["p00", "p03", "p06", "p09"] and ev["real_odd_frames"] == []


def test_a_1e307_action_scale_is_measured_not_overflowed(tmp_path):
    """Sim actions 1e307 times real's: the spreads' squares overflowed float64 (numpy warnings) and
    no `control_scale` was named. The ratio is read in logs: 1e307 in every dimension."""
    act = np.random.default_rng(1).normal(size=(N, 7))
    res = _stats(tmp_path, act * 1e307, act)
    f = _only(res, "control_scale")
    ev = f["evidence"]
    assert ev["field"] == "action" and ev["dims"] == list(range(7)) and ev["basis"] == "pairs"
    np.testing.assert_allclose(ev["scales"], 1e307, rtol=1e-9)
    np.testing.assert_allclose(ev["log10_scales"], 307.0, atol=1e-4)
    assert "1e+307x" in f["title"], f["title"]
    assert "control_sign" not in [g["code"] for g in res["findings"]]
