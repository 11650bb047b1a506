"""Robot-pretrained encoders from the checkpoint files their authors release, by name:

| name | network | embedding |
|---|---|---|
| `r3m:resnet18\\|resnet34\\|resnet50@PATH` | torchvision ResNet | 512 / 512 / 2048-d pooled features |
| `vip:resnet50@PATH` | torchvision ResNet-50 + VIP's Linear head | 1024-d (the head's width in the file) |
| `mcr:resnet50@PATH` | torchvision ResNet-50 | 2048-d pooled features |
| `mvp:vits\\|vitb\\|vitl@PATH` | timm ViT/16 (ViT-S with MVP's 12 heads; ViT-L at 256 px) | CLS token after the final norm |
| `vc1:vitb\\|vitl@PATH` | timm ViT/16 (MAE encoder) | CLS token after the final norm |
| `hrp:resnet18\\|vit@PATH` | data4robotics' GroupNorm ResNet-18 / ViT-B/16 | 512-d pooled / 768-d CLS |

`releases` holds each release's layout and preprocessing as data, `networks` builds the
architectures, `checkpoint` reads and checks a file, `encoder` is the `Encoder` and registers the
six prefixes. Nothing downloads: PATH is a local file (docs/encoders.md, Robot encoders, says where
each comes from). `torch`, `torchvision` and `timm` are imported only when a name is resolved.
"""

from __future__ import annotations

from perception_gap.encoders.robot.encoder import RobotEncoder
from perception_gap.encoders.robot.releases import RELEASES

__all__ = ["RELEASES", "RobotEncoder"]
