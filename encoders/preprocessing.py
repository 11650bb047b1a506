"""Image preprocessing shared by the adapters: a frozen description and its torch implementation.

Every adapter describes what its checkpoint expects with a `Preprocessing` and calls
`preprocess_images`, so the fingerprint (which hashes the description) and the pixels
(which follow it) cannot drift apart. Resizing runs on uint8 tensors with
`torchvision.transforms.v2.functional.resize(..., antialias=True)`, which matches Pillow's
resampling of the same filter to within 1 grey level (the reference pipelines of timm and
open_clip resize Pillow images), then values are divided by `input_scale` and normalized.
`torch` is imported inside the functions so that importing this module stays cheap.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from perception_gap.encoders.errors import EncoderError

if TYPE_CHECKING:  # pragma: no cover
    import torch

INTERPOLATIONS = ("bicubic", "bilinear", "nearest")
RESIZE_MODES = ("shortest", "squash", "longest")


@dataclass(frozen=True)
class Preprocessing:
    """What an encoder's weights expect to see.

    Attributes:
        size: (H, W) of the model input, pixels.
        interpolation: resize filter, one of "bicubic", "bilinear", "nearest" (antialiased
            when downscaling if `antialias`).
        resize_mode: "shortest": scale so the image covers (H, W) / `crop_pct` keeping its
            aspect ratio (for a square input: shortest side to floor(size / crop_pct)), then
            centre-crop (H, W). "squash": resize both sides to (H, W), aspect ratio not kept.
            "longest": scale the longest side to fit (H, W) keeping the aspect ratio, then pad
            the rest with `fill` around the centre.
        crop_pct: fraction of the resized image kept by the centre crop in "shortest" mode
            (1.0: resize the shortest side straight to the input size).
        mean: per-channel (R, G, B) mean subtracted after dividing by `input_scale`.
        std: per-channel (R, G, B) divisor applied after subtracting `mean`.
        input_scale: the input value scale: input pixels are expected as uint8 in
            [0, input_scale] and are divided by it, giving [0, 1] before `mean`/`std`.
        channels: channel order the model expects ("RGB").
        antialias: whether downscaling low-pass filters first (as Pillow does).
        fill: pad value in [0, 1] for "longest" mode, before normalization.
    """

    size: tuple[int, int]
    interpolation: str
    resize_mode: str
    crop_pct: float
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    input_scale: float = 255.0
    channels: str = "RGB"
    antialias: bool = True
    fill: float = 0.0

    def __post_init__(self) -> None:
        if self.interpolation not in INTERPOLATIONS:
            raise EncoderError(
                f"Expected `interpolation` in {INTERPOLATIONS}, got {self.interpolation!r}."
            )
        if self.resize_mode not in RESIZE_MODES:
            raise EncoderError(f"Expected `resize_mode` in {RESIZE_MODES}, got {self.resize_mode!r}.")
        if not (0.0 < self.crop_pct <= 1.0):
            raise EncoderError(f"Expected `crop_pct` in (0, 1], got {self.crop_pct}.")
        if len(self.size) != 2 or min(self.size) < 1:
            raise EncoderError(f"Expected `size` as (H, W) of positive ints, got {self.size}.")

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (tuples become lists), used for fingerprints and reports."""
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def _to_hwc_uint8(image: Any, index: int) -> np.ndarray:
    """An image as a validated HxWx3 uint8 array (a PIL image's pixels, or the array itself)."""
    if hasattr(image, "mode") and hasattr(image, "convert"):  # PIL.Image, without importing PIL
        if image.mode != "RGB":
            raise EncoderError(
                f"Expected images[{index}] as an RGB PIL image, got mode {image.mode!r} "
                "(convert it with .convert('RGB') if that is what the policy sees)."
            )
        image = np.asarray(image)
    if not isinstance(image, np.ndarray):
        raise EncoderError(
            f"Expected images[{index}] as an HxWx3 uint8 numpy array or RGB PIL image, "
            f"got {type(image).__name__}."
        )
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise EncoderError(
            f"Expected images[{index}] as an HxWx3 uint8 array, got {image.dtype} array of "
            f"shape {image.shape}."
        )
    return image


