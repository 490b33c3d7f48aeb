"""One lock per object key, held by a read-modify-write from its read until its write committed.

Writes are group-committed by the store: between an update's read and its write other requests
run. Two updates of one object through this apiserver would then both read the same version and
one would lose (a conflict, read again, retry); with many writers on one object some would lose
every round. Queueing them on the object's lock makes the second read what the first wrote.
Writers through other apiservers still meet the store's compare-and-swap, and are retried.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class KeyLocks:
    """Locks created on first use and dropped when nobody holds or waits for them."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        return len(self._locks)
