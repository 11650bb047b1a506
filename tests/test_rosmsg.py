"""compressedDepth CompressedImage messages (ingest/rosmsg.py), as ROS image_transport's
compressed_depth_image_transport writes them: a 12-byte ConfigHeader (int32 format, float32
depthParam[2], little-endian) then a 16-bit PNG. 16UC1 must come back exactly; 32FC1 (quantized
inverse depth) as the plugin's decoder gives it and within the quantization step of the depth
encoded. Encoded here with Pillow and numpy following the plugin's encoder, then written to a bag
with rosbags' Writer, indexed and measured."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("rosbags")
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

import tests.test_rosbag as tb
from perception_gap.catalog import Catalog
from perception_gap.errors import FrameError
from perception_gap.ingest.rosbag import index_rosbag
from perception_gap.ingest.rosmsg import COMPRESSED, message_frame, message_header
from perception_gap.statistics.depth import depth_stats
from perception_gap.workflows.stats import compute_stats

TS = get_typestore(Stores.ROS2_HUMBLE)
RNG = np.random.default_rng(11)
MM = RNG.integers(0, 5000, (tb.H, tb.W), dtype=np.uint16)  # zeros included: no reading
METRES = RNG.uniform(0.3, 12.0, (tb.H, tb.W)).astype(np.float32)  # past 10 m: beyond depth_max
DEPTH_MAX, DEPTH_QUANT = 10.0, 100.0  # the plugin's defaults (depth_max, depth_quantization)


def _png16(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(a.astype(np.uint16)).save(buf, format="PNG")
    return buf.getvalue()


def quantize(depth: np.ndarray) -> tuple[np.ndarray, float, float]:
    """The plugin's 32FC1 encoder: q = A / d + B (float32, truncated to uint16), 0 at or past depth_max."""
    a = np.float32(DEPTH_QUANT * (DEPTH_QUANT + 1.0))
    b = np.float32(1.0 - a / np.float32(DEPTH_MAX))
    q = np.where(depth < DEPTH_MAX, (a / depth + b), 0).astype(np.uint16)
    return q, float(a), float(b)


def compressed_depth(enc: str, depth: np.ndarray, t: float = 0.0, codec: str = " png"):
    if enc == "32FC1":
        q, a, b = quantize(depth)
    else:
        q, a, b = depth, 0.0, 0.0
    data = struct.pack("<iff", 0, a, b) + _png16(q)
    return TS.types["sensor_msgs/msg/CompressedImage"](header=tb._header(TS, t), format=f"{enc}; compressedDepth{codec}",
                                                       data=np.frombuffer(data, np.uint8))


def test_16uc1_comes_back_exactly():
    msg = compressed_depth("16UC1", MM)
    h = message_header(msg, COMPRESSED)
    assert (h.width, h.height, h.dtype, h.channels) == (tb.W, tb.H, "uint16", 1)
    got = message_frame(msg, COMPRESSED)
    assert got.dtype == np.uint16 and got.shape == (tb.H, tb.W, 1)
    np.testing.assert_array_equal(got[:, :, 0], MM)


def test_32fc1_decodes_inverse_depth_as_the_plugin_does():
    msg = compressed_depth("32FC1", METRES)
    assert message_header(msg, COMPRESSED).dtype == "float32"
    got = message_frame(msg, COMPRESSED)[:, :, 0]
    q, a, b = quantize(METRES)
    far = METRES >= DEPTH_MAX
    assert far.any() and np.isnan(got[far]).all()  # beyond depth_max: no reading
    want = np.float32(a) / (q[~far].astype(np.float32) - np.float32(b))
    np.testing.assert_array_equal(got[~far], want)
    # and within one quantization step of the depth that was encoded: dd = d^2 / A per unit of q
    d = METRES[~far].astype(np.float64)
    assert np.all(np.abs(got[~far] - d) <= d * d / a * 1.001 + 1e-6)


@pytest.mark.parametrize(("enc", "codec", "reason"), [
    ("16UC1", " rvl", "unsupported compressedDepth codec"),
    ("8UC3", " png", "unsupported compressedDepth encoding '8UC3'"),
])
def test_unsupported_compressed_depth_says_why(enc, codec, reason):
    msg = compressed_depth(enc, MM, codec=codec)
    with pytest.raises(FrameError, match=reason):
        message_header(msg, COMPRESSED)
    cut = TS.types["sensor_msgs/msg/CompressedImage"](header=tb._header(TS, 0.0), format="16UC1; compressedDepth",
                                                      data=np.frombuffer(struct.pack("<iff", 0, 0, 0), np.uint8))
    with pytest.raises(FrameError, match="holds no PNG after its 12-byte header"):
        message_header(cut, COMPRESSED)


def test_compressed_depth_topic_indexes_and_measures(tmp_path):
    path = tmp_path / "rgbd"
    with Writer2(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        cam = w.add_connection("/cam", "sensor_msgs/msg/Image", typestore=TS)
        dep = w.add_connection("/depth_c", "sensor_msgs/msg/CompressedImage", typestore=TS)
        for i, (enc, depth) in enumerate([("16UC1", MM), ("32FC1", METRES)]):
            t = tb.T0 + 0.1 * i
            w.write(cam, round(t * 1e9), TS.serialize_cdr(tb._image(TS, "rgb8", tb.RGB[i], t), "sensor_msgs/msg/Image"))
            w.write(dep, round(t * 1e9) + 1, TS.serialize_cdr(compressed_depth(enc, depth, t + 0.001),
                                                               "sensor_msgs/msg/CompressedImage"))
    with Catalog(tmp_path / "c.duckdb") as cat, cat.session():
        r = index_rosbag(cat, path, "/cam", "real", "real", depth_topic="/depth_c")
        assert (r.usable, r.warnings) == (2, ())
        assert compute_stats(cat, ["real"], workers=1).computed == 4
        rows = cat.con.execute("SELECT f.depth_unit, d.mean FROM frames f JOIN depth_stats d "
                               "ON d.content_hash = f.depth_hash ORDER BY f.step").fetchall()
    q, a, b = quantize(METRES)
    decoded = np.where(q == 0, np.nan, np.float32(a) / (q.astype(np.float32) - np.float32(b))).astype(np.float32)
    assert rows[0] == ("mm", pytest.approx(depth_stats(MM).mean))
    assert rows[1] == ("m", pytest.approx(depth_stats(decoded).mean))
