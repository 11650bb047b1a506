"""A gate covers every dimension and task it names, or it is `not computed` (exit 1, with its reason):
`policy-check --max-rel-diff` over action dimensions, `rank-fidelity --min-pearson` over tasks."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from perception_gap.cli import main

POLICIES = '''import numpy as np


def offset(images, proprio):
    """Channel means (equal on the twin frames), and a 4th dimension that is 0 on every sim frame
    and 67 on every real frame (proprio[:, 0] is 0 in sim, 1 in real)."""
    return np.concatenate([images.mean(axis=(2, 3)), 67.0 * proprio[:, :1]], axis=1)


def same(images, proprio):
    """The same channel means on both sides and a 4th dimension constant AND equal (a gripper
    command that never changes): no difference to measure, so the gate reads 0 there."""
    return np.concatenate([images.mean(axis=(2, 3)), np.full((len(images), 1), 0.5)], axis=1)
'''


def _catalog(tmp_path):
    rng = np.random.default_rng(0)
    rows = ["set,domain,rgb,pair_key,proprio"]
    for i in range(6):
        img = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)  # the same frame on both sides
        for dom, flag in (("sim", 0.0), ("real", 1.0)):
            Image.fromarray(img).save(tmp_path / f"{dom}{i}.png")
            rows.append(f'{dom},{dom},{dom}{i}.png,p{i},"[{flag}, {i * 0.1}]"')
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    db = str(tmp_path / "c.duckdb")
    assert main(["index", "--manifest", str(tmp_path / "m.csv"), "--db", db, "-q"]) == 0
    (tmp_path / "policies.py").write_text(POLICIES)
    return db


def test_policy_check_gate_is_not_computed_when_one_dimension_has_no_sim_spread(tmp_path, capsys):
    """Dimension 3 is constant in sim and 67 away in real on every pair: |real - sim| / sim std is
    undefined there. The other three dimensions agree exactly (0), so a gate over the dimensions it
    could measure read 0 and passed (exit 0); it is not computed, names the dimension, exits 1."""
    db = _catalog(tmp_path)
    js = tmp_path / "r.json"
    rc = main(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
               f"{tmp_path / 'policies.py'}:offset", "--max-rel-diff", "0.5", "--json", str(js)])
    out = capsys.readouterr().out
    assert rc == 1
    res = json.loads(js.read_text())
    gate, dims = res["policy_check"]["gate"], res["policy_check"]["per_dim"]
    assert (gate["status"], gate["passed"], gate["value"]) == ("not computed", False, None)
    assert "dimension(s) 3 (mean |real - sim| 67" in gate["reason"], gate
    assert [d["paired_diff_rel"] for d in dims] == [0.0, 0.0, 0.0, None]
    assert dims[3]["paired_diff_abs"] == 67.0 and dims[3]["sim_std"] == 0.0
    assert "NOT COMPUTED (|real - sim| / sim std is undefined in action dimension(s) 3" in out, out
    # the difference is named too, not only the gate
    (f,) = [f for f in res["findings"] if f["code"] == "policy_obs_mismatch"]
    assert f["evidence"]["sim_constant_dims"] == [3] and f["evidence"]["paired_diff_abs"] == [67.0]

    # a dimension constant and equal on both sides has nothing to measure and nothing that differs:
    # the gate is computed (0) and passes
    rc = main(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
               f"{tmp_path / 'policies.py'}:same", "--max-rel-diff", "0.5", "--json", str(js), "-q"])
    gate = json.loads(js.read_text())["policy_check"]["gate"]
    assert rc == 0 and (gate["status"], gate["value"]) == ("passed", 0.0)


def test_rank_fidelity_gate_is_not_computed_when_one_task_has_no_pearson(tmp_path, capsys):
    """Task `drawer`: sim success 0.5 for every policy, so Pearson is undefined there. The mean over
    the task where it is defined (0.98) passed `--min-pearson 0.7` with exit 0; the gate is not
    computed, names the task, and exits 1. The mean itself stays the mean over the defined tasks,
    with the undefined ones listed beside it."""
    f = tmp_path / "rates.csv"
    f.write_text("policy,task,sim,real\n"
                 "a,pick,0.1,0.2\nb,pick,0.5,0.6\nc,pick,0.9,0.8\n"
                 "a,drawer,0.5,0.1\nb,drawer,0.5,0.9\nc,drawer,0.5,0.5\n")
    js = tmp_path / "r.json"
    rc = main(["rank-fidelity", str(f), "--min-pearson", "0.7", "--json", str(js)])
    out = capsys.readouterr().out
    assert rc == 1
    sec = json.loads(js.read_text())["rank_fidelity"]
    (gate,) = sec["gates"]
    assert (gate["status"], gate["passed"], gate["value"]) == ("not computed", False, None)
    assert "'drawer' (sim success 0.5 for all 3 policies)" in gate["reason"], gate
    assert sec["passed"] is False and sec["pearson_undefined"] == ["drawer"]
    assert sec["mean"]["pearson"] == sec["tasks"]["pick"]["pearson"]
    assert "over 1 of 2 tasks (undefined on 'drawer')" in out and "NOT COMPUTED (Pearson is undefined" in out, out
    # the same file without the undefined task: computed over every task, passes
    f.write_text("policy,task,sim,real\na,pick,0.1,0.2\nb,pick,0.5,0.6\nc,pick,0.9,0.8\n")
    assert main(["rank-fidelity", str(f), "--min-pearson", "0.7", "-q"]) == 0
