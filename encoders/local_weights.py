"""Local weight files for the generic encoder families (`timm:`, `hf:`, `torchvision:`).

What the three adapters share, and nothing else:

- finding a file in the local Hugging Face hub cache without the network (`hub_snapshot`,
  `hub_file`): `HF_HUB_CACHE/models--ORG--NAME/snapshots/<commit>/`, the commit read from
  `refs/main`, or the only snapshot when a copied cache lacks its refs;
- checking a user's `@PATH` (`weights_path`) and reading a checkpoint as plain tensors
  (`read_state_dict`, `tensor_shapes`): `.safetensors` by the safetensors library, `.pth`/`.bin`/`.pt`
  by `checkpoints.load_weights_only` (declared sizes checked by `archives`, then
  `torch.load(weights_only=True)`), so a pickle carrying code is refused before any library sees it;
- one line naming the first missing, unexpected or mis-shaped keys (`key_mismatch`);
- the `crop_pct` that reproduces "resize the shortest side to R, centre-crop C" (`crop_pct_for`).
"""

from __future__ import annotations

import math
import os
import re
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from perception_gap.encoders.base import not_a_file
from perception_gap.encoders.checkpoints import CHECKPOINT_SUFFIXES, check_weights_only, load_weights_only
from perception_gap.encoders.errors import EncoderError
from perception_gap.encoders.open_clip_adapter import hf_cache_dir

if TYPE_CHECKING:  # pragma: no cover
    import torch

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# The containers training scripts wrap a state dict in (timm's train.py, torchvision's references).
_WRAPPERS = ("state_dict", "model")


def looks_like_repo_id(text: str) -> bool:
    """Whether `text` has the form of a Hugging Face repo id (`org/name`), not of a path."""
    return bool(_REPO_ID.match(text)) and not text.startswith((".", "~"))


def hub_snapshot(repo_id: str, cache_dir: str | None = None) -> str | None:
    """The folder of `repo_id`'s cached snapshot (the `main` ref, or the only snapshot when the
    refs were not copied); None when the repo is not in the cache. Never touches the network."""
    repo = os.path.join(hf_cache_dir(cache_dir), "models--" + repo_id.replace("/", "--"))
    snapshots = os.path.join(repo, "snapshots")
    try:
        with open(os.path.join(repo, "refs", "main"), encoding="utf-8") as f:
            commit = f.read().strip()
        if commit and os.path.isdir(os.path.join(snapshots, commit)):
            return os.path.join(snapshots, commit)
    except OSError:
        pass
    try:
        found = [d for d in os.listdir(snapshots) if os.path.isdir(os.path.join(snapshots, d))]
    except OSError:
        return None
    return os.path.join(snapshots, found[0]) if len(found) == 1 else None


def hub_file(repo_id: str, filenames: Iterable[str], cache_dir: str | None = None) -> str | None:
    """The first of `filenames` present in `repo_id`'s cached snapshot, or None."""
    folder = hub_snapshot(repo_id, cache_dir)
    if folder is None:
        return None
    for name in filenames:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def weights_path(text: str, what: str) -> str:
    """A user's weights file argument, checked: exists, is a regular file, has a checkpoint suffix.

    Args:
        text: the path as written (`~` expanded).
        what: the name it came from, for messages (`timm:resnet50@PATH`).

    Returns:
        The absolute path.

    Raises:
        EncoderError: missing, not a regular file, or another suffix.
    """
    path = os.path.abspath(os.path.expanduser(text))
    why = not_a_file(path)
    if why is not None:
        raise EncoderError(f"Expected the weights of {what} as a file, got {text!r} ({why}).")
    if not path.endswith(CHECKPOINT_SUFFIXES):
        raise EncoderError(f"Expected the weights of {what} as a file ending in {', '.join(CHECKPOINT_SUFFIXES)}, "
                           f"got {text!r}.")
    return path


