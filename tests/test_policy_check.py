"""policy-check: action statistics against closed forms, and the command on a real tiny catalog."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from perception_gap.cli import main
from perception_gap.geometry.policy import MISMATCH_REL, compare_actions, policy_findings
from tests.figures import capture, cell, hexc, html_tables, lines, only, ticklabels

KEYS = [f"k{i}" for i in range(8)]


def _codes(pc):
    return [f.code for f in policy_findings(pc)]


def test_identical_actions_agree_and_a_known_offset_is_measured():
    rng = np.random.default_rng(0)
    sim = rng.normal(size=(8, 3))
    same = compare_actions(sim, sim.copy(), KEYS)
    assert all(d.paired_diff_rel == 0 and d.paired_diff_mean == 0 for d in same.per_dim) and _codes(same) == []
    real = sim + 2 * sim.std(axis=0, ddof=1)  # every real action two sim spreads above its twin
    pc = compare_actions(sim, real, KEYS)
    np.testing.assert_allclose([d.paired_diff_rel for d in pc.per_dim], 2.0)
    np.testing.assert_allclose([d.real_std for d in pc.per_dim], np.std(sim, axis=0, ddof=1))
    assert _codes(pc) == ["policy_obs_mismatch"] and 2.0 >= MISMATCH_REL


def test_constant_real_actions_collapse_and_so_does_a_policy_that_ignores_its_input():
    rng = np.random.default_rng(1)
    sim = rng.normal(size=(8, 2))
    real = sim.copy()
    real[:, 1] = 0.3
    pc = compare_actions(sim, real, KEYS)
    assert [d.collapsed for d in pc.per_dim] == [False, True] and _codes(pc)[0] == "action_collapse"
    const = np.tile([0.1, -0.2], (8, 1))
    blind = compare_actions(const, const.copy(), KEYS)
    assert blind.ignores_input and _codes(blind) == ["action_collapse"]


def test_saturated_real_actions_collapse_even_when_they_spread():
    rng = np.random.default_rng(2)
    sim = rng.uniform(-0.5, 0.5, size=(10, 1))
    real = np.where(np.arange(10) % 2, 1.0, -1.0)[:, None]  # bang-bang at the limits
    pc = compare_actions(sim, real, KEYS + ["k8", "k9"])
    assert pc.per_dim[0].saturated and pc.per_dim[0].collapsed


# --- the command on a tiny catalog --------------------------------------------------------------


class Mean(torch.nn.Module):
    """Actions from the image's channel means and the proprio: responds to its input."""

    def forward(self, images: torch.Tensor, proprio: torch.Tensor) -> torch.Tensor:
        return torch.cat([images.mean(dim=(2, 3)), proprio], dim=1)


class Blind(torch.nn.Module):
    def forward(self, images: torch.Tensor, proprio: torch.Tensor) -> torch.Tensor:
        return torch.zeros(images.shape[0], 2) + 0.5


class Flat(torch.nn.Module):
    def forward(self, images: torch.Tensor, proprio: torch.Tensor) -> torch.Tensor:
        return images.mean(dim=(1, 2, 3))  # (N,): not (N, A)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("policy")
    rng = np.random.default_rng(0)
    lines = ["set,domain,rgb,pair_key,proprio"]
    for i in range(6):
        img = rng.integers(0, 256, (8, 10, 3), dtype=np.uint8)
        for dom, arr in (("sim", img), ("real", img), ("dark", np.zeros_like(img))):
            Image.fromarray(arr).save(root / f"{dom}{i}.png")
            domain = "sim" if dom == "sim" else "real"
            lines.append(f'{dom},{domain},{dom}{i}.png,p{i},"[{i * 0.1}, {1 - i * 0.1}]"')
    (root / "m.csv").write_text("\n".join(lines) + "\n")
    db = str(root / "c.duckdb")
    assert main(["index", "--manifest", str(root / "m.csv"), "--db", db, "-q"]) == 0
    for name, mod in (("mean", Mean()), ("blind", Blind()), ("flat", Flat())):
        torch.jit.script(mod).save(str(root / f"{name}.pt"))
    torch.save({"w": torch.zeros(2)}, root / "weights.pt")
    (root / "raising.py").write_text("def policy(images, proprio):\n    raise ValueError('boom')\n")
    return root, db


def _run(world, policy, *extra, real="real"):
    root, db = world
    spec = policy if ":" in policy else str(root / policy)
    return main(["policy-check", "--db", db, "--sim", "sim", "--real", real, "--policy", spec, "-q", *extra])


def test_same_frames_agree_and_the_gate_passes(world, tmp_path):
    js = tmp_path / "r.json"
    assert _run(world, "mean.pt", "--json", str(js), "--max-rel-diff", "0.01", "--out", str(tmp_path / "o")) == 0
    res = json.loads(js.read_text())
    pc = res["policy_check"]
    assert pc["n_pairs"] == 6 and len(pc["per_dim"]) == 5 and res["findings"] == []
    assert all(d["paired_diff_rel"] == 0 for d in pc["per_dim"]) and pc["gate"]["passed"]
    html = (tmp_path / "o" / "report.html").read_text()
    assert "Policy check" in html and "data:image/png;base64" in html


