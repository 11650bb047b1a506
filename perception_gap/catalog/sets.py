"""Frame sets as a whole: listing them with their counts, dropping and renaming them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perception_gap.errors import InputError

# every table that names a set, with its column (frame_sets is the set itself)
SET_TABLES = (("frames", "set_name"), ("annotations", "set_name"), ("annotated_frames", "set_name"),
              ("listing_repeats", "set_name"), ("baseline_samples", "set_name"), ("frame_sets", "name"))


@dataclass(frozen=True)
class SetSummary:
    """One frame set and the state of its frames.

    Attributes:
        name, domain, source: the set (`source` names the folder, manifest or dataset it came from).
        frames: catalogued frames (any state), plus the extra listings of a file a manifest names
            more than once (frames listed = rows, as `stats` counts them).
        usable: frames statistics and embeddings use (status ok, and not found unreadable).
        skipped: what `stats` reports as skipped, less the missing frames: frames recorded as
            skipped at index time, unreadable (colour or depth) at statistics time, and the
            extra listings of a repeated file.
        missing: frames whose file vanished since an earlier index.
        tags: the set's tags.
    """

    name: str
    domain: str
    source: str | None
    frames: int
    usable: int
    skipped: int
    missing: int
    tags: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "domain": self.domain, "frames": self.frames, "usable": self.usable,
                "skipped": self.skipped, "missing": self.missing, "source": self.source, "tags": list(self.tags)}


class SetsMixin:
    """Listing, dropping and renaming sets; mixed into `Catalog`, which provides `con` and `_transaction`."""

    def set_summaries(self) -> list[SetSummary]:
        """Every set with its frame counts (one query), by name; the skips counted as `stats` counts them."""
        rows = self.con.execute(
            "WITH rep AS (SELECT set_name, sum(repeats) AS n FROM listing_repeats GROUP BY set_name), "
            "fr AS (SELECT s.name, s.domain, s.source, s.tags, count(f.rgb_path) AS total, "
            "count(*) FILTER (f.status = 'ok' AND st.error IS NULL) AS ok, "
            "count(*) FILTER (f.status = 'skipped' OR (f.status = 'ok' AND "
            "(st.error IS NOT NULL OR ds.error IS NOT NULL))) AS skipped, "
            "count(*) FILTER (f.status = 'missing') AS missing "
            "FROM frame_sets s LEFT JOIN frames f ON f.set_name = s.name "
            "LEFT JOIN frame_stats st ON st.content_hash = f.content_hash "
            "LEFT JOIN depth_stats ds ON ds.content_hash = f.depth_hash "
            "GROUP BY s.name, s.domain, s.source, s.tags) "
            "SELECT fr.*, coalesce(rep.n, 0) FROM fr LEFT JOIN rep ON rep.set_name = fr.name "
            "ORDER BY fr.name").fetchall()
        return [SetSummary(name=n, domain=d, source=src, frames=int(t + again), usable=int(ok),
                           skipped=int(sk + again), missing=int(mi), tags=tuple(tags or ()))
                for n, d, src, tags, t, ok, sk, mi, again in rows]

    def _require_set(self, name: str, flag: str) -> None:
        if self.con.execute("SELECT 1 FROM frame_sets WHERE name = ?", [name]).fetchone() is None:
            known = ", ".join(r[0] for r in self.con.execute("SELECT name FROM frame_sets ORDER BY name").fetchall())
            raise InputError(f"Unknown set {name!r} for {flag} (known: {known or 'none; run `index` first'}).")

    def drop_set(self, name: str) -> int:
        """Remove a set: its row, its frames and its boxes, in one transaction; returns its frame count.

        Statistics and embeddings stay cached by content hash (another set may hold the same
        content; a later index of the same files reuses them).
        """
        self._require_set(name, "NAME")
        n = self.con.execute("SELECT count(*) FROM frames WHERE set_name = ?", [name]).fetchone()[0]
        with self._transaction():
            for table, col in SET_TABLES:
                self.con.execute(f"DELETE FROM {table} WHERE {col} = ?", [name])
        return int(n)

    def rename_set(self, old: str, new: str) -> None:
        """Rename a set everywhere it is named (frames, boxes), in one transaction.

        Earlier runs keep the names they were run with (their configuration is a record).
        """
        self._require_set(old, "OLD")
        if self.con.execute("SELECT 1 FROM frame_sets WHERE name = ?", [new]).fetchone() is not None:
            raise InputError(f"Expected NEW to be a name no set has, got {new!r} (a set of that name exists; "
                             f"`drop` it first).")
        with self._transaction():
            # the set's row first is impossible under the frames' key: copy it, move the rows, delete the old
            self.con.execute("INSERT INTO frame_sets SELECT ? AS name, * EXCLUDE (name) FROM frame_sets WHERE name = ?",
                             [new, old])
            for table, col in SET_TABLES[:-1]:
                self.con.execute(f"UPDATE {table} SET {col} = ? WHERE {col} = ?", [new, old])
            self.con.execute("DELETE FROM frame_sets WHERE name = ?", [old])
