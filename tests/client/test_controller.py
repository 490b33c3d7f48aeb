"""The controller loop: results requeue, terminal errors do not, failures back off."""

from __future__ import annotations

import asyncio

from ironpool.client.controller import DONE, Controller, ObjectKey, Result, TerminalError

from tests.helpers.wait import eventually


def test_object_keys_parse_and_print_like_client_go() -> None:
    assert ObjectKey.parse("ns/name") == ObjectKey("ns", "name") and str(ObjectKey("ns", "name")) == "ns/name"
    assert ObjectKey.parse("pool") == ObjectKey(None, "pool") and str(ObjectKey(None, "pool")) == "pool"
    assert ObjectKey.of({"metadata": {"name": "m", "namespace": "n"}}) == ObjectKey("n", "m")


async def test_requeue_after_terminal_error_and_backoff() -> None:
    calls: dict[str, int] = {"again": 0, "terminal": 0, "flaky": 0}

    async def reconcile(key: ObjectKey) -> Result:
        calls[key.name] += 1
        if key.name == "again":
            return Result(requeue_after=0.01) if calls["again"] < 3 else DONE
        if key.name == "terminal":
            raise TerminalError("the spec names a class no runtime has")
        if calls["flaky"] < 2:
            raise RuntimeError("runtime restarting")
        return DONE

    controller = Controller("test", reconcile, workers=2)
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    for name in calls:
        controller.enqueue(ObjectKey("ns", name))
    try:
        await eventually(lambda: calls["again"] == 3 and calls["flaky"] == 2, message="requeues and retries")
        # A terminal error is not retried; it runs again only when the key is enqueued again.
        assert calls["terminal"] == 1
        controller.enqueue(ObjectKey("ns", "terminal"))
        await eventually(lambda: calls["terminal"] == 2, message="the next event")
        assert controller.queue.num_requeues(ObjectKey("ns", "flaky")) == 0  # forgotten once it succeeded
    finally:
        stop.set()
        await task
