"""The FID Inception v3 of the reference FID implementations, from a local weights file.

`fid-inception:FILE` is pytorch-fid's `InceptionV3` with `use_fid_inception=True` (the network
TensorFlow's FID code used, ported to PyTorch), written here in plain `torch.nn` with the same
module names, so its state dict is the one pytorch-fid downloads
(`pt_inception-2015-12-05-6726825d.pth`, 8 hex digits of its SHA-256 in the name): the
torchvision `inception_v3(num_classes=1008, aux_logits=False)` key layout. Nothing downloads:
FILE is a local `.pth`/`.pt`/`.bin` (loaded by `checkpoints.load_weights_only`: its declared
sizes checked, then `torch.load(weights_only=True)`) or `.safetensors`; every tensor must be dense
and floating point (integer weights would be truncated into the network).

It differs from torchvision's Inception v3 in four places (the "FID blocks"):

- `Mixed_5b/5c/5d` (InceptionA), `Mixed_6b..6e` (InceptionC) and `Mixed_7b` (InceptionE):
  the 3x3 average pool of the pool branch excludes the zero padding from its mean
  (`count_include_pad=False`, as TensorFlow pools), where torchvision includes it;
- `Mixed_7c` (InceptionE): the pool branch max-pools (3x3, stride 1) instead of averaging;
- BatchNorm eps 0.001 and the 1008-class `fc` (kept so the file loads key for key; unused).

Preprocessing, as pytorch-fid's `fid_score`: RGB uint8 -> float x / 255 at the frame's own size,
bilinear resize to 299 x 299 on the float tensor (`F.interpolate`, `align_corners=False`, no
antialiasing), then 2x - 1 into [-1, 1]. The resize runs on float values (not on uint8, as
`preprocess_images` does for the other encoders), so the pixels fed to the network are the
reference's to float rounding. Embedding: the 2048-d output of the final average pool.
"""

from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from perception_gap.encoders.base import Encoder, LocalWeightsMixin, file_sha256, not_a_file
from perception_gap.encoders.checkpoints import CHECKPOINT_SUFFIXES, check_weights_only, load_weights_only
from perception_gap.encoders.errors import EncoderError
from perception_gap.encoders.preprocessing import Preprocessing, _to_hwc_uint8
from perception_gap.encoders.registry import register_prefix

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

FID_INCEPTION_PREFIX = "fid-inception:"
FID_INPUT_SIZE = 299
FID_DIM = 2048
# The first 8 hex digits of the SHA-256 of pytorch-fid's weights file (the torch.hub name suffix).
REFERENCE_SHA256_PREFIX = "6726825d"
_HUB_SUFFIX = re.compile(r"-([0-9a-f]{8})\.pth$")


