"""The SQLite store's WAL and page cache after bursts of writes.

SQLite writes each transaction to the WAL whole, checkpoints it into the database file every 1,000
pages, and then reuses the file from its start without shrinking it: a burst of large writes (a
hundred clients writing 1.5 MiB objects at once) left a WAL of half a gigabyte behind for good, and
the page cache as large as it ever grew. Three things keep both near the working set:

- a transaction (the store's group commit) takes queued writes up to about ``MAX_COMMIT_BYTES``
  (:mod:`.sqlite`), so the WAL never has to hold one burst whole;
- ``journal_size_limit`` (:mod:`.sqlite_schema`) truncates the WAL when SQLite resets it;
- once :data:`SETTLE_AFTER_BYTES` have been written since, and writes have paused for
  :data:`SETTLE_IDLE_SECONDS`, :class:`WalKeeper` checkpoints and truncates the WAL and gives the
  page cache back (``wal_checkpoint(TRUNCATE)``, ``shrink_memory``, then
  :func:`~ironpool.memory.malloc_trim`, so the process's resident size drops too). Small steady
  writes never pay.
"""

from __future__ import annotations

import asyncio
import sqlite3

from ironpool.memory import malloc_trim

SETTLE_AFTER_BYTES = 64 * 1024 * 1024
SETTLE_IDLE_SECONDS = 1.0


class WalKeeper:
    """Settles one connection's WAL and cache once a burst of writes has passed."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._unsettled = 0  # bytes written since the last settle
        self._timer: asyncio.TimerHandle | None = None
        self._stopped = False
        self.settled = 0  # settles done

    def written(self, size: int) -> None:
        """Count ``size`` bytes just committed (in the event loop's thread); past the threshold,
        (re)arm the settle for when writes pause."""
        self._unsettled += size
        if self._unsettled < SETTLE_AFTER_BYTES or self._stopped:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(SETTLE_IDLE_SECONDS, self.settle)

    def settle(self) -> None:
        """Checkpoint the WAL into the database and truncate it; give SQLite's page cache, and what
        the process has freed, back to the system."""
        self._timer = None
        if self._stopped:
            return
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._db.execute("PRAGMA shrink_memory")
        malloc_trim()  # what SQLite and the burst's requests freed, back to the system
        self._unsettled = 0
        self.settled += 1

    def stop(self) -> None:
        """No settle after this (the connection is closing)."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
