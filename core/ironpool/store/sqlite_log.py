"""The SQLite store's event log (the ``events`` table): kept to the last ``history`` revisions and,
when it holds more than ``history_bytes``, compacted to half of that at once (1 GiB by default: a
client rewriting a 1.5 MiB object cannot fill the disk with its versions); replayed to watchers
that fell behind the store's in-memory ring, in batches of at most :data:`_HISTORY_BATCH` events and
:data:`HISTORY_BATCH_BYTES` bytes.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ironpool.store.interface import RevisionCompacted, StoreEvent
from ironpool.store.sqlite_schema import EVENT_TYPES, prefix_end

DEFAULT_HISTORY = 100_000
DEFAULT_HISTORY_BYTES = 1024 * 1024 * 1024
HISTORY_BATCH_BYTES = 8 * 1024 * 1024
_COMPACT_EVERY = 1000
_HISTORY_BATCH = 256


class EventLog:
    """The ``events`` table of one store file: its compaction point, size and replay."""

    def __init__(self, db: sqlite3.Connection, history: int, history_bytes: int) -> None:
        self._db = db
        self.history = history
        self.history_bytes = history_bytes
        row = db.execute("SELECT value FROM meta WHERE name='compacted'").fetchone()
        self.compacted = int(row[0]) if row else 0  # the highest revision no longer kept
        (max_rev,) = db.execute("SELECT MAX(rev) FROM events").fetchone()
        self.last_revision = max(int(max_rev or 0), self.compacted)  # as opened
        self._writes_since_compact = 0
        self.held = self._log_bytes(self.compacted, None)  # the bytes of the logged events

    def check_kept(self, revision: int) -> None:
        """Raise RevisionCompacted when the events after ``revision`` are no longer all kept."""
        if revision < self.compacted:
            raise RevisionCompacted(f"revision {revision} has been compacted (oldest kept {self.compacted})")

    def maybe_compact(self, rev: int, writes: int, logged: int) -> int | None:
        """Every :data:`_COMPACT_EVERY` writes, drop the history older than the window, and at once
        when the log holds more than ``history_bytes``, down to half of that (inside the transaction
        being committed); the new compaction point, if any, for the caller to set once committed."""
        self.held += logged
        self._writes_since_compact += writes
        upto = self.compacted
        if self.held > self.history_bytes:
            upto = self._revision_keeping(self.history_bytes // 2, rev)
        if self._writes_since_compact >= _COMPACT_EVERY:
            self._writes_since_compact = 0
            upto = max(upto, rev - self.history)
        if upto <= self.compacted:
            return None
        self._drop(upto)
        return upto

    def compact(self, revision: int) -> None:
        """Drop the events up to ``revision`` in a transaction of its own."""
        if revision <= self.compacted:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._drop(revision)
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        self.compacted = revision

    def _log_bytes(self, after: int, upto: int | None) -> int:
        """The bytes of the logged events in (after, upto]."""
        sql = "SELECT ifnull(SUM(length(value) + ifnull(length(prev), 0)), 0) FROM events WHERE rev > ?"
        params = [after] if upto is None else [after, upto]
        (total,) = self._db.execute(sql + ("" if upto is None else " AND rev <= ?"), params).fetchone()
        return int(total)

    def _revision_keeping(self, keep: int, rev: int) -> int:
        """The revision up to which to drop the log so that it holds at most ``keep`` bytes (the
        last write is always kept)."""
        excess = self.held - keep
        upto = self.compacted
        rows = self._db.execute(
            "SELECT rev, length(value) + ifnull(length(prev), 0) FROM events WHERE rev > ? AND rev < ? "
            "ORDER BY rev", (self.compacted, rev))
        for row_rev, size in rows:
            upto = row_rev
            excess -= size
            if excess <= 0:
                break
        return int(upto)

    def _drop(self, upto: int) -> None:
        self.held -= self._log_bytes(self.compacted, upto)
        self._db.execute("DELETE FROM events WHERE rev <= ?", (upto,))
        self._db.execute(
            "INSERT INTO meta (name, value) VALUES ('compacted', ?) "
            "ON CONFLICT(name) DO UPDATE SET value=excluded.value",
            (upto,),
        )

    def replay(self, prefix: str, after: int, upto: int) -> tuple[list[StoreEvent], int]:
        """Logged events under ``prefix`` in (after, upto], at most a batch; and the revision covered."""
        self.check_kept(after)
        end = prefix_end(prefix)
        sql = "SELECT rev, type, key, value FROM events WHERE rev > ? AND rev <= ? AND key >= ?"
        params: list[Any] = [after, upto, prefix]
        if end is not None:
            sql += " AND key < ?"
            params.append(end)
        events: list[StoreEvent] = []
        size = 0
        for r, t, k, v in self._db.execute(sql + " ORDER BY rev LIMIT ?", [*params, _HISTORY_BATCH]):
            events.append(StoreEvent.from_raw(EVENT_TYPES[t], k, bytes(v), r))
            size += len(v)
            if size >= HISTORY_BATCH_BYTES:
                return events, r  # a full batch in bytes: the rest on the next call
        covered = events[-1].revision if len(events) == _HISTORY_BATCH else upto
        return events, covered

