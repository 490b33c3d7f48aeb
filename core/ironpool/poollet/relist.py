"""Turn runtime state changes into reconcile requests by periodic relisting (IronCore's ``irievent``).

IRI has no watch; like IronCore's generator, the poollet lists the runtime every ``period`` and
enqueues the API object of every IRI object that appeared, changed or disappeared. This is how a
guest that shut itself down flows back into the Machine's status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from ironpool.client.controller import ObjectKey

log = logging.getLogger(__name__)

T = TypeVar("T")


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` or until ``stop`` is set; True if stopping."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()


async def retry_until_ok(stop: asyncio.Event, fn: Callable[[], Awaitable[T]], what: str,
                         cap: float = 10.0) -> T | None:
    """``await fn()`` until it succeeds (backing off up to ``cap`` s); None if ``stop`` is set first.

    A poollet may start before its apiserver or runtime (hosts boot in any order): it waits.
    """
    delay = 0.2
    while not stop.is_set():
        try:
            return await fn()
        except Exception as exc:
            log.warning("%s failed: %s; retrying in %.1fs", what, exc or type(exc).__name__, delay)
        if await sleep_or_stop(stop, delay):
            break
        delay = min(delay * 2, cap)
    return None


class Relister(Generic[T]):
    """Diffs successive listings of IRI objects (protobuf messages with ``metadata.id``)."""

    def __init__(
        self,
        list_fn: Callable[[], Awaitable[Sequence[T]]],
        key_of: Callable[[T], ObjectKey | None],
        enqueue: Callable[[ObjectKey], None],
        period: float,
        after_list: Callable[[Sequence[T]], Awaitable[None]] | None = None,
    ) -> None:
        self.list_fn = list_fn
        self.key_of = key_of
        self.enqueue = enqueue
        self.period = period
        self.after_list = after_list
        self._seen: dict[str, tuple[bytes, ObjectKey | None]] = {}
        self.relists = 0

    async def relist_once(self) -> None:
        items = await self.list_fn()
        current: dict[str, tuple[bytes, ObjectKey | None]] = {}
        for item in items:
            msg: Any = item
            current[msg.metadata.id] = (msg.SerializeToString(deterministic=True), self.key_of(item))
        for oid, (data, key) in current.items():
            old = self._seen.get(oid)
            if key and (old is None or old[0] != data):
                self.enqueue(key)
        for oid, (_, key) in self._seen.items():
            if oid not in current and key:
                self.enqueue(key)
        self._seen = current
        self.relists += 1
        if self.after_list is not None:
            await self.after_list(items)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.relist_once()
            except Exception as exc:  # the runtime may be restarting; keep trying
                log.warning("relisting the runtime failed: %s", exc)
            if await sleep_or_stop(stop, self.period):
                return
