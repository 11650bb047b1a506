"""Segmentation masks as boxes (`index --masks`): ids missing from the categories are counted as
dropped, and an unusable mask folder says what is wrong with its files. Through the real CLI."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from tests.cli_process import N_PAIR as N
from tests.cli_process import clean, cli, copy_catalog, frames_dir, indexed_pair, one_line_error, query

T = 120  # seconds: every command here finishes in a few

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two indexed sets (sim, real) in a catalog on the ordinary disk, and their reference statistics."""
    return indexed_pair(tmp_path_factory)


def test_mask_ids_missing_from_the_categories_are_counted_as_dropped(tmp_path):
    frames_dir(tmp_path / "a", 2)
    db = tmp_path / "c.duckdb"
    assert cli("index", tmp_path / "a", "--set", "s", "--domain", "sim", "--db", db, "-q", timeout=T).returncode == 0
    (tmp_path / "masks").mkdir()
    for i in range(2):
        mask = np.zeros((48, 64), np.uint8)
        mask[5:15, 5:20] = 1   # a cube
        mask[30:40, 30:50] = 2  # not in the mapping
        Image.fromarray(mask).save(tmp_path / "masks" / f"f{i}.png")
    (tmp_path / "cats.json").write_text('{"1": "cube"}')
    p = cli("index", "--masks", tmp_path / "masks", "--mask-categories", tmp_path / "cats.json", "--set", "s",
            "--db", db, timeout=T)
    clean(p)
    assert p.returncode == 0, p.stderr
    assert "2 boxes on 2 frames" in p.stdout and "2 dropped (id 2 not in --mask-categories)" in p.stdout, p.stdout
    assert query(db, "SELECT category, bbox FROM annotations") == [("cube", (5.0, 5.0, 15.0, 10.0))] * 2


def test_unusable_masks_say_what_is_wrong_with_the_file(world, tmp_path):
    db = copy_catalog(world, tmp_path / "c.duckdb")
    cases = {
        "small": (lambda: np.zeros((24, 32), np.uint8), ".png", "frame_000.png: 32x24 pixels, its frame is 64x48"),
        "rgb": (lambda: np.zeros((48, 64, 3), np.uint8), ".png", "frame_000.png: has 3 channels (RGB)"),
        "float": (lambda: np.full((48, 64), 1.5, np.float32), ".npy",
                  "frame_000.npy: holds float32 values that are not whole numbers (e.g. 1.5)"),
        "float_tif": (lambda: np.full((48, 64), 0.25, np.float32), ".tif", "not whole numbers (e.g. 0.25)"),
    }
    for name, (make, ext, fragment) in cases.items():
        d = tmp_path / name
        d.mkdir()
        for i in range(N):
            a = make()
            np.save(d / f"frame_{i:03d}.npy", a) if ext == ".npy" else Image.fromarray(a).save(d / f"frame_{i:03d}{ext}")
        err = one_line_error(cli("index", "--masks", d, "--set", "sim", "--db", db), f"{N} found, none usable",
                              fragment)
        assert "'frame_000'.png" not in err
    (tmp_path / "none").mkdir()
    one_line_error(cli("index", "--masks", tmp_path / "none", "--set", "sim", "--db", db),
                    "e.g. 'frame_000.png'")
