"""The JSON Schema of results.json, exported from the section dataclasses, and validation against it."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from perception_gap.errors import InputError


def results_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a results.json: declared keys typed, required where the contract
    fixes them, other keys allowed (a newer writer may add some); evidence is free form."""
    from perception_gap.schema.results import Results

    defs: dict[str, Any] = {}
    top = Results.json_schema(defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "perception-gap results.json",
            "description": "Generated from perception_gap.schema by `python -m perception_gap.schema --write`; "
                           "do not edit by hand.",
            **top, "$defs": dict(sorted(defs.items()))}


def schema_text() -> str:
    """The schema as the file docs/results.schema.json holds it."""
    return json.dumps(results_schema(), indent=1, ensure_ascii=False) + "\n"


@functools.lru_cache(maxsize=4)
def _validator(schema_file: str | None) -> Any:
    try:
        from jsonschema import Draft202012Validator
    except ImportError:
        raise InputError("Validating a results.json needs the `jsonschema` package "
                         "(pip install 'perception-gap[test]').") from None
    schema = results_schema() if schema_file is None else json.loads(Path(schema_file).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def validate_results(obj: Any, *, schema_file: str | Path | None = None) -> None:
    """Check a results.json's JSON form against the schema (compiled once per process).

    Args:
        obj: the parsed results.json.
        schema_file: a schema file (docs/results.schema.json); None: the schema of the classes here.

    Raises:
        InputError: the first place it differs (its path, what the schema expects, what it holds).
    """
    from jsonschema.exceptions import best_match

    errors = list(_validator(None if schema_file is None else str(schema_file)).iter_errors(obj))
    if errors:
        e = best_match(errors)  # descends into `anyOf` (a section or null) to the deepest reason
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path) or " (top level)"
        message = e.message if len(e.message) <= 160 else e.message[:157] + "..."
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise InputError(f"Expected results.json to match its schema at `${where}`, got: {message}{more}.")
