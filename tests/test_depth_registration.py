"""`depth_registration` through the CLI on real RGB-D frames: a depth map shifted against its own
RGB is named with its offset, also when the other side's depth has lost its pixels along the
object edges (as a stereo depth camera does); registered depth on both sides names nothing of the
kind, holes or not."""

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


def _edge_holes(a: np.ndarray, z: np.ndarray) -> np.ndarray:
    """`z` with its pixels near the strongest colour edges invalid (0): the top 4% of the luma
    gradient, grown by 3 px, about a fifth of the frame."""
    from scipy import ndimage

    g = a.astype(np.float64).mean(axis=2)
    mag = np.hypot(*np.gradient(g))
    out = z.copy()
    out[ndimage.binary_dilation(mag > np.percentile(mag, 96), iterations=3)] = 0
    return out


def _stats(tmp_path, frames, shift_sim: int, real_holes: bool = False) -> dict:
    for side, shift in (("sim", shift_sim), ("real", 0)):
        (tmp_path / side / "depth").mkdir(parents=True)
        for i, (a, z) in enumerate(frames):
            zz = np.roll(z, shift, axis=1)
            zz[:, :shift] = 0
            if side == "real" and real_holes:
                zz = _edge_holes(a, zz)
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


def test_shift_is_named_when_the_real_depth_lost_its_object_edges(tmp_path, rgbd):
    """Holes along the colour edges on the real side bias each frame's depth-to-colour lag; the
    pairs, read depth against depth and colour against colour, still give the shift."""
    res = _stats(tmp_path, rgbd, 12, real_holes=True)
    first = res["findings"][0]
    assert (first["code"], first["severity"]) == ("depth_registration", "bug"), res["findings"]
    ev = first["evidence"]
    assert ev["basis"] == "pairs"
    assert ev["offset_px_sim_minus_real"][0] == pytest.approx(12, abs=4)
    assert abs(ev["offset_px_sim_minus_real"][1]) < 3


def test_registered_depth_names_no_registration(tmp_path, rgbd):
    """Registered depth on both sides, the real one with holes along its object edges (the harder
    case: each frame's depth-to-colour lag is biased there)."""
    res = _stats(tmp_path, rgbd, 0, real_holes=True)
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


def test_edge_profile_averages_over_valid_neighbours_only():
    """Holes do not pull a column's profile down: each column's value is the mean |difference|
    over the pairs whose two samples are valid (a loop over the grid as the reference), so a step
    keeps its height where most rows are holes; a column with no valid pair reads 0."""
    from perception_gap.statistics.sampling import EDGE_BINS, edge_profiles

    rng = np.random.default_rng(0)
    g = rng.uniform(0, 1, (40, 60))
    valid = rng.uniform(size=g.shape) > 0.6  # 60% holes
    valid[:, 30:32] = False  # the pairs (29, 30), (30, 31), (31, 32) of every row are invalid
    h, w, stride = 40, 60, 1
    prof = np.array(edge_profiles(g, stride, h, w, valid))
    ref = np.zeros(w - 1)
    for x in range(w - 1):
        ds = [abs(g[y, x + 1] - g[y, x]) for y in range(h) if valid[y, x] and valid[y, x + 1]]
        ref[x] = np.mean(ds) if ds else 0.0
    centres = (np.arange(EDGE_BINS) + 0.5) / EDGE_BINS
    want = np.interp(centres, (np.arange(w - 1) + 0.5) / w, ref)
    np.testing.assert_allclose(prof[:EDGE_BINS], want, rtol=1e-12, atol=1e-15)
    assert 0.2 < float(np.median(prof[:EDGE_BINS])) < 0.5  # |U - U'| has mean 1/3, holes or not
