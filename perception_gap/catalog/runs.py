"""Runs and their results in the catalog, so that history (drift) is a query."""

from __future__ import annotations

import json
from typing import Any

from perception_gap.catalog.schema import pa


class RunsMixin:
    """Stored runs and results; mixed into `Catalog`, which provides `con` and `_transaction`."""

    # -- runs and results --------------------------------------------------------------------
    def record_run(self, kind: str, config: dict[str, Any], version: str,
                   results: list[dict[str, Any]]) -> int:
        """Store a run and its figures (scope, name, value, ci_low, ci_high, detail)."""
        with self._transaction():
            run_id = self.con.execute("INSERT INTO runs (kind, config, version) VALUES (?, ?, ?) RETURNING run_id",
                                      [kind, json.dumps(config), version]).fetchone()[0]
            if results:
                batch = pa.table({  # noqa: F841
                    "run_id": pa.array([run_id] * len(results), pa.int64()),
                    "scope": pa.array([r["scope"] for r in results], pa.string()),
                    "name": pa.array([r["name"] for r in results], pa.string()),
                    "value": pa.array([r.get("value") for r in results], pa.float64()),
                    "ci_low": pa.array([r.get("ci_low") for r in results], pa.float64()),
                    "ci_high": pa.array([r.get("ci_high") for r in results], pa.float64()),
                    "detail": pa.array([json.dumps(r.get("detail")) if r.get("detail") is not None else None
                                        for r in results], pa.string()),
                })
                self.con.execute("INSERT INTO results SELECT run_id, scope, name, value, ci_low, ci_high, detail::JSON FROM batch")
        return int(run_id)

    def run_history(self, kind: str) -> list[dict[str, Any]]:
        """Every stored run of a kind, oldest first: run_id, started_at, config and its result rows."""
        runs = self.con.execute("SELECT run_id, started_at, config FROM runs WHERE kind = ? ORDER BY run_id",
                                [kind]).fetchall()
        if not runs:
            return []
        rows = self.con.execute(
            "SELECT s.run_id, s.scope, s.name, s.value, s.ci_low, s.ci_high, s.detail FROM results s "
            "JOIN runs r USING (run_id) WHERE r.kind = ? ORDER BY s.run_id", [kind]).fetchall()
        by_run: dict[int, list[dict[str, Any]]] = {}
        for run_id, scope, name, value, lo, hi, detail in rows:
            by_run.setdefault(int(run_id), []).append({"scope": scope, "name": name, "value": value,
                                                       "ci_low": lo, "ci_high": hi,
                                                       "detail": json.loads(detail) if detail else None})
        return [{"run_id": int(r), "started_at": str(t), "config": json.loads(c) if c else {},
                 "results": by_run.get(int(r), [])} for r, t, c in runs]
