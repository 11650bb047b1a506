"""open_clip image towers: `open_clip:ARCH:PRETRAINED`.

PRETRAINED is one of:

- an open_clip pretrained tag (`laion2b_s34b_b79k`, ...): used when its weights are already
  in the local cache (Hugging Face hub cache, or open_clip's `~/.cache/clip` for URL tags);
  otherwise downloaded through open_clip only when downloads are allowed (`allow_download`,
  default: not `HF_HUB_OFFLINE`) and the host answers within 3 s. Offline and uncached, the
  constructor fails at once with one line saying how to supply the weights (open_clip itself
  would retry the hub for ~46 s);
- a local checkpoint file (`.pt`, `.pth`, `.bin`, `.safetensors`) of a state_dict for ARCH;
- `local-dir:PATH`: a folder with `open_clip_config.json` (model_cfg + preprocess_cfg) and a
  checkpoint, as open_clip saves them (ARCH is then only a label).

Every checkpoint is checked to be plain tensors before open_clip reads it (see
`checkpoints.check_weights_only`): local files when the encoder is constructed, downloaded
ones before loading, and again at load if the file changed; open_clip then loads it with
`weights_only=True`.

Preprocessing is the checkpoint's own, as open_clip resolves it: its `PreprocessCfg`
defaults (OpenAI CLIP mean/std, bicubic, shortest side + centre crop) overlaid with the
tag's pretrained cfg (or the folder's `preprocess_cfg`, or `preprocess_tag`'s for a local
file of a known tag), at the model's image size. It is computed before loading and passed to
open_clip (`image_mean`, `image_std`, `image_interpolation`, `image_resize_mode`), so the
model carries the same config; pixels are then
produced by `preprocessing.preprocess_images` (torch ops, matching open_clip's Pillow
pipeline to within 1 grey level before normalization).

Embedding: `model.encode_image(x, normalize=True)`: L2-normalized image features,
width `embed_dim` of the model config.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from dataclasses import asdict
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from perception_gap.encoders.base import Encoder, file_sha256
from perception_gap.encoders.checkpoints import CHECKPOINT_SUFFIXES, check_weights_only
from perception_gap.encoders.errors import EncoderError, WeightsUnavailableError
from perception_gap.encoders.preprocessing import Preprocessing
from perception_gap.encoders.registry import register_prefix

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

OPEN_CLIP_PREFIX = "open_clip:"
LOCAL_DIR_PREFIX = "local-dir:"
_HF_WEIGHTS_NAME = "open_clip_pytorch_model.bin"
_HF_SAFE_WEIGHTS_NAME = "open_clip_model.safetensors"
_TRUTHY = {"1", "on", "yes", "true"}


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUTHY


def hf_cache_dir(cache_dir: str | None = None) -> str:
    """The Hugging Face hub cache folder, read from the environment now (not at import)."""
    if cache_dir:
        return cache_dir
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return os.path.expanduser(os.environ[var])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "huggingface", "hub")


def _reachable(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to host:port opens within `timeout` s (DNS included)."""
    ok: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            ok.append(True)
        except OSError:
            pass

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return bool(ok)


def _hf_candidates(hf_hub: str) -> tuple[str, list[str]]:
    """open_clip's 'org/repo/filename' hub entry -> (repo id, file names, safetensors first)."""
    repo_id, filename = os.path.split(hf_hub)
    filename = filename or _HF_WEIGHTS_NAME
    names = []
    if filename == _HF_WEIGHTS_NAME:
        names.append(_HF_SAFE_WEIGHTS_NAME)
    elif filename.endswith((".bin", ".pth")):
        names.append(filename[:-4] + ".safetensors")
    names.append(filename)
    return repo_id, names


