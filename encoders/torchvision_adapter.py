"""torchvision classification backbones: `torchvision:NAME@PATH`.

NAME is a classification model of `torchvision.models.list_models(module=torchvision.models)`
(resnet*, resnext*, wide_resnet*, regnet_*, convnext_*, efficientnet_*, mobilenet_v2/v3_*,
mnasnet*, shufflenet_v2_*, densenet*, vgg*, alexnet, vit_*, swin_*, maxvit_t); PATH a local
state dict (`.pth`, `.pt`, `.bin` or `.safetensors`) of that model, such as the file torchvision
downloads (`resnet50-11ad3fa6.pth`). Nothing downloads. The file is read as plain tensors
(`local_weights.read_state_dict`: safetensors, or declared sizes checked and a weights-only
unpickle) and its keys and shapes are checked against the model's at construction, classifier
excluded; a mismatch is one line naming the first missing and unexpected keys. googlenet,
inception_v3 (auxiliary heads, an input transform tied to Google's weights) and squeezenet (a
convolutional classifier) are not offered.

Embedding: the penultimate features. The model's head (`fc`, `classifier`, `heads` or `head`,
the first it has) loses its last `nn.Linear`, replaced by `nn.Identity`: the pooled features for
ResNet/RegNet/ShuffleNet/DenseNet/Swin/EfficientNet/MNASNet/MobileNetV2, the LayerNorm-ed pooled
features for ConvNeXt, the class token after the final LayerNorm for ViT, and the hidden layer
of a multi-layer head (MobileNetV3's 1024/1280, VGG's and AlexNet's fc7 4096, MaxViT's tanh
layer).

Preprocessing: torchvision's `ImageClassification` eval transform of the weights enum entry whose
file name PATH has (torchvision names files `ARCH-<8 hex digits of the SHA-256>.pth`, verified
here; the name tells `IMAGENET1K_V1`, resize 256, from `_V2`, resize 232), otherwise of the
architecture's `DEFAULT` entry: shortest side to `resize_size`, centre crop `crop_size`
(224 for most), bilinear (bicubic where the entry says so), ImageNet mean/std. The entry's name
is in the fingerprint with the weights' SHA-256 and the replaced head.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
from typing import TYPE_CHECKING, Any

from perception_gap.encoders.base import Encoder, LocalWeightsMixin, file_sha256
from perception_gap.encoders.checkpoints import check_weights_only
from perception_gap.encoders.errors import EncoderError
from perception_gap.encoders.local_weights import (
    crop_pct_for,
    key_mismatch,
    read_state_dict,
    tensor_shapes,
    weights_path,
)
from perception_gap.encoders.preprocessing import Preprocessing
from perception_gap.encoders.registry import register_prefix

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

TORCHVISION_PREFIX = "torchvision:"
TORCHVISION_FORM = "torchvision:NAME@PATH"
_HEADS = ("fc", "classifier", "heads", "head")
_NOT_OFFERED = ("googlenet", "inception_v3", "squeezenet1_0", "squeezenet1_1")
_HUB_SUFFIX = re.compile(r"-([0-9a-f]{8,})\.pth$")


def classification_models() -> list[str]:
    """The torchvision classification architectures this adapter takes."""
    import torchvision.models as models

    return [n for n in models.list_models(module=models) if n not in _NOT_OFFERED]


def strip_head(model: Any) -> str:
    """Replace the last `nn.Linear` of `model`'s classification head with `nn.Identity`, in place.

    Returns:
        The replaced module's path (`fc`, `classifier.3`, `heads.head`): its keys are the
        classifier's in a state dict.

    Raises:
        EncoderError: the model has no head attribute with a linear layer.
    """
    from torch import nn

    for attr in _HEADS:
        head = getattr(model, attr, None)
        if head is None:
            continue
        if isinstance(head, nn.Linear):
            setattr(model, attr, nn.Identity())
            return attr
        linear = [n for n, m in head.named_modules() if isinstance(m, nn.Linear)]
        if linear:
            parent, _, leaf = linear[-1].rpartition(".")
            setattr(head.get_submodule(parent) if parent else head, leaf, nn.Identity())
            return f"{attr}.{linear[-1]}"
    raise EncoderError(f"Expected a torchvision model with a linear classifier in one of {_HEADS}, got "
                       f"{type(model).__name__}.")


class TorchvisionEncoder(LocalWeightsMixin, Encoder):
    """A torchvision classification model's penultimate features, from a local weights file.

    Args:
        arch: torchvision model name (`resnet50`, `convnext_tiny`, `vit_b_16`, ...).
        weights: the state dict file.
        device: "cpu", "cuda" or "auto".
        precision: "fp32", "fp16" (CUDA) or "bf16" autocast (see `Encoder`).

    Raises:
        EncoderError: unknown architecture, a file that is missing, unsafe, corrupt (its
            torchvision file name's hash differs) or of another architecture.
    """

    family = "imagenet"
    adapter_version = "1"
    requires = ("torch", "torchvision")

    def __init__(self, arch: str, weights: str, *, device: str = "cpu", precision: str = "fp32") -> None:
        name = f"{TORCHVISION_PREFIX}{arch}@{weights}"
        super().__init__(name, device=device, precision=precision)
        import torchvision.models as models

        known = classification_models()
        if arch not in known:
            raise EncoderError(f"Unknown torchvision classification model {arch!r} in {name!r}; expected one of: "
                               f"{', '.join(known)}.")
        self.arch = arch
        self.weights = weights_path(weights, name)
        what = f"torchvision weights for {name}"
        check_weights_only(self.weights, what)
        self.weights_sha256 = file_sha256(self.weights)
        enum = models.get_model_weights(arch)
        entry = next((w for w in enum if os.path.basename(w.url) == os.path.basename(self.weights)), None)
        m = _HUB_SUFFIX.search(os.path.basename(self.weights))
        if entry is not None and m and not self.weights_sha256.startswith(m.group(1)):
            raise EncoderError(f"Expected {self.weights} to be torchvision's {arch} {entry.name} file (SHA-256 "
                               f"{m.group(1)}...), got SHA-256 {self.weights_sha256[:8]}...: a corrupt or renamed file.")
        self.transforms_entry = entry.name if entry is not None else f"DEFAULT ({enum.DEFAULT.name})"
        chosen = entry if entry is not None else enum.DEFAULT
        self._preprocessing = _to_preprocessing(chosen.transforms)
        # ViT builders size the position embedding from the weights' min_size (SWAG weights: 384).
        self._build_kwargs = {"image_size": chosen.meta["min_size"][0]} if arch.startswith("vit_") else {}

        self.head, shapes, self._dim = self._layout()
        problem = key_mismatch(tensor_shapes(self.weights, what), shapes, ignored=(self.head,))
        if problem:
            raise EncoderError(f"Expected {self.weights!r} to hold the weights of torchvision {arch}, got {problem}.")

    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> "TorchvisionEncoder":
        """`torchvision:NAME@PATH` -> encoder."""
        body = name[len(TORCHVISION_PREFIX):] if name.startswith(TORCHVISION_PREFIX) else ""
        arch, at, path = body.partition("@")
        if not arch or not path:
            raise EncoderError(f"Expected a torchvision encoder name as {TORCHVISION_FORM} (a local weights file; "
                               f"nothing downloads), got {name!r}.")
        return cls(arch, path, **kwargs)

    def _layout(self) -> tuple[str, dict[str, tuple[int, ...]], int]:
        """The replaced head's path, the headless model's key -> shape and its feature width, from
        a model on the meta device (no memory, no initialization); on the CPU for builders that
        read tensor values while they build (RegNet's block widths)."""
        try:
            return self._measure("meta")
        except NotImplementedError:
            return self._measure("cpu")

    def _measure(self, device: str) -> tuple[str, dict[str, tuple[int, ...]], int]:
        import torch

        with torch.device(device), torch.no_grad():
            model = self._skeleton()
            head = strip_head(model)
            shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
            dim = int(model.eval()(torch.zeros(1, 3, *self._preprocessing.size)).shape[-1])
        return head, shapes, dim

    def _skeleton(self) -> Any:
        import torchvision.models as models

        return models.get_model(self.arch, weights=None, **self._build_kwargs)

    # --- description -------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    def _fingerprint_parts(self) -> dict[str, Any]:
        return {"arch": self.arch, "weights_sha256": self.weights_sha256, "transforms": self.transforms_entry,
                "embedding": f"penultimate ({self.head} -> Identity)"}

    # --- running -----------------------------------------------------------------------
    def _load(self, device: str) -> Any:
        if file_sha256(self.weights) != self.weights_sha256:
            raise EncoderError(f"torchvision weights {self.weights} changed since the encoder was created; "
                               "create it again.")
        state = read_state_dict(self.weights, f"torchvision weights for {self.name}")
        model = self._skeleton()
        strip_head(model)
        prefix = self.head + "."
        model.load_state_dict({k: v for k, v in state.items() if not k.startswith(prefix)}, strict=True)
        log.debug("loaded torchvision %s from %s (sha256 %s)", self.arch, self.weights, self.weights_sha256)
        return model.eval().to(device)

    def _forward(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        return model(batch)


def _to_preprocessing(transforms: Any) -> Preprocessing:
    """A weights entry's `ImageClassification` partial -> `Preprocessing` (its defaults for what
    the entry leaves out: resize 256, bilinear, ImageNet mean/std)."""
    from torchvision.transforms._presets import ImageClassification

    params = {k: p.default for k, p in inspect.signature(ImageClassification).parameters.items()
              if p.default is not inspect.Parameter.empty}
    params.update(getattr(transforms, "keywords", {}))
    crop, resize = int(params["crop_size"]), int(params["resize_size"])
    interpolation = getattr(params["interpolation"], "value", str(params["interpolation"]))
    return Preprocessing(size=(crop, crop), interpolation=interpolation, resize_mode="shortest",
                         crop_pct=crop_pct_for(crop, resize), mean=tuple(params["mean"]), std=tuple(params["std"]),
                         input_scale=255.0, antialias=bool(params.get("antialias", True)))


register_prefix(TORCHVISION_PREFIX, TorchvisionEncoder.from_name, TORCHVISION_FORM)
