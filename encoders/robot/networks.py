"""The robot encoders' networks, built as their authors' code builds them, and what a state dict holds.

- ResNets: torchvision `resnet18/34/50(weights=None)`, `fc` replaced by an identity (R3M, MCR,
  HRP) or by VIP's `Linear(2048, hidden)`; HRP's with GroupNorm (16 groups) in place of BatchNorm.
  The embedding is the output: the globally average-pooled features (512 / 2048) or VIP's Linear.
- ViTs: timm's `VisionTransformer` (MVP, VC-1 and HRP subclass it and keep its module names):
  patch 16, a CLS token, qkv bias, MLP ratio 4, LayerNorm eps 1e-6, no classifier. The embedding is
  the CLS token after the final LayerNorm (`global_pool="token"`), which is what MVP's `forward`
  (`norm(x[:, 0])`) and VC-1 / HRP's `use_cls=True` (`norm(x)[:, 0]`) return: LayerNorm acts per token.
"""

from __future__ import annotations

import math
import re
from functools import partial
from typing import TYPE_CHECKING, Any

from perception_gap.encoders.robot.releases import Variant

if TYPE_CHECKING:  # pragma: no cover
    import torch

PATCH = 16
_BLOCK = re.compile(r"^blocks\.(\d+)\.")
_LAYER3 = re.compile(r"^layer3\.(\d+)\.")


def build(variant: Variant, *, img_size: int = 224, head_out: int = 0) -> "torch.nn.Module":
    """A freshly initialized network of `variant` (call it under `torch.device("meta")` to get its
    shapes without allocating), in eval mode.

    Args:
        variant: the architecture.
        img_size: ViT input side in pixels (sets the position-embedding grid).
        head_out: ResNet only: width of a Linear head on the pooled features (0: none).
    """
    from torch import nn

    if variant.arch == "resnet":
        import torchvision

        norm = None if variant.norm == "batch" else (lambda channels: nn.GroupNorm(16, channels))
        model = getattr(torchvision.models, f"resnet{variant.depth}")(weights=None, norm_layer=norm)
        pooled = model.fc.in_features
        model.fc = nn.Linear(pooled, head_out) if head_out else nn.Identity()
        return model.eval()
    from timm.models.vision_transformer import VisionTransformer

    model = VisionTransformer(
        img_size=img_size, patch_size=PATCH, embed_dim=variant.width, depth=variant.depth, num_heads=variant.heads,
        mlp_ratio=4.0, qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6), num_classes=0,
        global_pool="token", class_token=True)
    return model.eval()


def pooled_width(variant: Variant) -> int:
    """Width of the pooled features before any head: 512 (ResNet-18/34), 2048 (ResNet-50), the ViT width."""
    if variant.arch == "vit":
        return variant.width
    return 2048 if variant.depth >= 50 else 512


def vit_image_size(state: dict[str, Any]) -> int | None:
    """The input side a ViT state dict was trained at, from its position embedding (one CLS token
    plus a square grid of 16-px patches); None when it has none or it is not such a grid."""
    pos = state.get("pos_embed")
    if pos is None or pos.ndim != 3:
        return None
    grid = math.isqrt(max(int(pos.shape[1]) - 1, 0))
    return grid * PATCH if grid > 0 and grid * grid == int(pos.shape[1]) - 1 else None


def describe(state: dict[str, Any]) -> Variant | None:
    """The architecture a (prefix-stripped) state dict holds, when it is one of these families'
    kinds: a torchvision ResNet-18/34/50 (BatchNorm or GroupNorm) or a ViT (width, depth; heads 0:
    unknown); None otherwise."""
    cls = state.get("cls_token")
    if cls is not None and getattr(cls, "ndim", 0) == 3:
        blocks = {int(m.group(1)) for k in state if (m := _BLOCK.match(k))}
        return Variant("vit", len(blocks), int(cls.shape[-1]))
    if "conv1.weight" not in state:
        return None
    layer3 = {int(m.group(1)) for k in state if (m := _LAYER3.match(k))}
    bottleneck = "layer1.0.conv3.weight" in state
    depth = {(2, False): 18, (6, False): 34, (6, True): 50, (23, True): 101, (36, True): 152}.get(
        (len(layer3), bottleneck))
    if depth is None:
        return None
    return Variant("resnet", depth, norm="batch" if "bn1.running_mean" in state else "group16")


def same_architecture(found: Variant, wanted: Variant) -> bool:
    """Whether `found` (from `describe`) is `wanted`'s architecture (heads cannot be read off weights)."""
    return (found.arch, found.depth, found.width, found.norm) == (wanted.arch, wanted.depth, wanted.width, wanted.norm)