def build_fid_inception() -> "torch.nn.Module":
    """The FID Inception v3 network with freshly initialized weights, in eval mode.

    Returns:
        A module whose `features(x)` maps a (N, 3, 299, 299) batch in [-1, 1] to (N, 2048) and
        whose `state_dict()` has the keys of pytorch-fid's weights file.
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    class BasicConv2d(nn.Module):
        def __init__(self, cin: int, cout: int, **kw: Any) -> None:
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, bias=False, **kw)
            self.bn = nn.BatchNorm2d(cout, eps=0.001)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(self.bn(self.conv(x)))

    def tf_avg_pool(x: torch.Tensor) -> torch.Tensor:
        # TensorFlow's average pool divides by the pixels inside the image, not the padded window.
        return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)

    class InceptionA(nn.Module):
        def __init__(self, cin: int, pool_features: int) -> None:
            super().__init__()
            self.branch1x1 = BasicConv2d(cin, 64, kernel_size=1)
            self.branch5x5_1 = BasicConv2d(cin, 48, kernel_size=1)
            self.branch5x5_2 = BasicConv2d(48, 64, kernel_size=5, padding=2)
            self.branch3x3dbl_1 = BasicConv2d(cin, 64, kernel_size=1)
            self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
            self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, padding=1)
            self.branch_pool = BasicConv2d(cin, pool_features, kernel_size=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b5 = self.branch5x5_2(self.branch5x5_1(x))
            b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
            return torch.cat([self.branch1x1(x), b5, b3, self.branch_pool(tf_avg_pool(x))], 1)

    class InceptionB(nn.Module):
        def __init__(self, cin: int) -> None:
            super().__init__()
            self.branch3x3 = BasicConv2d(cin, 384, kernel_size=3, stride=2)
            self.branch3x3dbl_1 = BasicConv2d(cin, 64, kernel_size=1)
            self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
            self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, stride=2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
            return torch.cat([self.branch3x3(x), b3, F.max_pool2d(x, kernel_size=3, stride=2)], 1)

    class InceptionC(nn.Module):
        def __init__(self, cin: int, c7: int) -> None:
            super().__init__()
            self.branch1x1 = BasicConv2d(cin, 192, kernel_size=1)
            self.branch7x7_1 = BasicConv2d(cin, c7, kernel_size=1)
            self.branch7x7_2 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
            self.branch7x7_3 = BasicConv2d(c7, 192, kernel_size=(7, 1), padding=(3, 0))
            self.branch7x7dbl_1 = BasicConv2d(cin, c7, kernel_size=1)
            self.branch7x7dbl_2 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
            self.branch7x7dbl_3 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
            self.branch7x7dbl_4 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
            self.branch7x7dbl_5 = BasicConv2d(c7, 192, kernel_size=(1, 7), padding=(0, 3))
            self.branch_pool = BasicConv2d(cin, 192, kernel_size=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
            d = x
            for i in range(1, 6):
                d = getattr(self, f"branch7x7dbl_{i}")(d)
            return torch.cat([self.branch1x1(x), b7, d, self.branch_pool(tf_avg_pool(x))], 1)

    class InceptionD(nn.Module):
        def __init__(self, cin: int) -> None:
            super().__init__()
            self.branch3x3_1 = BasicConv2d(cin, 192, kernel_size=1)
            self.branch3x3_2 = BasicConv2d(192, 320, kernel_size=3, stride=2)
            self.branch7x7x3_1 = BasicConv2d(cin, 192, kernel_size=1)
            self.branch7x7x3_2 = BasicConv2d(192, 192, kernel_size=(1, 7), padding=(0, 3))
            self.branch7x7x3_3 = BasicConv2d(192, 192, kernel_size=(7, 1), padding=(3, 0))
            self.branch7x7x3_4 = BasicConv2d(192, 192, kernel_size=3, stride=2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b7 = x
            for i in range(1, 5):
                b7 = getattr(self, f"branch7x7x3_{i}")(b7)
            return torch.cat([self.branch3x3_2(self.branch3x3_1(x)), b7, F.max_pool2d(x, kernel_size=3, stride=2)], 1)

    class InceptionE(nn.Module):
        def __init__(self, cin: int, max_pool: bool) -> None:
            super().__init__()
            self.max_pool = max_pool  # Mixed_7c of the FID network max-pools its pool branch
            self.branch1x1 = BasicConv2d(cin, 320, kernel_size=1)
            self.branch3x3_1 = BasicConv2d(cin, 384, kernel_size=1)
            self.branch3x3_2a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
            self.branch3x3_2b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
            self.branch3x3dbl_1 = BasicConv2d(cin, 448, kernel_size=1)
            self.branch3x3dbl_2 = BasicConv2d(448, 384, kernel_size=3, padding=1)
            self.branch3x3dbl_3a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
            self.branch3x3dbl_3b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
            self.branch_pool = BasicConv2d(cin, 192, kernel_size=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b3 = self.branch3x3_1(x)
            b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
            d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
            d = torch.cat([self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d)], 1)
            pool = F.max_pool2d(x, kernel_size=3, stride=1, padding=1) if self.max_pool else tf_avg_pool(x)
            return torch.cat([self.branch1x1(x), b3, d, self.branch_pool(pool)], 1)

    class FIDInceptionV3(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.Conv2d_1a_3x3 = BasicConv2d(3, 32, kernel_size=3, stride=2)
            self.Conv2d_2a_3x3 = BasicConv2d(32, 32, kernel_size=3)
            self.Conv2d_2b_3x3 = BasicConv2d(32, 64, kernel_size=3, padding=1)
            self.Conv2d_3b_1x1 = BasicConv2d(64, 80, kernel_size=1)
            self.Conv2d_4a_3x3 = BasicConv2d(80, 192, kernel_size=3)
            self.Mixed_5b = InceptionA(192, pool_features=32)
            self.Mixed_5c = InceptionA(256, pool_features=64)
            self.Mixed_5d = InceptionA(288, pool_features=64)
            self.Mixed_6a = InceptionB(288)
            self.Mixed_6b = InceptionC(768, c7=128)
            self.Mixed_6c = InceptionC(768, c7=160)
            self.Mixed_6d = InceptionC(768, c7=160)
            self.Mixed_6e = InceptionC(768, c7=192)
            self.Mixed_7a = InceptionD(768)
            self.Mixed_7b = InceptionE(1280, max_pool=False)
            self.Mixed_7c = InceptionE(2048, max_pool=True)
            self.fc = nn.Linear(FID_DIM, 1008)  # the classifier of the weights file; not on the feature path

        def features(self, x: torch.Tensor) -> torch.Tensor:
            x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
            x = F.max_pool2d(x, kernel_size=3, stride=2)
            x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
            x = F.max_pool2d(x, kernel_size=3, stride=2)
            for name in ("5b", "5c", "5d", "6a", "6b", "6c", "6d", "6e", "7a", "7b", "7c"):
                x = getattr(self, f"Mixed_{name}")(x)
            return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.features(x)

    return FIDInceptionV3().eval()


def _read_state_dict(path: str, *, mmap: bool = False) -> dict[str, Any]:
    """The file's tensors (weights-only load once its declared sizes are checked; memory-mapped when
    `mmap` and the file is an uncompressed zip, so checking keys and shapes reads no tensor data);
    EncoderError when it is not a dict of tensors."""
    import torch

    what = "FID Inception weights"
    if path.endswith(".safetensors"):
        check_weights_only(path, what)
        try:
            from safetensors.torch import load_file

            state = load_file(path, device="cpu")
        except Exception as e:  # noqa: BLE001 - any failure here means an unreadable weights file
            raise EncoderError(f"cannot read {what} {path}: {str(e).strip().splitlines()[0]}") from None
    else:
        state = load_weights_only(path, what, mmap=mmap)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise EncoderError(f"Expected the FID Inception weights {path!r} to hold a state dict of tensors, "
                           f"got {type(state).__name__}.")
    return state


def _kind(t: Any) -> str:
    """A tensor's layout and dtype in words ("sparse_coo float32", "quantized qint8", "int64")."""
    dtype = str(t.dtype).removeprefix("torch.")
    if t.is_quantized:
        return f"quantized {dtype}"
    layout = str(t.layout).removeprefix("torch.")
    return dtype if layout == "strided" else f"{layout} {dtype}"


