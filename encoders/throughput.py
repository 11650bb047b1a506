"""Bare model-forward throughput: the limit the embed stage is benchmarked against.

The design benchmarks each stage against its own limit measured in the same run; for
embedding that limit is the model forward on pre-decoded, preprocessed tensors (no decode,
no resize, no database).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from perception_gap.encoders.base import Encoder
from perception_gap.encoders.errors import EncoderError


@dataclass(frozen=True)
class ForwardThroughput:
    """Forward throughput of one encoder.

    Attributes:
        encoder: encoder name.
        device: "cpu" or "cuda".
        threads: torch intra-op threads during the measurement.
        batch_size: images per forward.
        images_per_s: images / second, best of the timed batches (higher is faster).
        median_images_per_s: images / second, median of the timed batches.
    """

    encoder: str
    device: str
    threads: int
    batch_size: int
    images_per_s: float
    median_images_per_s: float


def measure_forward(
    encoder: Encoder, *, batch_size: int = 16, n_batches: int = 5, warmup: int = 1, seed: int = 0
) -> ForwardThroughput:
    """Time `encoder.encode` on random pre-made batches of the encoder's input size.

    Args:
        encoder: the encoder (its model is loaded before timing).
        batch_size: images per forward.
        n_batches: timed forwards.
        warmup: untimed forwards first.
        seed: seed of the random input tensor.

    Returns:
        The throughput (threads as currently set by `torch.set_num_threads`).
    """
    import torch

    if batch_size < 1 or n_batches < 1 or warmup < 0:
        raise EncoderError(
            f"Expected batch_size >= 1, n_batches >= 1, warmup >= 0, got {batch_size}, {n_batches}, {warmup}."
        )
    gen = torch.Generator().manual_seed(seed)
    batch = torch.randn((batch_size, 3, *encoder.preprocessing.size), generator=gen)
    encoder.load()
    for _ in range(warmup):
        encoder.encode(batch)
    rates = []
    for _ in range(n_batches):
        t0 = time.perf_counter()
        encoder.encode(batch)
        rates.append(batch_size / (time.perf_counter() - t0))
    rates.sort()
    return ForwardThroughput(
        encoder=encoder.name,
        device=encoder.device,
        threads=torch.get_num_threads(),
        batch_size=batch_size,
        images_per_s=rates[-1],
        median_images_per_s=rates[len(rates) // 2],
    )
