"""Boxes in the catalog: ground truth and detector output, by source, per frame."""

from __future__ import annotations

from typing import Any

from perception_gap.catalog.schema import pa


class AnnotationsMixin:
    """Annotations of frames; mixed into `Catalog`, which provides `con` and `_transaction`."""

    # -- annotations ------------------------------------------------------------------------
    def frame_sizes(self, set_name: str) -> list[tuple[str, str, int | None, int | None]]:
        """(rgb_path, pair_key, width, height) of the usable frames of a set."""
        return [tuple(r) for r in self.con.execute(
            "SELECT rgb_path, pair_key, width, height FROM frames WHERE set_name = ? AND status = 'ok' ORDER BY rgb_path",
            [set_name]).fetchall()]

    def replace_annotations(self, set_name: str, source: str, rows: list[dict[str, Any]],
                            annotated: list[str]) -> None:
        """Replace a set's boxes from one source (`gt` or a detector name) in one transaction.

        `annotated` lists every frame the source covers, boxes or not: a frame with no object is
        still evaluated (its detections are false positives).
        """
        with self._transaction():
            self.con.execute("DELETE FROM annotations WHERE set_name = ? AND source = ?", [set_name, source])
            self.con.execute("DELETE FROM annotated_frames WHERE set_name = ? AND source = ?", [set_name, source])
            covered = pa.table({"rgb_path": pa.array(sorted(set(annotated)), pa.string())})  # noqa: F841
            self.con.execute("INSERT INTO annotated_frames SELECT ?, rgb_path, ? FROM covered", [set_name, source])
            if rows:
                batch = pa.table({  # noqa: F841 (DuckDB reads it by name)
                    "set_name": pa.array([set_name] * len(rows), pa.string()),
                    "rgb_path": pa.array([r["rgb_path"] for r in rows], pa.string()),
                    "source": pa.array([source] * len(rows), pa.string()),
                    "category": pa.array([r["category"] for r in rows], pa.string()),
                    "bbox": pa.array([list(r["bbox"]) for r in rows], pa.list_(pa.float64())),
                    "score": pa.array([r.get("score") for r in rows], pa.float64()),
                    "area": pa.array([r.get("area") for r in rows], pa.float64()),
                    "iscrowd": pa.array([bool(r.get("iscrowd")) for r in rows], pa.bool_()),
                })
                self.con.execute("INSERT INTO annotations SELECT set_name, rgb_path, source, category, bbox, score, "
                                 "area, iscrowd FROM batch")

    def load_annotations(self, set_name: str) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """source -> rgb_path -> boxes of the usable frames of a set; every frame the source
        covers is a key, with an empty list when it has no box."""
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for source, path in self.con.execute(
                "SELECT a.source, a.rgb_path FROM annotated_frames a JOIN frames f ON f.set_name = a.set_name "
                "AND f.rgb_path = a.rgb_path AND f.status = 'ok' WHERE a.set_name = ?", [set_name]).fetchall():
            out.setdefault(source, {}).setdefault(path, [])
        rows = self.con.execute(
            "SELECT a.source, a.rgb_path, a.category, a.bbox, a.score, a.area, a.iscrowd FROM annotations a "
            "JOIN frames f ON f.set_name = a.set_name AND f.rgb_path = a.rgb_path AND f.status = 'ok' "
            "WHERE a.set_name = ? ORDER BY a.source, a.rgb_path", [set_name]).fetchall()
        for source, path, cat, bbox, score, area, crowd in rows:
            out.setdefault(source, {}).setdefault(path, []).append(
                {"category": cat, "bbox": tuple(bbox), "score": score, "area": area, "iscrowd": bool(crowd)})
        return out
