"""Batch size from free accelerator memory (`--batch-size auto`).

On CUDA the model is loaded, one probe batch is run to measure the peak activation memory per
frame, and the batch is the largest that fits a fraction of the free memory, clamped. On the
CPU there is no memory wall worth probing (batches only amortize per-call overhead), so `auto`
is the default batch size.
"""

from __future__ import annotations

from dataclasses import dataclass

from perception_gap.encoders.base import Encoder
from perception_gap.encoders.errors import EncoderError

DEFAULT_BATCH = 32
MIN_BATCH, MAX_BATCH = 1, 512
HEADROOM = 0.6  # fraction of the free memory a batch may use: the allocator fragments, and
# the loader holds PREFETCH more batches in pinned host memory, not on the device
PROBE_FRAMES = 8


@dataclass(frozen=True)
class BatchChoice:
    """How `--batch-size auto` decided.

    Attributes:
        batch_size: frames per model call.
        device: "cpu" or "cuda".
        free_bytes: free device memory when chosen (0 on the CPU).
        per_frame_bytes: peak device memory one more frame costs, measured on a probe batch
            (0 on the CPU).
    """

    batch_size: int
    device: str
    free_bytes: int
    per_frame_bytes: int


def choose_batch_size(free_bytes: int, per_frame_bytes: int, *, headroom: float = HEADROOM,
                      lo: int = MIN_BATCH, hi: int = MAX_BATCH) -> int:
    """The largest batch whose activations fit `headroom` of the free memory, within [lo, hi].

    Args:
        free_bytes: free device memory, bytes (after the model is loaded).
        per_frame_bytes: peak memory of one frame's forward, bytes (> 0).
        headroom: fraction of `free_bytes` the batch may use, in (0, 1].
        lo, hi: bounds of the result (1 <= lo <= hi).

    Returns:
        floor(free_bytes * headroom / per_frame_bytes) clamped to [lo, hi]; `lo` when nothing fits.

    Raises:
        EncoderError: a non-positive per-frame cost, negative free memory, or bad bounds.
    """
    if per_frame_bytes <= 0 or free_bytes < 0:
        raise EncoderError(f"Expected `per_frame_bytes` > 0 and `free_bytes` >= 0, got {per_frame_bytes}, {free_bytes}.")
    if not 0 < headroom <= 1 or not 1 <= lo <= hi:
        raise EncoderError(f"Expected `headroom` in (0, 1] and 1 <= lo <= hi, got {headroom}, {lo}, {hi}.")
    return max(lo, min(hi, int(free_bytes * headroom) // per_frame_bytes))


def auto_batch_size(encoder: Encoder, *, default: int = DEFAULT_BATCH) -> BatchChoice:
    """`--batch-size auto` for a loaded-or-not encoder: probed on CUDA, `default` on the CPU.

    Args:
        encoder: the encoder (loaded here on CUDA if it is not yet).
        default: the batch size on the CPU.

    Returns:
        The choice, with the memory figures it was made from.
    """
    if encoder.device != "cuda":
        return BatchChoice(batch_size=default, device=encoder.device, free_bytes=0, per_frame_bytes=0)
    import torch

    encoder.load()
    probe = torch.zeros((PROBE_FRAMES, 3, *encoder.preprocessing.size))
    encoder.encode(probe)  # warm-up: cuDNN workspaces and lazy allocations are not per frame
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    encoder.encode(probe)
    per_frame = max(1, (torch.cuda.max_memory_allocated() - base) // PROBE_FRAMES)
    free, _ = torch.cuda.mem_get_info()
    return BatchChoice(batch_size=choose_batch_size(free, per_frame), device="cuda",
                       free_bytes=int(free), per_frame_bytes=int(per_frame))
