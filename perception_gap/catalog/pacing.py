"""When a long stage writes its results: in batches sized by rows and by time.

Each catalog write opens and closes the file (readers get in between, see `Catalog.con`), and
that costs with the file's size, not the batch's: ~70 ms to open and ~50-100 ms to close next
to a 10^6-frame baseline. Writing every 512 frames made 10,000 small frames pay 20 writes a
stage; writing when at least `min_rows` are pending *and* `interval_s` have passed since the
last write (or `max_rows` are pending) keeps the writes to one every few seconds whatever the
frame rate, while an interrupted run still loses at most those few seconds of work.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class WritePacer:
    """Says when pending rows are due for a write.

    Args:
        min_rows: never write fewer rows, except at the end (the caller's final flush).
        interval_s: otherwise write once this long has passed since the last write...
        max_rows: ...or once this many rows are pending, whichever comes first.
    """

    min_rows: int
    interval_s: float
    max_rows: int
    _last: float = field(default_factory=time.monotonic)

    def due(self, pending: int) -> bool:
        if pending < self.min_rows:
            return False
        return pending >= self.max_rows or time.monotonic() - self._last >= self.interval_s

    def wrote(self) -> None:
        self._last = time.monotonic()
