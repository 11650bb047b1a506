"""The one reader of the users' tables: CSV, JSONL and Parquet files of rows.

Manifests, rollouts logs, rates tables, tick logs and pose logs all come through `read_table`,
so every one of them takes the same three formats and refuses bad input with the same one-line
errors: a missing or non-regular file, an unknown suffix, an unreadable file, a column named
twice, no rows or more rows than the caller's cap (`read_table`), a missing column (`require`),
an empty name (`label`) and a number that is not finite or out of range (`number`). Rows count
from 1 after the header in every message, whatever the format.

CSV cells are text (an empty cell is None): a pair key `001` stays `001`. JSONL and Parquet
keep their own types. A number (`as_float`) is an int or float value, or text written as a
plain decimal number: never a boolean (JSONL `true`, a Parquet bool column), and never text that
only Python's `float()` reads (`1_0` as 10, other scripts' digits).

A row cap is checked before the rows are held: a Parquet file's row count comes from its
footer, and CSV and JSONL rows are counted as they stream in.
"""

from __future__ import annotations

import csv
import decimal
import json
import math
import numbers
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perception_gap.errors import FrameError, InputError
from perception_gap.ingest.frames import open_regular

EXTENSIONS = (".csv", ".jsonl", ".ndjson", ".parquet")


@dataclass(frozen=True)
class Table:
    """A table read from `path`: `columns` maps each name to its values, one per row (None: empty).

    Attributes:
        path: the file read.
        what: the argument's name in error messages (`FILE`, `--manifest`).
        columns: {column: values}, every list of length `n_rows`, in the file's column order.
    """

    path: Path
    what: str
    columns: dict[str, list[Any]]

    @property
    def n_rows(self) -> int:
        return len(next(iter(self.columns.values()), []))

    def rows(self) -> list[dict[str, Any]]:
        """The rows as dicts of every column (None where a row has no value)."""
        names = list(self.columns)
        return [dict(zip(names, values)) for values in zip(*self.columns.values())]

    def require(self, names: tuple[str, ...] | list[str]) -> None:
        """Every column of `names` is present (see `require`)."""
        require(self.columns, names, self.path, self.what)


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; a key given twice is an error (json keeps the last)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice in one object")
        out[k] = v
    return out


def _unique(names: list[Any], path: Path, what: str) -> list[str]:
    seen: list[str] = []
    for n in names:
        if str(n) in seen:
            raise InputError(f"{what} {str(path)!r} has two columns named {str(n)!r}; rename or remove one.")
        seen.append(str(n))
    return seen


def _too_many(n_rows: int | None, max_rows: int, path: Path, what: str) -> InputError:
    """The refusal of a table past its cap; `n_rows` None where reading stopped at the first row over."""
    got = "more (reading stopped there)" if n_rows is None else f"{n_rows:,}"
    return InputError(f"Expected at most {max_rows:,} rows in {what} {str(path)!r}, got {got}; "
                      "split the table or keep fewer rows.")


def _csv_columns(fd: int, path: Path, what: str, max_rows: int | None) -> dict[str, list[Any]]:
    # utf-8-sig: a byte-order mark is not part of the first column's name
    with open(fd, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = _unique([c.strip() for c in next(reader, [])], path, what)
        columns: dict[str, list[Any]] = {n: [] for n in header}
        n_rows = 0
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue  # a blank line is no row
            n_rows += 1
            if max_rows is not None and n_rows > max_rows:
                raise _too_many(None, max_rows, path, what)
            cells = cells[:len(header)] + [""] * (len(header) - len(cells))  # cells past the header are dropped
            for n, c in zip(header, cells):
                columns[n].append(None if c == "" else c)
    return columns


def _jsonl_columns(fd: int, path: Path, what: str, max_rows: int | None) -> dict[str, list[Any]]:
    rows: list[dict[str, Any]] = []
    with open(fd, encoding="utf-8-sig") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, object_pairs_hook=_no_repeats)
            except ValueError as e:
                raise InputError(f"{what} {str(path)!r} line {i}: {str(e).splitlines()[0]}.") from None
            if not isinstance(obj, dict):
                raise InputError(f"{what} {str(path)!r} line {i}: expected a JSON object, got {type(obj).__name__}.")
            rows.append(obj)
            if max_rows is not None and len(rows) > max_rows:
                raise _too_many(None, max_rows, path, what)
    names = list(dict.fromkeys(k for r in rows for k in r))  # rows may leave keys out: their union, in order
    return {n: [r.get(n) for r in rows] for n in names}


