"""Embeddings in the catalog, keyed by (content hash, encoder fingerprint), and recorded skips."""

from __future__ import annotations

from typing import Any

from perception_gap.catalog import host
from perception_gap.catalog.baselines import bounded_read, paths_table
from perception_gap.catalog.schema import SOURCE_COLUMNS, pa


def embedding_tables(encoder: str, fingerprint: str, hashes: list[str], vectors: Any,
                     skips: list[tuple[str, str]] = ()) -> tuple[pa.Table, pa.Table]:
    """One batch as Arrow rows of the `embeddings` and `embedding_skips` tables (column for column
    what the catalog stores; the Ray engine writes these as Parquet shards)."""
    import numpy as np

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = vectors.shape if vectors.ndim == 2 else (0, 0)
    offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
    emb = pa.table({
        "content_hash": pa.array(list(hashes)[:n], pa.string()),
        "encoder": pa.array([encoder] * n, pa.string()),
        "fingerprint": pa.array([fingerprint] * n, pa.string()),
        "dim": pa.array([dim] * n, pa.int32()),
        "vector": pa.ListArray.from_arrays(offsets, pa.array(vectors.ravel(), pa.float32())),
    })
    sk = pa.table({"content_hash": pa.array([h for h, _ in skips], pa.string()),
                   "fingerprint": pa.array([fingerprint] * len(skips), pa.string()),
                   "reason": pa.array([r for _, r in skips], pa.string())})
    return emb, sk


