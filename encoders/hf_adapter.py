"""Hugging Face transformers vision models: `hf:REPO_OR_DIR` and `hf:REPO_OR_DIR#POOLING`.

REPO_OR_DIR is a local model folder (`config.json`, `preprocessor_config.json` and the weights:
`model.safetensors`, `pytorch_model.bin`, or their sharded `*.index.json` forms), or a repo id
(`facebook/dinov2-small`) found in the local Hugging Face hub cache (its `main` snapshot, or the
only snapshot of a copied cache). Nothing downloads; a repo id that is not cached fails at once
with one line saying how to bring it over. `transformers` is an optional extra
(`pip install 'perception-gap[hf]'`), imported only when an `hf:` name is requested.

Model: the class `AutoModel` picks for the config's `model_type`; for a dual-tower config (CLIP,
SigLIP: a `vision_config` inside) the vision tower's class (`CLIPVisionModel`,
`SiglipVisionModel`), which loads the tower's weights out of the whole checkpoint. A model type
transformers does not know (custom code) and a model whose input is not `pixel_values` are
refused: `trust_remote_code` is never set.

Weights: every weights file is checked before transformers reads it (safetensors headers, or
declared sizes and a weights-only unpickle for `.bin`, `checkpoints.check_weights_only`). At
construction transformers loads the model once on the CPU (it renames some layouts as it loads,
and only warns about weights it cannot find): the encoder is refused in one line when a weight
the model uses would stay randomly initialized or has another shape, the first missing and
unexpected keys named. Keys the model does not take (a classifier head, a text tower) are
ignored, and so is a missing `pooler` when the pooling does not use it. The model is loaded again
at first use (holding it from construction would hold every encoder of a sweep at once).

POOLING (default per model type, in the fingerprint):

- `cls`: the first token of `last_hidden_state` (default for vit, deit, dinov2,
  dinov2_with_registers, vit_msn, where it is the token the model was trained to pool);
- `pooler`: `pooler_output` (default otherwise when the model has one: CLIP's post-LayerNorm
  class token, SigLIP's attention-pooling head, BEiT's and ConvNeXt's normalized average, ResNet's
  and Swin's average pool);
- `mean`: the mean of the patch tokens, the last (H/p)·(W/p) tokens of `last_hidden_state` (after
  the class, register and distillation tokens), or the spatial mean of a feature map (default
  when there is no `pooler_output`).

Preprocessing, from `preprocessor_config.json`: `size` as `shortest_edge` (resize the shortest
side, then `crop_size` centre crop) or `height`/`width` (resize both sides, no crop); ConvNeXt's
`crop_pct` rule (shortest side to size / crop_pct, centre crop, below 384; a plain resize from
384); `resample` 0/2/3 as nearest/bilinear/bicubic; `rescale_factor` as the value scale;
`image_mean`/`image_std`. Other resize rules (`longest_edge`, a resize then a smaller crop) are
refused in one line.

Fingerprint: the model class, the SHA-256 of config.json and of every weights file, the
pooling and the preprocessing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from typing import TYPE_CHECKING, Any, Iterator

from perception_gap.encoders.base import Encoder, LocalWeightsMixin, file_sha256, not_a_file
from perception_gap.encoders.checkpoints import check_weights_only
from perception_gap.encoders.errors import EncoderError, WeightsUnavailableError
from perception_gap.encoders.local_weights import crop_pct_for, hub_snapshot, looks_like_repo_id
from perception_gap.encoders.open_clip_adapter import hf_cache_dir
from perception_gap.encoders.preprocessing import Preprocessing
from perception_gap.encoders.registry import register_prefix

if TYPE_CHECKING:  # pragma: no cover
    import torch

log = logging.getLogger(__name__)

HF_PREFIX = "hf:"
HF_FORM = "hf:REPO_OR_DIR[#cls|#pooler|#mean]"
POOLINGS = ("cls", "pooler", "mean")
EXTRA = "pip install 'perception-gap[hf]'"
CLS_MODEL_TYPES = ("vit", "deit", "dinov2", "dinov2_with_registers", "vit_msn")
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}


def _read_json(path: str, what: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise EncoderError(f"Cannot read {what} {path}: {e}.") from None
    if not isinstance(data, dict):
        raise EncoderError(f"Expected {what} {path} to hold a JSON object, got {type(data).__name__}.")
    return data


def weights_files(folder: str) -> list[str]:
    """The weights files transformers would read from `folder` (safetensors first, shards
    resolved from their index); [] when there are none."""
    for name in _WEIGHTS:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        if not name.endswith(".index.json"):
            return [path]
        shards = sorted(set(_read_json(path, "weights index").get("weight_map", {}).values()))
        missing = [s for s in shards if not os.path.isfile(os.path.join(folder, s))]
        if missing or not shards:
            raise WeightsUnavailableError(f"Expected the shards listed in {path} beside it, got {len(missing)} of "
                                          f"{len(shards)} missing (first: {missing[0] if missing else 'none listed'}).")
        return [os.path.join(folder, s) for s in shards]
    return []


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' load reports and progress bars off while it loads (the library never prints;
    what matters is raised as an EncoderError), restored after."""
    from transformers.utils import logging as tf_logging

    verbosity, bars = tf_logging.get_verbosity(), tf_logging.is_progress_bar_enabled()
    tf_logging.set_verbosity_error()
    tf_logging.disable_progress_bar()
    try:
        yield
    finally:
        tf_logging.set_verbosity(verbosity)
        if bars:
            tf_logging.enable_progress_bar()


