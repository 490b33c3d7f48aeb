"""Resident memory back near the working set once a burst has passed.

Python gives the memory of freed objects back to the C allocator, and glibc's allocator keeps much
of it: after a burst of large writes or lists the process stayed at its high-water mark (60 MiB to
260 MiB, for good). :func:`settle_memory` looks at the resident size every few seconds and, when it
has grown :data:`SETTLE_GROWTH` above the lowest size seen since the last settle, has the allocator
give its free pages back (``malloc_trim``). A steady server never trims; one trim costs a few
milliseconds.
"""

from __future__ import annotations

import asyncio
import logging

from ironpool.memory import malloc_trim, resident_bytes

log = logging.getLogger("ironpool.apiserver")

SETTLE_GROWTH = 32 * 1024 * 1024
SETTLE_INTERVAL = 2.0


class MemorySettler:
    """Decides when to trim: :meth:`check` once per interval."""

    def __init__(self, growth: int = SETTLE_GROWTH) -> None:
        self.growth = growth
        self.floor = resident_bytes()
        self.trims = 0

    def check(self) -> None:
        rss = resident_bytes()
        if rss <= self.floor + self.growth:
            self.floor = min(self.floor, rss)  # the working set shrank: measure growth from there
            return
        malloc_trim()
        self.trims += 1
        after = resident_bytes()
        log.debug("memory settled: %d MiB resident -> %d MiB", rss >> 20, after >> 20)
        self.floor = after


async def settle_memory(interval: float = SETTLE_INTERVAL) -> None:
    """Run :class:`MemorySettler` every ``interval`` seconds until cancelled."""
    settler = MemorySettler()
    while True:
        await asyncio.sleep(interval)
        settler.check()
