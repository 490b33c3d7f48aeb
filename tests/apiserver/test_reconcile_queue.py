"""The controllers' work queue: a key queued once however often added, retried with backoff until
it succeeds, and the work ended by a closed store."""

from __future__ import annotations

import itertools
import logging
import time

from ironpool.apiserver.controllers.reconcile_queue import ReconcileQueue
from ironpool.store.interface import StoreError

from tests.helpers.wait import eventually

LOG = logging.getLogger("test.workqueue")


async def test_a_key_added_many_times_is_worked_once_and_in_order() -> None:
    seen: list[str] = []

    async def reconcile(key: str) -> None:
        seen.append(key)

    queue: ReconcileQueue[str] = ReconcileQueue(reconcile, name="t", log=LOG)
    for key in ("a", "b", "a", "c", "b"):
        queue.add(key)
    assert "a" in queue
    await eventually(lambda: len(seen) == 3, 5, "three keys worked")
    assert seen == ["a", "b", "c"] and "a" not in queue


async def test_a_failing_key_is_retried_with_growing_delays_until_it_succeeds() -> None:
    attempts: list[float] = []

    async def reconcile(key: str) -> None:
        attempts.append(time.monotonic())
        if len(attempts) < 4:
            raise RuntimeError("not yet")

    queue: ReconcileQueue[str] = ReconcileQueue(reconcile, name="t", log=LOG, first=0.02, most=0.08)
    queue.add("k")
    await eventually(lambda: len(attempts) == 4, 5, "four attempts")
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    # 0.02, 0.04, then the ceiling 0.08 (less the event loop's clock resolution, which may fire early)
    assert gaps[0] >= 0.019 and gaps[1] >= 0.039 and gaps[2] >= 0.079, gaps
    assert not queue._failures  # forgotten once it succeeded


async def test_a_closed_store_ends_the_work_without_retrying() -> None:
    calls: list[str] = []

    async def reconcile(key: str) -> None:
        calls.append(key)
        raise StoreError("closed")

    queue: ReconcileQueue[str] = ReconcileQueue(reconcile, name="t", log=LOG, first=0.01)
    queue.add("a")
    queue.add("b")
    await eventually(lambda: queue._worker is not None and queue._worker.done(), 5, "the worker ended")
    assert calls == ["a"] and "b" in queue
