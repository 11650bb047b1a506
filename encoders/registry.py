"""Name -> encoder factory registry.

`register_encoder(name)` decorates (or is called with) a factory: any callable taking keyword
arguments (`device=...`, adapter options) and returning an `Encoder`. Names of the form
`open_clip:ARCH:PRETRAINED` are not registered: `get_encoder` resolves them to the open_clip
adapter on demand.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

from encoders.base import Encoder
from encoders.errors import EncoderError

OPEN_CLIP_PREFIX = "open_clip:"

Factory = Callable[..., Encoder]
F = TypeVar("F", bound=Factory)

_REGISTRY: dict[str, Factory] = {}
_LOCK = threading.Lock()


def register_encoder(name: str, factory: F | None = None) -> Any:
    """Register `factory` under `name`; used as `@register_encoder(name)` or called directly.

    Raises:
        EncoderError: `name` is already registered, empty, or uses the `open_clip:` prefix.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise EncoderError(f"Expected `name` as a non-empty string without spaces around it, got {name!r}.")
    if name.startswith(OPEN_CLIP_PREFIX):
        raise EncoderError(f"Expected a name not starting with {OPEN_CLIP_PREFIX!r} (reserved), got {name!r}.")

    def deco(f: F) -> F:
        if not callable(f):
            raise EncoderError(f"Expected a callable factory for encoder {name!r}, got {type(f).__name__}.")
        with _LOCK:
            if name in _REGISTRY:
                raise EncoderError(f"Encoder {name!r} is already registered.")
            _REGISTRY[name] = f
        return f

    return deco if factory is None else deco(factory)


def list_encoders() -> list[str]:
    """Registered encoder names, sorted (open_clip:ARCH:PRETRAINED names are not listed)."""
    with _LOCK:
        return sorted(_REGISTRY)


def get_encoder(name: str, **kwargs: Any) -> Encoder:
    """Build the encoder called `name` (cheap: the model loads on first use).

    Args:
        name: a registered name (see `list_encoders()`) or `open_clip:ARCH:PRETRAINED`.
        **kwargs: passed to the factory, e.g. `device="auto"`.

    Raises:
        EncoderError: unknown name (the message lists the valid ones), bad arguments, or
            (`WeightsUnavailableError`) open_clip weights that are not available offline.
    """
    if not isinstance(name, str):
        raise EncoderError(f"Expected the encoder name as a string, got {type(name).__name__}.")
    with _LOCK:
        factory = _REGISTRY.get(name)
    if factory is not None:
        return factory(**kwargs)
    if name.startswith(OPEN_CLIP_PREFIX):
        from encoders.open_clip_adapter import OpenClipEncoder

        return OpenClipEncoder.from_name(name, **kwargs)
    valid = ", ".join(list_encoders())
    raise EncoderError(
        f"Unknown encoder {name!r}; expected one of: {valid}, or open_clip:ARCH:PRETRAINED."
    )
