"""The house rules, checked on the source tree: module size, import direction, no cycles, folder docs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("perception_gap", "encoders", "reports")
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    mods = {"cli": ROOT / "cli.py"}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = p
    return mods


def _imports(path: Path, mods: dict[str, Path]) -> set[str]:
    """Project modules `path` imports (anywhere in it, lazily or not), plus the parent packages each import runs."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a, then a.b, then a.b.c
                if ".".join(parts[:i]) in mods:
                    out.add(".".join(parts[:i]))
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph = {m: _imports(p, mods) - {m} for m, p in mods.items()}
    for m in graph:  # a package's own __init__ is not an import cycle with its submodules' parent chain
        graph[m] = {d for d in graph[m] if not m.startswith(d + ".")}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (c := visit(d)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_cycle_finder_finds_a_known_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycle_anywhere():
    graph = _graph()
    assert len(graph) > 40 and "perception_gap.workflows.run" in graph["perception_gap.workflows"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_no_module_over_500_lines():
    long = {m: n for m, p in _modules().items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def test_every_folder_says_what_it_owns():
    for pkg in PACKAGES:
        for init in (ROOT / pkg).rglob("__init__.py"):
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert doc and len(doc) > 80, f"{init.relative_to(ROOT)} needs a docstring saying what the folder owns"


def test_imports_run_one_way():
    """cli -> perception_gap -> encoders; reports reads results only; duckdb only in the catalog; torch only in encoders."""
    graph = _graph()
    for m, deps in graph.items():
        if m.startswith("encoders"):
            assert not any(d.startswith(("perception_gap", "reports", "cli")) for d in deps), (m, deps)
        if m.startswith("reports"):
            assert not any(d.startswith(("perception_gap", "encoders", "cli")) for d in deps), (m, deps)
        if m.startswith("perception_gap"):
            assert "cli" not in deps, m
    for m, p in _modules().items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        top = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        top |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
        if "duckdb" in top:
            assert m.startswith("perception_gap.catalog"), m
        if top & {"torch", "open_clip", "timm"}:
            assert m.startswith("encoders"), m


def test_the_catalog_and_the_cli_import_without_the_fft():
    """scipy's FFT (~0.3 s to import) loads where a spectrum is computed, not with the catalog or
    the CLI: commands that compute none (`sets`, `report`, `embed`, ...) do not pay for it."""
    import subprocess
    import sys

    code = ("import sys; import cli, perception_gap.catalog, perception_gap.statistics.workers; "
            "print('scipy.fft' in sys.modules); "
            "from perception_gap.statistics.texture import fft_module; fft_module(); print('scipy.fft' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
