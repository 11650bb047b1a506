"""One-line refusals that say what is wrong: what a path given as a file or folder really is (a
FIFO, a folder, a device), and which check an encoder's output failed (its shape or its values)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perception_gap import cli, encoders
from perception_gap.examples import write_examples

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def odd_paths(tmp_path):
    """A FIFO, a folder and a character device, each under a name that looks like the file asked for."""
    if not hasattr(os, "mkfifo") or not os.path.exists("/dev/null"):
        pytest.skip("needs FIFOs and /dev/null")
    paths = {}
    for ext in (".json", ".py", ".pth"):
        os.mkfifo(tmp_path / f"fifo{ext}")
        (tmp_path / f"dir{ext}").mkdir()
        (tmp_path / f"dev{ext}").symlink_to("/dev/null")
        paths[ext] = {"fifo": tmp_path / f"fifo{ext}", "dir": tmp_path / f"dir{ext}", "dev": tmp_path / f"dev{ext}"}
    return paths


@pytest.fixture()
def catalog(tmp_path):
    """A catalog holding the examples' `sim` and `real` sets (2 frames each)."""
    ex = write_examples(tmp_path / "ex", n=2)
    db = str(tmp_path / "gap.duckdb")
    for folder, name in ((ex.sim, "sim"), (ex.real, "real")):
        assert cli.main(["index", str(folder), "--set", name, "--domain", name, "--db", db, "--quiet"]) == 0
    return db


WORDS = {"fifo": "is a FIFO (named pipe)", "dir": "is a directory", "dev": "is a character device"}


def _one_line_error(capsys, argv: list[str]) -> str:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1, (argv, code, err)
    return err


@pytest.mark.parametrize("kind", sorted(WORDS))
def test_a_file_argument_that_exists_says_what_it_is(odd_paths, catalog, tmp_path, capsys, kind):
    """`reprojection FILE`, `policy-check --policy FILE.py:f` and `run --inception-weights FILE` on an
    existing FIFO, folder or device: never "(not found)", but what the path is."""
    db = catalog
    argvs = [["reprojection", str(odd_paths[".json"][kind]), "--db", db],
             ["policy-check", "--policy", f"{odd_paths['.py'][kind]}:f", "--sim", "sim", "--real", "real", "--db", db],
             ["run", "--sim", "sim", "--real", "real", "--out", str(tmp_path / "out"), "--encoders", "pixel",
              "--inception-weights", str(odd_paths[".pth"][kind]), "--db", db]]
    for argv in argvs:
        err = _one_line_error(capsys, argv)
        assert WORDS[kind] in err and "not found" not in err, (argv[0], err)


@pytest.mark.parametrize("kind", ["fifo", "dev"])
def test_a_folder_argument_that_is_a_fifo_or_device_says_so(odd_paths, tmp_path, capsys, kind):
    """`index PATH` and `index --video PATH` given a FIFO or a device: named as such, not "(a file)" and
    not an empty folder of videos."""
    db = str(tmp_path / "gap.duckdb")
    p = str(odd_paths[".json"][kind])
    err = _one_line_error(capsys, ["index", p, "--set", "s", "--domain", "sim", "--db", db])
    assert f"{WORDS[kind]}, not a folder" in err, err
    err = _one_line_error(capsys, ["index", "--video", p, "--set", "s", "--domain", "sim", "--db", db])
    assert WORDS[kind] in err and "found none" not in err, err


def test_coco_from_a_fifo_or_folder_is_refused_at_once(odd_paths, catalog):
    """`index --coco` read its file with a plain read: a FIFO without a writer waited forever and a
    folder gave a traceback. Each is now one line and exit 2, in a fresh process with a time limit."""
    db = catalog
    for kind in ("fifo", "dir", "dev"):
        r = subprocess.run([sys.executable, str(REPO / "cli.py"), "index", "--coco", str(odd_paths[".json"][kind]),
                            "--set", "sim", "--source", "gt", "--db", db], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and WORDS[kind] in r.stderr, (kind, r.stderr)


class _BrokenPixel(encoders.PixelEncoder):
    """The pixel encoder with a defect of its output, as a user's plug-in may have."""

    defect = ""

    def encode(self, batch):
        v = super().encode(batch)
        if self.defect == "nan":
            v[1:3, :5] = np.nan
            v[0, 0] = np.inf
        elif self.defect == "shape":
            v = v[:, :7]
        return v


@pytest.mark.parametrize("defect,words,absent", [
    ("nan", ["10 NaN and 1 infinite value(s) in 3 of the", "as expected"], "shape (4, 7)"),
    ("shape", ["shape (4, 7) for a batch of 4 frames, expected (4, 816)"], "NaN"),
])
def test_an_encoder_output_refusal_names_the_check_that_failed(tmp_path, capsys, monkeypatch, defect, words, absent):
    from perception_gap.encoders import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))  # registration undone after the test
    monkeypatch.setattr(_BrokenPixel, "defect", defect)
    encoders.register_encoder("broken-pixel", _BrokenPixel)
    ex = write_examples(tmp_path / "ex", n=4)
    db = str(tmp_path / "gap.duckdb")
    assert cli.main(["index", str(ex.sim), "--set", "sim", "--domain", "sim", "--db", db, "--quiet"]) == 0
    err = _one_line_error(capsys, ["embed", "--encoder", "broken-pixel", "--set", "sim", "--db", db, "--quiet"])
    assert all(w in err for w in words) and absent not in err and " or non-finite" not in err, err
