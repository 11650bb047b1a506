"""Safe checkpoint checks: a checkpoint is loaded only if it is plain tensors of a bounded size.

A `.pt`/`.pth`/`.bin` file is a pickle, and unpickling can run arbitrary code. Before any
library (open_clip) reads a checkpoint, `check_weights_only` first reads what the file declares
it unpacks to (`archives.check_declared_sizes`: a few megabytes may declare gigabytes), then loads
it with `torch.load(..., weights_only=True)` and refuses it if that fails. An uncompressed zip
archive is memory-mapped for that load, so tensor data is not read; a compressed one (zip
deflate, which a memory map cannot hold) or a legacy-format file is read, within the declared
limit. `.safetensors` files are safe by construction and only have their header checked. open_clip
then loads the same file with `weights_only=True` too; the pre-check matters because open_clip's
`load_state_dict` retries an unrestricted `torch.load` when the restricted one raises `TypeError`.
"""

from __future__ import annotations

import os
import re
import warnings
from typing import Any

from perception_gap.encoders.archives import check_declared_sizes
from perception_gap.encoders.errors import EncoderError, UnsafeCheckpointError

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".bin", ".safetensors")


def check_weights_only(path: str, what: str = "checkpoint") -> None:
    """Raise unless `path` is a checkpoint of plain tensors (no code runs while checking).

    Args:
        path: the checkpoint file.
        what: its role in messages ("checkpoint", "FID Inception weights").

    Raises:
        UnsafeCheckpointError: the pickle references code (a class or function outside
            torch's weights-only allow-list).
        ArchiveLimitError: it declares more data than its size allows (`archives.declared_limit`).
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
    load_weights_only(path, what, mmap=True)


def load_weights_only(path: str, what: str = "checkpoint", *, mmap: bool = False) -> Any:
    """`torch.load(path, weights_only=True)` on the CPU, once its declared sizes are checked.

    Args:
        path: a `torch.save` file (zip or legacy format).
        what: its role in messages.
        mmap: memory-map an uncompressed zip archive (tensor data stays on disk until used);
            compressed archives and legacy files are read whole either way.

    Raises:
        UnsafeCheckpointError, ArchiveLimitError, EncoderError: as `check_weights_only`.
    """
    import torch

    sizes = check_declared_sizes(path, what)
    try:
        with warnings.catch_warnings():  # torch warns about sparse invariants and TypedStorage as it loads
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True,
                              mmap=mmap and sizes.fmt == "zip" and not sizes.deflated)
    except Exception as e:  # noqa: BLE001 - every failure is a refusal; classify the message
        msg = str(e)
        if "Unsupported global" in msg or "Unsupported class" in msg:
            m = re.search(r"GLOBAL ([\w.]+)", msg)
            what_code = f" (it names {m.group(1)})" if m else ""
            raise UnsafeCheckpointError(
                f"refusing {what} {path}: it is not plain weights, unpickling it would run "
                f"code{what_code}; re-save it as a state_dict of tensors (torch.save(model.state_dict(), "
                "PATH)) or as .safetensors"
            ) from None
        if "weights_only" in msg or "Weights only load failed" in msg:
            raise UnsafeCheckpointError(
                f"refusing {what} {path}: the weights-only unpickler cannot read it ({_wo_reason(msg)}); "
                "re-save it as a state_dict of tensors (torch.save(model.state_dict(), PATH)) or as .safetensors"
            ) from None
        raise EncoderError(f"cannot read {what} {path}: {_first_line(e)}") from None


def _wo_reason(msg: str) -> str:
    """The weights-only unpickler's own reason, in words ("Unsupported operand 255" -> "byte 255 ...")."""
    m = re.search(r"WeightsUnpickler error:\s*([^\n]+)", msg)
    reason = m.group(1).strip().rstrip(".") if m else _first_line(Exception(msg))
    op = re.fullmatch(r"Unsupported operand (\d+)", reason)
    if op:
        code = int(op.group(1))
        return f"pickle opcode {chr(code)!r} (byte {code}) is not one it accepts"
    return reason


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
