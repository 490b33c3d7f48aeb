"""The apiserver controllers' reconcile queue: the keys to reconcile and the task that works them.

A key is queued at most once however often it is added; one task works the queue, a key at a time,
in the order added; a key whose reconcile fails is added again after a delay that doubles with each
failure in a row (from ``first`` up to ``most``) and is forgotten once it succeeds. A closed store
(:class:`~ironpool.store.interface.StoreError`) ends the work: the process is stopping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from ironpool.store.interface import StoreError

K = TypeVar("K")


class ReconcileQueue(Generic[K]):
    """Keys to reconcile, each queued at most once, retried with exponential backoff."""

    def __init__(self, reconcile: Callable[[K], Awaitable[None]], *, name: str, log: logging.Logger,
                 describe: Callable[[K], str] = str, first: float = 0.5, most: float = 30.0) -> None:
        self._reconcile = reconcile
        self._name = name
        self._log = log
        self._describe = describe
        self._first, self._most = first, most
        self._queue: dict[K, None] = {}  # an ordered set
        self._failures: dict[K, int] = {}
        self._worker: asyncio.Task[None] | None = None

    def __contains__(self, key: object) -> bool:
        return key in self._queue

    def add(self, key: K) -> None:
        """Reconcile ``key`` soon (starts the worker if it is not running)."""
        self._queue[key] = None
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work(), name=self._name)

    def add_after(self, key: K, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self.add, key)

    async def _work(self) -> None:
        while self._queue:
            key = next(iter(self._queue))
            del self._queue[key]
            try:
                await self._reconcile(key)
                self._failures.pop(key, None)
            except StoreError:
                return
            except Exception as exc:
                failures = self._failures[key] = self._failures.get(key, 0) + 1
                delay = min(self._first * 2 ** (failures - 1), self._most)
                self._log.warning("%s: %s; trying again in %.1fs", self._describe(key), exc, delay)
                self.add_after(key, delay)
