"""`depth_registration` through the CLI on real RGB-D frames: a depth map shifted against its own
RGB is named with its offset; registered depth on both sides names nothing of the kind."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from perception_gap import cli


@pytest.fixture(scope="module")
def rgbd(shared_data):
    cols = sorted((shared_data / "rgbd" / "color").glob("*.jpg"))
    deps = sorted((shared_data / "rgbd" / "depth").glob("*.png"))
    if len(cols) < 3 or len(cols) != len(deps):
        pytest.skip("no RGB-D frames under the data folder")
    frames = []
    for c, d in zip(cols, deps):
        a, z = np.asarray(Image.open(c).convert("RGB")), np.asarray(Image.open(d))
        frames += [(a, z), (np.ascontiguousarray(a[:, ::-1]), np.ascontiguousarray(z[:, ::-1]))]
    return frames


def _stats(tmp_path, frames, shift_sim: int) -> dict:
    for side, shift in (("sim", shift_sim), ("real", 0)):
        (tmp_path / side / "depth").mkdir(parents=True)
        for i, (a, z) in enumerate(frames):
            zz = np.roll(z, shift, axis=1)
            zz[:, :shift] = 0
            Image.fromarray(a).save(tmp_path / side / f"f{i:02d}.png")
            Image.fromarray(zz).save(tmp_path / side / "depth" / f"f{i:02d}.png")
    db = str(tmp_path / "c.duckdb")
    for side in ("sim", "real"):
        assert cli.main(["index", str(tmp_path / side), "--set", side, "--domain", side, "--db", db,
                         "--depth-unit", "mm", "--quiet"]) == 0
    out = tmp_path / "s.json"
    assert cli.main(["stats", "--sim", "sim", "--real", "real", "--db", db, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_text())


def test_depth_shifted_against_its_rgb_is_named_with_its_offset(tmp_path, rgbd):
    res = _stats(tmp_path, rgbd, 12)
    first = res["findings"][0]
    assert (first["code"], first["severity"]) == ("depth_registration", "bug"), res["findings"]
    ev = first["evidence"]
    assert ev["shifted_side"] == "sim" and ev["basis"] == "pairs"
    assert ev["offset_px_sim_minus_real"][0] == pytest.approx(12, abs=4)  # x: the shift
    assert abs(ev["offset_px_sim_minus_real"][1]) < 3  # y: untouched
    assert abs(ev["offset_px_real"][0]) < 3


def test_registered_depth_names_no_registration(tmp_path, rgbd):
    res = _stats(tmp_path, rgbd, 0)
    assert "depth_registration" not in {f["code"] for f in res["findings"]}, res["findings"]


def test_edge_profile_puts_a_step_where_it_is():
    """A vertical step at x = 300 of a 640-wide frame peaks in the bin holding 300/640 of the width;
    the row profile of the same frame is flat (no horizontal edge)."""
    from perception_gap.statistics.sampling import EDGE_BINS, edge_profiles, sample_grid, sample_stride

    h, w, x0 = 480, 640, 300
    a = np.zeros((h, w))
    a[:, x0:] = 1.0
    s = sample_stride(h, w)
    prof = np.array(edge_profiles(sample_grid(a, s), s, h, w))
    cols, rows = prof[:EDGE_BINS], prof[EDGE_BINS:]
    assert abs(int(np.argmax(cols)) - int(x0 / w * EDGE_BINS)) <= 1
    assert np.allclose(rows, 0.0)