def find_cached_tag_weights(pretrained_cfg: dict[str, Any], cache_dir: str | None = None) -> str | None:
    """Path of a tag's weights in the local caches, or None; never touches the network."""
    if pretrained_cfg.get("file"):
        return pretrained_cfg["file"] if os.path.isfile(pretrained_cfg["file"]) else None
    if pretrained_cfg.get("hf_hub"):
        from huggingface_hub import try_to_load_from_cache

        repo_id, names = _hf_candidates(pretrained_cfg["hf_hub"])
        for name in names:
            hit = try_to_load_from_cache(repo_id, name, cache_dir=hf_cache_dir(cache_dir))
            if isinstance(hit, str) and os.path.isfile(hit):
                return hit
    if pretrained_cfg.get("url"):
        folder = cache_dir or os.path.expanduser("~/.cache/clip")
        path = os.path.join(folder, os.path.basename(pretrained_cfg["url"]))
        if os.path.isfile(path):
            return path
    return None


def _find_checkpoint_in_dir(folder: str) -> str | None:
    from pathlib import Path

    import open_clip.factory as factory

    finder = getattr(factory, "_find_checkpoint_in_dir", None)
    if finder is not None:  # the exact file open_clip will load
        return finder(Path(folder))
    for name in ("open_clip_model.safetensors", "open_clip_pytorch_model.safetensors",
                 "open_clip_pytorch_model.bin", "open_clip_pytorch_model.pth"):
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