def check_state_dict(state: dict[str, Any], model: Any, path: str) -> dict[str, Any]:
    """`state`, once its keys, shapes, layouts and dtypes are checked against `model`'s.

    BatchNorm's `num_batches_tracked` counters are optional (older files lack them); every
    other key of the model must be present with the model's shape, and no other key may be.
    Every tensor must be dense (not sparse, not quantized) and floating point where the model's
    is (integer weights would be truncated into the network and give FID 0 for any two sets).

    Raises:
        EncoderError: missing, unexpected, mis-shaped or mis-typed keys (the first few named).
    """
    model_state = model.state_dict()
    want = {k: tuple(v.shape) for k, v in model_state.items()}
    optional = {k for k in want if k.endswith("num_batches_tracked")}
    missing = sorted(set(want) - set(state) - optional)
    unexpected = sorted(set(state) - set(want))
    shapes = sorted(k for k in set(want) & set(state) if tuple(state[k].shape) != want[k])
    if missing or unexpected or shapes:
        parts = [f"{len(v)} {what} (e.g. {', '.join(v[:2])})" for what, v in
                 (("missing keys", missing), ("unexpected keys", unexpected), ("keys of another shape", shapes)) if v]
        raise EncoderError(f"Expected the FID Inception weights {path!r} to be the FID Inception v3 state dict "
                           f"(pytorch-fid's pt_inception-2015-12-05 layout), got {'; '.join(parts)}.")
    kinds = sorted(k for k in set(want) & set(state)
                   if state[k].layout != model_state[k].layout or state[k].is_quantized
                   or state[k].dtype.is_floating_point != model_state[k].dtype.is_floating_point
                   or state[k].dtype.is_complex)
    if kinds:
        shown = ", ".join(f"{k}: {_kind(state[k])}" for k in kinds[:2])
        raise EncoderError(f"Expected the FID Inception weights {path!r} to hold dense floating-point tensors, "
                           f"got {len(kinds)} of another kind (e.g. {shown}).")
    return state


