"""Watchers that have read everything and wait for the next change under their prefix.

A store's watchers follow one history (a backend's ring of recent events), each for its own key
prefix. Waking every one of them on every write costs a task switch each, and an apiserver holds
a dozen or more (its admission and RBAC mirrors watch one kind each, besides the HTTP watches): on
a busy store that was a large share of what a write cost. Here a write wakes only the watchers it
concerns; the others' positions move past it while they sleep, so when they wake they do not walk
events that were never theirs, and a long sleep does not leave them behind the ring.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from ironpool.store.interface import StoreEvent


@dataclass(slots=True)
class _Waiter:
    prefix: str
    cursor: int
    woken: asyncio.Future[None] = field(repr=False)


class PrefixWaiters:
    """The waiting watchers of one history (see the module docstring)."""

    def __init__(self) -> None:
        self._waiting: list[_Waiter] = []

    async def wait(self, prefix: str, cursor: int) -> int:
        """Until an event under ``prefix`` follows ``cursor`` (the revision of the last event the
        watcher read; every later one must be published here), or :meth:`wake_all`. Returns the
        position to read on from: ``cursor``, or later when only other prefixes' events came."""
        waiter = _Waiter(prefix, cursor, asyncio.get_running_loop().create_future())
        self._waiting.append(waiter)
        try:
            await waiter.woken
        except asyncio.CancelledError:
            self._waiting = [w for w in self._waiting if w is not waiter]
            raise
        return waiter.cursor

    def publish(self, events: Sequence[StoreEvent]) -> None:
        """New events, in revision order, after every waiter's cursor."""
        if not events or not self._waiting:
            return
        last = events[-1].revision
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            prefix = waiter.prefix
            if any(e.key.startswith(prefix) for e in events):
                if not waiter.woken.done():
                    waiter.woken.set_result(None)
            else:
                waiter.cursor = last  # nothing of its own: it would only have skipped these
                self._waiting.append(waiter)

    def wake_all(self) -> None:
        """Wake every waiter (the history failed or the store is closing)."""
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            if not waiter.woken.done():
                waiter.woken.set_result(None)
