"""The SQLite store's file: its tables, how it is opened, and the lock that keeps it to one process.

* ``objects(key, value, create_rev, mod_rev)`` holds the current documents; ``value`` is the JSON of
  the document with ``metadata.resourceVersion`` already set to ``mod_rev``, so reads return it as is.
* ``events(rev, type, key, value, prev)`` is the history: one row per write, ``value`` the new state
  (for a DELETED event the last state carrying the deletion's revision) and ``prev`` the state just
  before (NULL for ADDED). ``prev`` makes consistent reads at an older revision possible without
  keeping every version: the state of a key at revision R is its current row if unchanged since R,
  otherwise the ``prev`` of its first event after R. The log is compacted (:mod:`.sqlite_log`); the
  highest removed revision is kept in ``meta`` as ``compacted``.
* ``guards(key, value, rev)`` holds the guard keys (:class:`~ironpool.store.interface.Guard`), each
  with the revision of the object write that last set it; they have no history.

``PRAGMA user_version`` records the schema version (:mod:`.schema`); :func:`connect` migrates an
older file and refuses a newer one before creating or changing anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Callable
from typing import IO

from ironpool.store.interface import EventType, StoreError
from ironpool.store.schema import SCHEMA_VERSION, SchemaInvalid, check_not_newer

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    create_rev INTEGER NOT NULL,
    mod_rev INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    rev INTEGER PRIMARY KEY,
    type INTEGER NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    prev BLOB
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS guards (
    key TEXT PRIMARY KEY,
    value BLOB NOT NULL,
    rev INTEGER NOT NULL
) WITHOUT ROWID;
"""

#: the page cache of the store's connection, in KiB (SQLite allocates it as pages are read)
CACHE_KIB = 64 * 1024
#: what the WAL file is truncated to when SQLite resets it after a checkpoint
WAL_LIMIT_BYTES = 64 * 1024 * 1024

# ``events.type`` holds the index of the event's type here.
EVENT_TYPES: tuple[EventType, EventType, EventType] = ("ADDED", "MODIFIED", "DELETED")
TYPE_CODE: dict[EventType, int] = {t: i for i, t in enumerate(EVENT_TYPES)}


def connect(path: str) -> sqlite3.Connection:
    """The file at ``path`` in WAL mode with ``synchronous=NORMAL``, its tables created; a new file is
    made readable by its owner only (it holds Secrets; SQLite gives its -wal and -shm files the same mode)."""
    if path != ":memory:" and not path.startswith("file:"):
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    # Autocommit mode: transactions are opened explicitly with BEGIN IMMEDIATE.
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=5000")
    # SQLite's default page cache is 2 MiB: past a few thousand objects (and their log) point reads
    # missed it and asked the OS for pages (measured over 7,000 objects: 15 -> 9 us a read).
    db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    # After a checkpoint SQLite reuses the WAL file from its start but keeps its size; past this limit
    # it truncates it instead, so one burst of large writes does not leave a file of its size behind.
    db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
    try:
        migrate(db, path)
    except BaseException:
        db.close()
        raise
    return db


# The columns each table of release 0 (schema version 0) had: what the step from it checks first.
_V0_COLUMNS = {
    "objects": ["key", "value", "create_rev", "mod_rev"],
    "events": ["rev", "type", "key", "value", "prev"],
    "meta": ["name", "value"],
    "guards": ["key", "value", "rev"],
}


def _from_v0(db: sqlite3.Connection, path: str) -> None:
    """Release 0 kept no version. Its layout is version 1's, so the step checks that the tables are
    release 0's (a foreign file is refused, not stamped) and adds what it lacked (guards)."""
    for table, columns in _V0_COLUMNS.items():
        found = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        if found and found != columns:
            raise SchemaInvalid(f"{path}: table {table} has columns {found}, not ironpool's {columns}; "
                                "is this an ironpool database?")
    _create_tables(db)


def _create_tables(db: sqlite3.Connection) -> None:
    # One statement at a time: executescript would commit the migration's transaction first.
    for statement in filter(str.strip, _SCHEMA.split(";")):
        db.execute(statement)


#: version -> the step that migrates a file of that version to the next one (inside one transaction)
MIGRATIONS: dict[int, Callable[[sqlite3.Connection, str], None]] = {0: _from_v0}


def schema_version(db: sqlite3.Connection) -> int:
    (version,) = db.execute("PRAGMA user_version").fetchone()
    return int(version)


def migrate(db: sqlite3.Connection, path: str) -> None:
    """Bring the file to :data:`SCHEMA_VERSION`: a new file gets the tables, an older one the
    migration steps from its version up; a newer one is refused (SchemaTooNew) untouched."""
    found = schema_version(db)
    check_not_newer(path, found)
    if found == SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        found = schema_version(db)  # another connection may have migrated it meanwhile
        tables = db.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
        if found == 0 and not tables:
            _create_tables(db)
        else:
            for version in range(found, SCHEMA_VERSION):
                MIGRATIONS[version](db, path)
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def exclusive_lock(path: str) -> IO[bytes]:
    """Hold ``PATH.lock`` so a second process cannot run the same store (the revision counter
    lives in this process); the kernel drops the lock when the process dies, even on kill -9."""
    lock = open(f"{path}.lock", "a+b")  # noqa: SIM115 - held for the store's lifetime
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise StoreError(f"{path} is in use by another process (one apiserver per SQLite file)") from None
    return lock


def prefix_end(prefix: str) -> str | None:
    """The smallest key greater than every key starting with ``prefix`` (None: no upper bound)."""
    if not prefix:
        return None
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)
