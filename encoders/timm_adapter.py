"""Any timm architecture: `timm:NAME` and `timm:NAME@PATH`.

NAME is a timm model name, with or without its pretrained tag (`resnet50`, `resnet50.a1_in1k`,
`vit_base_patch16_224.augreg2_in21k_ft_in1k`; without a tag, timm's default tag). Weights:

- `timm:NAME`: the tag's file in the local Hugging Face hub cache (its `hf_hub_id` repo,
  `model.safetensors` first, then `pytorch_model.bin` or the tag's `hf_hub_filename`), or torch
  hub's checkpoint folder for a tag that only has a URL. Never downloaded: absent, the name fails
  at once with one line saying how to bring the file over.
- `timm:NAME@PATH`: a local `.safetensors`, `.pth`, `.bin` or `.pt` state dict for NAME.

The file is read as plain tensors (`local_weights.read_state_dict`: safetensors, or declared sizes
checked and a weights-only unpickle) and handed to timm itself
(`pretrained_cfg_overlay={"state_dict": ...}`), which applies the architecture's own checkpoint
filter, drops the classifier and loads strictly, exactly as `timm.create_model(NAME,
pretrained=True, num_classes=0)` would from that file. At construction the file's keys and shapes
are compared with the model's (built on the meta device: no memory, no initialization); when they
differ, timm's filter gets its chance (a full load on the CPU) and a failure is one line naming
the first missing and unexpected keys.

Embedding: `model(x)` with `num_classes=0`: the pooled pre-logits features (timm's
`forward_head(..., pre_logits=True)`), not normalized.

Preprocessing: the tag's pretrained config as `timm.data.resolve_data_config` reads it (input
size, interpolation, mean/std, crop_pct, crop_mode): `center` maps to a shortest-side resize to
floor(size / crop_pct) and a centre crop; `squash` with crop_pct 1 to a resize of both sides;
`border` with crop_pct 1 and a grey mean to a longest-side resize padded with the mean. `squash`
with a crop and `border` with a coloured mean (29 of timm's 3,394 tags) are refused: the engine's
preprocessing cannot express them. The data config is part of the fingerprint, beside the weights'
SHA-256, the architecture and the tag.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from perception_gap.encoders.base import Encoder, LocalWeightsMixin, file_sha256
from perception_gap.encoders.checkpoints import check_weights_only
from perception_gap.encoders.errors import EncoderError, WeightsUnavailableError
from perception_gap.encoders.local_weights import (
    hub_file,
    key_mismatch,
    read_state_dict,
    tensor_shapes,
    weights_path,
)
from perception_gap.encoders.open_clip_adapter import hf_cache_dir
from perception_gap.encoders.preprocessing import INTERPOLATIONS, Preprocessing
from perception_gap.encoders.registry import register_prefix

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

TIMM_PREFIX = "timm:"
TIMM_FORM = "timm:NAME or timm:NAME@PATH"
_HUB_FILES = ("model.safetensors", "pytorch_model.bin")


class TimmEncoder(LocalWeightsMixin, Encoder):
    """A timm model's pooled pre-logits features, from cached or local weights.

    Args:
        model_name: timm name, optionally with its tag (`convnext_tiny.fb_in22k`).
        weights: a local checkpoint path; None for the tag's file in the local caches.
        device: "cpu", "cuda" or "auto".
        precision: "fp32", "fp16" (CUDA) or "bf16" autocast (see `Encoder`).
        cache_dir: the Hugging Face hub cache (default: from the environment).

    Raises:
        EncoderError: unknown name or tag, a file that is missing, unsafe or of another
            architecture, or a preprocessing the engine cannot express.
        WeightsUnavailableError: no weights for the tag in the local caches.
    """

    family = "imagenet"
    adapter_version = "1"
    requires = ("torch", "timm")

    def __init__(self, model_name: str, weights: str | None = None, *, device: str = "cpu",
                 precision: str = "fp32", cache_dir: str | None = None) -> None:
        name = f"{TIMM_PREFIX}{model_name}" + (f"@{weights}" if weights is not None else "")
        super().__init__(name, device=device, precision=precision)
        import timm
        from timm.data import resolve_data_config
        from timm.models import get_pretrained_cfg, split_model_name_tag

        self.model_name = model_name
        arch, tag = split_model_name_tag(model_name)
        if not arch or not timm.is_model(arch):
            raise EncoderError(f"Unknown timm architecture {arch!r} in {name!r}; expected a name from "
                               "timm.list_models() (e.g. resnet50, convnext_tiny, vit_base_patch16_224).")
        try:
            cfg = get_pretrained_cfg(model_name)
        except RuntimeError:  # an unknown tag
            cfg = None
        if cfg is None:
            tags = ", ".join(timm.list_pretrained(arch)) or "none"
            raise EncoderError(f"Unknown timm pretrained tag {tag!r} for {arch}; expected one of: {tags}.")
        self.arch = arch
        self.pretrained_cfg = cfg.to_dict()
        self.tag = self.pretrained_cfg.get("tag") or ""
        self.data_config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in
                            resolve_data_config(pretrained_cfg=self.pretrained_cfg).items()}
        self._preprocessing = _to_preprocessing(self.data_config, name)

        if weights is not None:
            self.weights = weights_path(weights, name)
        else:
            self.weights = self._cached_weights(name, cache_dir)
        check_weights_only(self.weights, f"timm weights for {name}")
        self.weights_sha256 = file_sha256(self.weights)
        self._dim, self._model_shapes = self._layout()
        self._check_keys(name)

    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> "TimmEncoder":
        """`timm:NAME` or `timm:NAME@PATH` -> encoder (PATH may itself contain '@')."""
        body = name[len(TIMM_PREFIX):] if name.startswith(TIMM_PREFIX) else ""
        model_name, at, path = body.partition("@")
        if not model_name or (at and not path):
            raise EncoderError(f"Expected a timm encoder name as {TIMM_FORM}, got {name!r}.")
        return cls(model_name, path if at else None, **kwargs)

    # --- construction helpers ----------------------------------------------------------
    def _cached_weights(self, name: str, cache_dir: str | None) -> str:
        cfg = self.pretrained_cfg
        hub_id = cfg.get("hf_hub_id")
        if hub_id:
            extra = cfg.get("hf_hub_filename")
            names = (extra[:-4] + ".safetensors", extra) if extra and extra.endswith((".bin", ".pth")) else (
                (extra,) if extra else _HUB_FILES)
            found = hub_file(hub_id, names, cache_dir)
            if found:
                return found
        if cfg.get("url"):
            import torch.hub

            path = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(cfg["url"]))
            if os.path.isfile(path):
                return path
        if not hub_id and not cfg.get("url"):
            raise WeightsUnavailableError(f"timm has no pretrained weights for {self.model_name!r}; pass a local "
                                          f"file: timm:{self.model_name}@/path/to/model.safetensors")
        where = f"repo {hub_id} is not in the Hugging Face cache {hf_cache_dir(cache_dir)}" if hub_id else \
            f"{os.path.basename(cfg['url'])} is not in torch hub's checkpoints folder"
        fetch = f"`hf download {hub_id}` on a machine online, then copy its hub cache here" if hub_id else \
            f"download {cfg['url']}"
        raise WeightsUnavailableError(f"timm weights for {name} are not available offline ({where}); {fetch}, "
                                      f"or pass a local file: timm:{self.model_name}@/path/to/model.safetensors")

    def _layout(self) -> tuple[int, dict[str, tuple[int, ...]]]:
        """The feature width and the model's key -> shape, from a model on the meta device."""
        import timm
        import torch

        with torch.device("meta"):
            model = timm.create_model(self.model_name, pretrained=False, num_classes=0)
            shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
            try:
                dim = int(model(torch.empty(1, 3, *self._preprocessing.size)).shape[-1])
            except Exception:  # noqa: BLE001 - an op without a meta kernel: timm's own record of the width
                dim = int(getattr(model, "head_hidden_size", None) or model.num_features)
        return dim, shapes

    def _classifiers(self) -> tuple[str, ...]:
        c = self.pretrained_cfg.get("classifier") or ()
        return (c,) if isinstance(c, str) else tuple(c)

    def _check_keys(self, name: str) -> None:
        what = f"timm weights for {name}"
        problem = key_mismatch(tensor_shapes(self.weights, what), self._model_shapes, ignored=self._classifiers())
        self._timm_layout = problem is None
        if problem is None:
            return
        try:  # another key layout, which timm's checkpoint filter for this architecture may map
            self._build("cpu")
        except Exception:  # noqa: BLE001 - timm refused it too: report the keys
            raise EncoderError(f"Expected {self.weights!r} to hold the weights of timm {self.arch}, got "
                               f"{problem}.") from None

    # --- description -------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    def _fingerprint_parts(self) -> dict[str, Any]:
        return {"arch": self.arch, "tag": self.tag, "weights_sha256": self.weights_sha256,
                "data_config": self.data_config, "embedding": "timm num_classes=0 pooled pre-logits"}

    # --- running -----------------------------------------------------------------------
    def _build(self, device: str) -> Any:
        """The model through timm's own loader, which loads strictly only when the model's class
        count equals the config's: so both are set to the file's own count (its classifier rows; 0
        without a classifier; the tag's count for a file in another layout, mapped by timm's
        filter), and the classifier is reset to none afterwards, as `num_classes=0` builds it."""
        import timm

        state = read_state_dict(self.weights, f"timm weights for {self.name}")
        n_classes = int(self.pretrained_cfg.get("num_classes") or 0)
        if self._timm_layout:
            rows = [state[f"{c}.weight"].shape[0] for c in self._classifiers() if f"{c}.weight" in state]
            n_classes = int(rows[0]) if rows else 0
        overlay: dict[str, Any] = {"state_dict": state, "num_classes": n_classes}
        model = timm.create_model(self.model_name, pretrained=True, pretrained_cfg_overlay=overlay,
                                  num_classes=n_classes)
        if n_classes:
            model.reset_classifier(0)
        return model.eval().to(device)

    def _load(self, device: str) -> Any:
        if file_sha256(self.weights) != self.weights_sha256:
            raise EncoderError(f"timm weights {self.weights} changed since the encoder was created; create it again.")
        model = self._build(device)
        log.debug("loaded timm %s from %s (sha256 %s)", self.model_name, self.weights, self.weights_sha256)
        return model

    def _forward(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        return model(batch)


def _to_preprocessing(dc: dict[str, Any], name: str) -> Preprocessing:
    """timm's resolved data config -> `Preprocessing` (module docstring); EncoderError for a crop
    mode the engine cannot express."""
    channels, h, w = (int(v) for v in dc["input_size"])
    if channels != 3:
        raise EncoderError(f"Expected {name} to take 3-channel RGB input, its pretrained config says {channels}.")
    interpolation = dc.get("interpolation") or "bilinear"
    if interpolation not in INTERPOLATIONS:
        raise EncoderError(f"Expected {name}'s interpolation in {INTERPOLATIONS}, its pretrained config says "
                           f"{interpolation!r}.")
    crop_pct = float(dc.get("crop_pct") or 0.875)
    mode = dc.get("crop_mode") or "center"
    mean = tuple(float(v) for v in dc["mean"])
    std = tuple(float(v) for v in dc["std"])
    kw: dict[str, Any] = dict(size=(h, w), interpolation=interpolation, mean=mean, std=std, input_scale=255.0)
    if mode == "center":
        return Preprocessing(resize_mode="shortest", crop_pct=min(crop_pct, 1.0), **kw)
    if mode == "squash" and crop_pct == 1.0:
        return Preprocessing(resize_mode="squash", crop_pct=1.0, **kw)
    if mode == "border" and crop_pct == 1.0 and len(set(mean)) == 1:
        return Preprocessing(resize_mode="longest", crop_pct=1.0, fill=mean[0], **kw)
    raise EncoderError(f"Expected {name}'s pretrained config to ask for crop_mode 'center' (or 'squash' with "
                       f"crop_pct 1), got crop_mode {mode!r} with crop_pct {crop_pct}, which the engine's "
                       "preprocessing cannot express.")


register_prefix(TIMM_PREFIX, TimmEncoder.from_name, TIMM_FORM)
