"""The threads a video decode may use in this process: the decoder's, and swscale's (one).

A statistics worker process sets its decoders' share of the cores (`set_decode_threads`): with
every core already decoding another video, FFmpeg's frame threads only add their hand-over
(~0.3 ms of CPU per 640x480 H.264 frame, 15% of its decode). Elsewhere (in-process decoding,
the embedding stage, the Ray engine) FFmpeg chooses.
"""

from __future__ import annotations

from typing import Any

_DECODE_THREADS: int | None = None  # None: FFmpeg's choice (frame threads, one per core)


def set_decode_threads(n: int | None) -> None:
    """Let each video decoder of this process use n threads (1: decode on the calling thread); None: FFmpeg's choice."""
    global _DECODE_THREADS
    _DECODE_THREADS = None if n is None else max(1, int(n))


def configure_decoder(stream: Any) -> None:
    """Set a PyAV video stream's decoder threads to this process's choice, before decoding."""
    if _DECODE_THREADS == 1:
        stream.thread_type = "NONE"
        return
    stream.thread_type = "AUTO"  # frame threads: sequential decode, several cores
    if _DECODE_THREADS:
        stream.codec_context.thread_count = _DECODE_THREADS


def rgb24_options(av: Any) -> dict[str, int]:
    """`to_ndarray` options for a single-threaded swscale: PyAV 17 added threaded reformatting and
    its `threads` argument (a pool per call by default); earlier releases convert on the calling
    thread and take no such argument."""
    try:
        major = int(str(av.__version__).split(".")[0])
    except ValueError:
        major = 0
    return {"threads": 1} if major >= 17 else {}