def read_state_dict(path: str, what: str, *, mmap: bool = False) -> dict[str, "torch.Tensor"]:
    """A checkpoint's tensors, read without running code.

    A `.safetensors` file is read by safetensors; any other by `load_weights_only` (declared sizes
    checked, then a weights-only unpickle; memory-mapped when `mmap` and possible). A dict whose
    `state_dict` or `model` entry is the tensors is unwrapped, and a `module.` prefix on every key
    (a DataParallel save) is removed.

    Raises:
        UnsafeCheckpointError, ArchiveLimitError: refused as `checkpoints.check_weights_only` refuses.
        EncoderError: unreadable, or not a dict of tensors.
    """
    import torch

    if path.endswith(".safetensors"):
        check_weights_only(path, what)
        from safetensors.torch import load_file

        try:
            state: Any = load_file(path, device="cpu")
        except Exception as e:  # noqa: BLE001 - any failure here means an unreadable file
            raise EncoderError(f"cannot read {what} {path}: {_first_line(e)}") from None
    else:
        state = load_weights_only(path, what, mmap=mmap)

    def tensors(d: Any) -> bool:
        return isinstance(d, dict) and bool(d) and all(isinstance(v, torch.Tensor) for v in d.values())

    if not tensors(state) and isinstance(state, dict):
        state = next((state[k] for k in _WRAPPERS if tensors(state.get(k))), state)
    if not tensors(state):
        kind = f"a dict with keys {', '.join(map(str, list(state)[:4]))}" if isinstance(state, dict) else type(state).__name__
        raise EncoderError(f"Expected {what} {path!r} to hold a state dict of tensors, got {kind}.")
    if all(k.startswith("module.") for k in state):
        state = {k[len("module."):]: v for k, v in state.items()}
    return state


def tensor_shapes(path: str, what: str) -> dict[str, tuple[int, ...]]:
    """Key -> shape of a checkpoint's tensors, reading as little as possible: a safetensors header,
    or a memory-mapped weights-only load (uncompressed zip archives)."""
    if path.endswith(".safetensors"):
        check_weights_only(path, what)
        from safetensors import safe_open

        with safe_open(path, framework="pt") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        if all(k.startswith("module.") for k in shapes):
            shapes = {k[len("module."):]: v for k, v in shapes.items()}
        return shapes
    return {k: tuple(v.shape) for k, v in read_state_dict(path, what, mmap=True).items()}


def key_mismatch(file_shapes: Mapping[str, tuple[int, ...]], model_shapes: Mapping[str, tuple[int, ...]], *,
                 ignored: Iterable[str] = ()) -> str | None:
    """How a checkpoint's keys differ from a model's, in words; None when they match. BatchNorm's
    `num_batches_tracked` counters may be missing (older files lack them).

    Args:
        file_shapes: key -> shape in the file.
        model_shapes: key -> shape the model wants.
        ignored: key prefixes of the file that the model does not take (a classifier head).

    Returns:
        e.g. "12 missing keys (first: layer1.0.conv1.weight, layer1.0.bn1.weight); 3 unexpected keys
        (first: blocks.0.attn.qkv.weight)", or None.
    """
    skip = tuple(f"{p}." for p in ignored)
    present = {k: v for k, v in file_shapes.items() if not (skip and k.startswith(skip))}
    missing = [k for k in model_shapes if k not in present and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in present if k not in model_shapes]
    shapes = [k for k in model_shapes if k in present and tuple(present[k]) != tuple(model_shapes[k])]
    if not missing and not shapes and not unexpected:
        return None
    parts = [f"{len(v)} {what} (first: {', '.join(v[:2])})" for what, v in
             (("missing keys", missing), ("unexpected keys", unexpected)) if v]
    if shapes:
        k = shapes[0]
        parts.append(f"{len(shapes)} keys of another shape (first: {k} {tuple(present[k])} in the file, "
                     f"{tuple(model_shapes[k])} in the model)")
    return "; ".join(parts)


def crop_pct_for(crop: int, resize: int) -> float:
    """The `Preprocessing.crop_pct` for "shortest side to `resize`, centre crop `crop`": the
    largest fraction whose floor(crop / crop_pct) is exactly `resize` (a plain crop / resize may
    land one float step short and resize to resize - 1)."""
    if not 0 < crop <= resize:
        raise EncoderError(f"Expected a centre crop no larger than the resize, got crop {crop} from {resize}.")
    pct = crop / resize
    while math.floor(crop / pct) < resize:
        pct = math.nextafter(pct, 0.0)
    return pct


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
