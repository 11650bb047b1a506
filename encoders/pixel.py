"""A weights-free pixel baseline: what a gap looks like before any learned features.

Each image is squash-resized (antialiased bilinear, aspect ratio not kept) to a
`work_size` x `work_size` sRGB working image with values in [0, 1]. The embedding
concatenates:

- a `thumb_size` x `thumb_size` thumbnail (area average of the working image, which
  `work_size` must be a multiple of), channel-major (R plane, G plane, B plane):
  3 * thumb_size**2 values in [0, 1];
- per-channel histograms of the working image, `bins` equal bins over [0, 1], each
  normalized to sum to 1: 3 * bins values.

Defaults (thumb 16, bins 16, work 64) give 768 + 48 = 816 dimensions. Deterministic and
exact (no learned weights); the fingerprint covers these parameters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perception_gap.encoders.base import Encoder
from perception_gap.encoders.errors import EncoderError
from perception_gap.encoders.preprocessing import Preprocessing
from perception_gap.encoders.registry import register_encoder

if TYPE_CHECKING:  # pragma: no cover
    import torch


class _Identity:
    """Stands in for a model: the pixel baseline has nothing to load."""


class PixelEncoder(Encoder):
    """Thumbnail + colour histograms, no weights.

    Args:
        thumb_size: thumbnail side, pixels (default 16).
        bins: histogram bins per channel (default 16).
        work_size: side of the squash-resized working image (default 64; a multiple of
            `thumb_size`).
        device: "cpu", "cuda" or "auto".
        precision: accepted for a uniform interface, but the pixel statistics have no model to
            speed up and always run in fp32 (`self.precision` says so; reports show it).
    """

    family = "pixel"
    adapter_version = "1"
    # a batched resize and a few memory-bound passes (~0.2 ms a 160x120 frame on one thread): with
    # two OpenMP threads per call, fighting the embed stage's decode threads for two cores, the
    # same work took several times longer. The numbers do not depend on the thread count (tested).
    cpu_threads = 1

    def __init__(self, *, thumb_size: int = 16, bins: int = 16, work_size: int = 64, device: str = "cpu",
                 precision: str = "fp32") -> None:
        for arg, value in (("thumb_size", thumb_size), ("bins", bins), ("work_size", work_size)):
            if not isinstance(value, int) or value < 1:
                raise EncoderError(f"Expected `{arg}` as a positive int, got {value!r}.")
        if work_size % thumb_size:
            raise EncoderError(
                f"Expected `work_size` a multiple of `thumb_size` ({thumb_size}), got {work_size}."
            )
        super().__init__("pixel", device=device, precision=precision)
        self.precision = "fp32"  # histogram bin edges must not move with rounding
        self.thumb_size, self.bins, self.work_size = thumb_size, bins, work_size
        self._preprocessing = Preprocessing(
            size=(work_size, work_size),
            interpolation="bilinear",
            resize_mode="squash",
            crop_pct=1.0,
            mean=(0.0, 0.0, 0.0),
            std=(1.0, 1.0, 1.0),
            input_scale=255.0,
        )

    @property
    def dim(self) -> int:
        return 3 * self.thumb_size**2 + 3 * self.bins

    @property
    def preprocessing(self) -> Preprocessing:
        return self._preprocessing

    def weights_available(self) -> bool:
        return True

    def weights_source(self) -> str:
        return "none (pixel statistics)"

    def _fingerprint_parts(self) -> dict[str, Any]:
        return {"thumb_size": self.thumb_size, "bins": self.bins, "work_size": self.work_size}

    def _load(self, device: str) -> Any:
        return _Identity()

    def _forward(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        import torch
        import torch.nn.functional as F

        n = batch.shape[0]
        k = self.work_size // self.thumb_size
        thumb = F.avg_pool2d(batch, kernel_size=k).reshape(n, -1)
        idx = (batch * self.bins).floor().clamp_(0, self.bins - 1).to(torch.int64).reshape(n, 3, -1)
        counts = torch.zeros((n, 3, self.bins), dtype=torch.float32, device=batch.device)
        counts.scatter_add_(2, idx, torch.ones_like(idx, dtype=torch.float32))
        hist = (counts / idx.shape[-1]).reshape(n, -1)
        return torch.cat([thumb, hist], dim=1)


register_encoder("pixel", PixelEncoder)
