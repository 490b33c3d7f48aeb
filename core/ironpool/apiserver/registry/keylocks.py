"""One lock per object key, held by a read-modify-write from its read until its write committed.

Writes are group-committed by the store: between an update's read and its write other requests
run. Two updates of one object through this apiserver would then both read the same version and
one would lose (a conflict, read again, retry); with many writers on one object some would lose
every round. Queueing them on the object's lock makes the second read what the first wrote.
Writers through other apiservers still meet the store's compare-and-swap, and are retried.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class KeyLocks:
    """Locks created on first use and dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def hold(self, key: str) -> _Held:
        """``async with locks.hold(key):`` the key's lock, held for the block."""
        return _Held(self._locks, key)

    def __len__(self) -> int:
        return len(self._locks)


class _Held:
    """One hold of a key's lock. A class, not a generator-based context manager: every write takes
    one, and a generator costs it several times as much to enter and leave."""

    __slots__ = ("_key", "_lock", "_locks")

    def __init__(self, locks: dict[str, tuple[asyncio.Lock, int]], key: str) -> None:
        self._locks, self._key = locks, key
        self._lock: asyncio.Lock | None = None

    async def __aenter__(self) -> None:
        lock, users = self._locks.get(self._key) or (asyncio.Lock(), 0)
        self._locks[self._key] = (lock, users + 1)
        self._lock = lock
        try:
            await lock.acquire()
        except BaseException:
            self._release_use()
            raise

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._lock is not None
        self._lock.release()
        self._release_use()

    def _release_use(self) -> None:
        lock, users = self._locks[self._key]
        if users == 1:
            del self._locks[self._key]
        else:
            self._locks[self._key] = (lock, users - 1)
