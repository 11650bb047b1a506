"""The Python API as the README shows it, run as it stands, and the contract kept in step."""

from __future__ import annotations

import contextlib
import inspect
import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import perception_gap as pg
from perception_gap.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SHARED_CONTRACT = ROOT.parent / "shared" / "CONTRACT.md"


def _readme_block(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _frames(root: Path, n: int = 12, bgr: bool = False) -> None:
    rng = np.random.default_rng(0)
    root.mkdir(parents=True)
    for i in range(n):
        yy, xx = np.mgrid[0:96, 0:128]
        base = np.stack([60 + 120 * (xx / 128), 90 + 60 * (yy / 96), 40 + 30 * np.sin(xx / 9 + i)], axis=-1)
        rgb = np.clip(base + rng.normal(0, 3, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(rgb[..., ::-1] if bgr else rgb).save(root / f"frame_{i:03d}.png")


def test_readme_python_api_example_runs_and_names_the_fault(tmp_path, monkeypatch):
    code = _readme_block("Python API")
    monkeypatch.chdir(tmp_path)
    _frames(tmp_path / "frames" / "sim")
    _frames(tmp_path / "frames" / "real", bgr=True)  # the real camera stores BGR
    out = io.StringIO()
    scope: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md:Python API", "exec"), scope)
    res, raw, again = scope["res"], scope["raw"], scope["again"]
    assert res["findings"][0]["code"] == "channel_swap" and res["findings"][0]["severity"] == "bug"
    assert raw["findings"][0]["code"] == "channel_swap"
    assert {e["name"] for e in res["encoders"]} == {"efficientnet-lite0", "pixel"}
    assert again == pg.load_results(tmp_path / "out" / "results.json")
    assert again["findings"] == res["findings"]
    assert (tmp_path / "out" / "report.html").stat().st_size > 10_000
    assert "[bug] channel_swap" in out.getvalue()


def test_api_names_are_importable_typed_and_documented():
    for name in pg.__all__:
        obj = getattr(pg, name)
        if callable(obj):
            assert obj.__doc__ and len(obj.__doc__) > 40, name
            assert "return" in obj.__annotations__, name
    with pytest.raises(AttributeError):
        pg.no_such_entry_point  # noqa: B018


def test_load_results_errors_are_one_line(tmp_path):
    with pytest.raises(InputError, match="No results file"):
        pg.load_results(tmp_path)
    (tmp_path / "results.json").write_text("{not json")
    with pytest.raises(InputError, match="Expected a results.json"):
        pg.load_results(tmp_path)


@pytest.mark.skipif(not SHARED_CONTRACT.exists(), reason="../shared/CONTRACT.md is not here")
def test_docs_contract_is_in_step_with_the_shared_contract():
    ours = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    body = ours.split("-->\n\n", 1)[1]
    assert body == SHARED_CONTRACT.read_text(encoding="utf-8")


def test_contract_additions_name_options_and_codes_the_engine_has():
    import argparse

    from perception_gap import cli

    text = (ROOT / "docs" / "contract-additions.md").read_text(encoding="utf-8")
    parser = cli.build_parser()
    options: set[str] = set()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for sub in subparsers[0].choices.values():
        for action in sub._actions:
            options.update(action.option_strings)
    named = set(re.findall(r"`[a-z-]* ?(--[a-z][a-z0-9-]+)", text)) | set(re.findall(r"\[(--[a-z][a-z0-9-]+)", text))
    assert {"--depth-camera", "--depth-topic", "--sync-tolerance", "--rollouts", "--max-drop"} <= named
    assert named - options == set()
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "perception_gap").rglob("*.py"))
    codes = re.findall(r"`([a-z_]+)`", text.split("Finding codes of the evaluation commands:", 1)[1].split("## Database")[0])
    assert len(codes) >= 9
    for code in codes:
        assert f'"{code}"' in source, code


API_MODULES = ("perception_gap.api", "perception_gap.api_sources", "perception_gap.api_checks", "perception_gap.api_camera")


def test_the_api_examples_run_as_written(tmp_path, monkeypatch):
    """Every `Examples:` block of the API is a doctest that runs offline on the small example inputs."""
    import doctest
    import importlib
    import tempfile

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the examples' temporary folders go with the test's
    attempted = 0
    for name in API_MODULES:
        res = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
        assert res.failed == 0, f"{name}: {res.failed} of {res.attempted} examples failed (output above)"
        attempted += res.attempted
    assert attempted > 120


def _commands() -> set[str]:
    import argparse

    from perception_gap import cli

    (sub,) = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def test_every_command_has_a_typed_api_function_with_an_example():
    from perception_gap import api

    assert set(api.COMMANDS) == _commands()
    for command, name in api.COMMANDS.items():
        fn = getattr(pg, name)
        assert name in pg.__all__ and fn is getattr(api, name), command
        assert fn.__annotations__.get("return") is not None, name
        assert "Examples:" in fn.__doc__ and ">>> " in fn.__doc__, name
        assert ("Args:" in fn.__doc__) == bool(inspect.signature(fn).parameters), name
    assert set(pg.__all__) - {"__version__"} == set(api.__all__)


def test_api_names_are_not_shadowed_by_submodules():
    """`pg.NAME` stays the API function after `perception_gap.NAME` is imported: no submodule has its name."""
    import pkgutil

    submodules = {m.name for m in pkgutil.iter_modules(pg.__path__)}
    assert {"embed", "demo", "catalog"} <= submodules
    assert not submodules & set(pg.__all__)


def test_the_api_does_not_import_the_command_layer():
    """api.py and its parts reach the library's jobs, never perception_gap.commands or the CLI (at any depth)."""
    from test_layout import _graph

    graph = _graph()
    seen, todo = set(), list(API_MODULES)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    assert "perception_gap.workflows.checks" in seen and "perception_gap.evaluation.jobs" in seen
    assert not {m for m in seen if m.startswith(("perception_gap.commands", "perception_gap.cli"))}


def test_run_demo_indexes_the_demo_files_with_their_boxes_and_runs(tmp_path, monkeypatch):
    """run_demo's wiring (index the manifest, attach masks and both detectors' boxes, run, write, then the
    checks after the gap hunt as the `demo` command runs them), on the small example files standing in for
    the MuJoCo build and its after-hunt inputs (which `tests/test_demo.py` checks)."""
    import perception_gap.demo as demo
    import perception_gap.demo.after as after
    from perception_gap.demo import DemoFiles
    from perception_gap.examples import write_examples

    def build(folder, inject=None):
        ex = write_examples(folder)
        return DemoFiles(root=ex.root, manifest=ex.manifest, sim_masks=ex.masks, mask_categories=ex.mask_categories,
                         sim_coco=ex.coco, real_coco=ex.coco, real_gt_coco=None, sim_set="sim", real_set="real",
                         inject=inject, n_frames=8)

    def after_inputs(root):
        ex = write_examples(root)
        return after.AfterFiles("perception_gap.examples:example_policy", ex.poses, ex.cameras, ex.states)

    monkeypatch.setattr(demo, "build_demo", build)
    monkeypatch.setattr(after, "build_after_inputs", after_inputs)
    with pytest.raises(InputError, match="Expected `inject` in"):
        pg.run_demo(tmp_path / "x", inject="no_such_fault")
    res = pg.run_demo(tmp_path / "out", encoders=["pixel"], workers=1)
    assert res["findings"][0]["code"] == "channel_swap"
    assert "colour-detector" in res["detection"]["sets"]["sim"]  # scored against the masks' ground truth
    assert pg.load_results(tmp_path / "out")["findings"] == res["findings"]
    with pg.open_catalog(tmp_path / "out" / "perception_gap.duckdb", read_only=True) as cat:
        assert [(s.name, s.usable) for s in pg.list_sets(cat)] == [("real", 8), ("sim", 8)]
    checked = pg.load_results(tmp_path / "out" / "after")
    assert {"policy_check", "replay", "reprojection"} <= set(checked) and checked["policy_check"]["n_pairs"] == 8
    assert (tmp_path / "out" / "after" / "report.html").is_file()
