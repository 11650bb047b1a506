"""User code ending the process: a policy (or its module, on import) calling `sys.exit` or raising
a BaseException is one line naming `--policy` and exit 2, not the end of the CLI. Through `cli.main`."""

from __future__ import annotations

import pytest

from perception_gap import cli
from tests.cli_process import one_line, proprio_catalog


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    """Six sim/real pairs of 6x8 frames with 2-d proprio, indexed from a manifest."""
    root = tmp_path_factory.mktemp("proprio")
    return root, proprio_catalog(root)


@pytest.mark.parametrize("body, needle", [
    ("    import sys\n    sys.exit(0)\n", "sys.exit(0)"),
    ("    raise SystemExit(3)\n", "sys.exit(3)"),
    ("    class Stop(BaseException):\n        pass\n    raise Stop()\n", "raise Stop"),
])
def test_a_policy_ending_the_process_is_one_line_exit_2(catalog, tmp_path, capsys, body, needle):
    _, db = catalog
    (tmp_path / "quits.py").write_text("def policy(images, proprio):\n" + body)
    js = tmp_path / "r.json"
    rc = cli.main(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
                   f"{tmp_path / 'quits.py'}:policy", "--json", str(js)])
    assert rc == 2 and not js.exists()
    one_line(capsys, needle, "running the policy", "--policy")


def test_a_policy_module_exiting_on_import_is_one_line_exit_2(catalog, tmp_path, capsys):
    _, db = catalog
    (tmp_path / "quits_early.py").write_text("import sys\nsys.exit(0)\ndef policy(images, proprio):\n    pass\n")
    rc = cli.main(["policy-check", "--db", db, "--sim", "sim", "--real", "real", "--policy",
                   f"{tmp_path / 'quits_early.py'}:policy"])
    assert rc == 2
    one_line(capsys, "sys.exit(0)", "loading `--policy`")