def _check_policy_plot(drawn, per_dim):
    """Two boxes per action dimension, sim then real, each drawn from its own stored quantiles
    (whisker ends p5/p95, box p25..p75, median line) in its side's colour, labelled `is`/`ir`."""
    from perception_gap.reports.plots import REAL_COLOR, SIM_COLOR

    (fig,) = only(drawn, "policy_plot")
    (ax,) = fig.axes
    expect = [(f"{i}{dom[0]}", d[f"{dom}_quantiles"], (SIM_COLOR if dom == "sim" else REAL_COLOR).lower())
              for i, d in enumerate(per_dim) for dom in ("sim", "real")]
    assert ticklabels(ax) == [label for label, _, _ in expect]
    boxes = [p for p in ax.patches]
    assert len(boxes) == len(expect)
    segs = lines(ax)
    for k, (box, (label, q, colour)) in enumerate(zip(boxes, expect)):
        ys = box.get_path().vertices[:, 1]
        assert (ys.min(), ys.max()) == (pytest.approx(q[1]), pytest.approx(q[3])), label
        assert hexc(box.get_facecolor()) == colour, label
        near = [ln for ln in segs if np.allclose(ln[0].mean(), k + 1, atol=0.3)]  # bxp puts box k at k + 1
        ends = sorted({round(float(v), 9) for ln in near for v in ln[1]})
        assert ends == sorted({round(float(v), 9) for v in q}), label
    assert "s = sim, r = real" in ax.get_title()


def test_dark_real_frames_collapse_the_image_dimensions(world, tmp_path, monkeypatch):
    js = tmp_path / "r.json"
    drawn = capture(monkeypatch)
    assert _run(world, "mean.pt", "--json", str(js), "--max-rel-diff", "0.5", "--out", str(tmp_path / "o"),
                real="dark") == 1
    res = json.loads(js.read_text())
    collapse = next(f for f in res["findings"] if f["code"] == "action_collapse")
    assert collapse["evidence"]["dims"] == [0, 1, 2]  # the three channel means; proprio dims still agree
    per_dim = res["policy_check"]["per_dim"]
    # the dark real side's image dimensions sit at 0, the sim side's do not: sides can be told apart
    assert all(d["real_quantiles"] == [0.0] * 5 and d["sim_quantiles"][2] > 0.3 for d in per_dim[:3])
    _check_policy_plot(drawn, per_dim)
    table = html_tables((tmp_path / "o" / "report.html").read_text())["policy-dims"]
    assert table[0] == ["dim", "sim std", "real std", "paired diff (real - sim)", "|diff| / sim std"]
    for i, (row, d) in enumerate(zip(table[1:], per_dim, strict=True)):
        assert row[0] == str(i)
        for text, key in zip(row[1:4], ("sim_std", "real_std", "paired_diff_mean")):
            assert cell(text) == pytest.approx(d[key], rel=5e-3, abs=1e-12), (i, key)


def test_a_policy_that_ignores_its_input_collapses(world, tmp_path):
    js = tmp_path / "r.json"
    assert _run(world, "blind.pt", "--json", str(js)) == 0
    f = json.loads(js.read_text())["findings"]
    assert [x["code"] for x in f] == ["action_collapse"] and f[0]["evidence"]["ignores_input"]


def test_preprocess_hook_and_module_function_spec(world, tmp_path, monkeypatch):
    root, _ = world
    (root / "hooks.py").write_text("import torch\n"
                                   "def prep(images, proprio):\n    return images * 0, proprio\n"
                                   "def policy(images, proprio):\n    return torch.cat([images.mean(dim=(2, 3)), proprio], 1)\n")
    js = tmp_path / "r.json"
    assert _run(world, f"{root / 'hooks.py'}:policy", "--preprocess", f"{root / 'hooks.py'}:prep", "--json", str(js)) == 0
    dims = json.loads(js.read_text())["policy_check"]["per_dim"]
    assert [d["sim_std"] for d in dims[:3]] == [0, 0, 0] and dims[3]["sim_std"] > 0


@pytest.mark.parametrize("policy, needle", [
    ("weights.pt", "TorchScript"),
    ("flat.pt", "(N, A)"),
    ("missing.pt", "no such file"),
    ("RAISING", "raised"),
    ("no_such_module_xyz:fn", "Cannot import"),
])
def test_bad_policies_are_one_line_exit_2(world, capsys, policy, needle):
    root, _ = world
    spec = f"{root / 'raising.py'}:policy" if policy == "RAISING" else policy
    assert _run(world, spec) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err, err


def test_a_torch_export_program_loads_and_runs(world, tmp_path):
    program = torch.export.export(Mean(), (torch.zeros(6, 3, 8, 10), torch.zeros(6, 2)))  # the 6 pairs, one batch
    torch.export.save(program, str(tmp_path / "mean.pt2"))
    js = tmp_path / "r.json"
    assert _run(world, str(tmp_path / "mean.pt2"), "--json", str(js), "--max-rel-diff", "0.01") == 0
    assert len(json.loads(js.read_text())["policy_check"]["per_dim"]) == 5
    (tmp_path / "bad.pt2").write_bytes(b"not a program")
    assert _run(world, str(tmp_path / "bad.pt2")) == 2


def test_real_actions_stuck_over_the_first_steps_collapse_early():
    rng = np.random.default_rng(4)
    steps = [s for _ in range(4) for s in range(10)]  # 4 episodes of 10 steps
    sim = rng.normal(size=(40, 2))
    real = sim + rng.normal(0, 0.05, size=(40, 2))
    early = np.array(steps) < 5
    real[early, 0] = 0.2  # dimension 0 stuck at the start of every real episode
    pc = compare_actions(sim, real, [f"k{i}" for i in range(40)], steps)
    assert pc.n_early == 20 and pc.early_collapsed == (0,) and not pc.per_dim[0].collapsed
    f = policy_findings(pc)[0]
    assert f.code == "action_collapse" and f.evidence["early_dims"] == [0]
    assert compare_actions(sim, real, [f"k{i}" for i in range(40)]).early_collapsed == ()  # no steps, no early check
