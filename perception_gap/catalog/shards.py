"""Merging Parquet shards (written by the Ray engine's workers) into the cache tables, idempotently."""

from __future__ import annotations

from pathlib import Path

SHARD_TABLES = {  # table -> its key: a shard row whose key is already stored is left out
    "frame_stats": ("content_hash",),
    "depth_stats": ("content_hash",),
    "embeddings": ("content_hash", "fingerprint"),
    "embedding_skips": ("content_hash", "fingerprint"),
}


def shard_dir(db_path: str | Path) -> Path:
    """The folder beside a catalog file where the Ray engine's workers write their shards."""
    p = Path(db_path)
    return p.with_name(p.name + ".shards")


def shard_table(path: str | Path) -> str:
    """The cache table a shard file belongs to (its name is `<table>-<id>.parquet`)."""
    table = Path(path).name.split("-", 1)[0]
    if table not in SHARD_TABLES:
        raise ValueError(f"not a shard file name: {Path(path).name}")
    return table


class ShardsMixin:
    """Shard merging; mixed into `Catalog`, which provides `con` and `_transaction`."""

    def merge_shards(self, files: list[str | Path]) -> int:
        """Insert the rows of Parquet shard files into their cache tables in one transaction.

        Rows whose key is already stored are left as they are, and a key repeated across shards
        (a task retried after a lost worker) is inserted once: merging a shard twice, or a shard
        set that overlaps what is stored, never duplicates a row.

        Returns:
            Rows inserted now.
        """
        by_table: dict[str, list[str]] = {}
        for f in files:
            by_table.setdefault(shard_table(f), []).append(str(f))
        added = 0
        with self._transaction():
            for table, paths in sorted(by_table.items()):
                key = ", ".join(SHARD_TABLES[table])
                before = self.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                self.con.execute(
                    f"INSERT OR IGNORE INTO {table} BY NAME SELECT DISTINCT ON ({key}) * "
                    f"FROM read_parquet(?, union_by_name = true) ORDER BY {key}", [paths])
                added += self.con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - before
        return added
