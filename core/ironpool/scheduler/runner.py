"""The networked scheduler: informers feed SchedulerCore and the queue, one loop decides, binds run
concurrently (assumed in the cache at once, confirmed by the watch, forgotten on failure).

``run_scheduler(client, config, stop_event)`` is what ``ironpool scheduler`` and ``ironpool up`` run.
The parts: :mod:`~ironpool.scheduler.eventhandlers` (the informers' side), this loop (the
scheduling cycle: PreEnqueue, then a decision), :mod:`~ironpool.scheduler.binding` (the binding
cycle) and :mod:`~ironpool.scheduler.reporting` (conditions and Events).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from typing import Any

from ironpool.client.informer import SharedInformerFactory
from ironpool.client.rest import AsyncClient
from ironpool.scheduler.binding import Binder, RunnerStats
from ironpool.scheduler.config import SchedulerConfig
from ironpool.scheduler.core import SchedulerCore
from ironpool.scheduler.eventhandlers import EventHandlers
from ironpool.scheduler.model import Kind
from ironpool.scheduler.queue import QueuedItem, SchedulingQueue
from ironpool.scheduler.reporting import Reporter

log = logging.getLogger(__name__)

__all__ = ["RunnerStats", "SchedulerRunner", "run_scheduler"]

_GC_PAUSE_MAX = 30.0  # seconds the initial sync may run with the cyclic collector off
_DECIDE_SLICE = 0.005  # seconds of decisions after which the loop lets binds and watches run


class SchedulerRunner:
    """Informers + queue + core + binder, in one asyncio loop."""

    def __init__(self, client: AsyncClient, config: SchedulerConfig | None = None, *,
                 bind_concurrency: int = 64, report: bool = True, ready: asyncio.Event | None = None) -> None:
        self.client = client
        self.config = config or SchedulerConfig()
        self.core = SchedulerCore(self.config)
        q = self.config.queue
        self.queue = SchedulingQueue(q.initial_backoff, q.max_backoff, q.unschedulable_flush)
        self.factory = SharedInformerFactory(client)
        self.reporter = Reporter(client, busy=self._binding) if report else None
        self.stats = RunnerStats()
        self.ready = ready if ready is not None else asyncio.Event()  # set once it decides
        self._wakeup = asyncio.Event()
        self._sync: asyncio.Future[None] | None = None
        self._closed = False
        self.binder = Binder(client, self.core, self.queue, self._current, self.reporter, self.stats,
                             bind_concurrency, self._wakeup.set)
        self.handlers = EventHandlers(self.core, self.queue, self.binder, self.reporter, self.config,
                                      self._wakeup.set)

    def _binding(self) -> bool:
        return self.binder.in_flight > 0 or bool(self.queue.stats()["active"])

    def _current(self, kind: Kind, key: str) -> dict[str, Any] | None:
        return self.handlers.current(kind, key)

    # ---- the loop --------------------------------------------------------------------------------
    def start(self) -> None:
        """Register the handlers and start listing and watching (idempotent): a replica campaigning
        for the Lease syncs its cache meanwhile, as kube-scheduler does, so it decides at once when it
        leads. Nothing is decided or written before :meth:`run`."""
        if self._sync is None:
            self.handlers.register(self.factory)
            self._sync = asyncio.ensure_future(self._synced())

    async def _synced(self) -> None:
        # The initial lists allocate millions of objects (every pool and pending object, decoded)
        # and free almost none: collections during them would only walk what stays. Afterwards the
        # synced cache is long-lived: frozen, it is kept out of every later collection. (No full
        # collection first: it would walk all of it once more to find next to no garbage.) A sync
        # that takes long (the apiserver is away) gets the collector back after _GC_PAUSE_MAX.
        resume = asyncio.get_running_loop().call_later(_GC_PAUSE_MAX, gc.enable) if gc.isenabled() else None
        gc.disable()
        self.factory.start()
        try:
            await self.factory.wait_for_sync()
        finally:
            if resume is not None:
                resume.cancel()
                gc.enable()
        gc.freeze()

    async def run(self, stop_event: asyncio.Event) -> None:
        """Decide and bind until ``stop_event`` is set (starts the informers if :meth:`start` did not)."""
        self.start()
        try:
            await self._wait_synced(stop_event)
            if stop_event.is_set():
                return
            self.ready.set()
            log.info("scheduler ready: %d machine pools, %d volume pools, %d pending",
                     self.core.cache.pool_count("machine"), self.core.cache.pool_count("volume"),
                     len(self.queue))
            handled = 0
            clock = time.perf_counter
            yielded = clock()
            while not stop_event.is_set():
                item = self.queue.pop()
                if item is None:
                    timeout = self.queue.next_ready_in()
                    await self._sleep(stop_event, 1.0 if timeout is None else min(timeout, 1.0))
                    self.binder.expire_assumed()
                    continue
                await self._schedule_one(item)
                handled += 1
                if handled % 32 == 0 or clock() - yielded > _DECIDE_SLICE:
                    # Let the informers and binds run: after a few decisions, or after a slow one (the
                    # first decision of a class builds its index), so its bind is sent at once.
                    await asyncio.sleep(0)
                    yielded = clock()
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop binding, reporting and watching (a runner that never ran, too; once)."""
        if self._closed:
            return
        self._closed = True
        if self._sync is not None:
            self._sync.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sync
        await self.binder.stop()
        if self.reporter is not None:
            await self.reporter.stop()
        await self.factory.stop()
        self.core.close()

    async def _wait_synced(self, stop_event: asyncio.Event) -> None:
        assert self._sync is not None
        stop: asyncio.Future[Any] = asyncio.ensure_future(stop_event.wait())
        waiters: set[asyncio.Future[Any]] = {self._sync, stop}
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if self._sync.done():
            self._sync.result()  # a failed sync is raised here

    async def _sleep(self, stop_event: asyncio.Event, timeout: float) -> None:
        self._wakeup.clear()
        if self.queue.next_ready_in() == 0.0:
            return
        waiters = {asyncio.ensure_future(self._wakeup.wait()), asyncio.ensure_future(stop_event.wait())}
        _, pending = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()

    async def _schedule_one(self, item: QueuedItem) -> None:
        """The scheduling cycle of one object; its binding cycle runs on as a task."""
        req = item.request
        if (req.kind, req.key) in self.core.cache.placements:
            self.queue.done(item)  # already placed, together with the Machine that uses it
            return
        gate = self.core.pre_enqueue(req)
        if not gate.ok:
            self.queue.unschedulable(item, gate.reason, gate.wakeups)
            return
        self.stats.decisions += 1
        decision = self.core.schedule(req)
        if decision.pool is None:
            self.stats.unschedulable += 1
            self.queue.unschedulable(item, decision.message, decision.wakeups)
            if self.reporter is not None and req.obj is not None:
                self.reporter.failed(req.kind, req.key, req.obj, decision.message)
            return
        await self.binder.start(item, decision)


async def run_scheduler(client: AsyncClient, config: SchedulerConfig | None, stop_event: asyncio.Event,
                        **options: Any) -> None:
    """Run the scheduler until ``stop_event`` is set (used by ``ironpool scheduler`` and ``ironpool up``)."""
    await SchedulerRunner(client, config, **options).run(stop_event)