class FIDInceptionEncoder(LocalWeightsMixin, Encoder):
    """pytorch-fid's FID Inception v3 pool features (2048-d) from a local weights file.

    Constructing it checks the file (exists, weights-only, the FID Inception key layout), so a
    wrong file fails before any frame is read.

    Args:
        weights: path of the state dict (`.pth`, `.pt`, `.bin` or `.safetensors`).
        device: "cpu", "cuda" or "auto".
        precision: "fp32", "fp16" (CUDA) or "bf16" autocast (see `Encoder`).
    """

    family = "imagenet"
    adapter_version = "1"

    def __init__(self, weights: str, *, device: str = "cpu", precision: str = "fp32") -> None:
        super().__init__(FID_INCEPTION_PREFIX + str(weights), device=device, precision=precision)
        self.weights = str(weights)
        why = not_a_file(self.weights)
        if why is not None:
            raise EncoderError(f"Expected the FID Inception weights as a file, got {self.weights!r} ({why}).")
        if not self.weights.endswith(CHECKPOINT_SUFFIXES):
            raise EncoderError(f"Expected the FID Inception weights ending in {', '.join(CHECKPOINT_SUFFIXES)}, "
                               f"got {self.weights!r}.")
        import torch

        with torch.device("meta"):  # the layout only: shapes without memory or initialization
            layout = build_fid_inception()
        check_state_dict(_read_state_dict(self.weights, mmap=True), layout, self.weights)
        self.weights_sha256 = file_sha256(self.weights)
        m = _HUB_SUFFIX.search(os.path.basename(self.weights))
        if m and not self.weights_sha256.startswith(m.group(1)):
            raise EncoderError(f"FID Inception weights {self.weights} are corrupt: SHA-256 {self.weights_sha256[:8]}..., "
                               f"its name says {m.group(1)}.")
        self._preprocessing = Preprocessing(size=(FID_INPUT_SIZE, FID_INPUT_SIZE), interpolation="bilinear",
                                            resize_mode="squash", crop_pct=1.0, mean=(0.5, 0.5, 0.5),
                                            std=(0.5, 0.5, 0.5), input_scale=255.0, antialias=False)

    @property
    def reference_weights(self) -> bool:
        """Whether the file is pytorch-fid's own weights (its SHA-256 starts with 6726825d)."""
        return self.weights_sha256.startswith(REFERENCE_SHA256_PREFIX)

    @property
    def dim(self) -> int:
        return FID_DIM

    def _fingerprint_parts(self) -> dict[str, Any]:
        return {"arch": "pytorch-fid InceptionV3 (FID blocks)", "weights_sha256": self.weights_sha256,
                "embedding": "pool3_2048", "resize": "float bilinear, align_corners False"}

    def preprocess(self, images: Sequence[Any]) -> "torch.Tensor":
        """Images -> (N, 3, 299, 299) float32 in [-1, 1], resized as pytorch-fid resizes.

        Args:
            images: N HxWx3 uint8 RGB arrays (any size) or RGB PIL images.
        """
        import torch
        import torch.nn.functional as F

        if len(images) == 0:
            raise EncoderError("Expected at least one image, got an empty sequence.")
        arrays = [_to_hwc_uint8(image, i) for i, image in enumerate(images)]
        out = torch.empty((len(arrays), 3, FID_INPUT_SIZE, FID_INPUT_SIZE), dtype=torch.float32)
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, a in enumerate(arrays):
            groups.setdefault(a.shape, []).append(i)
        for idx in groups.values():
            x = torch.from_numpy(np.stack([arrays[i] for i in idx])).permute(0, 3, 1, 2).to(torch.float32) / 255.0
            x = F.interpolate(x, size=(FID_INPUT_SIZE, FID_INPUT_SIZE), mode="bilinear", align_corners=False)
            out[idx] = 2 * x - 1
        return out

    def _load(self, device: str) -> Any:
        model = build_fid_inception()
        # checked again here: the file may have changed since the encoder was constructed
        state = check_state_dict(_read_state_dict(self.weights), model, self.weights)
        model.load_state_dict(state, strict=False)  # only the optional num_batches_tracked may be absent
        log.debug("loaded the FID Inception v3 from %s (sha256 %s)", self.weights, self.weights_sha256)
        return model.eval().to(device)

    def _forward(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        return model.features(batch)


register_prefix(FID_INCEPTION_PREFIX, lambda name, **kw: FIDInceptionEncoder(name[len(FID_INCEPTION_PREFIX):], **kw),
                f"{FID_INCEPTION_PREFIX}FILE")
