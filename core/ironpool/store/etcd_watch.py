"""Watches on etcd: a resumable watch stream, and the feed that fans one stream out to many watchers.

:func:`watch_batches` follows one key range from a revision and survives the loss of its member: it
opens the watch again on the next member from the last revision it delivered.

:class:`Feed` is the store's one watch of its whole object range. Its events go into a ring in
revision order (as the SQLite store's ring), and every local watcher whose position the ring still
covers reads from it, filtering by its prefix; a hundred HTTP watches cost one etcd watch and one
decode per event, not a hundred (Kubernetes' watch cache does the same). A watcher that starts
before the ring or falls behind it opens a watch of its own from its position, so a slow reader
never holds the others up and never loses events; a position etcd has compacted away ends the watch
with :class:`~ironpool.store.interface.RevisionCompacted` (410 Expired over HTTP).

The ring is bounded in events (``2 * size``) and in bytes (``max_bytes`` of
:attr:`StoreEvent.held_bytes`: a large document is held once, as its JSON).
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from ironpool.store.etcd_client import EtcdConnection, retryable, rpc, store_error
from ironpool.store.interface import DEFAULT_RING_BYTES, RevisionCompacted, StoreError, StoreEvent
from ironpool.store.waiters import PrefixWaiters

log = logging.getLogger("ironpool.store.etcd")

Convert = Callable[[Any], StoreEvent]
_BATCH = 256


async def watch_batches(conn: EtcdConnection, start: bytes, end: bytes, after: int,
                        convert: Convert) -> AsyncIterator[list[StoreEvent]]:
    """The events of ``[start, end)`` with revisions above ``after``, a response at a time, for as
    long as the store is open; raises RevisionCompacted when ``after`` is no longer in etcd's
    history, StoreError when no member answered for the connection's retry deadline."""
    m = rpc()
    cursor = after
    failing_since: float | None = None
    delay = 0.05
    while not conn.closed:
        index, stub = conn.watch_stub()
        call = stub.Watch()
        try:
            create = m.WatchCreateRequest(key=start, range_end=end, start_revision=cursor + 1, prev_kv=True)
            await call.write(m.WatchRequest(create_request=create))
            while True:
                resp = await call.read()
                if resp is grpc.aio.EOF:
                    raise StoreError("etcd closed the watch stream")
                if resp.compact_revision:
                    raise RevisionCompacted(
                        f"revision {cursor} has been compacted (oldest kept {resp.compact_revision})")
                if resp.canceled:
                    raise StoreError(f"etcd canceled the watch: {resp.cancel_reason or 'no reason given'}")
                failing_since, delay = None, 0.05
                if resp.events:
                    batch = [convert(event) for event in resp.events]
                    cursor = batch[-1].revision
                    yield batch
        except grpc.aio.AioRpcError as exc:
            if conn.closed or exc.code() == grpc.StatusCode.CANCELLED:
                return
            if not retryable(exc):
                raise store_error(exc, "watch") from None
            conn.failed(index, exc)
        except StoreError as exc:
            if isinstance(exc, RevisionCompacted) or conn.closed:
                raise
            conn.failed(index, exc)
        finally:
            call.cancel()
        now = time.monotonic()
        failing_since = failing_since or now
        if now - failing_since > conn.retry_deadline:
            raise StoreError(f"etcd watch: no member answered for {conn.retry_deadline:.0f}s")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


class Feed:
    """One etcd watch of the whole object range, kept in a ring of recent events (module docstring).

    Every event with a revision above :attr:`ring_from` is in :attr:`ring` (in revision order, one
    object write per revision). When the ring holds twice its size the older half is dropped and
    ``ring_from`` moves up; so does it when the ring holds more than ``max_bytes``, down to half of
    that. When the watch fails for good (``failed``), watchers carry on with watches
    of their own and the store starts a new feed for later ones.
    """

    def __init__(self, conn: EtcdConnection, start: bytes, end: bytes, after: int, convert: Convert,
                 size: int, max_bytes: int = DEFAULT_RING_BYTES,
                 listener: Callable[[list[StoreEvent]], None] | None = None) -> None:
        self.ring: list[StoreEvent] = []
        self.revisions: list[int] = []
        self.ring_from = after
        self.size = size
        self.max_bytes = max_bytes
        self.held = 0  # the ring's StoreEvent.held_bytes, summed
        self.failed: BaseException | None = None
        self._listener = listener  # told of every batch before the watchers (the store's recent objects)
        self._waiters = PrefixWaiters()
        self._task = asyncio.get_running_loop().create_task(
            self._run(conn, start, end, after, convert), name="ironpool-etcd-feed")

    @property
    def usable(self) -> bool:
        return self.failed is None

    async def _run(self, conn: EtcdConnection, start: bytes, end: bytes, after: int,
                   convert: Convert) -> None:
        try:
            async for batch in watch_batches(conn, start, end, after, convert):
                if self._listener is not None:
                    self._listener(batch)
                self.ring.extend(batch)
                self.revisions.extend(e.revision for e in batch)
                self.held += sum(e.held_bytes for e in batch)
                if len(self.ring) >= 2 * self.size or self.held > self.max_bytes:
                    self._trim()
                self._waiters.publish(batch)
            self.failed = StoreError("store is closed")
        except asyncio.CancelledError:
            self.failed = StoreError("store is closed")
            raise
        except BaseException as exc:
            if not isinstance(exc, RevisionCompacted):
                log.warning("etcd watch feed stopped: %s", exc)
            self.failed = exc
        finally:
            self._waiters.wake_all()

    def _trim(self) -> None:
        """Drop the oldest events down to ``size`` events and half of ``max_bytes``."""
        drop, held = 0, self.held
        while drop < len(self.ring) and (len(self.ring) - drop > self.size or held > self.max_bytes // 2):
            held -= self.ring[drop].held_bytes
            drop += 1
        if drop:
            self.ring_from = self.revisions[drop - 1]
            del self.ring[:drop]
            del self.revisions[:drop]
        self.held = held

    def after(self, cursor: int) -> list[StoreEvent] | None:
        """Up to a batch of events above ``cursor``; [] when there are none yet, None when the ring
        no longer covers ``cursor`` (or the feed failed)."""
        if self.failed is not None or cursor < self.ring_from:
            return None
        i = bisect.bisect_right(self.revisions, cursor)
        return self.ring[i : i + _BATCH]

    async def wait(self, prefix: str, cursor: int) -> int:
        """Until an event under ``prefix`` follows ``cursor`` or the feed stops; the position to read
        on from (see :class:`~ironpool.store.waiters.PrefixWaiters`)."""
        return await self._waiters.wait(prefix, cursor)

    def wake(self) -> None:
        """Release every waiting watcher (the store is closing)."""
        self._waiters.wake_all()

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
