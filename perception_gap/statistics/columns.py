"""The columns of the statistics cache, read off the dataclasses that define them.

`ImageStats` and `DepthStats` are the one definition of what is stored per frame and per
depth map: each field's name, type annotation and docstring entry. A field's annotation gives
its column kind (`KINDS`); the catalog derives its DDL and the Arrow schema of its bulk writes
and of the Ray engine's shards from these kinds (`perception_gap.catalog.schema`), and a stored
row converts back into the dataclass through `from_row`. Adding a statistic is adding a field.
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import fields
from typing import Any, TypeVar

# Python annotation (without `| None`) -> column kind; a field of any other type is refused, so
# a statistic the catalog could not store fails when the catalog builds its schema, not at the
# first write.
KINDS: dict[Any, str] = {
    int: "int",
    float: "float",
    str: "str",
    bytes: "bytes",
    tuple[float, ...]: "floats",
}

T = TypeVar("T")


def _kind(owner: type, name: str, annotation: Any) -> str:
    """The column kind of one annotation such as `tuple[float, ...] | None` (every column is nullable:
    an unreadable frame's row holds its error and nothing else)."""
    if isinstance(annotation, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else annotation
    if annotation not in KINDS:
        raise TypeError(f"Expected {owner.__name__}.{name} to be annotated with one of "
                        f"{', '.join(map(str, KINDS))} (or `| None`), got {annotation}.")
    return KINDS[annotation]


@functools.cache
def stat_columns(cls: type) -> tuple[tuple[str, str], ...]:
    """(name, kind) of every field of a statistics dataclass, in field order.

    Raises:
        TypeError: a field whose annotation has no column kind.
    """
    hints = typing.get_type_hints(cls)
    return tuple((f.name, _kind(cls, f.name, hints[f.name])) for f in fields(cls))


def from_row(cls: type[T], row: dict[str, Any], prefix: str = "") -> T:
    """The dataclass `cls` from a stored row whose columns are its fields named `prefix + field`;
    list columns (DuckDB and Arrow return lists) become tuples, as the dataclass holds them."""
    vals = {}
    for name, kind in stat_columns(cls):
        v = row[prefix + name]
        vals[name] = tuple(v) if kind == "floats" and v is not None else v
    return cls(**vals)