class OpenClipEncoder(Encoder):
    """The image tower of an open_clip model; embeddings are L2-normalized.

    Args:
        arch: open_clip architecture name (`open_clip.list_models()`, or one added with
            `open_clip.add_model_config`).
        pretrained: a pretrained tag, a checkpoint path, or `local-dir:PATH`.
        device: "cpu", "cuda" or "auto".
        precision: "fp32", "fp16" (CUDA) or "bf16" autocast (see `Encoder`).
        cache_dir: cache folder for tag weights (default: the Hugging Face hub cache from
            the environment, and `~/.cache/clip` for URL tags).
        allow_download: whether an uncached tag may be downloaded (default: unless
            `HF_HUB_OFFLINE` is set).
        preprocess_tag: for a local checkpoint file, a pretrained tag whose preprocessing
            (mean/std, interpolation, resize mode) and QuickGELU setting the checkpoint
            follows; default: open_clip's defaults for the architecture.

    Raises:
        EncoderError: unknown architecture or tag, unsupported or unreadable checkpoint.
        WeightsUnavailableError: the weights are neither local nor downloadable now.
    """

    family = "clip"
    adapter_version = "1"
    requires = ("torch", "open_clip")

    def __init__(
        self,
        arch: str,
        pretrained: str,
        *,
        device: str = "cpu",
        precision: str = "fp32",
        cache_dir: str | None = None,
        allow_download: bool | None = None,
        preprocess_tag: str | None = None,
    ) -> None:
        super().__init__(f"{OPEN_CLIP_PREFIX}{arch}:{pretrained}", device=device, precision=precision)
        import open_clip
        from open_clip.transform import PreprocessCfg, merge_preprocess_dict

        self.arch, self.pretrained, self.cache_dir = arch, pretrained, cache_dir
        self._tag_cfg: dict[str, Any] | None = None  # set when weights must be downloaded
        self.reference_transform: Any = None  # open_clip's eval transform, set on load
        self._checkpoint: str | None = None
        self._model_name = arch
        self.quick_gelu = False
        pp = asdict(PreprocessCfg())

        if pretrained.startswith(LOCAL_DIR_PREFIX):
            folder = os.path.expanduser(pretrained[len(LOCAL_DIR_PREFIX):])
            cfg_path = os.path.join(folder, "open_clip_config.json")
            if not os.path.isfile(cfg_path):
                raise WeightsUnavailableError(
                    f"open_clip local-dir {folder} has no open_clip_config.json; expected a folder "
                    "saved by open_clip (open_clip_config.json + open_clip_model.safetensors)"
                )
            try:
                with open(cfg_path, encoding="utf-8") as f:
                    local = json.load(f)
                self.model_cfg = dict(local["model_cfg"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise EncoderError(f"cannot read {cfg_path}: expected JSON with 'model_cfg' ({e})") from None
            pp = merge_preprocess_dict(pp, local.get("preprocess_cfg", {}))
            self._checkpoint = _find_checkpoint_in_dir(folder)
            if self._checkpoint is None:
                raise WeightsUnavailableError(f"open_clip local-dir {folder} holds no checkpoint "
                                              "(.safetensors, .bin or .pth)")
            self._model_name = LOCAL_DIR_PREFIX + folder
        else:
            model_cfg = open_clip.get_model_config(arch)
            if model_cfg is None:
                raise EncoderError(
                    f"Unknown open_clip architecture {arch!r}; expected a name from "
                    "open_clip.list_models() (e.g. ViT-B-32, ViT-B-16, ViT-L-14) or a config "
                    "added with open_clip.add_model_config."
                )
            self.model_cfg = dict(model_cfg)
            if self._looks_like_path(pretrained):
                path = os.path.expanduser(pretrained)
                if not path.endswith(CHECKPOINT_SUFFIXES):
                    raise EncoderError(
                        f"Expected an open_clip checkpoint ending in {', '.join(CHECKPOINT_SUFFIXES)} "
                        f"or local-dir:PATH, got {pretrained!r}."
                    )
                if not os.path.isfile(path):
                    raise WeightsUnavailableError(f"open_clip checkpoint {path} does not exist")
                self._checkpoint = os.path.abspath(path)
                if preprocess_tag:
                    tag_cfg = self._tag(open_clip, preprocess_tag)
                    pp = merge_preprocess_dict(pp, tag_cfg)
                    self.quick_gelu = bool(tag_cfg.get("quick_gelu", False))
            else:
                tag_cfg = self._tag(open_clip, pretrained)
                pp = merge_preprocess_dict(pp, tag_cfg)
                self.quick_gelu = bool(tag_cfg.get("quick_gelu", False))
                self._checkpoint = find_cached_tag_weights(tag_cfg, cache_dir)
                if self._checkpoint is None:
                    self._require_download(tag_cfg, allow_download)
                    self._tag_cfg = tag_cfg
        self._checked: tuple[str, int, int] | None = None
        if self._checkpoint is not None:
            self._check_checkpoint(self._checkpoint)  # refuse unsafe files before anything loads
        self.quick_gelu = self.quick_gelu or bool(self.model_cfg.get("quick_gelu", False))
        size = self.model_cfg.get("vision_cfg", {}).get("image_size", pp["size"])
        pp["size"] = size
        self._pp_dict = pp
        self._preprocessing = _to_preprocessing(pp)

    # --- construction helpers ----------------------------------------------------------
    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> "OpenClipEncoder":
        """`open_clip:ARCH:PRETRAINED` -> encoder (PRETRAINED may itself contain ':')."""
        parts = name.split(":", 2)
        if len(parts) != 3 or parts[0] + ":" != OPEN_CLIP_PREFIX or not parts[1] or not parts[2]:
            raise EncoderError(
                f"Expected an open_clip encoder name as open_clip:ARCH:PRETRAINED, got {name!r}."
            )
        return cls(parts[1], parts[2], **kwargs)

    @staticmethod
    def _looks_like_path(pretrained: str) -> bool:
        return (
            os.sep in pretrained
            or "/" in pretrained
            or pretrained.startswith("~")
            or pretrained.endswith((*CHECKPOINT_SUFFIXES, ".npz", ".npy", ".ckpt"))
            or os.path.exists(pretrained)
        )

    def _tag(self, open_clip: Any, tag: str) -> dict[str, Any]:
        cfg = open_clip.get_pretrained_cfg(self.arch, tag)
        if not cfg:
            tags = open_clip.list_pretrained_tags_by_model(self.arch)
            listed = ", ".join(tags) if tags else "none"
            raise EncoderError(
                f"Unknown open_clip pretrained tag {tag!r} for {self.arch}; expected one of: "
                f"{listed}, or a checkpoint path (.pt, .bin, .safetensors) or local-dir:PATH."
            )
        return dict(cfg)

    def _require_download(self, tag_cfg: dict[str, Any], allow_download: bool | None) -> None:
        allowed = (not _offline()) if allow_download is None else bool(allow_download)
        host = "huggingface.co" if tag_cfg.get("hf_hub") else urlparse(tag_cfg.get("url", "")).hostname
        where = f"not in the Hugging Face cache {hf_cache_dir(self.cache_dir)}"
        if allowed and host and _reachable(host):
            return
        reason = f"offline ({where})" if not allowed else f"({where}, and {host or 'the host'} is unreachable)"
        raise WeightsUnavailableError(
            f"open_clip weights for {self.arch}/{self.pretrained} are not available {reason}; "
            f"pass a local checkpoint: open_clip:{self.arch}:"
            "/path/to/open_clip_pytorch_model.bin (or .safetensors, or local-dir:PATH)"
        )

    # --- description -------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return int(self.model_cfg["embed_dim"])

    @property
    def preprocessing(self) -> Preprocessing:
        return self._preprocessing

    def weights_available(self) -> bool:
        return self._checkpoint is not None and os.path.isfile(self._checkpoint)

    def weights_source(self) -> str:
        return self._checkpoint or f"open_clip tag {self.pretrained} (to download)"

    def _ensure_checkpoint(self) -> str:
        if self._checkpoint is None:
            import open_clip

            assert self._tag_cfg is not None
            log.info("downloading open_clip weights %s/%s", self.arch, self.pretrained)
            self._checkpoint = open_clip.download_pretrained(self._tag_cfg, cache_dir=self.cache_dir)
        return self._checkpoint

    def _check_checkpoint(self, path: str) -> None:
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
        if self._checked != key:
            check_weights_only(path)
            self._checked = key

    def _fingerprint_parts(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "model_cfg": self.model_cfg,
            "quick_gelu": self.quick_gelu,
            "weights_sha256": file_sha256(self._ensure_checkpoint()),
            "embedding": "encode_image_l2_normalized",
        }

    # --- running -----------------------------------------------------------------------
    def _load(self, device: str) -> Any:
        import open_clip

        checkpoint = self._ensure_checkpoint()
        self._check_checkpoint(checkpoint)
        pp = self._pp_dict
        kwargs: dict[str, Any] = dict(
            device=device,
            image_mean=tuple(pp["mean"]),
            image_std=tuple(pp["std"]),
            image_interpolation=pp["interpolation"],
            image_resize_mode=pp["resize_mode"],
            weights_only=True,
            pretrained_image=False,
            require_pretrained=True,
        )
        if self._model_name.startswith(LOCAL_DIR_PREFIX):
            model, _, val = open_clip.create_model_and_transforms(self._model_name, **kwargs)
        else:
            model, _, val = open_clip.create_model_and_transforms(
                self.arch, pretrained=checkpoint, force_quick_gelu=self.quick_gelu, **kwargs
            )
        # open_clip's own (Pillow) eval transform, kept as the reference `preprocess` matches.
        self.reference_transform = val
        visual_size = getattr(model.visual, "image_size", None)
        if visual_size is not None and _pair(visual_size) != self.preprocessing.size:
            raise EncoderError(
                f"open_clip model {self.arch} takes {_pair(visual_size)} inputs but its config says "
                f"{self.preprocessing.size}"
            )
        return model.eval()

    def _forward(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        return model.encode_image(batch, normalize=True)


def _pair(size: Any) -> tuple[int, int]:
    if isinstance(size, (list, tuple)):
        return int(size[0]), int(size[1])
    return int(size), int(size)


def _to_preprocessing(pp: dict[str, Any]) -> Preprocessing:
    """open_clip's eval `PreprocessCfg` dict -> `Preprocessing`."""
    if pp.get("mode", "RGB") != "RGB":
        raise EncoderError(f"Expected open_clip preprocess mode 'RGB', got {pp.get('mode')!r}.")
    interpolation = pp.get("interpolation", "bicubic")
    if interpolation == "random":  # a training-time option; eval uses bicubic
        interpolation = "bicubic"
    return Preprocessing(
        size=_pair(pp["size"]),
        interpolation=interpolation,
        resize_mode=pp.get("resize_mode", "shortest"),
        crop_pct=1.0,
        mean=tuple(float(v) for v in pp["mean"]),  # type: ignore[arg-type]
        std=tuple(float(v) for v in pp["std"]),  # type: ignore[arg-type]
        input_scale=255.0,
        fill=float(pp.get("fill_color", 0)) / 255.0,
    )


register_prefix(OPEN_CLIP_PREFIX, OpenClipEncoder.from_name, "open_clip:ARCH:PRETRAINED")
