"""Frame sets and frames in the catalog: which files a set holds and in what state."""

from __future__ import annotations

from typing import Any

from perception_gap.catalog.schema import FRAME_COLUMNS, arrow_table, frame_types, pa
from perception_gap.errors import InputError


class FramesMixin:
    """Frame sets and their frames; mixed into `Catalog`, which provides `con` and `_transaction`."""

    # -- frame sets --------------------------------------------------------------------------
    def ensure_set(self, name: str, domain: str, *, source: str | None = None,
                   tags: list[str] | None = None, root: str | None = None) -> None:
        """Create the set, or check that an existing one has the same domain."""
        row = self.con.execute("SELECT domain FROM frame_sets WHERE name = ?", [name]).fetchone()
        if row is not None:
            if row[0] != domain:
                raise InputError(f"Set {name!r} is already indexed as domain {row[0]!r}; got --domain {domain!r}. Use another set name.")
            self.con.execute(
                "UPDATE frame_sets SET updated_at = current_timestamp, tags = coalesce(?, tags), "
                "source = coalesce(?, source), root = coalesce(?, root) WHERE name = ?",
                [tags, source, root, name])
            return
        self.con.execute("INSERT INTO frame_sets (name, domain, source, tags, root) VALUES (?, ?, ?, ?, ?)",
                         [name, domain, source, tags, root])

    def get_set(self, name: str) -> dict[str, Any] | None:
        row = self.con.execute("SELECT name, domain, source, tags, root FROM frame_sets WHERE name = ?", [name]).fetchone()
        if row is None:
            return None
        return dict(zip(("name", "domain", "source", "tags", "root"), row))

    def list_sets(self) -> list[str]:
        return [r[0] for r in self.con.execute("SELECT name FROM frame_sets ORDER BY name").fetchall()]

    # -- frames ------------------------------------------------------------------------------
    def existing_frames(self, set_name: str) -> dict[str, dict[str, Any]]:
        """rgb_path -> catalog row (the change-detection columns) for a set."""
        cols = ("rgb_path", "file_size", "mtime_ns", "depth_path", "depth_size", "depth_mtime_ns",
                "status", "content_hash", "pair_key", "episode", "step", "depth_unit", "action", "proprio",
                "member", "frame_index", "container_path", "depth_member", "depth_index", "timestamp")
        rows = self.con.execute(f"SELECT {', '.join(cols)} FROM frames WHERE set_name = ?", [set_name]).fetchall()
        return {r[0]: dict(zip(cols, r)) for r in rows}

    def write_frames(self, rows: list[dict[str, Any]]) -> None:
        """Insert or replace frames (keyed by set and path) in one transaction."""
        if not rows:
            return
        batch = arrow_table(rows, FRAME_COLUMNS, frame_types())  # noqa: F841 (DuckDB reads it by name)
        cols = ", ".join(FRAME_COLUMNS)
        with self._transaction():
            self.con.execute(
                "DELETE FROM frames USING (SELECT set_name, rgb_path FROM batch) b "
                "WHERE frames.set_name = b.set_name AND frames.rgb_path = b.rgb_path")
            self.con.execute(f"INSERT INTO frames ({cols}) SELECT {cols} FROM batch")

    def frames_at_paths(self, paths: list[str]) -> list[dict[str, Any]]:
        """Every column of the usable frames (of any set) whose RGB, depth or container file is in `paths`."""
        if not paths:
            return []
        tbl = pa.table({"p": pa.array(paths, pa.string())})  # noqa: F841 (DuckDB reads it by name)
        cur = self.con.execute(
            f"SELECT {', '.join(FRAME_COLUMNS)} FROM frames WHERE status = 'ok' "
            "AND (rgb_path IN (SELECT p FROM tbl) OR depth_path IN (SELECT p FROM tbl) "
            "OR container_path IN (SELECT p FROM tbl))")
        return [dict(zip(FRAME_COLUMNS, r)) for r in cur.fetchall()]

    def mark_missing(self, set_name: str, paths: list[str]) -> None:
        if not paths:
            return
        tbl = pa.table({"rgb_path": pa.array(paths, pa.string())})  # noqa: F841
        self.con.execute(
            "UPDATE frames SET status = 'missing', error = 'file vanished since last index', "
            "indexed_at = current_timestamp WHERE set_name = ? AND rgb_path IN (SELECT rgb_path FROM tbl)",
            [set_name])

    def remove_frames(self, set_name: str, paths: list[str]) -> None:
        """Delete a set's rows for these paths (no longer listed), with their boxes."""
        if not paths:
            return
        tbl = pa.table({"rgb_path": pa.array(paths, pa.string())})  # noqa: F841
        with self._transaction():
            for table in ("frames", "annotations", "annotated_frames"):
                self.con.execute(f"DELETE FROM {table} WHERE set_name = ? AND rgb_path IN (SELECT rgb_path FROM tbl)",
                                 [set_name])

    def depth_unit_gaps(self, set_name: str) -> tuple[int, int, str | None, list[str]]:
        """Usable frames with a declared depth unit: (how many lack a depth map, how many there are,
        one that lacks it, the units declared on those lacking one)."""
        n_lacking, n, example, units = self.con.execute(
            "SELECT count(*) FILTER (depth_path IS NULL), count(*), min(rgb_path) FILTER (depth_path IS NULL), "
            "list(DISTINCT depth_unit ORDER BY depth_unit) FILTER (depth_path IS NULL) FROM frames "
            "WHERE set_name = ? AND status = 'ok' AND depth_unit IS NOT NULL", [set_name]).fetchone()
        return int(n_lacking), int(n), example, list(units or [])

    def set_counts(self, set_name: str) -> dict[str, int]:
        """Frames of a set by state: `ok` (usable), `skipped`, `missing`, and `unreadable` (indexed
        as ok, but decoding failed when statistics were computed; not counted in `ok`)."""
        rows = self.con.execute(
            "SELECT f.status, s.error IS NOT NULL AS bad, count(*) FROM frames f "
            "LEFT JOIN frame_stats s ON s.content_hash = f.content_hash "
            "WHERE f.set_name = ? GROUP BY ALL", [set_name]).fetchall()
        counts = {"total": 0, "ok": 0, "skipped": 0, "missing": 0, "unreadable": 0}
        for status, bad, n in rows:
            counts["total"] += n
            if status == "ok" and bad:
                counts["unreadable"] += n
            else:
                counts[status] = counts.get(status, 0) + n
        return counts

    def replace_repeats(self, set_name: str, repeats: list[tuple[str, int, str]]) -> None:
        """Record the files a set's listing names more than once: (path, extra listings, reason)."""
        with self._transaction():
            self.con.execute("DELETE FROM listing_repeats WHERE set_name = ?", [set_name])
            if repeats:
                self.con.executemany("INSERT INTO listing_repeats VALUES (?, ?, ?, ?)",
                                     [[set_name, p, n, r] for p, n, r in repeats])

    def listing_repeats(self, set_name: str) -> list[dict[str, Any]]:
        """Files listed more than once by a set's last listing: path, repeats (extra listings), reason."""
        rows = self.con.execute("SELECT rgb_path, repeats, reason FROM listing_repeats WHERE set_name = ? "
                                "ORDER BY rgb_path", [set_name]).fetchall()
        return [{"path": p, "repeats": n, "reason": r} for p, n, r in rows]

    def skipped_frames(self, set_name: str) -> list[dict[str, str]]:
        """Every frame of the set that is not usable, with its reason."""
        rows = self.con.execute(
            "SELECT f.rgb_path, f.status, coalesce(f.error, s.error, d.error) FROM frames f "
            "LEFT JOIN frame_stats s ON s.content_hash = f.content_hash "
            "LEFT JOIN depth_stats d ON d.content_hash = f.depth_hash "
            "WHERE f.set_name = ? AND (f.status <> 'ok' OR s.error IS NOT NULL OR d.error IS NOT NULL) "
            "ORDER BY f.rgb_path", [set_name]).fetchall()
        return [{"path": p, "status": st if st != "ok" else "skipped", "reason": r or "unknown"} for p, st, r in rows]