def _parquet_columns(fd: int, path: Path, what: str, max_rows: int | None) -> dict[str, list[Any]]:
    import pyarrow.parquet as pq

    with open(fd, "rb") as f:
        pf = pq.ParquetFile(f)
        n_rows = pf.metadata.num_rows  # the footer's count: nothing decoded yet
        if max_rows is not None and n_rows > max_rows:
            raise _too_many(n_rows, max_rows, path, what)
        table = pf.read()
    names = _unique(table.column_names, path, what)
    return {n: table.column(i).to_pylist() for i, n in enumerate(names)}


def read_table(path: str | Path, what: str = "FILE", *, max_rows: int | None = None) -> Table:
    """Read a CSV (header row), JSONL (one object per line) or Parquet file.

    Only a regular file is read (a FIFO would block for ever, a device never ends).

    Args:
        path: the file; its suffix (.csv, .jsonl or .ndjson, .parquet) says the format.
        what: the argument's name for error messages (`FILE`, `--manifest`).
        max_rows: refuse a table of more rows, before holding them (None: no cap).

    Returns:
        The `Table`, with at least one row.

    Raises:
        InputError: the file is missing or not a regular file, of another type, unreadable, has a
            column named twice, no rows, or more than `max_rows`.

    Examples:
        >>> import tempfile, pathlib
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
        >>> _ = f.write_text("policy,success\\na,1\\nb,\\n")
        >>> read_table(f).columns
        {'policy': ['a', 'b'], 'success': ['1', None]}
    """
    p = Path(path)
    ext = p.suffix.lower()
    if ext not in EXTENSIONS:
        raise InputError(f"Expected `{what}` to end in .csv, .jsonl or .parquet, got {str(p)!r}.")
    try:
        fd = open_regular(p)
    except FrameError as e:
        if str(e) == "file not found":
            raise InputError(f"Expected `{what}` to be an existing file, got {str(p)!r} (not found).") from None
        raise InputError(f"Expected `{what}` to be a regular file, got {str(p)!r} ({e}).") from None
    reader = _csv_columns if ext == ".csv" else _parquet_columns if ext == ".parquet" else _jsonl_columns
    try:
        columns = reader(fd, p, what, max_rows)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001  (csv, codecs and pyarrow raise their own types) one line naming the file
        first = (str(e).splitlines() or [""])[0]
        raise InputError(f"Cannot read {what} {str(p)!r}: {type(e).__name__}: {first}") from None
    table = Table(p, what, columns)
    if not columns or table.n_rows == 0:
        raise InputError(f"{what} {str(p)!r} has no rows.")
    return table


def read_columns(path: str | Path, what: str = "FILE") -> dict[str, list[Any]]:
    """The table at `path` as {column: values} (see `read_table`)."""
    return read_table(path, what).columns


def require(columns: dict[str, list[Any]], names: tuple[str, ...] | list[str], path: str | Path,
            what: str = "FILE") -> None:
    """Every column of `names` is present, else one error naming the missing ones and those found."""
    missing = [n for n in names if n not in columns]
    if missing:
        raise InputError(f"{what} {str(path)!r} is missing required column(s) {', '.join(missing)} "
                         f"(has: {', '.join(map(str, columns)) or 'none'}).")


def label(value: Any, column: str, row: int) -> str:
    """A non-empty name (policy, task, ...); rows count from 1 after the header."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == "":
        raise InputError(f"Row {row}: empty `{column}`; every row needs a {column}.")
    return str(value).strip()


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)",
                      re.IGNORECASE)


def as_float(value: Any) -> float:
    """A cell as a float: an int or float value, or text written as a decimal number (`-1.5`, `2e3`,
    `nan`, `inf`); surrounding spaces are ignored.

    Raises:
        ValueError: None, a boolean, a list or other object, text that is not a plain decimal
            (`1_0`, `١٠`, `0x10`), or an int beyond a float's range.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is a boolean, not a number")
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value.strip()):
            raise ValueError(f"{value[:40]!r} is not a decimal number")
        return float(value)
    if isinstance(value, (numbers.Real, decimal.Decimal)):  # numpy scalars and Parquet decimals too
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"{str(value)[:40]} is beyond a float's range") from None
    raise ValueError(f"{str(value)[:40]!r} ({type(value).__name__}) is not a number")


def number(value: Any, column: str, row: int, *, low: float = -math.inf, high: float = math.inf) -> float:
    """A finite number within [low, high] (see `as_float`), else one error naming the row, column and value."""
    try:
        x = as_float(value)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and low <= x <= high):
        bounds = f" in [{low:g}, {high:g}]" if math.isfinite(low) or math.isfinite(high) else ""
        kind = " (a boolean)" if isinstance(value, bool) else ""
        raise InputError(f"Row {row}: expected `{column}` to be a finite number{bounds}, got {value!r}{kind}.")
    return x
