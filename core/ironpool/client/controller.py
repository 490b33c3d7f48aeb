"""The controller toolkit: typed object keys, a reconcile result, a terminal error, and the loop that
feeds keys from event handlers through a rate-limited work queue into ``reconcile`` (controller-runtime's
``Reconcile(ctx, Request) (Result, error)`` in asyncio).

A reconcile is idempotent. It returns a :class:`Result` (``requeue_after``: look again later, for
things that send no event), or raises: a :class:`TerminalError` means retrying will not help until
something changes (the key is dropped until its next event), ``Conflict``/``NotFound`` mean the cache
was stale (retried soon, quietly), anything else is retried with exponential backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ironpool.api.errors import Conflict, NotFound
from ironpool.api.meta import object_key
from ironpool.client.workqueue import QueueShutDown, WorkQueue, default_rate_limiter

log = logging.getLogger(__name__)


@dataclass(frozen=True, order=True)
class ObjectKey:
    """An object's namespace (None for cluster-scoped kinds) and name: what a work queue holds."""

    namespace: str | None
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any] | BaseModel) -> ObjectKey:
        """The key of an object, typed or as a JSON dict."""
        return cls.parse(object_key(obj))

    @classmethod
    def parse(cls, key: str) -> ObjectKey:
        """From client-go's key form: ``namespace/name`` or ``name``."""
        namespace, sep, name = key.rpartition("/")
        return cls(namespace if sep else None, name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for besides its next event: another look in ``requeue_after`` seconds."""

    requeue_after: float | None = None


DONE = Result()


class TerminalError(Exception):
    """Retrying will not help until the object (or what it refers to) changes; do not requeue."""


Reconciler = Callable[[ObjectKey], Awaitable[Result]]


class Controller:
    """Runs ``workers`` coroutines over one work queue of :class:`ObjectKey`."""

    def __init__(self, name: str, reconcile: Reconciler, workers: int = 2) -> None:
        self.name = name
        self.reconcile = reconcile
        self.workers = workers
        self.queue: WorkQueue[ObjectKey] = WorkQueue(default_rate_limiter(base=0.05, cap=30.0), name=name)

    def enqueue(self, key: ObjectKey) -> None:
        self.queue.add(key)

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            try:
                result = await self.reconcile(key)
            except asyncio.CancelledError:
                self.queue.done(key)
                raise
            except TerminalError as exc:
                log.error("%s: %s: %s (not retried until it changes)", self.name, key, exc)
                self.queue.forget(key)
            except (Conflict, NotFound) as exc:
                # Stale cache: the informer will deliver the newer object; retry soon either way.
                log.debug("%s %s: %s; requeue", self.name, key, exc)
                self.queue.add_rate_limited(key)
            except Exception:
                log.exception("%s: reconcile of %s failed; requeue with backoff", self.name, key)
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
                if result.requeue_after is not None:
                    self.queue.add_after(key, result.requeue_after)
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
