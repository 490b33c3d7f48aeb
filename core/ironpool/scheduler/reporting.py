"""What the scheduler tells the world about a decision: the ``Scheduled`` condition and an Event.

Both are best effort and asynchronous, like kube-scheduler's event recorder: reports go to a bounded
queue served by a few workers, failures before successes, so reporting never takes apiserver
capacity away from binding when it is busy (it catches up when idle). Conditions are merged into the
object's current list (read fresh on a conflict) so the poollet's conditions survive; Events are
written by the shared :class:`~ironpool.client.events.EventRecorder`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from ironpool.api import Machine, Volume
from ironpool.api.conditions import SCHEDULED, scheduled_message, with_condition
from ironpool.api.errors import ApiError, Conflict, NotFound
from ironpool.client.events import EventRecorder
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.scheduler.model import Kind

log = logging.getLogger(__name__)
COMPONENT = "ironpool-scheduler"
_MODELS: dict[Kind, Any] = {"machine": Machine, "volume": Volume}


Job = tuple[Kind, dict[str, Any], bool, str, str]


class Reporter:
    """Writes conditions and Events from a bounded priority queue with a few workers."""

    def __init__(self, client: AsyncClient, workers: int = 2, max_pending: int = 10_000,
                 busy: Callable[[], bool] | None = None) -> None:
        self.client = client
        self.recorder = EventRecorder(client, COMPONENT)
        #: while this says the scheduler is busy binding, success reports wait (failures do not)
        self.busy = busy or (lambda: False)
        self._queue: asyncio.PriorityQueue[tuple[int, int, Job]] = asyncio.PriorityQueue()
        self._workers = workers
        self._max_pending = max_pending
        self._tasks: list[asyncio.Task[None]] = []
        self._seq = 0
        self.dropped = 0
        #: the last failure reported per object: the same message is not reported again
        self._last_failure: dict[tuple[Kind, str], str] = {}

    def failed(self, kind: Kind, key: str, obj: dict[str, Any], message: str) -> None:
        """Report ``FailedScheduling``, unless that is what the object was last told."""
        if self._last_failure.get((kind, key)) != message:
            self._last_failure[(kind, key)] = message
            self.submit(kind, obj, False, "FailedScheduling", message)

    def scheduled(self, kind: Kind, key: str, obj: dict[str, Any], pool: str) -> None:
        self._last_failure.pop((kind, key), None)
        self.submit(kind, obj, True, SCHEDULED, scheduled_message(key, pool))

    def forget(self, kind: Kind, key: str) -> None:
        """The object is bound (by anyone) or gone: a later failure is news again."""
        self._last_failure.pop((kind, key), None)

    def submit(self, kind: Kind, obj: dict[str, Any], scheduled: bool, reason: str, message: str) -> None:
        """Queue a report (never blocks); successes are dropped first when the queue is full."""
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]
        if self._queue.qsize() >= self._max_pending and scheduled:
            self.dropped += 1
            return
        self._seq += 1
        self._queue.put_nowait((1 if scheduled else 0, self._seq, (kind, obj, scheduled, reason, message)))

    async def drain(self) -> None:
        """Wait until every queued report has been written (tests, shutdown)."""
        await self._queue.join()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _work(self) -> None:
        while True:
            prio, seq, job = await self._queue.get()
            if prio and self.busy():
                # put it back and give the binds the apiserver; re-check shortly
                self._queue.put_nowait((prio, seq, job))
                self._queue.task_done()
                await asyncio.sleep(0.05)
                continue
            try:
                await self.report(*job)
            finally:
                self._queue.task_done()

    async def report(self, kind: Kind, obj: dict[str, Any], scheduled: bool, reason: str,
                     message: str) -> None:
        await asyncio.gather(self._condition(kind, obj, scheduled, reason, message),
                             self.recorder.record(obj, "Normal" if scheduled else "Warning", reason, message))

    async def _condition(self, kind: Kind, obj: dict[str, Any], scheduled: bool, reason: str,
                         message: str) -> None:
        info = resource_for_model(_MODELS[kind])
        meta = obj.get("metadata") or {}
        current = obj
        for _ in range(3):
            conditions = with_condition(current, SCHEDULED, "True" if scheduled else "False", reason, message)
            if conditions is None:
                return
            patch = {"metadata": {"resourceVersion": (current.get("metadata") or {}).get("resourceVersion")},
                     "status": {"conditions": conditions}}
            try:
                await self.client.patch_raw(info, meta["name"], patch, meta.get("namespace"),
                                            subresource="status")
                return
            except Conflict:
                try:
                    current = await self.client.get_raw(info, meta["name"], meta.get("namespace"))
                except ApiError:
                    return
            except NotFound:
                return
            except Exception as exc:  # best effort: never let reporting break scheduling
                log.warning("Scheduled condition on %s %s: %s", kind, meta.get("name"), exc)
                return
