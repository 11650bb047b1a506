"""The DuckDB catalog: schema, the `Catalog` class and the writer lock.

Owns everything stored on disk (frame sets, frames, cached statistics, annotations, embeddings,
runs and results), listing, dropping and renaming sets (`sets`) and the one-writer-at-a-time lock; `core` is the only module that imports duckdb.
"""

from perception_gap.catalog.core import CONNECT_WAIT_S, Catalog
from perception_gap.catalog.locking import WriterLock, lock_path
from perception_gap.catalog.schema import DEFAULT_DB, FRAME_COLUMNS, SCHEMA_VERSION

__all__ = ["CONNECT_WAIT_S", "Catalog", "DEFAULT_DB", "FRAME_COLUMNS", "SCHEMA_VERSION", "WriterLock", "lock_path"]
