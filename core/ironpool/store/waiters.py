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
    """The waiting watchers of one history (see the module docstring).

    Waiters are grouped by prefix, and an event finds the groups it concerns by looking up each of
    its key's prefixes that end at a ``/`` (keys are paths), so a publish costs a few lookups per
    event rather than a test per waiter. A waiter left asleep is not touched at all: the revision
    published last before the batch that wakes it is where it reads on from.
    """

    def __init__(self) -> None:
        self._groups: dict[str, list[_Waiter]] = {}
        self._odd: set[str] = set()  # prefixes not ending at a "/": tested against every key
        self._published = 0  # the revision of the last event published

    def __len__(self) -> int:
        return sum(len(group) for group in self._groups.values())

    async def wait(self, prefix: str, cursor: int) -> int:
        """Until an event under ``prefix`` follows ``cursor`` (the revision of the last event the
        watcher read; every later one must be published here), or :meth:`wake_all`. Returns the
        position to read on from: ``cursor``, or later when only other prefixes' events came."""
        waiter = _Waiter(prefix, cursor, asyncio.get_running_loop().create_future())
        group = self._groups.get(prefix)
        if group is None:
            group = self._groups[prefix] = []
            if prefix and not prefix.endswith("/"):
                self._odd.add(prefix)
        group.append(waiter)
        try:
            await waiter.woken
        except asyncio.CancelledError:
            group = self._groups.get(prefix)
            if group is not None:
                group[:] = [w for w in group if w is not waiter]
                if not group:
                    del self._groups[prefix]
                    self._odd.discard(prefix)
            raise
        return waiter.cursor

    def _wake(self, prefix: str, position: int) -> None:
        for waiter in self._groups.pop(prefix):
            waiter.cursor = max(waiter.cursor, position)
            if not waiter.woken.done():
                waiter.woken.set_result(None)
        self._odd.discard(prefix)

    def publish(self, events: Sequence[StoreEvent]) -> None:
        """New events, in revision order, after every waiter's cursor."""
        if not events:
            return
        before, self._published = self._published, events[-1].revision
        groups = self._groups
        if not groups:
            return
        hit: set[str] = set()
        for event in events:
            key = event.key
            if "" in groups:
                hit.add("")
            end = key.find("/")
            while end >= 0:
                if (prefix := key[: end + 1]) in groups:
                    hit.add(prefix)
                end = key.find("/", end + 1)
            hit.update(p for p in self._odd if key.startswith(p))
        for prefix in hit:
            # Events before this batch were all other prefixes': skip them (see the class doc).
            self._wake(prefix, before)

    def wake_all(self) -> None:
        """Wake every waiter (the history failed or the store is closing)."""
        for prefix in list(self._groups):
            self._wake(prefix, self._published)
