"""Reading a log table (CSV, JSONL or Parquet) into columns, and checking its cells at the boundary."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from perception_gap.errors import InputError

EXTENSIONS = (".csv", ".jsonl", ".ndjson", ".parquet")


def read_columns(path: str | Path, what: str = "FILE") -> dict[str, list[Any]]:
    """The table as {column: values}, one value per row (None for an empty cell).

    Args:
        path: a CSV (header row), JSONL (one object per line) or Parquet file.
        what: the argument's name for error messages.

    Raises:
        InputError: the file is missing, of another type, unreadable, or has no rows.
    """
    p = Path(path)
    ext = p.suffix.lower()
    if ext not in EXTENSIONS:
        raise InputError(f"Expected `{what}` to end in .csv, .jsonl or .parquet, got {str(p)!r}.")
    if not p.is_file():
        raise InputError(f"Expected `{what}` to be an existing file, got {str(p)!r}.")
    try:
        if ext == ".csv":
            import pyarrow.csv as pcsv

            table = pcsv.read_csv(p, read_options=pcsv.ReadOptions(encoding="utf-8"))
        elif ext == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(p)
        else:
            import pyarrow.json as pjson

            table = pjson.read_json(p)
    except Exception as e:  # noqa: BLE001  (pyarrow raises its own types) one line naming the file
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise InputError(f"Cannot read {what} {str(p)!r}: {first}") from None
    names = [str(n) for n in table.column_names]
    if len(set(names)) != len(names):
        raise InputError(f"{what} {str(p)!r} has two columns of one name; rename or remove one.")
    if table.num_rows == 0:
        raise InputError(f"{what} {str(p)!r} has no rows.")
    return {n: table.column(i).to_pylist() for i, n in enumerate(names)}


def require(columns: dict[str, list[Any]], names: tuple[str, ...], path: str | Path) -> None:
    """Every column of `names` is present, else one error naming the missing ones and those found."""
    missing = [n for n in names if n not in columns]
    if missing:
        raise InputError(f"{str(path)!r} lacks column(s) {', '.join(missing)} (has: {', '.join(columns) or 'none'}).")


def label(value: Any, column: str, row: int) -> str:
    """A non-empty name (policy, task, ...); row numbers count from 1 after the header."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == "":
        raise InputError(f"Row {row}: empty `{column}`; every row needs a {column}.")
    return str(value).strip()


def number(value: Any, column: str, row: int, *, low: float = -math.inf, high: float = math.inf) -> float:
    """A finite number within [low, high], else one error naming the row, column and value."""
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float's range
        x = math.nan
    if not (math.isfinite(x) and low <= x <= high):
        bounds = f" in [{low:g}, {high:g}]" if math.isfinite(low) or math.isfinite(high) else ""
        raise InputError(f"Row {row}: expected `{column}` to be a finite number{bounds}, got {value!r}.")
    return x
