"""The machinery shared by the results.json sections: reading, writing and describing one from its fields.

A section is a frozen dataclass deriving from `Section`. Its annotated fields are the keys the
report, the command line and the contract read; `from_dict` converts nested sections, lists and
maps of them by the annotations, and keeps every other key in `extra` so that a results.json
written by a newer version loses nothing when read and written again. `to_dict` writes the keys
back in the order they were read (declaration order for a section built in code), and leaves out
an optional key (`optional()`) that is None and was not in the source. `json_schema` describes the
same fields as a JSON Schema: declared keys typed and, unless `optional()` or defaulted, required;
other keys allowed.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, ClassVar, Union

from perception_gap.errors import InputError

_OPTIONAL = "optional"
FROZEN = {"frozen": True, "kw_only": True}  # the dataclass options of every section


def optional(**kwargs: Any) -> Any:
    """A key a writer may leave out (None when absent); required keys are the fields without a default."""
    return dataclasses.field(default=None, metadata={_OPTIONAL: True}, **kwargs)


@dataclasses.dataclass(frozen=True)
class Section:
    """Base of every results.json section: `from_dict`, `to_dict`, unknown keys kept in `extra`.

    Attributes:
        extra: the keys of the source object that the section does not declare, as read.
    """

    extra: dict[str, Any] = dataclasses.field(default_factory=dict, kw_only=True, repr=False)
    _keys: tuple[str, ...] = dataclasses.field(default=(), kw_only=True, repr=False, compare=False)

    # keys the schema requires although the dataclass gives them a default, and schema fragments that
    # replace a field's own (an enum of its values)
    schema_required: ClassVar[tuple[str, ...]] = ()
    schema_properties: ClassVar[dict[str, Any]] = {}

    @classmethod
    def _fields(cls) -> dict[str, tuple[dataclasses.Field, Any]]:
        cached = cls.__dict__.get("_field_cache")
        if cached is None:
            hints = typing.get_type_hints(cls)
            cached = {f.name: (f, hints[f.name]) for f in dataclasses.fields(cls) if f.name not in ("extra", "_keys")}
            cls._field_cache = cached  # type: ignore[attr-defined]
        return cached

    @classmethod
    def from_dict(cls, d: Any, *, where: str = "") -> Any:
        """The section read from its JSON form (`where`: its path, for the error message).

        Raises:
            InputError: `d` is not an object, a required key is missing, or a nested section is not an object.
        """
        where = where or cls.__name__
        if not isinstance(d, dict):
            raise InputError(f"Expected `{where}` to be a JSON object, got {type(d).__name__}.")
        fields = cls._fields()
        kwargs: dict[str, Any] = {}
        for name, (f, hint) in fields.items():
            if name in d:
                kwargs[name] = _read(hint, d[name], f"{where}.{name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InputError(f"Expected `{where}` to have the key {name!r}, got keys {sorted(d)}.")
        extra = {k: v for k, v in d.items() if k not in fields}
        try:
            return cls(**kwargs, extra=extra, _keys=tuple(d))
        except (TypeError, ValueError) as e:
            raise InputError(f"Expected a valid `{where}`: {e}") from None

    @classmethod
    def from_result(cls, result: Any, **more: Any) -> Any:
        """The section from an engine result dataclass: the keys it declares, taken from the result's
        `to_dict()` and from `more`, in declaration order (what the result holds beyond them stays out)."""
        given = {**result.to_dict(), **more}
        return cls.from_dict({k: given[k] for k in cls._fields() if k in given}, where=cls.__name__)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: plain dicts, lists and values, keys in the order they were read."""
        return {k: self._value(k) for k in self._key_order()}

    def _key_order(self) -> list[str]:
        """The keys of the JSON form: those read, in their order, then declared and extra keys set since."""
        fields = self._fields()
        keys = [k for k in self._keys if k in fields or k in self.extra]
        seen = set(keys)
        for name, (f, _) in fields.items():
            if name not in seen and not (getattr(self, name) is None and f.metadata.get(_OPTIONAL)):
                keys.append(name)
        keys += [k for k in self.extra if k not in seen and k not in fields]
        return keys

    def _value(self, key: str) -> Any:
        """One key's JSON form (KeyError when the section has no such key)."""
        if key in self._fields():
            return _write(getattr(self, key))
        return self.extra[key]

    @classmethod
    def json_schema(cls, defs: dict[str, Any]) -> dict[str, Any]:
        """A `$ref` to this section's schema, added (with the sections it holds) to `defs`."""
        name = cls.__name__
        if name not in defs:
            defs[name] = {}  # placeholder: a section that holds itself refers back
            props, required = {}, []
            for fname, (f, hint) in cls._fields().items():
                props[fname] = cls.schema_properties.get(fname) or _schema(hint, defs)
                if fname in cls.schema_required or (f.default is dataclasses.MISSING and f.default_factory is
                                                    dataclasses.MISSING and not f.metadata.get(_OPTIONAL)):
                    required.append(fname)
            doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ").replace("    ", " ")
            defs[name] = {"type": "object", "description": doc, "properties": props, "required": required,
                          "additionalProperties": True}
        return {"$ref": f"#/$defs/{name}"}


def _args(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    origin = typing.get_origin(hint)
    if origin is types.UnionType:
        origin = Union
    return origin, typing.get_args(hint)


def _is_section(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, Section)


def _read(hint: Any, v: Any, where: str) -> Any:
    if v is None:
        return None
    origin, args = _args(hint)
    if _is_section(hint):
        return hint.from_dict(v, where=where)
    if origin is Union:
        inner = [a for a in args if a is not type(None)]
        return _read(inner[0], v, where) if len(inner) == 1 else v
    if origin is list and args and isinstance(v, list):
        return [_read(args[0], x, f"{where}[{i}]") for i, x in enumerate(v)]
    if origin is dict and len(args) == 2 and isinstance(v, dict):
        return {k: _read(args[1], x, f"{where}.{k}") for k, x in v.items()}
    return v


def _write(v: Any) -> Any:
    if isinstance(v, Section):
        return v.to_dict()
    if isinstance(v, list):
        return [_write(x) for x in v]
    if isinstance(v, dict):
        return {k: _write(x) for k, x in v.items()}
    return v


# JSON has no NaN or infinity: a number that came out non-finite is written as null (and listed
# under `non_finite`), so every number a section declares may also be null.
_PLAIN = {str: {"type": "string"}, bool: {"type": "boolean"}, int: {"type": "integer"},
          float: {"type": ["number", "null"]}, type(None): {"type": "null"}}


def _schema(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if hint is Any:
        return {}
    if hint in _PLAIN:
        return dict(_PLAIN[hint])
    if _is_section(hint):
        return hint.json_schema(defs)
    origin, args = _args(hint)
    if origin is Union:
        parts = [_schema(a, defs) for a in args]
        if all(set(p) == {"type"} for p in parts):
            merged: list[str] = []
            for p in parts:
                for t in p["type"] if isinstance(p["type"], list) else [p["type"]]:
                    if t not in merged:
                        merged.append(t)
            return {"type": merged}
        return {"anyOf": parts}
    if origin is list:
        return {"type": "array", **({"items": _schema(args[0], defs)} if args and args[0] is not Any else {})}
    if origin is dict:
        value = _schema(args[1], defs) if len(args) == 2 else {}
        return {"type": "object", **({"additionalProperties": value} if value else {})}
    if origin is typing.Literal:
        return {"enum": list(args)}
    raise TypeError(f"No JSON Schema for the annotation {hint!r}.")
