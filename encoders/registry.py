"""Name -> encoder factory registry.

`register_encoder(name)` decorates (or is called with) a factory: any callable taking keyword
arguments (`device=...`, adapter options) and returning an `Encoder`. A family of open-ended
names (`open_clip:ARCH:PRETRAINED`) is registered once by its adapter with
`register_prefix(prefix, resolver, form)`; `get_encoder` hands such names to the resolver.
Adapters import this module, never the other way round: the registry knows them by
registration only.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

from perception_gap.encoders.base import Encoder
from perception_gap.encoders.errors import EncoderError

Factory = Callable[..., Encoder]
F = TypeVar("F", bound=Factory)

_REGISTRY: dict[str, Factory] = {}
# prefix -> (resolver taking the whole name and the factory's keyword arguments, the name's form for messages)
_PREFIXES: dict[str, tuple[Callable[..., Encoder], str]] = {}
_LOCK = threading.Lock()


def register_prefix(prefix: str, resolver: Callable[..., Encoder], form: str) -> None:
    """Route every name starting with `prefix` to `resolver(name, **kwargs)`.

    Args:
        prefix: e.g. `open_clip:`; reserved from then on (`register_encoder` refuses it).
        resolver: builds the encoder from the whole name and the factory keyword arguments.
        form: how such names look, for error messages (`open_clip:ARCH:PRETRAINED`).

    Raises:
        EncoderError: the prefix is empty or already registered.
    """
    if not isinstance(prefix, str) or not prefix:
        raise EncoderError(f"Expected `prefix` as a non-empty string, got {prefix!r}.")
    with _LOCK:
        if prefix in _PREFIXES:
            raise EncoderError(f"Encoder prefix {prefix!r} is already registered.")
        _PREFIXES[prefix] = (resolver, form)


def register_encoder(name: str, factory: F | None = None) -> Any:
    """Register `factory` under `name`; used as `@register_encoder(name)` or called directly.

    Raises:
        EncoderError: `name` is already registered, empty, or uses the `open_clip:` prefix.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise EncoderError(f"Expected `name` as a non-empty string without spaces around it, got {name!r}.")
    with _LOCK:
        reserved = [p for p in _PREFIXES if name.startswith(p)]
    if reserved:
        raise EncoderError(f"Expected a name not starting with {reserved[0]!r} (reserved), got {name!r}.")

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


def list_forms() -> list[str]:
    """How the names of each prefixed family look (`open_clip:ARCH:PRETRAINED`, ...), in registration order."""
    with _LOCK:
        return [form for _resolver, form in _PREFIXES.values()]


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
        prefixes = dict(_PREFIXES)
    if factory is not None:
        return factory(**kwargs)
    for prefix, (resolver, _form) in prefixes.items():
        if name.startswith(prefix):
            return resolver(name, **kwargs)
    valid = ", ".join(list_encoders())
    forms = "".join(f", or {form}" for _resolver, form in prefixes.values())
    raise EncoderError(f"Unknown encoder {name!r}; expected one of: {valid}{forms}.")