class EmbeddingsMixin:
    """Cached embeddings; mixed into `Catalog`, which provides `con` and `_transaction`."""

    # -- embeddings --------------------------------------------------------------------------
    def hashes_needing_embedding(self, set_names: list[str] | None, fingerprint: str) -> list[tuple[Any, ...]]:
        """(content_hash, path, member, frame_index, container_hash, dtype, format) of usable frames
        with neither an embedding nor a recorded skip for this encoder fingerprint; all sets when
        `set_names` is None. Path, member, index and container hash say where to decode it and
        what to verify first, as in `hashes_needing_stats`."""
        where = "" if set_names is None else "AND f.set_name IN (SELECT unnest(?)) "
        params: list[Any] = [] if set_names is None else [set_names]
        return [tuple(r) for r in self.con.execute(
            f"SELECT {SOURCE_COLUMNS}, min(f.dtype), min(f.format) FROM frames f "
            "LEFT JOIN frame_stats s ON s.content_hash = f.content_hash "
            f"WHERE f.status = 'ok' AND f.content_hash IS NOT NULL AND s.error IS NULL {where}"
            "AND f.content_hash NOT IN (SELECT content_hash FROM embeddings WHERE fingerprint = ?) "
            "AND f.content_hash NOT IN (SELECT content_hash FROM embedding_skips WHERE fingerprint = ?) "
            "GROUP BY f.content_hash ORDER BY 2, 3, 4, 1", params + [fingerprint, fingerprint]).fetchall()]

    def write_embeddings(self, encoder: str, fingerprint: str, hashes: list[str], vectors: "Any",
                         skips: list[tuple[str, str]] = ()) -> None:
        """Store one batch of (N, D) float32 vectors and skip reasons in one transaction.

        Rows already present (same content and fingerprint) are left as they are, so a batch
        replayed after an interruption never duplicates.
        """
        batch, sk = embedding_tables(encoder, fingerprint, hashes, vectors, skips)  # DuckDB reads them by name
        with self._transaction():
            if batch.num_rows:
                self.con.execute(
                    "INSERT OR IGNORE INTO embeddings (content_hash, encoder, fingerprint, dim, vector) "
                    "SELECT content_hash, encoder, fingerprint, dim, vector FROM batch")
            if sk.num_rows:
                self.con.execute("INSERT OR IGNORE INTO embedding_skips SELECT content_hash, fingerprint, reason FROM sk")

    def load_embeddings(self, set_name: str, fingerprint: str,
                        paths: tuple[str, ...] | None = None) -> tuple[list[dict[str, Any]], "Any"]:
        """Usable frames of a set that have an embedding: (frame rows, (N, D) float32 array); only
        those at `paths` (rgb_path) when given (a baseline sample).

        Two reads, so the cost follows the set, not the table: the frames joined with the keys of
        their embeddings (no vectors: DuckDB would otherwise read every vector of the table into the
        join, 21 s and 6.7 GiB for 10,000 frames next to a 10^6-frame baseline), then the vectors of
        those rows by rowid, which skips the row groups that hold none of them (a new set's rows lie
        together at the end of the table). A sample's reads run under `bounded_read`: its rows are
        spread over every block of the table.
        """
        import numpy as np

        sample = paths_table(paths or ())  # noqa: F841 (DuckDB reads it by name)
        only = "" if paths is None else "AND f.rgb_path IN (SELECT p FROM sample) "
        # a fresh cursor: `sql` refuses to run while an earlier `execute` result is unconsumed
        with bounded_read(self.con, paths is not None):
            keys = host.cursor(self.con, self._key).sql(
                "SELECT f.pair_key, f.episode, f.step, f.rgb_path, f.action, f.proprio, e.rowid AS _row FROM frames f "
                "JOIN embeddings e ON e.content_hash = f.content_hash AND e.fingerprint = $fp "
                f"WHERE f.set_name = $set AND f.status = 'ok' {only}ORDER BY f.episode NULLS FIRST, f.step NULLS FIRST, f.rgb_path",
                params={"fp": fingerprint, "set": set_name}).to_arrow_table()
            n = keys.num_rows
            if n == 0:
                return [], np.zeros((0, 0), np.float32)
            rows = keys.column("_row").to_numpy()
            ids = pa.table({"r": pa.array(np.unique(rows), pa.int64())})  # noqa: F841 (DuckDB reads it by name)
            tbl = host.cursor(self.con, self._key).sql(
                "SELECT rowid AS r, vector FROM embeddings WHERE rowid BETWEEN $lo AND $hi AND rowid IN (SELECT r FROM ids)",
                params={"lo": int(rows.min()), "hi": int(rows.max())}).to_arrow_table()
        vec = tbl.column("vector").combine_chunks()
        dim = len(vec[0])
        found = tbl.column("r").to_numpy()
        stored = vec.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(len(found), dim)
        order = np.argsort(found)
        arr = stored[order[np.searchsorted(found, rows, sorter=order)]]  # frames sharing content share a row
        meta = keys.drop_columns(["_row"]).to_pylist()
        return meta, arr

    def embedding_counts(self, fingerprint: str) -> dict[str, int]:
        rows = self.con.execute(
            "SELECT (SELECT count(*) FROM embeddings WHERE fingerprint = ?), "
            "(SELECT count(*) FROM embedding_skips WHERE fingerprint = ?)", [fingerprint, fingerprint]).fetchone()
        return {"embedded": int(rows[0]), "skipped": int(rows[1])}

    def embedding_skip_reasons(self, set_name: str, fingerprint: str) -> list[dict[str, str]]:
        return [{"path": p, "reason": r} for p, r in self.con.execute(
            "SELECT f.rgb_path, k.reason FROM frames f JOIN embedding_skips k ON k.content_hash = f.content_hash "
            "AND k.fingerprint = ? WHERE f.set_name = ? ORDER BY 1", [fingerprint, set_name]).fetchall()]

    def embedded_frames(self, set_name: str, fingerprints: list[str]) -> list[dict[str, Any]]:
        """Usable frames of a set embedded under every one of `fingerprints`, one row per content hash
        (pair_key, episode, step, content_hash, width, height and where to decode it: rgb_path,
        container_path, member, frame_index, container_hash), in episode and step order."""
        rows = self.con.execute(
            "SELECT f.pair_key, f.episode, f.step, f.content_hash, f.rgb_path, f.container_path, f.member, "
            "f.frame_index, f.container_hash, f.width, f.height FROM frames f WHERE f.set_name = ? AND f.status = 'ok' "
            "AND f.content_hash IS NOT NULL AND (SELECT count(DISTINCT e.fingerprint) FROM embeddings e "
            "WHERE e.content_hash = f.content_hash AND e.fingerprint IN (SELECT unnest(?))) = ? "
            "ORDER BY f.episode NULLS FIRST, f.step NULLS FIRST, f.rgb_path",
            [set_name, list(fingerprints), len(set(fingerprints))]).fetchall()
        cols = ("pair_key", "episode", "step", "content_hash", "rgb_path", "container_path", "member",
                "frame_index", "container_hash", "width", "height")
        seen: set[str] = set()
        out = []
        for r in rows:
            if r[3] not in seen:
                seen.add(r[3])
                out.append(dict(zip(cols, r)))
        return out

    def vectors_by_hash(self, fingerprint: str, hashes: list[str], *, counterfactual: bool = False) -> dict[str, Any]:
        """{key: float32 vector} of the stored embeddings among `hashes` (frames' content hashes) for one
        fingerprint; with `counterfactual`, of the counterfactual frames' keys instead
        (`counterfactual_embeddings`: sim frames through a camera model, `perception_gap.camera`)."""
        import numpy as np

        if not hashes:
            return {}
        want = pa.table({"h": pa.array(list(dict.fromkeys(hashes)), pa.string())})  # noqa: F841 (read by name)
        table, col = ("counterfactual_embeddings", "key") if counterfactual else ("embeddings", "content_hash")
        tbl = host.cursor(self.con, self._key).sql(
            f"SELECT {col} AS content_hash, vector FROM {table} WHERE fingerprint = $fp AND {col} IN (SELECT h FROM want)",
            params={"fp": fingerprint}).to_arrow_table()
        if tbl.num_rows == 0:
            return {}
        vec = tbl.column("vector").combine_chunks()
        dim = len(vec[0])
        arr = vec.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(tbl.num_rows, dim)
        return dict(zip(tbl.column("content_hash").to_pylist(), arr))

    def write_counterfactuals(self, encoder: str, fingerprint: str, keys: list[str], vectors: Any) -> None:
        """Store counterfactual frames' vectors (one transaction; rows already present are kept)."""
        batch, _ = embedding_tables(encoder, fingerprint, keys, vectors)  # noqa: F841 (DuckDB reads it by name)
        with self._transaction():
            if batch.num_rows:
                self.con.execute(
                    "INSERT OR IGNORE INTO counterfactual_embeddings (key, encoder, fingerprint, dim, vector) "
                    "SELECT content_hash, encoder, fingerprint, dim, vector FROM batch")
