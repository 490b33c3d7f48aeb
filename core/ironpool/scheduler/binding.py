"""The binding cycle: writes a decision to the apiserver, concurrently with the next decisions.

As in kube-scheduler, a decision is already assumed in the cache when its binding starts, so the
next decisions see the pool's room taken. The profile's PreBind plugins run first (VolumeBinding
binds the Machine's new Volumes), then its Bind plugin (DefaultBinder); on success PostBind runs and
the assumption waits for the watch to confirm it (or expires), on failure it is unreserved and the
object goes back to the queue:

* the object is gone (404): forgotten;
* a conflict (409: the object changed since the decision, or the apiserver's capacity admission
  refused to overcommit the pool): retried as soon as the watch brings a newer version of the object,
  else after the backoff;
* anything else: logged, retried after the backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from ironpool.api.errors import Conflict, NotFound
from ironpool.client.rest import AsyncClient
from ironpool.scheduler.core import SchedulerCore
from ironpool.scheduler.framework.interface import Status
from ironpool.scheduler.framework.profile import Decision
from ironpool.scheduler.model import Kind, pool_ref_of, request_from_json
from ironpool.scheduler.queue import QueuedItem, SchedulingQueue
from ironpool.scheduler.reporting import Reporter
from ironpool.scheduler.tasks import TaskSet

log = logging.getLogger(__name__)

#: the current version of an object as the watch shows it, if any
Lookup = Callable[[Kind, str], dict[str, Any] | None]


@dataclass
class RunnerStats:
    """Counters a test, the bench or /metrics can read."""

    decisions: int = 0
    bound: int = 0
    unschedulable: int = 0
    conflicts: int = 0
    errors: int = 0


class Binder:
    """Runs binding cycles, at most ``concurrency`` at once."""

    def __init__(self, client: AsyncClient, core: SchedulerCore, queue: SchedulingQueue, current: Lookup,
                 reporter: Reporter | None, stats: RunnerStats, concurrency: int,
                 on_done: Callable[[], None]) -> None:
        self.client = client
        self.core = core
        self.queue = queue
        self.current = current
        self.reporter = reporter
        self.stats = stats
        self.on_done = on_done
        self.in_flight = 0
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks = TaskSet()
        #: objects whose bind lost a resourceVersion race -> the stale resourceVersion; the newer
        #: version arriving through the watch sends them straight back to active
        self._stale: dict[tuple[Kind, str], str] = {}

    async def start(self, item: QueuedItem, decision: Decision) -> None:
        """Start binding ``decision`` once a slot is free (waits for one)."""
        await self._slots.acquire()
        self.in_flight += 1
        self.spawn(self._bind(item, decision))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.spawn(coro)

    async def stop(self) -> None:
        await self._tasks.stop()

    # ---- what the watch tells the binder ---------------------------------------------------------
    def forget(self, kind: Kind, key: str) -> None:
        """The object is bound or gone."""
        self._stale.pop((kind, key), None)

    def newer_version(self, kind: Kind, key: str, resource_version: str) -> bool:
        """Whether a bind of ``key`` lost to a version older than ``resource_version``: then the
        object is worth another attempt at once (and the lost race is forgotten)."""
        stale = self._stale.get((kind, key))
        if stale is None or stale == resource_version:
            return False
        del self._stale[(kind, key)]
        return True

    def expire_assumed(self) -> None:
        """Drop assumptions whose binding never showed up in the watch, and queue those objects again."""
        for placement in self.core.cache.cleanup_expired(time.monotonic()):
            log.warning("%s %s: binding to %s never showed up; retrying", placement.kind, placement.key,
                        placement.pool)
            doc = self.current(placement.kind, placement.key)
            if doc is not None and pool_ref_of(placement.kind, doc) is None:
                self.queue.add(request_from_json(placement.kind, doc))

    # ---- the cycle ------------------------------------------------------------------------------
    async def _bind(self, item: QueuedItem, decision: Decision) -> None:
        req = decision.request
        framework = self.core.framework_for(req)
        try:
            try:
                status = await framework.bind(self.client, decision)
            except Exception as exc:  # a plugin that raised instead of returning its error
                status = Status.from_error("", exc)
            if status.ok:
                self._bound(item, decision)
            else:
                self.core.unreserve(decision)
                self._failed(item, decision, status)
        finally:
            self.in_flight -= 1
            self._slots.release()
            self.on_done()

    def _bound(self, item: QueuedItem, decision: Decision) -> None:
        req, state, pool = decision.request, decision.state, decision.pool
        assert state is not None and pool is not None
        self.stats.bound += 1
        self.core.cache.finish_binding(req.kind, req.key, time.monotonic())
        self.core.framework_for(req).post_bind(decision)
        self.queue.done(item)
        if self.reporter is not None and state.bound is not None:
            self.reporter.scheduled(req.kind, req.key, state.bound, pool)

    def _failed(self, item: QueuedItem, decision: Decision, status: Status) -> None:
        req = decision.request
        if isinstance(status.error, NotFound):
            self.queue.delete(req.kind, req.key)
            self.queue.done(item)
        elif isinstance(status.error, Conflict):
            self.stats.conflicts += 1
            self.queue.backoff(item, "conflict while binding")
            self._requeue_if_changed(req.kind, req.key, req.resource_version)
        else:
            self.stats.errors += 1
            log.warning("binding %s %s to %s failed: %s", req.kind, req.key, decision.pool, status.reason)
            self.queue.backoff(item, status.reason)

    def _requeue_if_changed(self, kind: Kind, key: str, rv: str) -> None:
        """A conflict because the object changed (often our own status write): retry at once if the
        watch already brought the newer version, else as soon as it does (see :meth:`newer_version`)."""
        doc = self.current(kind, key)
        if doc is None or pool_ref_of(kind, doc) is not None:
            return
        if (doc.get("metadata") or {}).get("resourceVersion") != rv:
            self.queue.add(request_from_json(kind, doc))
        else:
            self._stale[(kind, key)] = rv
