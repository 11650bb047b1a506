"""The report's reading of a results.json: the typed sections of perception_gap.schema, as far as a file has them.

`perception_gap.load_results` validates: a section that lacks a key it requires is an error there.
A report is also asked for hand-made, partial and older files (no `version`, intervals written
before they carried their cluster counts) and shows what they hold, a dash for the rest. So here a
section is read from any object:

- a key the section declares but the object lacks reads as None, also where the class has a
  default (absent is shown as absent, as in the file);
- a nested section, list or map given as another JSON kind reads as None;
- keys the section does not declare are kept in `extra`, as `Section.from_dict` keeps them;
- values are not checked (the report's formatting takes any value), and a section's own checks
  (a finding's severity) are left to the loader: the section is built without its `__init__`.

An object that already is the section (a `Results` from `load_results`, a gate the engine built) is
used as it is.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, TypeVar, Union

from perception_gap.schema import Results, Section

S = TypeVar("S", bound=Section)


@lru_cache(maxsize=None)
def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls) if f.name not in ("extra", "_keys"))


def section(cls: type[S], raw: Any) -> S | None:
    """`raw` read as the section `cls` (see the module docstring); None when `raw` is not a JSON object."""
    if isinstance(raw, cls):
        return raw
    if not isinstance(raw, Mapping):
        return None
    fields = _fields(cls)
    obj = object.__new__(cls)
    for name, hint in fields:
        object.__setattr__(obj, name, _value(hint, raw[name]) if name in raw else None)
    declared = {name for name, _ in fields}
    object.__setattr__(obj, "extra", {k: v for k, v in raw.items() if k not in declared})
    object.__setattr__(obj, "_keys", tuple(raw))
    return obj


def blank(cls: type[S]) -> S:
    """The section with every key absent: what an entry that is not an object shows (a row of dashes)."""
    return _blank(cls)  # type: ignore[return-value]


@lru_cache(maxsize=None)
def _blank(cls: type) -> Any:
    return section(cls, {})


def entries(cls: type[S], raw: Any) -> list[S]:
    """Each entry of a list read as the section `cls`, one that is not an object as the blank one (a
    list keeps its length); anything but a list as no entries."""
    if not isinstance(raw, (list, tuple)):
        return []
    return [section(cls, e) or blank(cls) for e in raw]


def given(s: Section | None) -> bool:
    """Whether a section holds anything: read from an object with keys, or built with a value (a
    results.json's `{}` is no interval, no FID)."""
    if s is None:
        return False
    return bool(s._keys or s.extra) or any(getattr(s, name) is not None for name, _ in _fields(type(s)))


def results(raw: Any) -> Results:
    """A whole results.json (a `Results` as it is; anything but an object as an empty one)."""
    return section(Results, raw) or blank(Results)


def _value(hint: Any, v: Any) -> Any:
    if v is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Union or origin is types.UnionType:
        inner = [a for a in args if a is not type(None)]
        return _value(inner[0], v) if len(inner) == 1 else v
    if isinstance(hint, type) and issubclass(hint, Section):
        return section(hint, v)
    if origin is list:
        if not isinstance(v, (list, tuple)):
            return None
        return [_value(args[0], x) for x in v] if args else list(v)
    if origin is dict:
        if not isinstance(v, Mapping):
            return None
        return {k: _value(args[1], x) for k, x in v.items()} if len(args) == 2 else dict(v)
    return v
