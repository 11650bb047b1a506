"""policy-check on inputs that differ between the domains as a whole: an output constant within each
domain but different between them (not a collapse), and proprio of another width on each side
(`control_dims`, as `stats` names it)."""

from __future__ import annotations

import json

import numpy as np
from PIL import Image

from perception_gap.cli import main

POLICIES = '''import numpy as np
import torch


def per_domain(images, proprio):
    """100 * proprio[:, 0] in both dimensions: 0 on every sim frame, 100 on every real frame."""
    return np.tile(100.0 * proprio[:, :1], (1, 2))


def blind(images, proprio):
    return np.full((len(images), 2), 0.5)


def means(images, proprio):
    return images.mean(axis=(2, 3))


def linear(images, proprio):
    """A policy built for 5-d proprio: fails on the 3-d real vectors."""
    return proprio @ torch.ones(5, 2)
'''


def _catalog(tmp_path, sim_width: int = 2, real_width: int = 2) -> str:
    rng = np.random.default_rng(1)
    rows = ["set,domain,rgb,pair_key,proprio"]
    for i in range(6):
        img = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)
        for dom, flag, width in (("sim", 0.0, sim_width), ("real", 1.0, real_width)):
            Image.fromarray(img).save(tmp_path / f"{dom}{i}.png")
            rows.append(f'{dom},{dom},{dom}{i}.png,p{i},"{[flag] + [i * 0.1] * (width - 1)}"')
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    db = str(tmp_path / "c.duckdb")
    assert main(["index", "--manifest", str(tmp_path / "m.csv"), "--db", db, "-q"]) == 0
    (tmp_path / "policies.py").write_text(POLICIES)
    return db


def _check(tmp_path, db, policy, *extra):
    js = tmp_path / f"{policy}.json"
    rc = main(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
               f"{tmp_path / 'policies.py'}:{policy}", "--json", str(js), "-q", *extra])
    return rc, (json.loads(js.read_text()) if js.exists() else None)


def test_constant_but_different_per_domain_is_not_a_collapse(tmp_path):
    """Sim actions 0 on every frame, real 100 on every frame: it used to read `action_collapse`,
    'returns the same action for all sim and real frames'. It is a per-domain answer: the policy
    ignores what varies between frames and reacts to something that differs between the domains."""
    db = _catalog(tmp_path)
    rc, res = _check(tmp_path, db, "per_domain")
    assert rc == 0
    assert [f["code"] for f in res["findings"]] == ["policy_obs_mismatch"], res["findings"]
    (f,) = res["findings"]
    assert "one constant action for all 6 sim frames and a different one for all real frames" in f["title"]
    assert "|real - sim| = 100, 100 in dimension(s) 0, 1" in f["title"], f["title"]
    assert f["evidence"]["constant_per_domain"] is True and f["evidence"]["paired_diff_abs"] == [100.0, 100.0]
    pc = res["policy_check"]
    assert pc["ignores_input"] is False and pc["constant_per_domain"] is True
    # constant AND equal on both sides is still the collapse
    rc, res = _check(tmp_path, db, "blind")
    assert rc == 0 and [f["code"] for f in res["findings"]] == ["action_collapse"]
    assert "same action for all 6 sim and real frames" in res["findings"][0]["title"]
    assert res["policy_check"]["ignores_input"] is True and res["policy_check"]["constant_per_domain"] is False


def test_proprio_of_another_width_per_domain_is_named(tmp_path, capsys):
    """Sim proprio 5-d, real 3-d: `stats` names `control_dims` on these sets; policy-check fed both
    to the policy without a word. A policy that reads images only still runs, with the finding; one
    that fails on the real width says why in its one-line error."""
    db = _catalog(tmp_path, 5, 3)
    assert main(["stats", "--db", db, "--sim", "sim", "--real", "real", "--json", str(tmp_path / "s.json"),
                 "-q"]) == 0
    stats_codes = [f["code"] for f in json.loads((tmp_path / "s.json").read_text())["findings"]]
    assert "control_dims" in stats_codes
    rc, res = _check(tmp_path, db, "means")
    assert rc == 0
    (f,) = [f for f in res["findings"] if f["code"] == "control_dims"]
    assert f["severity"] == "bug" and (f["evidence"]["sim_dims"], f["evidence"]["real_dims"]) == (5, 3)
    assert f["title"].startswith("Sim proprio has 5 dimensions, real proprio 3: the policy was fed both")
    assert res["policy_check"]["proprio_dims"] == {"sim": [5], "real": [3]}
    capsys.readouterr()
    rc, _ = _check(tmp_path, db, "linear")
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "(sim proprio is 5-d, real proprio 3-d: `stats` names this control_dims)" in err, err
    # the same widths on both sides: no such finding
    other = tmp_path / "same"
    other.mkdir()
    db = _catalog(other, 3, 3)
    rc, res = _check(other, db, "means")
    assert rc == 0 and "control_dims" not in [f["code"] for f in res["findings"]]
