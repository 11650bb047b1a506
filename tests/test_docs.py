"""The documentation: the MkDocs site builds offline with `--strict`, and the README's links into it resolve.

The site needs the `docs` packages (the `docs` extra; the `test` extra includes them); without them the
build test skips.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS_PACKAGES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def _missing_docs_packages() -> list[str]:
    missing = []
    for name in DOCS_PACKAGES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a parent package is absent
            found = False
        if not found:
            missing.append(name)
    return missing


def test_mkdocs_build_strict_offline(tmp_path):
    missing = _missing_docs_packages()
    if missing:
        pytest.skip(f"docs extra not installed (missing {', '.join(missing)}): pip install -e '.[docs]'")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", HF_HUB_OFFLINE="1")
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(site)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    from perception_gap import api as pg_api

    for name in set(pg_api.__all__) - {"COMMANDS"}:  # every function, generated from its docstring
        assert f'id="perception_gap.api.{name}"' in api, name
    pages = list(site.rglob("*.html"))
    assert len(pages) >= 20
    for page in pages:  # material's web fonts would be fetched by every reader: `theme.font: false`
        assert "fonts.googleapis.com" not in page.read_text(encoding="utf-8"), page


def test_readme_is_short_and_its_links_into_the_repository_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 350
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert any(t.startswith("docs/") for t in local)
    for target in local:
        assert (ROOT / target).exists(), target
