"""A large baseline set's fixed-size sample of frames, drawn by content and cached per set.

A drift check compares new frames with a stored baseline. Past a size, the baseline side of
every gate is estimated on a sample: the frames whose seeded hash of their content hash is
smallest (a bottom-k sample: uniform over frames, independent of episodes and file order, and a
pure function of the set's content and the seed). The sample is stored with a content key of the
set (`digest`: an order-free XOR of per-frame hashes over path, content hash, episode, step and
pair key), so a later check reuses it while the set is unchanged and draws it again when it is not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from perception_gap.catalog.schema import pa

# per-frame content hash of a usable frame, XORed over the set: equal sets give equal digests in any order
_DIGEST = ("SELECT count(*), coalesce(bit_xor(hash(concat_ws('|', rgb_path, content_hash, episode, step, pair_key))), 0) "
           "FROM frames WHERE set_name = ? AND status = 'ok'")


@dataclass(frozen=True)
class BaselineSample:
    """The frames of a set a drift check reads on the baseline side.

    Attributes:
        set_name: the set.
        n_frames: usable frames in the set.
        size: the sample size asked for.
        seed: the seed of the hash that orders frames.
        digest: content key of the set the sample was drawn from.
        paths: rgb_path of the sampled frames, or None when the set has at most `size` frames (all are read).
        cached: True when the sample came from the catalog's cache (the set unchanged since it was drawn).
    """

    set_name: str
    n_frames: int
    size: int
    seed: int
    digest: int
    paths: tuple[str, ...] | None
    cached: bool

    @property
    def n_used(self) -> int:
        return self.n_frames if self.paths is None else len(self.paths)

    def to_dict(self) -> dict[str, object]:
        return {"n_frames": self.n_frames, "n_used": self.n_used, "size": self.size, "seed": self.seed,
                "sampled": self.paths is not None, "cached": self.cached}


class BaselinesMixin:
    """Cached baseline samples; mixed into `Catalog`, which provides `con` and `_transaction`."""

    def set_digest(self, set_name: str) -> tuple[int, int]:
        """(usable frames, content key) of a set; the key changes when any usable frame is added,
        removed or re-indexed with other content, episode, step or pair key."""
        n, digest = self.con.execute(_DIGEST, [set_name]).fetchone()
        return int(n), int(digest)

    def baseline_sample(self, set_name: str, size: int, seed: int = 0) -> BaselineSample:
        """The set's bottom-`size` sample by seeded content hash, from the cache when the set is unchanged.

        Sets of at most `size` usable frames are not sampled (`paths` None) and nothing is stored.
        """
        n, digest = self.set_digest(set_name)
        if n <= size:
            return BaselineSample(set_name, n, size, seed, digest, None, False)
        row = self.con.execute("SELECT paths FROM baseline_samples WHERE set_name = ? AND size = ? AND seed = ? "
                               "AND digest = ? AND n_frames = ?", [set_name, size, seed, digest, n]).fetchone()
        if row is not None:
            return BaselineSample(set_name, n, size, seed, digest, tuple(row[0]), True)
        paths = [r[0] for r in self.con.execute(
            "SELECT rgb_path FROM frames WHERE set_name = ? AND status = 'ok' "
            "ORDER BY hash(concat(content_hash, '|', ?)), rgb_path LIMIT ?", [set_name, str(seed), size]).fetchall()]
        with self._transaction():
            self.con.execute("DELETE FROM baseline_samples WHERE set_name = ? AND size = ? AND seed = ?",
                             [set_name, size, seed])
            self.con.execute("INSERT INTO baseline_samples (set_name, size, seed, digest, n_frames, paths) "
                             "VALUES (?, ?, ?, ?, ?, ?)", [set_name, size, seed, digest, n, paths])
        return BaselineSample(set_name, n, size, seed, digest, tuple(paths), False)


# DuckDB memory while a sample of a large set is read. Its buffer pool keeps every block a scan
# touched until memory runs short (default limit: 80% of RAM), and a 20,000-frame sample of a
# 10^6-frame baseline touches every block of its table (a sample's frames are spread over all of
# them): without a bound the process would hold the whole embeddings table (3.3 GB of pixel
# vectors) and statistics table after one check. The result itself is at most 20,000 rows (100 MB
# of 1280-d float32 vectors), so a scan under this bound evicts blocks and costs the same CPU.
SAMPLE_READ_MEMORY = "1GB"


@contextmanager
def bounded_read(con: Any, sampled: bool) -> Iterator[None]:
    """Cap DuckDB's buffer pool at `SAMPLE_READ_MEMORY` while a sampled read runs (nothing when not sampled)."""
    if not sampled:
        yield
        return
    con.execute(f"SET memory_limit = '{SAMPLE_READ_MEMORY}'")
    try:
        yield
    finally:
        con.execute("RESET memory_limit")


def paths_table(paths: tuple[str, ...] | list[str]) -> pa.Table:
    """An Arrow table of one column `p` (the paths), for DuckDB to join a set's frames against."""
    return pa.table({"p": pa.array(list(paths), pa.string())})