class HFEncoder(LocalWeightsMixin, Encoder):
    """A transformers vision model's pooled features, from a local folder or the hub cache.

    Args:
        source: a model folder or a cached repo id.
        pooling: "cls", "pooler", "mean", or None for the model type's default (module docstring).
        device: "cpu", "cuda" or "auto".
        precision: "fp32", "fp16" (CUDA) or "bf16" autocast (see `Encoder`).
        cache_dir: the Hugging Face hub cache (default: from the environment).

    Raises:
        EncoderError: transformers missing, a folder without config or weights, weights of
            another architecture, a model that takes no images, or a preprocessing the engine
            cannot express.
        WeightsUnavailableError: a repo id that is not in the local cache.
    """

    family = "imagenet"
    adapter_version = "1"
    requires = ("torch", "transformers")

    def __init__(self, source: str, pooling: str | None = None, *, device: str = "cpu", precision: str = "fp32",
                 cache_dir: str | None = None) -> None:
        name = f"{HF_PREFIX}{source}" + (f"#{pooling}" if pooling else "")
        super().__init__(name, device=device, precision=precision)
        try:
            import transformers
        except ImportError:
            raise EncoderError(f"Encoder {name!r} needs the Hugging Face transformers package: {EXTRA}.") from None
        if pooling is not None and pooling not in POOLINGS:
            raise EncoderError(f"Expected the pooling after '#' in {name!r} in {POOLINGS}, got {pooling!r}.")
        self.source = source
        self.folder = self._resolve(source, name, cache_dir)
        config_path = os.path.join(self.folder, "config.json")
        config = _read_json(config_path, "model config")
        self.model_type = str(config.get("model_type", ""))
        self.model_class = self._model_class(transformers, config, name)
        self.config_sha256 = file_sha256(config_path)
        pp_path = os.path.join(self.folder, "preprocessor_config.json")
        if not_a_file(pp_path) is not None:
            raise EncoderError(f"Expected {pp_path} (the model's image preprocessing) beside config.json, got none.")
        self.processor_config = _read_json(pp_path, "preprocessor config")
        self._preprocessing = _to_preprocessing(self.processor_config, name)
        self.weights = weights_files(self.folder)
        if not self.weights:
            raise WeightsUnavailableError(f"Expected weights for {name} in {self.folder} ({', '.join(_WEIGHTS)}), "
                                          "got none: only the config is here.")
        for path in self.weights:
            check_weights_only(path, f"weights for {name}")
        self.weights_sha256 = {os.path.basename(p): file_sha256(p) for p in self.weights}
        self._vision_config = getattr(transformers, self.model_class).config_class.from_pretrained(self.folder)
        outputs = self._skeleton_outputs()
        self.pooling = pooling or default_pooling(self.model_type, outputs)
        self._dim = int(pool(outputs, self.pooling, self._grid(), name).shape[-1])
        # transformers only warns about weights it could not find (they stay randomly initialized)
        # and renames some layouts as it loads: so it loads them here once, and `_build` refuses
        # what would be left out; the model is loaded again at first use.
        self._build("cpu")

    @classmethod
    def from_name(cls, name: str, **kwargs: Any) -> "HFEncoder":
        """`hf:REPO_OR_DIR[#POOLING]` -> encoder (a folder whose own name holds '#' still works)."""
        body = name[len(HF_PREFIX):] if name.startswith(HF_PREFIX) else ""
        source, hash_, pooling = body.rpartition("#")
        if not hash_ or (pooling not in POOLINGS and os.path.isdir(os.path.expanduser(body))):
            source, pooling = body, ""
        if not source:
            raise EncoderError(f"Expected a Hugging Face encoder name as {HF_FORM}, got {name!r}.")
        return cls(source, pooling or None, **kwargs)

    # --- construction helpers ----------------------------------------------------------
    @staticmethod
    def _resolve(source: str, name: str, cache_dir: str | None) -> str:
        folder = os.path.expanduser(source)
        if os.path.isdir(folder):
            if not_a_file(os.path.join(folder, "config.json")) is not None:
                raise EncoderError(f"Expected a Hugging Face model folder with config.json, got {source!r} (no "
                                   "config.json in it).")
            return os.path.abspath(folder)
        if not looks_like_repo_id(source):
            raise EncoderError(f"Expected {name!r} to name a model folder or a repo id (org/name) in the Hugging "
                               f"Face cache, got {source!r} (not found).")
        snapshot = hub_snapshot(source, cache_dir)
        if snapshot is None or not os.path.isfile(os.path.join(snapshot, "config.json")):
            raise WeightsUnavailableError(
                f"Hugging Face model {source} is not in the cache {hf_cache_dir(cache_dir)} (offline, nothing "
                f"downloads); `hf download {source}` on a machine online, then copy its hub cache here, or pass "
                "the folder: hf:/path/to/model")
        return snapshot

    @staticmethod
    def _model_class(transformers: Any, config: dict[str, Any], name: str) -> str:
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

        model_type = config.get("model_type")
        vision = config.get("vision_config")
        key = (vision.get("model_type") or f"{model_type}_vision_model") if isinstance(vision, dict) else model_type
        cls_name = MODEL_MAPPING_NAMES.get(str(key))
        cls = getattr(transformers, cls_name, None) if cls_name else None
        if cls is None:
            raise EncoderError(f"Expected {name!r} to be a model type transformers {transformers.__version__} knows "
                               f"(no custom code is run), got model_type {model_type!r}.")
        if getattr(cls, "main_input_name", None) != "pixel_values":
            raise EncoderError(f"Expected {name!r} to be a vision model (input pixel_values), got {cls_name} whose "
                               f"input is {getattr(cls, 'main_input_name', '?')}.")
        return str(cls_name)

    def _skeleton_outputs(self) -> Any:
        """The model's outputs on a (1, 3, H, W) input, from a model on the meta device (no memory,
        no initialization), or on the CPU where an op has no meta kernel."""
        try:
            return self._run_skeleton("meta")
        except Exception:  # noqa: BLE001 - retried on the CPU, which reports
            pass
        try:
            return self._run_skeleton("cpu")
        except Exception as e:  # noqa: BLE001 - any failure: the model cannot take this input
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            h, w = self._preprocessing.size
            raise EncoderError(f"Cannot run {self.model_class} of {self.name!r} on a 3x{h}x{w} image: {first}.") from None

    def _run_skeleton(self, device: str) -> Any:
        import torch
        import transformers

        with torch.device(device), torch.no_grad(), _quiet_transformers():
            model = getattr(transformers, self.model_class)(self._vision_config).eval()
            return model(pixel_values=torch.zeros(1, 3, *self._preprocessing.size))

    def _grid(self) -> int:
        """Patch tokens of a preprocessed image: (H/p)·(W/p), 0 without a patch size."""
        p = getattr(self._vision_config, "patch_size", None)
        if not p:
            return 0
        ph, pw = (p, p) if isinstance(p, int) else (int(p[0]), int(p[1]))
        h, w = self._preprocessing.size
        return (h // ph) * (w // pw)

    # --- description -------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    def weights_available(self) -> bool:
        return all(os.path.isfile(p) for p in self.weights)

    def weights_source(self) -> str:
        return self.folder

    def _fingerprint_parts(self) -> dict[str, Any]:
        return {"model_class": self.model_class, "model_type": self.model_type, "config_sha256": self.config_sha256,
                "weights_sha256": self.weights_sha256, "pooling": self.pooling}

    # --- running -----------------------------------------------------------------------
    def _build(self, device: str) -> Any:
        import transformers

        cls = getattr(transformers, self.model_class)
        try:  # mismatched shapes come back in `info` (named below) rather than as a multi-line error
            with _quiet_transformers():
                model, info = cls.from_pretrained(self.folder, local_files_only=True, output_loading_info=True,
                                                  ignore_mismatched_sizes=True)
        except (OSError, RuntimeError, ValueError) as e:
            raise EncoderError(f"Expected {self.folder} to hold {self.model_class} weights, but transformers "
                               f"refused them: {str(e).strip().splitlines()[0]}") from None
        unused = () if self.pooling == "pooler" else ("pooler.",)
        missing = sorted(k for k in info.get("missing_keys", ()) if not k.startswith(unused))
        mismatched = sorted(str(k[0] if isinstance(k, (tuple, list)) else k) for k in info.get("mismatched_keys", ()))
        if missing or mismatched:
            parts = [f"{len(v)} {what} (first: {', '.join(v[:2])})" for what, v in
                     (("missing keys", missing), ("keys of another shape", mismatched),
                      ("unexpected keys", sorted(info.get("unexpected_keys", ())))) if v]
            raise EncoderError(f"Expected {self.folder} to hold {self.model_class} weights, got {'; '.join(parts)}.")
        return model.float().eval().to(device)

    def _load(self, device: str) -> Any:
        for path in self.weights:
            if file_sha256(path) != self.weights_sha256[os.path.basename(path)]:
                raise EncoderError(f"Hugging Face weights {path} changed since the encoder was created; create it again.")
            check_weights_only(path, f"weights for {self.name}")
        model = self._build(device)
        log.debug("loaded %s from %s (pooling %s)", self.model_class, self.folder, self.pooling)
        return model

    def _forward(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        return pool(model(pixel_values=batch), self.pooling, self._grid(), self.name)


def default_pooling(model_type: str, outputs: Any) -> str:
    """`cls` for the model types in CLS_MODEL_TYPES, else `pooler` when the model returns a
    pooler output, else `mean`."""
    if model_type in CLS_MODEL_TYPES:
        return "cls"
    return "pooler" if getattr(outputs, "pooler_output", None) is not None else "mean"


def pool(outputs: Any, pooling: str, grid: int, name: str) -> "torch.Tensor":
    """A model's outputs -> (N, D) features (module docstring).

    Args:
        outputs: the model's output (`last_hidden_state` (N, T, D) or (N, C, H, W); optional
            `pooler_output` (N, D) or (N, C, 1, 1)).
        pooling: "cls", "pooler" or "mean".
        grid: patch tokens per image, (H/p)·(W/p); the mean takes the last `grid` tokens.
        name: the encoder's name, for messages.

    Raises:
        EncoderError: a pooling the outputs do not allow (no pooler output; `cls` on a feature map).
    """
    if pooling == "pooler":
        out = getattr(outputs, "pooler_output", None)
        if out is None:
            raise EncoderError(f"Expected {name!r} to return a pooler_output for '#pooler', got none; use #cls or #mean.")
        return out.flatten(1)
    hidden = outputs.last_hidden_state
    if hidden.ndim == 4:  # a feature map (N, C, H, W)
        if pooling == "cls":
            raise EncoderError(f"Expected a token sequence for '#cls' in {name!r}, got a feature map; use #mean or #pooler.")
        return hidden.mean(dim=(2, 3))
    if pooling == "cls":
        return hidden[:, 0]
    tokens = hidden[:, -grid:] if 0 < grid <= hidden.shape[1] else hidden
    return tokens.mean(dim=1)


def _pair(value: Any, what: str, name: str) -> tuple[int, int] | int:
    """A processor size entry: an int, or (height, width) from a dict; `shortest_edge` stays an int."""
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        if set(value) >= {"height", "width"}:
            return int(value["height"]), int(value["width"])
        if set(value) == {"shortest_edge"}:
            return int(value["shortest_edge"])
    raise EncoderError(f"Expected {what} of {name!r} as shortest_edge or height/width, got {value!r}.")


def _to_preprocessing(pp: dict[str, Any], name: str) -> Preprocessing:
    """preprocessor_config.json -> `Preprocessing` (module docstring)."""
    resample = pp.get("resample", 3)
    if resample not in _RESAMPLE:
        raise EncoderError(f"Expected resample in {sorted(_RESAMPLE)} (nearest, bilinear, bicubic) for {name!r}, "
                           f"got {resample!r}.")
    interpolation = _RESAMPLE[resample]
    scale = 1.0 / float(pp.get("rescale_factor", 1 / 255)) if pp.get("do_rescale", True) else 1.0
    scale = round(scale, 6)
    if pp.get("do_normalize", True):
        if "image_mean" not in pp or "image_std" not in pp:
            raise EncoderError(f"Expected image_mean and image_std in the preprocessor config of {name!r}, got none.")
        mean = tuple(float(v) for v in pp["image_mean"])
        std = tuple(float(v) for v in pp["image_std"])
    else:
        mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)
    kw: dict[str, Any] = dict(interpolation=interpolation, mean=mean, std=std, input_scale=scale)
    if not pp.get("do_resize", True) or "size" not in pp:
        raise EncoderError(f"Expected a resize to a fixed size in the preprocessor config of {name!r}, got "
                           f"do_resize={pp.get('do_resize')!r}, size={pp.get('size')!r}.")
    crop = pp.get("do_center_crop", False)
    size = _pair(pp["size"], "size", name)
    processor = str(pp.get("image_processor_type") or pp.get("feature_extractor_type") or "")
    if processor.startswith("ConvNext") and "crop_pct" in pp:
        s = size if isinstance(size, int) else size[0]
        if s < 384:  # shortest side to int(s / crop_pct), then a centre crop of s
            return Preprocessing(size=(s, s), resize_mode="shortest", crop_pct=float(pp["crop_pct"]), **kw)
        return Preprocessing(size=(s, s), resize_mode="squash", crop_pct=1.0, **kw)
    if isinstance(size, int) and not crop:  # an int size without a crop is a square
        size = (size, size)
    if isinstance(size, tuple):
        crop_to = _pair(pp.get("crop_size", size), "crop_size", name) if crop else size
        crop_to = (crop_to, crop_to) if isinstance(crop_to, int) else crop_to
        if crop_to != size:
            raise EncoderError(f"Expected a resize to height/width without a smaller crop for {name!r}, got size "
                               f"{size} then crop {crop_to}, which the engine's preprocessing cannot express.")
        return Preprocessing(size=size, resize_mode="squash", crop_pct=1.0, **kw)
    if not crop:
        raise EncoderError(f"Expected a centre crop after the shortest-edge resize of {name!r} (a fixed input "
                           "size), got none.")
    crop_to = _pair(pp.get("crop_size"), "crop_size", name)
    ch, cw = (crop_to, crop_to) if isinstance(crop_to, int) else crop_to
    if ch != cw:
        raise EncoderError(f"Expected a square centre crop after the shortest-edge resize of {name!r}, got "
                           f"{ch}x{cw}, which the engine's preprocessing cannot express.")
    return Preprocessing(size=(ch, ch), resize_mode="shortest", crop_pct=crop_pct_for(ch, max(size, ch)), **kw)


register_prefix(HF_PREFIX, HFEncoder.from_name, HF_FORM)
