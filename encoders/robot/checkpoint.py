"""Reading a robot encoder's released checkpoint: weights-only, size-checked, its keys mapped onto the
architecture and checked key for key and shape for shape.

The file is read by `checkpoints.load_weights_only` (its declared sizes checked first by
`archives.check_declared_sizes`, then `torch.load(weights_only=True)`, memory-mapped when it is an
uncompressed zip, so a check reads no tensor data). Beside tensors, the weights-only unpickler
is allowed one class, `argparse.Namespace`: MAE-style training checkpoints (MVP's, VC-1's) may
store their `args` next to `model`, and rebuilding a Namespace only sets attributes.

Then, as the authors' loader does: the state dict is taken from under its top-level key, the keys
their loader discards are dropped (R3M's language head, the MAE decoder), the wrapper prefix
(`module.convnet.`, `_model.`) is stripped, and what remains must be exactly the network's keys
with its shapes (BatchNorm's `num_batches_tracked` counters may be absent). Anything else is one
line naming the first keys that differ, or the architecture the file holds when it is another
variant of the same family.
"""

from __future__ import annotations

import argparse
from typing import Any

from perception_gap.encoders.checkpoints import load_weights_only
from perception_gap.encoders.errors import EncoderError
from perception_gap.encoders.robot import networks
from perception_gap.encoders.robot.releases import Release


def _shown(keys: list[str], n: int = 2) -> str:
    return ", ".join(repr(k) for k in keys[:n]) + (f" and {len(keys) - n} more" if len(keys) > n else "")


def read_release(path: str, release: Release, variant: str) -> dict[str, Any]:
    """The state dict of `variant` in a file of `release`'s layout, keys stripped of the wrapper
    prefix and without the keys the authors' loader drops; not yet checked against the network.

    Raises:
        UnsafeCheckpointError, ArchiveLimitError: the file is not plain weights, or declares more
            than it may unpack to.
        EncoderError: unreadable, or not nested the way the release is.
    """
    import torch

    what = f"{release.title} weights"
    with torch.serialization.safe_globals([argparse.Namespace]):
        obj = load_weights_only(path, what, mmap=True)
    if not isinstance(obj, dict):
        raise EncoderError(f"Expected the {what} {path!r} to hold a dict, got {type(obj).__name__}.")
    top = [k for k in obj if not isinstance(obj[k], torch.Tensor)]
    if release.top_keys:
        key = next((k for k in release.top_keys if k in obj), None)
        if key is None or not isinstance(obj[key], dict):
            wanted = " or ".join(repr(k) for k in release.top_keys)
            raise EncoderError(f"Expected the {what} {path!r} to hold its state dict under {wanted} "
                               f"({release.file}), got top-level keys {_shown(sorted(map(str, obj)), 4) or 'none'}.")
        state = obj[key]
    elif top:
        raise EncoderError(f"Expected the {what} {path!r} to be a state dict of tensors ({release.file}), got "
                           f"top-level keys holding no tensor: {_shown(sorted(map(str, top)), 4)}.")
    else:
        state = obj
    start = release.keys_start(variant)
    out: dict[str, Any] = {}
    stray: list[str] = []
    for k, v in state.items():
        k = str(k)
        if k.startswith(release.dropped) or k.removeprefix(start).startswith(release.dropped):
            continue
        if not k.startswith(start) or not isinstance(v, torch.Tensor):
            stray.append(k)
            continue
        out[k[len(start):]] = v
    if stray:
        where = f"under {start!r}" if start else "of the network"
        raise EncoderError(f"Expected every key of the {what} {path!r} to be a tensor {where}, got "
                           f"{len(stray)} others (e.g. {_shown(sorted(stray))}).")
    return out


def check_against(state: dict[str, Any], model: Any, *, path: str, release: Release, variant: str) -> None:
    """Refuse `state` unless it is `model`'s state dict: the same keys (BatchNorm counters optional),
    the same shapes, floating point where the network is.

    Raises:
        EncoderError: another variant of the family (named, with the name to use), or another
            architecture (the first missing, unexpected or mis-shaped keys named).
    """
    wanted = release.variants[variant]
    want = {k: v for k, v in model.state_dict().items()}
    optional = {k for k in want if k.endswith("num_batches_tracked")}
    missing = sorted(set(want) - set(state) - optional)
    unexpected = sorted(set(state) - set(want))
    shapes = sorted(k for k in set(want) & set(state) if tuple(state[k].shape) != tuple(want[k].shape))
    name = f"{release.prefix}:{variant}"
    if missing or unexpected or shapes:
        found = networks.describe(state)
        if found is not None and not networks.same_architecture(found, wanted):
            other = next((v for v, a in release.variants.items() if networks.same_architecture(found, a)), None)
            use = f"; name it {release.prefix}:{other}@PATH" if other else ""
            raise EncoderError(f"Expected {name} weights ({wanted.label}) in {path!r}, got a {found.label} "
                               f"checkpoint{use}.")
        parts = [f"{len(v)} {what} (e.g. {_shown(v)})" for what, v in
                 (("missing keys", missing), ("unexpected keys", unexpected), ("keys of another shape", shapes)) if v]
        raise EncoderError(f"Expected {path!r} to hold the {release.title} {wanted.label} weights of {name} "
                           f"({release.file}), got {'; '.join(parts)}.")
    kinds = sorted(k for k in want if k in state and want[k].is_floating_point()
                   and (not state[k].is_floating_point() or state[k].layout != want[k].layout or state[k].is_quantized))
    if kinds:
        raise EncoderError(f"Expected {path!r} to hold dense floating-point weights for {name}, got {len(kinds)} "
                           f"of another kind (e.g. {kinds[0]}: {state[kinds[0]].dtype}).")
