"""The embedded store: one SQLite file in WAL mode, an event log for watches, an in-memory ring.

Its tables are :mod:`.sqlite_schema`'s: the current objects, an event log of every write (kept to
the last ``history`` revisions and at most ``history-bytes``, :mod:`.sqlite_log`) and the guard keys.
A burst of large writes leaves neither a large WAL file nor a large page cache behind
(:mod:`.sqlite_wal`).

Durability: ``journal_mode=WAL`` with ``synchronous=NORMAL`` commits each write to the WAL file
without an fsync. A committed write survives the process being killed (``kill -9``), since the data
is in the OS page cache; only a power loss or kernel crash can lose the most recent commits. That is
the guarantee this backend gives; use etcd when machine failures must not lose writes.

All SQLite calls run synchronously on the event loop: each is a few microseconds (no fsync).
Writes are group-committed: a write is queued, and at the end of the event loop's turn every queued
write commits in one transaction, each at its own revision in a savepoint of its own (one failing
leaves the others), and only then do their callers hear back. A commit costs several times a
write's statements, so concurrent writers (an apiserver under load) share it. Watchers never slow
writers down: writes append to an in-memory ring and wake watchers; a watcher that fell behind
the ring reads from the ``events`` table instead, in batches (:meth:`.sqlite_log.EventLog.replay`),
and a watcher behind the compacted log gets
:class:`~ironpool.store.interface.RevisionCompacted` (410 Expired over HTTP).

The ring is bounded twice: it holds at most ``2 * ring`` events and at most ``ring-bytes`` bytes of
documents (:attr:`StoreEvent.held_bytes`: a small event is counted with its decoded document, a
large one holds only its JSON, see :data:`~ironpool.store.interface.DECODED_MAX`). Twenty writes of a
1.5 MiB object thus hold about 30 MB, not twenty decoded copies of it.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import parse_qs

import orjson

from ironpool.store.interface import (
    DEFAULT_RING_BYTES,
    SCAN_PAGE_BYTES,
    SCAN_PAGE_KEYS,
    Document,
    EventType,
    Guard,
    GuardConflict,
    GuardValue,
    KeyExists,
    KeyNotFound,
    RawStorePage,
    RevisionConflict,
    ScanPage,
    Store,
    StoreError,
    StoreEvent,
    StorePage,
)
from ironpool.store.sqlite_log import DEFAULT_HISTORY, DEFAULT_HISTORY_BYTES, EventLog
from ironpool.store.sqlite_rows import object_rows
from ironpool.store.sqlite_schema import TYPE_CODE, connect, exclusive_lock
from ironpool.store.sqlite_wal import WalKeeper
from ironpool.store.waiters import PrefixWaiters

DEFAULT_RING = 4096
#: one transaction holds queued writes up to about this many bytes (the WAL grows to a transaction)
MAX_COMMIT_BYTES = 32 * 1024 * 1024


def _with_revision(obj: Document, rev: int) -> Document:
    """A shallow copy of ``obj`` whose ``metadata.resourceVersion`` is ``rev``."""
    doc = dict(obj)
    metadata = dict(doc.get("metadata") or {})
    metadata["resourceVersion"] = str(rev)
    doc["metadata"] = metadata
    return doc


def _positive(options: dict[str, str], name: str, default: int) -> int:
    value = options.get(name, str(default))
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"--store: sqlite option {name}={value!r} must be a positive integer")
    return int(value)


#: keys per ``SELECT ... IN`` of :meth:`SQLiteStore.read_guards` (well under SQLite's 32,766 bound
#: on a statement's parameters)
_GUARD_CHUNK = 500


@dataclass(frozen=True, slots=True)
class _Write:
    """One queued write: ADDED (create), MODIFIED (update) or DELETED (delete) of ``key``."""

    type: EventType
    key: str
    obj: Document | None
    expected: int | None
    guards: tuple[Guard, ...]


class SQLiteStore(Store):
    """:class:`Store` on one SQLite file (see the module docstring for layout and guarantees).

    ``path`` may carry options as a query string:
    ``/var/lib/ironpool.db?history=100000&history-bytes=1073741824&ring=4096&ring-bytes=67108864``.
    Use one instance per file and per event loop.
    """

    def __init__(self, path: str, *, history: int | None = None, ring: int | None = None,
                 ring_bytes: int | None = None, history_bytes: int | None = None) -> None:
        path, _, query = path.partition("?")
        options = {k: v[-1] for k, v in parse_qs(query).items()}
        known = ("history", "history-bytes", "ring", "ring-bytes")
        unknown = set(options) - set(known)
        if unknown:
            raise ValueError(f"--store: unknown sqlite option(s) {sorted(unknown)}; "
                             f"known: {', '.join(known)}")
        self.history = history or _positive(options, "history", DEFAULT_HISTORY)
        self.history_bytes = history_bytes or _positive(options, "history-bytes", DEFAULT_HISTORY_BYTES)
        self.ring_size = ring or _positive(options, "ring", DEFAULT_RING)
        self.ring_bytes = ring_bytes or _positive(options, "ring-bytes", DEFAULT_RING_BYTES)
        if not path:
            raise ValueError("--store: sqlite URL needs a file path, e.g. sqlite:///var/lib/ironpool.db")
        self._lock: IO[bytes] | None = None
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._lock = exclusive_lock(path)
        self.path = path
        try:
            self._db = connect(path)
        except BaseException:
            if self._lock is not None:
                self._lock.close()  # a refused file (a newer schema) leaves no lock behind
            raise
        self._log = EventLog(self._db, self.history, self.history_bytes)
        self._rev = self._log.last_revision
        # ring[i] has revision ring_base + i; revisions are contiguous because every write lands here.
        self._ring: list[StoreEvent] = []
        self._ring_base = self._rev + 1
        self._ring_held = 0  # the ring's StoreEvent.held_bytes, summed
        self._waiters = PrefixWaiters()  # watchers that read everything, by prefix
        self._closed = False
        self._queue: builtins.list[tuple[_Write, asyncio.Future[Document]]] = []
        self._wal = WalKeeper(self._db)

    # -- reads ---------------------------------------------------------------------------------

    async def get(self, key: str) -> Document | None:
        raw = self._get_raw(key)
        return None if raw is None else orjson.loads(raw)

    async def get_raw(self, key: str) -> bytes | None:
        return self._get_raw(key)

    def _get_raw(self, key: str) -> bytes | None:
        self._check_open()
        row = self._db.execute("SELECT value FROM objects WHERE key=?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    async def list(
        self,
        prefix: str,
        *,
        limit: int = 0,
        start_after: str | None = None,
        revision: int | None = None,
        predicate: Callable[[Document], bool] | None = None,
    ) -> StorePage:
        read_rev = self._read_revision(limit, revision)
        rows = object_rows(self._db, prefix, start_after, read_rev, read_rev == self._rev)
        items: builtins.list[Document] = []
        more = False
        for _key, raw in rows:
            doc = orjson.loads(raw)
            if predicate is not None and not predicate(doc):
                continue
            if limit and len(items) >= limit:
                more = True
                break
            items.append(doc)
        return StorePage(items=items, revision=read_rev, more=more)

    async def list_raw(
        self, prefix: str, *, limit: int = 0, start_after: str | None = None, revision: int | None = None
    ) -> RawStorePage:
        read_rev = self._read_revision(limit, revision)
        rows = object_rows(self._db, prefix, start_after, read_rev, read_rev == self._rev)
        if not limit:
            return RawStorePage([raw for _key, raw in rows], read_rev, False)
        items = [raw for _key, raw in itertools.islice(rows, limit + 1)]
        more = len(items) > limit
        return RawStorePage(items[:limit], read_rev, more)

    def _read_revision(self, limit: int, revision: int | None) -> int:
        self._check_open()
        if limit < 0:
            raise ValueError("limit must be >= 0")
        read_rev = self._rev if revision is None or revision == 0 else revision
        if read_rev > self._rev:
            raise StoreError(f"revision {read_rev} is in the future (current {self._rev})")
        self._log.check_kept(read_rev)
        return read_rev

    async def scan_raw(
        self, prefix: str, *, start_after: str | None = None, revision: int | None = None,
        until: str | None = None, keys_only: bool = False, page_bytes: int = SCAN_PAGE_BYTES,
    ) -> AsyncGenerator[ScanPage, None]:
        read_rev = self._read_revision(0, revision)
        after = start_after
        while True:
            # A page is one statement, run before the loop turns; the next page reads at read_rev.
            page = self._scan_page(prefix, after, until, read_rev, keys_only, page_bytes)
            yield page
            if not page.more:
                return
            after = page.keys[-1]

    def _scan_page(self, prefix: str, after: str | None, until: str | None, read_rev: int, keys_only: bool,
                   page_bytes: int) -> ScanPage:
        self._check_open()
        self._log.check_kept(read_rev)  # compacted past the scan's revision since its first page
        keys: builtins.list[str] = []
        items: builtins.list[bytes] = []
        size = 0
        rows = object_rows(self._db, prefix, after, read_rev, read_rev == self._rev, keys_only=keys_only,
                           limit=SCAN_PAGE_KEYS + 1)
        try:
            for key, raw in rows:
                if until is not None and key > until:
                    return ScanPage(keys, items, read_rev, False)
                if len(keys) >= SCAN_PAGE_KEYS or size >= page_bytes:
                    return ScanPage(keys, items, read_rev, True)
                keys.append(key)
                if not keys_only:
                    items.append(bytes(raw))
                    size += len(raw)
        finally:
            rows.close()
        return ScanPage(keys, items, read_rev, False)

    async def current_revision(self) -> int:
        return self._rev

    @property
    def revision(self) -> int:
        """The revision of the last write (synchronous form of :meth:`current_revision`)."""
        return self._rev

    @property
    def compacted_revision(self) -> int:
        """The highest revision whose event is no longer kept; watches must start at or after it."""
        return self._log.compacted

    # -- writes --------------------------------------------------------------------------------

    async def create(self, key: str, obj: Document, *, guards: Sequence[Guard] = ()) -> Document:
        return await self._submit(_Write("ADDED", key, obj, None, tuple(guards)))

    async def update(
        self, key: str, obj: Document, *, expected_revision: int | None = None, guards: Sequence[Guard] = ()
    ) -> Document:
        return await self._submit(_Write("MODIFIED", key, obj, expected_revision, tuple(guards)))

    async def delete(
        self, key: str, *, expected_revision: int | None = None, guards: Sequence[Guard] = ()
    ) -> Document:
        return await self._submit(_Write("DELETED", key, None, expected_revision, tuple(guards)))

    def _submit(self, write: _Write) -> asyncio.Future[Document]:
        """Queue a write for the group commit at the end of this turn of the event loop."""
        self._check_open()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Document] = loop.create_future()
        self._queue.append((write, future))
        if len(self._queue) == 1:
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        """Commit every queued write in one transaction (group commit), each at its own revision.

        Each write runs in a savepoint when it shares the transaction, so one that fails (KeyExists,
        RevisionConflict, GuardConflict) leaves the others; writes see the writes queued before them.
        Their callers learn the outcome only after the COMMIT, so an acknowledged write is durable as
        any commit of this backend is.
        """
        queue, self._queue = self._queue, []
        if self._closed:
            for _, future in queue:
                if not future.done():
                    future.set_exception(StoreError("store is closed"))
            return
        shared = len(queue) > 1
        outcomes: builtins.list[StoreEvent | StoreError] = []
        rev = self._rev
        compacted: int | None = None
        logged = 0  # bytes the writes add to the log
        try:
            self._db.execute("BEGIN IMMEDIATE")
            for at, (write, _) in enumerate(queue):
                if shared:
                    self._db.execute("SAVEPOINT w")
                try:
                    event, prev = self._apply(write, rev + 1)
                except StoreError as exc:
                    self._db.execute("ROLLBACK TO w" if shared else "ROLLBACK")
                    outcomes.append(exc)
                else:
                    outcomes.append(event)
                    logged += len(event.raw or b"") + len(prev or b"")
                    rev += 1
                if shared:
                    self._db.execute("RELEASE w")
                if logged >= MAX_COMMIT_BYTES and at + 1 < len(queue):
                    # A transaction is written to the WAL whole: the rest goes in the next one.
                    self._queue[:0] = queue[at + 1:]
                    queue = queue[:at + 1]
                    asyncio.get_running_loop().call_soon(self._flush)
                    break
            if self._db.in_transaction:
                compacted = self._log.maybe_compact(rev, rev - self._rev, logged)
                self._db.execute("COMMIT")
        except BaseException as exc:
            if self._db.in_transaction:  # a failed COMMIT (disk full) leaves it open too
                self._db.execute("ROLLBACK")
            failure = exc if isinstance(exc, Exception) else StoreError(f"write interrupted: {exc!r}")
            for _, future in queue:
                if not future.done():
                    future.set_exception(failure)
            if not isinstance(exc, Exception):
                raise
            return
        self._rev = rev
        if compacted is not None:
            self._log.compacted = compacted
        self._wal.written(logged)
        events = [o for o in outcomes if not isinstance(o, StoreError)]
        for event in events:
            self._keep(event)
        # The watchers are told once per commit, not once per write: each publish walks them all.
        self._waiters.publish(events)
        for (_, future), outcome in zip(queue, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, StoreError):
                future.set_exception(outcome)
            else:
                future.set_result(orjson.loads(outcome.raw or b"{}"))

    def _apply(self, write: _Write, rev: int) -> tuple[StoreEvent, bytes | None]:
        """The statements of one write at revision ``rev``, inside the open transaction; its event,
        and the state before it (None for a create), as logged."""
        key, guards = write.key, write.guards
        prev: bytes | None = None
        if write.type == "ADDED":
            assert write.obj is not None
            doc = _with_revision(write.obj, rev)
            raw = orjson.dumps(doc)
            try:
                self._db.execute(
                    "INSERT INTO objects (key, value, create_rev, mod_rev) VALUES (?, ?, ?, ?)",
                    (key, raw, rev, rev),
                )
            except sqlite3.IntegrityError:
                raise KeyExists(key) from None
            self._guard(guards, rev)
        elif write.type == "MODIFIED":
            assert write.obj is not None
            doc = _with_revision(write.obj, rev)
            raw = orjson.dumps(doc)
            prev = self._current(key, write.expected)
            self._guard(guards, rev)
            self._db.execute("UPDATE objects SET value=?, mod_rev=? WHERE key=?", (raw, rev, key))
        else:
            prev = self._current(key, write.expected)
            self._guard(guards, rev)
            doc = _with_revision(orjson.loads(prev), rev)
            raw = orjson.dumps(doc)
            self._db.execute("DELETE FROM objects WHERE key=?", (key,))
        self._db.execute(
            "INSERT INTO events (rev, type, key, value, prev) VALUES (?, ?, ?, ?, ?)",
            (rev, TYPE_CODE[write.type], key, raw, prev),
        )
        return StoreEvent(type=write.type, key=key, object=doc, revision=rev, raw=raw), prev

    def _current(self, key: str, expected_revision: int | None) -> bytes:
        row = self._db.execute("SELECT value, mod_rev FROM objects WHERE key=?", (key,)).fetchone()
        if row is None:
            raise KeyNotFound(key)
        if expected_revision is not None and int(row[1]) != expected_revision:
            raise RevisionConflict(f"{key}: revision is {row[1]}, expected {expected_revision}")
        return bytes(row[0])

    def _guard(self, guards: Sequence[Guard], rev: int) -> None:
        """Check every guard against its stored revision, then write them (inside the write's
        transaction: a GuardConflict rolls the object write back too)."""
        if not guards:
            return
        # Revisions decide; a value (a pool's usage: every charge on it) is decoded only to tell
        # the loser what it lost to.
        failed = [g.key for g in guards if self._guard_revision(g.key) != g.revision]
        if failed:
            raise GuardConflict(self._read_guards(failed))
        for g in guards:
            if g.check_only:
                continue
            if g.value is None:
                self._db.execute("DELETE FROM guards WHERE key=?", (g.key,))
            else:
                self._db.execute(
                    "INSERT INTO guards (key, value, rev) VALUES (?, ?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value, rev=excluded.rev",
                    (g.key, orjson.dumps(g.value), rev),
                )

    def _guard_revision(self, key: str) -> int:
        row = self._db.execute("SELECT rev FROM guards WHERE key=?", (key,)).fetchone()
        return 0 if row is None else int(row[0])

    def _read_guards(self, keys: Sequence[str]) -> builtins.list[GuardValue]:
        # One statement per chunk, not one per key: admission reads usage keys ahead in batches of
        # dozens (binds over 5,000 pools: 0.17 s of CPU in these reads -> 0.01 s).
        found: dict[str, tuple[bytes, int]] = {}
        for start in range(0, len(keys), _GUARD_CHUNK):
            chunk = keys[start:start + _GUARD_CHUNK]
            marks = ",".join("?" * len(chunk))
            for key, value, rev in self._db.execute(
                    f"SELECT key, value, rev FROM guards WHERE key IN ({marks})", tuple(chunk)):
                found[key] = (value, rev)
        out = []
        for key in keys:
            row = found.get(key)
            out.append(GuardValue(key, None, 0) if row is None else GuardValue(key, orjson.loads(row[0]),
                                                                               int(row[1])))
        return out

    async def read_guards(self, keys: Sequence[str]) -> builtins.list[GuardValue]:
        self._check_open()
        return self._read_guards(keys)

    async def compact(self, revision: int) -> None:
        self._check_open()
        if revision > self._rev:
            raise StoreError(f"cannot compact to revision {revision}: current is {self._rev}")
        self._log.compact(revision)

    def _keep(self, event: StoreEvent) -> None:
        """Add a committed event to the ring (watchers are told by the caller)."""
        self._ring.append(event)
        self._ring_held += event.held_bytes
        if len(self._ring) >= 2 * self.ring_size or self._ring_held > self.ring_bytes:
            # Down to half of either bound at once, so trimming stays rare (amortised).
            drop, held = 0, self._ring_held
            while drop < len(self._ring) and (len(self._ring) - drop > self.ring_size
                                              or held > self.ring_bytes // 2):
                held -= self._ring[drop].held_bytes
                drop += 1
            del self._ring[:drop]
            self._ring_base += drop
            self._ring_held = held

    # -- watch ---------------------------------------------------------------------------------

    async def watch(self, prefix: str, revision: int) -> AsyncIterator[StoreEvent]:
        self._check_open()
        self._log.check_kept(revision)
        cursor = revision
        while not self._closed:
            if cursor < self._ring_base - 1:
                # Behind the ring: replay from the event log, a batch at a time.
                batch, cursor = self._log.replay(prefix, cursor, self._ring_base - 1)
                for event in batch:
                    yield event
            elif cursor < self._rev:
                event = self._ring[cursor + 1 - self._ring_base]
                cursor = event.revision
                if event.key.startswith(prefix):
                    yield event
            else:
                cursor = await self._waiters.wait(prefix, cursor)

    # -- lifecycle -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("store is closed")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._wal.stop()
        self._waiters.wake_all()
        self._db.close()
        if self._lock is not None:
            self._lock.close()  # releases the flock
