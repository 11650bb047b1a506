"""The `Encoder` base class, its description record, and helpers every adapter shares.

An encoder is cheap to construct: it knows its name, width, preprocessing and where its
weights are, but loads the model only on the first `encode` (or an explicit `load()`), so
listing encoders and checking the embedding cache never pays for a model. `torch` is imported
lazily, inside methods.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Sequence

import numpy as np

from perception_gap.encoders.errors import EncoderError
from perception_gap.encoders.preprocessing import Preprocessing, preprocess_images

if TYPE_CHECKING:  # pragma: no cover
    import torch

FAMILIES = ("clip", "imagenet", "pixel")
DEVICES = ("cpu", "cuda", "auto")
# fp32: the reference. bf16 / fp16: torch autocast around the forward (outputs cast back to
# float32); fp16 on CUDA only (CPU fp16 kernels are few and slow). Tolerances against fp32 are
# stated and tested in tests/test_gpu.py.
PRECISIONS = ("fp32", "fp16", "bf16")

_HASH_CACHE: dict[tuple[str, int, int], str] = {}
_HASH_LOCK = threading.Lock()


def not_a_file(path: str | os.PathLike[str]) -> str | None:
    """Why `path` is not a regular file, in words for an error message ("not found", "is a FIFO
    (named pipe), not a regular file", ...); None when it is one. The encoders' own copy of
    perception_gap.ingest.frames.not_a_file, in the same words (encoders import nothing of the rest
    of the package)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "not found"
    except OSError as e:
        return f"cannot look at it: {e.strerror or e}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return f"is {next((k for test, k in kinds if test(mode)), 'a special file')}, not a regular file"


def output_problem(name: str, vectors: Any, n: int, dim: int) -> str | None:
    """Why an encoder's output for a batch of `n` frames cannot be stored, as a one-line message
    naming which check failed (the shape, or NaN / infinite values and in how many frames); None
    when it is an (n, dim) array of finite numbers."""
    shape = tuple(getattr(vectors, "shape", ()))
    if shape != (n, dim):
        return (f"Encoder {name!r} returned an array of shape {shape} for a batch of {n} frames, expected "
                f"{(n, dim)}; nothing of it was stored.")
    v = np.asarray(vectors)
    n_nan, n_inf = int(np.isnan(v).sum()), int(np.isinf(v).sum())
    if not n_nan and not n_inf:
        return None
    frames = int((~np.isfinite(v)).any(axis=1).sum())
    what = " and ".join(s for s in (f"{n_nan} NaN" if n_nan else "", f"{n_inf} infinite" if n_inf else "") if s)
    return (f"Encoder {name!r} returned {what} value(s) in {frames} of the {n} vectors of a batch (shape {shape} "
            f"as expected); nothing of it was stored.")


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file's bytes, computed once per (path, size, mtime) per process."""
    real = os.path.realpath(path)
    st = os.stat(real)
    key = (real, st.st_size, st.st_mtime_ns)
    with _HASH_LOCK:
        hit = _HASH_CACHE.get(key)
    if hit is not None:
        return hit
    h = hashlib.sha256()
    with open(real, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    with _HASH_LOCK:
        _HASH_CACHE[key] = digest
    return digest


def make_fingerprint(parts: dict[str, Any]) -> str:
    """Stable 32-hex-digit hash of a JSON-able description (keys sorted)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(blob.encode("utf-8"), digest_size=16).hexdigest()


def module_installed(module: str) -> bool:
    """Whether `module` can be imported here (looked up, not imported: cheap)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def resolve_device(device: str) -> str:
    """"cpu" | "cuda" | "auto" -> a torch device string; "auto" takes CUDA when present."""
    if device not in DEVICES:
        raise EncoderError(f"Expected `device` in {DEVICES}, got {device!r}.")
    if device == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise EncoderError("Expected a CUDA device for `device='cuda'`, but torch sees none.")
    return "cpu"


def check_precision(precision: str, device: str) -> None:
    """Refuse a precision this (resolved) device cannot run.

    Raises:
        EncoderError: unknown precision, fp16 on the CPU, or bf16 on a GPU without it.
    """
    if precision not in PRECISIONS:
        raise EncoderError(f"Expected `precision` in {PRECISIONS}, got {precision!r}.")
    if precision == "fp16" and device == "cpu":
        raise EncoderError("Expected `precision` fp32 or bf16 on the CPU, got 'fp16' (fp16 autocast needs CUDA).")
    if precision == "bf16" and device == "cuda":
        import torch

        if not torch.cuda.is_bf16_supported():
            raise EncoderError("Expected `precision` fp32 or fp16 on this GPU, got 'bf16' (it has no bfloat16).")


@dataclass(frozen=True)
class EncoderInfo:
    """What `perception-gap encoders` shows about one encoder.

    Attributes:
        name: the name it is requested by.
        family: "clip" | "imagenet" | "pixel" (CLIP-calibrated thresholds apply to "clip" only).
        dim: embedding width.
        preprocessing: what the weights expect.
        weights_available: whether the weights can be loaded here without a download.
        weights: where the weights come from (a file path, or a short note).
    """

    name: str
    family: str
    dim: int
    preprocessing: Preprocessing
    weights_available: bool
    weights: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "dim": self.dim, "preprocessing": self.preprocessing.to_dict(),
                "weights_available": self.weights_available, "weights": self.weights}


class Encoder(ABC):
    """An image encoder: uint8 RGB images -> float32 embeddings of width `dim`.

    Subclasses set `family` and `adapter_version` (bump it whenever a change alters the
    embeddings, so cached vectors are recomputed) and implement `dim`, `preprocessing`,
    `weights_available`, `_fingerprint_parts` and `_load` / `_forward`.

    Args:
        name: the name the encoder is requested by.
        device: "cpu", "cuda" or "auto" (CUDA when available).
        precision: "fp32" (default), "fp16" (CUDA only) or "bf16": the forward runs under
            torch autocast at that precision; part of the fingerprint unless fp32.
    """

    family: ClassVar[str] = ""
    adapter_version: ClassVar[str] = "1"
    # torch intra-op threads the embed stage gives this encoder on the CPU (None: torch's own
    # setting). An encoder whose model costs little next to decoding (the pixel baseline) runs
    # on one, and the stage's decode threads keep the cores.
    cpu_threads: ClassVar[int | None] = None
    # the modules running the model needs (top-level names): an encoder whose modules are missing
    # is left out of the defaults, and asking for it names the optional install that brings them
    requires: ClassVar[tuple[str, ...]] = ("torch",)

    def __init__(self, name: str, *, device: str = "cpu", precision: str = "fp32") -> None:
        if device not in DEVICES:
            raise EncoderError(f"Expected `device` in {DEVICES}, got {device!r}.")
        if precision not in PRECISIONS:
            raise EncoderError(f"Expected `precision` in {PRECISIONS}, got {precision!r}.")
        self.name = name
        self.device_request = device
        self.precision = precision
        self._model: Any = None
        self._device: str | None = None
        self._fingerprint: str | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim}, family={self.family!r})"

    # --- description -------------------------------------------------------------------
    @property
    @abstractmethod
    def dim(self) -> int:
        """Embedding width."""

    @property
    @abstractmethod
    def preprocessing(self) -> Preprocessing:
        """What the weights expect (input size, resize, crop, mean/std, value scale)."""

    @abstractmethod
    def weights_available(self) -> bool:
        """Whether the weights can be loaded here without downloading; cheap, loads nothing."""

    def weights_source(self) -> str:
        """Where the weights come from (a path, or a short note); for listings."""
        return ""

    def missing_modules(self) -> list[str]:
        """The modules of `requires` that are not installed here (empty when it can run)."""
        return [m for m in self.requires if not module_installed(m)]

    @abstractmethod
    def _fingerprint_parts(self) -> dict[str, Any]:
        """Architecture and weights identity (e.g. the weights file's SHA-256)."""

    @property
    def fingerprint(self) -> str:
        """Hex hash of weights bytes + preprocessing + architecture + adapter version.

        Computed once per instance (the weights file is hashed once per process); any change
        of weights, preprocessing or adapter gives a new fingerprint, so cached embeddings
        keyed by it are recomputed. A reduced precision is part of it, so an fp16 or bf16
        vector is never served for an fp32 request (fp32 adds nothing: caches made before
        precisions existed stay valid).
        """
        if self._fingerprint is None:
            parts = dict(self._fingerprint_parts())
            if self.precision != "fp32":
                parts["precision"] = self.precision
            parts.update(
                adapter=type(self).__name__,
                adapter_version=self.adapter_version,
                family=self.family,
                dim=self.dim,
                preprocessing=self.preprocessing.to_dict(),
            )
            self._fingerprint = make_fingerprint(parts)
        return self._fingerprint

    def info(self) -> EncoderInfo:
        """A description record (cheap: loads no model)."""
        return EncoderInfo(
            name=self.name,
            family=self.family,
            dim=self.dim,
            preprocessing=self.preprocessing,
            weights_available=self.weights_available(),
            weights=self.weights_source(),
        )

    # --- running -----------------------------------------------------------------------
    @property
    def device(self) -> str:
        """The torch device the model runs on ("cpu" or "cuda"), resolved on first use."""
        if self._device is None:
            device = resolve_device(self.device_request)
            check_precision(self.precision, device)
            self._device = device
        return self._device

    @abstractmethod
    def _load(self, device: str) -> Any:
        """Build the model with its weights, in eval mode, on `device`; return it."""

    @abstractmethod
    def _forward(self, model: Any, batch: "torch.Tensor") -> "torch.Tensor":
        """(N, 3, H, W) float32 on the model's device -> (N, dim) embeddings."""

    def load(self) -> "Encoder":
        """Load the model now (otherwise the first `encode` does); returns self."""
        with self._lock:
            if self._model is None:
                self._model = self._load(self.device)
        return self

    def preprocess(self, images: Sequence[Any]) -> "torch.Tensor":
        """Images -> the model's input batch, as `preprocessing` describes.

        Args:
            images: N HxWx3 uint8 RGB numpy arrays (any size) or RGB PIL images.

        Returns:
            float32 tensor (N, 3, H, W), H, W = `preprocessing.size`, on the CPU.
        """
        return preprocess_images(images, self.preprocessing)

    def stage(self, batch: torch.Tensor) -> torch.Tensor:
        """A preprocessed batch made ready for a fast copy: page-locked when the model is on CUDA
        (so `encode` copies it asynchronously), unchanged on the CPU. Call it off the model's
        thread (the embed stage's loader does)."""
        return batch.pin_memory() if self.device == "cuda" else batch

    def encode(self, batch: "torch.Tensor") -> np.ndarray:
        """Embed a preprocessed batch.

        Args:
            batch: float32 tensor (N, 3, H, W) as returned by `preprocess`.

        Returns:
            float32 array (N, dim); deterministic for a given input on a given device.
        """
        import torch

        self._check_batch(batch)
        self.load()
        with torch.inference_mode(), self.autocast():
            x = batch.to(self.device, dtype=torch.float32, non_blocking=batch.is_pinned())
            out = self._forward(self._model, x)
        return out.float().cpu().numpy().astype(np.float32, copy=False)

    @contextlib.contextmanager
    def stage_threads(self) -> Iterator[None]:
        """The embed stage's model work on `cpu_threads` torch threads on the CPU (process-wide,
        restored after); unchanged when the encoder sets none or runs on CUDA."""
        import torch

        threads = torch.get_num_threads()
        if self.device == "cpu" and self.cpu_threads:
            torch.set_num_threads(self.cpu_threads)
        try:
            yield
        finally:
            torch.set_num_threads(threads)

    def autocast(self) -> Any:
        """The autocast context of `precision` on the model's device (a no-op for fp32)."""
        import contextlib

        import torch

        if self.precision == "fp32":
            return contextlib.nullcontext()
        dtype = torch.float16 if self.precision == "fp16" else torch.bfloat16
        return torch.autocast(device_type=self.device, dtype=dtype)

    def _check_batch(self, batch: Any) -> None:
        import torch

        expected = (3, *self.preprocessing.size)
        if not isinstance(batch, torch.Tensor) or batch.ndim != 4 or tuple(batch.shape[1:]) != expected:
            got = tuple(batch.shape) if hasattr(batch, "shape") else type(batch).__name__
            raise EncoderError(
                f"Expected `batch` as a tensor of shape (N, {', '.join(map(str, expected))}), got {got}."
            )

    def embed(self, images: Sequence[Any]) -> np.ndarray:
        """`encode(preprocess(images))`: N images -> float32 (N, dim)."""
        return self.encode(self.preprocess(images))


class LocalWeightsMixin:
    """`preprocessing`, `weights_available` and `weights_source` of an encoder whose weights are
    one local file: `__init__` sets `self.weights` (the path) and `self._preprocessing`. Listed
    before `Encoder` among the bases, so these fill its abstract methods."""

    weights: str
    _preprocessing: Preprocessing

    @property
    def preprocessing(self) -> Preprocessing:
        return self._preprocessing

    def weights_available(self) -> bool:
        return os.path.isfile(self.weights)

    def weights_source(self) -> str:
        return self.weights
