"""A controller-runtime-style loop: keys from event handlers → work queue → ``reconcile(key)``.

Reconcile functions are idempotent; an exception requeues the key with backoff, a returned delay
requeues it later (polling something that has no event), ``None`` means done until the next event.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ironpool.api.errors import Conflict, NotFound
from ironpool.client.workqueue import QueueShutDown, WorkQueue, default_rate_limiter

log = logging.getLogger(__name__)

Reconcile = Callable[[str], Awaitable[float | None]]


class Controller:
    """Runs ``workers`` coroutines over one work queue of string keys (``namespace/name`` or ``name``)."""

    def __init__(self, name: str, reconcile: Reconcile, workers: int = 2) -> None:
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        self.queue: WorkQueue[str] = WorkQueue(default_rate_limiter(base=0.05, cap=30.0), name=name)

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            try:
                delay = await self.reconcile(key)
            except asyncio.CancelledError:
                self.queue.done(key)
                raise
            except (Conflict, NotFound) as exc:
                # Stale cache: the informer will deliver the newer object; retry soon either way.
                log.debug("%s %s: %s; requeue", self.name, key, exc)
                self.queue.add_rate_limited(key)
            except Exception:
                log.exception("%s: reconcile of %s failed; requeue with backoff", self.name, key)
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
                if delay is not None:
                    self.queue.add_after(key, delay)
            self.queue.done(key)

    async def run(self, stop: asyncio.Event) -> None:
        """Work until ``stop`` is set, then shut the queue down and wait for the workers."""
        tasks = [asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
                 for i in range(self.workers)]
        try:
            await stop.wait()
        finally:
            self.queue.shutdown()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
