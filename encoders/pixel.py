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

It needs no torch: where torch is not installed, `preprocess` returns a numpy batch and `encode`
computes the same statistics in numpy (`pixel_features`), to the same bits as the torch path
(tested), so vectors cached by one install serve the other.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from perception_gap.encoders.base import Encoder, module_installed
from perception_gap.encoders.errors import EncoderError
from perception_gap.encoders.preprocessing import Preprocessing, preprocess_images_numpy
from perception_gap.encoders.registry import register_encoder

if TYPE_CHECKING:  # pragma: no cover
    import torch


class _Identity:
    """Stands in for a model: the pixel baseline has nothing to load."""


def pixel_features(batch: np.ndarray, thumb_size: int, bins: int) -> np.ndarray:
    """The pixel baseline's vectors of a preprocessed batch, in numpy.

    Float32 arithmetic in torch's order (the thumbnail sums each k x k block row by row, then
    divides), so the vectors equal the torch path's bit for bit.

    Args:
        batch: (N, 3, S, S) float32 in [0, 1], S a multiple of `thumb_size`.

    Returns:
        (N, 3 * thumb_size**2 + 3 * bins) float32.
    """
    n, _, size, _ = batch.shape
    k = size // thumb_size
    blocks = batch.reshape(n, 3, thumb_size, k, thumb_size, k)
    acc = np.zeros((n, 3, thumb_size, thumb_size), np.float32)
    for i in range(k):
        for j in range(k):
            acc += blocks[:, :, :, i, :, j]
    thumb = (acc / np.float32(k * k)).reshape(n, -1)
    idx = np.clip(np.floor(batch * np.float32(bins)), 0, bins - 1).astype(np.int64).reshape(n * 3, -1)
    offsets = (np.arange(n * 3) * bins)[:, None]
    counts = np.bincount((idx + offsets).ravel(), minlength=n * 3 * bins).astype(np.float32)
    hist = (counts.reshape(n * 3, bins) / np.float32(idx.shape[-1])).reshape(n, -1)
    return np.concatenate([thumb, hist], axis=1)


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
    requires = ()

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

    # --- the numpy path, where torch is not installed --------------------------------------
    @property
    def device(self) -> str:
        if module_installed("torch"):
            return super().device
        if self.device_request == "cuda":
            raise EncoderError("Expected `device` 'cpu' or 'auto' without torch, got 'cuda' (CUDA runs through torch).")
        return "cpu"

    def preprocess(self, images: Sequence[Any]) -> Any:
        """As `Encoder.preprocess`; a float32 numpy array (N, 3, S, S) where torch is not installed."""
        if module_installed("torch"):
            return super().preprocess(images)
        return preprocess_images_numpy(images, self.preprocessing)

    def stage(self, batch: Any) -> Any:
        return batch if isinstance(batch, np.ndarray) else super().stage(batch)

    def stage_threads(self) -> Any:
        return super().stage_threads() if module_installed("torch") else contextlib.nullcontext()

    def encode(self, batch: Any) -> np.ndarray:
        """As `Encoder.encode`; also takes the numpy batch `preprocess` gives without torch."""
        if not isinstance(batch, np.ndarray):
            return super().encode(batch)
        expected = (3, *self.preprocessing.size)
        if batch.ndim != 4 or tuple(batch.shape[1:]) != expected or batch.dtype != np.float32:
            raise EncoderError(f"Expected `batch` as a float32 array of shape (N, {', '.join(map(str, expected))}), "
                               f"got {batch.dtype} {tuple(batch.shape)}.")
        return pixel_features(batch, self.thumb_size, self.bins)

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
