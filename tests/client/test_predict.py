"""Predictions of a set of Machines answered by the scheduler (a dry-run Reservation), against a real
apiserver and a running scheduler: three where two fit, selectors asked apart, Machines within a
Reservation, nothing left behind, and a clear error when no scheduler answers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from ironpool.client.config import ClientConfig
from ironpool.client.predict import PredictionUnavailable, predict_machines
from ironpool.client.rest import AsyncClient, Client
from ironpool.scheduler.config import parse_config
from ironpool.scheduler.runner import SchedulerRunner

from tests.scheduler.sched_docs import machine, machine_class, machine_pool
from tests.scheduler.test_integration import MC, create_pool, sync_client
from tests.scheduler.test_reservations_integration import RSV


@pytest.fixture
def scheduled(apiserver: Any) -> Iterator[Client]:
    """x-small (1 cpu); pool vm with 2 cpus, pool gold (label tier=gold) with 1: room for 3 in all;
    a scheduler thread."""
    client = sync_client(apiserver)
    client.create_raw(MC, machine_class("x-small", 1, "256Mi"))
    create_pool(client, machine_pool("vm", 2, "8Gi", classes=["x-small"]))
    create_pool(client, machine_pool("gold", 1, "8Gi", classes=["x-small"], labels={"tier": "gold"}))
    stop = threading.Event()
    ready = threading.Event()

    def run() -> None:
        async def main() -> None:
            aclient = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
            runner = SchedulerRunner(aclient, parse_config({}))
            halt = asyncio.Event()
            task = asyncio.create_task(runner.run(halt))
            await runner.ready.wait()
            ready.set()
            await asyncio.to_thread(stop.wait)
            halt.set()
            await task
            await aclient.aclose()

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(30), "scheduler not ready"
    try:
        yield client
    finally:
        stop.set()
        thread.join(30)
        client.close()


def test_a_set_is_predicted_together_and_the_one_too_many_is_named(scheduled: Client) -> None:
    three = [machine(f"web-{i}", "x-small") for i in range(3)]
    answers = predict_machines(scheduled, "default", three)
    assert [a.key for a in answers] == ["default/web-0", "default/web-1", "default/web-2"]
    assert sorted(str(a.pool) for a in answers) == ["gold", "vm", "vm"]
    four = predict_machines(scheduled, "default", [machine(f"m-{i}", "x-small") for i in range(4)])
    assert sorted(str(a.pool) for a in four[:3]) == ["gold", "vm", "vm"] and four[3].pool is None
    assert four[3].reason.startswith("does not fit (with 3 more of this run): needs 4 x-small: 3 fit")
    assert "short by 1 x-small" in four[3].reason
    # Nothing is held or left behind.
    assert scheduled.list_raw(RSV, "default").items == []


def test_selectors_are_asked_apart_and_reservations_answer_for_their_machines(scheduled: Client) -> None:
    gold = [machine(f"g-{i}", "x-small", selector={"tier": "gold"}) for i in range(2)]
    answers = predict_machines(scheduled, "default", [*gold, machine("plain", "x-small")])
    assert [a.pool for a in answers] == ["gold", None, "vm"]
    within = machine("w", "x-small", labels={"compute.ironcore.dev/reservation": "later"})
    assert predict_machines(scheduled, "default", [within])[0].reason == \
        "within reservation later, which does not exist yet"
    pinned = machine("p", "x-small", pool="vm")
    assert predict_machines(scheduled, "default", [pinned])[0].pool == "vm"


def test_no_scheduler_means_no_prediction(apiserver: Any) -> None:
    client = sync_client(apiserver)
    try:
        with pytest.raises(PredictionUnavailable, match="no scheduler answered"):
            predict_machines(client, "default", [machine("m", "x-small")], timeout=1.5)
        assert client.list_raw(RSV, "default").items == []
    finally:
        client.close()