def _resize_crop(t: "torch.Tensor", p: Preprocessing) -> "torch.Tensor":
    import torchvision.transforms.v2.functional as F
    from torchvision.transforms import InterpolationMode

    mode = InterpolationMode(p.interpolation)
    th, tw = p.size
    h, w = int(t.shape[-2]), int(t.shape[-1])
    if p.resize_mode == "squash":
        return F.resize(t, [th, tw], interpolation=mode, antialias=p.antialias)
    if p.resize_mode == "shortest":
        if th == tw:
            # torchvision's Resize(int) rule, as timm (floor(size / crop_pct)) and open_clip use.
            scale_size = int(math.floor(th / p.crop_pct))
            t = F.resize(t, [scale_size], interpolation=mode, antialias=p.antialias)
        else:
            s = max(th / p.crop_pct / h, tw / p.crop_pct / w)
            t = F.resize(
                t, [max(th, round(h * s)), max(tw, round(w * s))], interpolation=mode,
                antialias=p.antialias,
            )
        return F.center_crop(t, [th, tw])
    # "longest": fit inside, pad the remainder around the centre.
    s = min(th / h, tw / w)
    nh, nw = max(1, min(th, round(h * s))), max(1, min(tw, round(w * s)))
    t = F.resize(t, [nh, nw], interpolation=mode, antialias=p.antialias)
    fill = int(round(p.fill * p.input_scale))
    top, left = (th - nh) // 2, (tw - nw) // 2
    return F.pad(t, [left, top, tw - nw - left, th - nh - top], fill=fill)


def preprocess_images(images: Sequence[Any], p: Preprocessing) -> "torch.Tensor":
    """Resize, crop and normalize images exactly as `p` describes.

    Args:
        images: a sequence of N HxWx3 uint8 numpy arrays (RGB, any H, W) or RGB PIL images;
            an (N, H, W, 3) uint8 array also works.

    Returns:
        float32 tensor of shape (N, 3, H, W) with H, W = `p.size`, on the CPU.

    Raises:
        EncoderError: an image is not HxWx3 uint8 / RGB, or `images` is empty.
    """
    import torch

    arrays = _validated(images)
    mean = torch.tensor(p.mean, dtype=torch.float32).view(3, 1, 1)
    std = torch.tensor(p.std, dtype=torch.float32).view(3, 1, 1)
    out = torch.empty((len(images), 3, *p.size), dtype=torch.float32)
    # Images of one size are resized as one (N, 3, H, W) batch, laid out channels-last as a single
    # image's HWC pixels are: the same kernel on the same layout, so the same numbers bit for bit
    # (tested), at ~1/7 of the cost per small frame (one call instead of one per image).
    for idx in _size_groups(arrays):
        hwc = torch.from_numpy(np.stack([arrays[i] for i in idx]))  # a copy: PIL arrays are read-only
        t = _resize_crop(hwc.permute(0, 3, 1, 2), p)
        out[idx] = (t.to(torch.float32) / p.input_scale - mean) / std
    return out


def _validated(images: Sequence[Any]) -> list[np.ndarray]:
    """The images as validated HxWx3 uint8 arrays."""
    if isinstance(images, np.ndarray) and images.ndim == 3:
        raise EncoderError(
            "Expected a sequence of images (or an (N, H, W, 3) array), got one HxWx3 array; "
            "wrap it in a list."
        )
    if len(images) == 0:
        raise EncoderError("Expected at least one image, got an empty sequence.")
    return [_to_hwc_uint8(image, i) for i, image in enumerate(images)]


def _size_groups(arrays: list[np.ndarray]) -> list[list[int]]:
    """Indices of the arrays, grouped by shape (each group is resized as one batch)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, a in enumerate(arrays):
        groups.setdefault(a.shape, []).append(i)
    return list(groups.values())


def preprocess_images_numpy(images: Sequence[Any], p: Preprocessing) -> np.ndarray:
    """`preprocess_images` without torch, for a "squash" antialiased bilinear `p` (the pixel baseline's).

    The same numbers as `preprocess_images` (see `resize_numpy`), as a numpy array.

    Args:
        images: as for `preprocess_images`.

    Returns:
        float32 array of shape (N, 3, H, W) with H, W = `p.size`.

    Raises:
        EncoderError: a bad image, or a preprocessing this path does not implement (it needs torch).
    """
    from perception_gap.encoders.resize_numpy import resize_bilinear_uint8

    if (p.resize_mode, p.interpolation, p.antialias) != ("squash", "bilinear", True):
        raise EncoderError(f"Expected a squash antialiased bilinear preprocessing without torch, got resize_mode "
                           f"{p.resize_mode!r}, interpolation {p.interpolation!r}, antialias {p.antialias}.")
    arrays = _validated(images)
    mean = np.asarray(p.mean, np.float32).reshape(3, 1, 1)
    std = np.asarray(p.std, np.float32).reshape(3, 1, 1)
    out = np.empty((len(arrays), 3, *p.size), np.float32)
    for idx in _size_groups(arrays):
        resized = resize_bilinear_uint8(np.stack([arrays[i] for i in idx]), p.size)
        out[idx] = (resized.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(p.input_scale) - mean) / std
    return out
