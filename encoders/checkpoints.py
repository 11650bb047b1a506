"""Safe checkpoint checks: a checkpoint is loaded only if it is plain tensors.

A `.pt`/`.pth`/`.bin` file is a pickle, and unpickling can run arbitrary code. Before any
library (open_clip) reads a checkpoint, `check_weights_only` loads it with
`torch.load(..., weights_only=True)` (memory-mapped for zip-format files, so tensor data is
not read) and refuses it if that fails; `.safetensors` files are safe by construction and
only have their header checked. open_clip then loads the same file with `weights_only=True`
too; the pre-check matters because open_clip's `load_state_dict` retries an unrestricted
`torch.load` when the restricted one raises `TypeError`.
"""

from __future__ import annotations

import os
import re
import zipfile

from perception_gap.encoders.errors import EncoderError, UnsafeCheckpointError

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors")


def check_weights_only(path: str) -> None:
    """Raise unless `path` is a checkpoint of plain tensors (no code runs while checking).

    Raises:
        UnsafeCheckpointError: the pickle references code (a class or function outside
            torch's weights-only allow-list).
        EncoderError: missing, unsupported suffix, or unreadable file.
    """
    if not os.path.isfile(path):
        raise EncoderError(f"Expected a checkpoint file, got {path!r} (not a file).")
    if not path.endswith(CHECKPOINT_SUFFIXES):
        raise EncoderError(
            f"Expected a checkpoint ending in {', '.join(CHECKPOINT_SUFFIXES)}, got {path!r}."
        )
    if path.endswith(".safetensors"):
        from safetensors import safe_open

        try:
            with safe_open(path, framework="pt") as f:
                f.keys()
        except Exception as e:  # noqa: BLE001 - any parse failure means unreadable
            raise EncoderError(f"cannot read safetensors checkpoint {path}: {_first_line(e)}") from None
        return
    import torch

    try:
        torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except Exception as e:  # noqa: BLE001 - every failure is a refusal; classify the message
        msg = str(e)
        if "weights_only" in msg or "Weights only load failed" in msg or "Unsupported global" in msg:
            m = re.search(r"Unsupported (?:global|operand)[^\n]*?(GLOBAL [\w.]+|\d+)?", msg)
            what = f" ({m.group(0).strip()})" if m else ""
            raise UnsafeCheckpointError(
                f"refusing checkpoint {path}: it is not plain weights, unpickling it would run "
                f"code{what}; re-save it as a state_dict of tensors (torch.save(model.state_dict(), "
                "PATH)) or as .safetensors"
            ) from None
        raise EncoderError(f"cannot read checkpoint {path}: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
