"""The house rules, checked on the source tree: module size, import direction, no cycles, folder docs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the folders of the repository and the package each one is installed as (pyproject's package-dir)
PACKAGES = {"perception_gap": "perception_gap", "encoders": "perception_gap.encoders", "reports": "perception_gap.reports"}
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    mods = {"cli": ROOT / "cli.py"}
    for folder, package in PACKAGES.items():
        for p in (ROOT / folder).rglob("*.py"):
            parts = [package, *p.relative_to(ROOT / folder).with_suffix("").parts]
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
    for folder in PACKAGES:
        for init in (ROOT / folder).rglob("__init__.py"):
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
            assert doc and len(doc) > 80, f"{init.relative_to(ROOT)} needs a docstring saying what the folder owns"


def test_imports_run_one_way():
    """cli -> perception_gap -> encoders; reports reads results (the typed schema) only (and words numbers with
    perception_gap.wording, labels evidence from the check registry); duckdb only in the catalog; torch only
    in encoders."""
    graph = _graph()
    own = lambda m, pkg: m == pkg or m.startswith(pkg + ".")
    for m, deps in graph.items():
        if own(m, "perception_gap.encoders"):
            assert all(own(d, "perception_gap.encoders") or d == "perception_gap" for d in deps), (m, deps)
        if own(m, "perception_gap.reports"):
            assert all(own(d, "perception_gap.reports") or own(d, "perception_gap.schema")
                       or d in ("perception_gap", "perception_gap.wording", "perception_gap.diagnoses",
                                "perception_gap.diagnoses.checks", "perception_gap.errors")
                       for d in deps), (m, deps)
        if own(m, "perception_gap") and m != "perception_gap.cli":
            assert "cli" not in deps and "perception_gap.cli" not in deps, m
    for m, p in _modules().items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        top = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        top |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}
        if "duckdb" in top:
            assert m.startswith("perception_gap.catalog"), m
        if top & {"torch", "open_clip", "timm"}:
            assert own(m, "perception_gap.encoders"), m


def test_the_catalog_and_the_cli_import_without_the_fft():
    """scipy's FFT (~0.3 s to import) loads where a spectrum is computed, not with the catalog or
    the CLI: commands that compute none (`sets`, `report`, `embed`, ...) do not pay for it."""
    import subprocess
    import sys

    code = ("import sys; import perception_gap.cli, perception_gap.catalog, perception_gap.statistics.workers; "
            "print('scipy.fft' in sys.modules); "
            "from perception_gap.statistics.texture import fft_module; fft_module(); print('scipy.fft' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


def test_one_package_is_installed_and_it_lists_every_folder():
    """pyproject installs perception_gap only: every folder of the three with an __init__.py is in its
    package list under the name it is imported by, and nothing else is (no top-level cli, encoders, reports)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    setup = conf["tool"]["setuptools"]
    assert "py-modules" not in setup
    assert setup["package-dir"] == {v: k for k, v in PACKAGES.items() if k != v}
    folders = {".".join([PACKAGES[init.relative_to(ROOT).parts[0]], *init.relative_to(ROOT).parts[1:-1]])
               for folder in PACKAGES for init in (ROOT / folder).rglob("__init__.py")}
    assert set(setup["packages"]) == folders
    assert {p.split(".")[0] for p in setup["packages"]} == {"perception_gap"}
    assert conf["project"]["scripts"] == {"perception-gap": "perception_gap.cli:main"}
