"""`RobotEncoder`: one robot-pretrained encoder from its released checkpoint file, and its names.

Constructing it reads and checks the file (the layout of `releases.RELEASES`, the keys and shapes
of the network of `networks.build`, built on the meta device so checking allocates no weights),
so a wrong file fails before any frame is read. Loading reads it again and hands its tensors to
the network (`load_state_dict(assign=True)`: a memory-mapped file is not copied on the CPU).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from perception_gap.encoders.base import Encoder, LocalWeightsMixin, file_sha256, not_a_file
from perception_gap.encoders.errors import EncoderError, WeightsUnavailableError
from perception_gap.encoders.registry import register_prefix
from perception_gap.encoders.robot import networks
from perception_gap.encoders.robot.checkpoint import check_against, read_release
from perception_gap.encoders.robot.releases import RELEASES, Release

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

SUFFIXES = (".pt", ".pth", ".bin")
LAYOUT_VERSION = "1"


class RobotEncoder(LocalWeightsMixin, Encoder):
    """A robot-pretrained image encoder (R3M, VIP, MVP, VC-1, MCR, HRP) from its released file.

    Args:
        release: the family's prefix without its colon: "r3m", "vip", "mvp", "vc1", "mcr", "hrp".
        variant: one of the family's variants (`RELEASES[release].variants`), e.g. "resnet18", "vitb".
        weights: path of the checkpoint file as its authors release it.
        device: "cpu", "cuda" or "auto".
        precision: "fp32", "fp16" (CUDA) or "bf16" autocast (see `Encoder`).

    Raises:
        WeightsUnavailableError: `weights` is not a file.
        UnsafeCheckpointError, ArchiveLimitError: not plain weights, or declares more than it may hold.
        EncoderError: unknown family or variant, another suffix, another layout or architecture.
    """

    family = "robot"
    adapter_version = "1"

    def __init__(self, release: str, variant: str, weights: str, *, device: str = "cpu",
                 precision: str = "fp32") -> None:
        if release not in RELEASES:
            raise EncoderError(f"Expected a robot encoder family in {', '.join(RELEASES)}, got {release!r}.")
        rel = RELEASES[release]
        if variant not in rel.variants:
            raise EncoderError(f"Expected the {rel.title} variant in {', '.join(rel.variants)}, got {variant!r} "
                               f"(names look like {rel.form}).")
        super().__init__(f"{rel.prefix}:{variant}@{weights}", device=device, precision=precision)
        self.release: Release = rel
        self.variant = variant
        self.architecture = rel.variants[variant]
        self.weights = os.path.abspath(os.path.expanduser(str(weights)))
        why = not_a_file(self.weights)
        if why is not None:
            raise WeightsUnavailableError(f"Expected the {rel.title} weights as a file ({rel.file}), got "
                                          f"{str(weights)!r} ({why}).")
        if not self.weights.endswith(SUFFIXES):
            raise EncoderError(f"Expected the {rel.title} weights as the file its authors release, ending in "
                               f"{', '.join(SUFFIXES)} ({rel.file}), got {str(weights)!r}.")
        state = read_release(self.weights, rel, variant)
        self.img_size = (networks.vit_image_size(state) or 224) if self.architecture.arch == "vit" else 224
        fc = state.get("fc.weight")
        # VIP's head width is its training config's hidden_dim; the file's fc says it (1024 released).
        self.head_out = int(fc.shape[0]) if rel.head == "linear" and fc is not None and fc.ndim == 2 else (
            1024 if rel.head == "linear" else 0)
        check_against(state, self._network(meta=True), path=self.weights, release=rel, variant=variant)
        self._preprocessing = rel.preprocessing(self.img_size)

    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> "RobotEncoder":
        """`FAMILY:VARIANT@PATH` (e.g. `r3m:resnet50@/models/r3m_50/model.pt`) -> encoder."""
        release, _, rest = name.partition(":")
        rel = RELEASES.get(release)
        variant, at, weights = rest.partition("@")
        if rel is None or not at or not weights:
            form = rel.form if rel else " or ".join(r.form for r in RELEASES.values())
            raise EncoderError(f"Expected a robot encoder name as {form} (PATH: the checkpoint file its authors "
                               f"release), got {name!r}.")
        return cls(release, variant, weights, **kwargs)

    def _network(self, *, meta: bool) -> "torch.nn.Module":
        import torch

        with torch.device("meta" if meta else "cpu"):
            return networks.build(self.architecture, img_size=self.img_size, head_out=self.head_out)

    # --- description -------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self.head_out or networks.pooled_width(self.architecture)

    def _fingerprint_parts(self) -> dict[str, Any]:
        rel, arch = self.release, self.architecture
        head = f", fc Linear({networks.pooled_width(arch)}, {self.head_out})" if self.head_out else ""
        return {
            "release": rel.prefix,
            "variant": self.variant,
            "arch": f"{arch.label}{head}, input {self.img_size}px",
            "layout": {"top_keys": list(rel.top_keys), "key_prefix": rel.keys_start(self.variant),
                       "dropped": list(rel.dropped), "version": LAYOUT_VERSION},
            "weights_sha256": file_sha256(self.weights),
            "input_convention": rel.convention,
            "embedding": ("CLS token after the final LayerNorm" if arch.arch == "vit" else
                          "global-average-pooled features" + (" through fc" if self.head_out else "")),
        }

    # --- running -----------------------------------------------------------------------
    def _load(self, device: str) -> Any:
        import torch

        state = read_release(self.weights, self.release, self.variant)
        model = self._network(meta=True)
        check_against(state, model, path=self.weights, release=self.release, variant=self.variant)
        full = {}
        for k, ref in model.state_dict().items():
            v = state.get(k)
            if v is None:  # a BatchNorm counter the file predates; unused in eval
                v = torch.zeros((), dtype=ref.dtype)
            full[k] = v.to(torch.float32) if v.is_floating_point() else v
        model.load_state_dict(full, strict=True, assign=True)
        if any(t.is_meta for t in (*model.parameters(), *model.buffers())):
            raise EncoderError(f"{self.name}: part of the network was left without weights after loading.")
        log.debug("loaded %s from %s", self.name, self.weights)
        return model.eval().to(device)

    def _forward(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        return model(batch)


for _release in RELEASES.values():
    register_prefix(f"{_release.prefix}:", RobotEncoder.from_name, _release.form)
