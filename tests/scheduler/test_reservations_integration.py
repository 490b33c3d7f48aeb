"""Reservations through the scheduler against a real apiserver: plans written and charged, the
refusal naming the shortfall with nothing held, acceptance once the pools (here: a stand-in for
their poollets) accept their parts, Machines placed within and counted as consumed, the one beyond
waiting with a clear condition, expiry freeing the pools, dry runs answered and removed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ironpool.api.compute import Reservation
from ironpool.api.errors import Conflict, NotFound
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient, Client
from ironpool.client.wire import resource_for_model
from ironpool.scheduler.config import parse_config
from ironpool.scheduler.runner import SchedulerRunner

from tests.scheduler.sched_docs import machine, machine_class, machine_pool
from tests.scheduler.test_integration import MC, M, condition, create_pool, eventually, sync_client

RSV = resource_for_model(Reservation)
LABEL = "compute.ironcore.dev/reservation"


def reservation(name: str, count: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Reservation",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"resources": {"class/machine.x-small": str(count)}, **spec}}


async def accept_parts(client: AsyncClient, stop: asyncio.Event, reject: str | None = None) -> None:
    """What the pools' poollets do: every Pending part of a holding Reservation becomes Accepted (the
    pool ``reject`` rejects its parts)."""
    while not stop.is_set():
        for r in (await client.list_raw(RSV, "default")).items:
            status = r.get("status") or {}
            pending = any(e.get("state") == "Pending" for e in status.get("pools") or ())
            if r["spec"].get("dryRun") or not pending:
                continue
            pools = [{**e, "state": ("Rejected" if e["ref"] == reject else "Accepted")}
                     for e in status["pools"]]
            patch = {"metadata": {"resourceVersion": r["metadata"]["resourceVersion"]},
                     "status": {"pools": pools}}
            with contextlib.suppress(Conflict, NotFound):
                await client.patch_raw(RSV, r["metadata"]["name"], patch, "default", subresource="status")
        await asyncio.sleep(0.05)


@pytest.fixture
async def cluster(apiserver: Any) -> AsyncIterator[tuple[Client, AsyncClient, SchedulerRunner]]:
    """x-small (1 cpu), pools a and b with 7 cpus each, a running scheduler and pool stand-ins."""
    client = sync_client(apiserver)
    aclient = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    client.create_raw(MC, machine_class("x-small", 1, "256Mi"))
    for name in ("a", "b"):
        create_pool(client, machine_pool(name, 7, "64Gi", classes=["x-small"]))
    config = parse_config({"queue": {"initialBackoffSeconds": 0.05, "maxBackoffSeconds": 0.2}})
    runner = SchedulerRunner(aclient, config)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(runner.run(stop)), asyncio.create_task(accept_parts(aclient, stop))]
    try:
        await asyncio.wait_for(runner.ready.wait(), 20)
        yield client, aclient, runner
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
        await aclient.aclose()
        client.close()


async def _answered(client: Client, name: str, ctype: str = "Scheduled", status: str | None = None,
                    timeout: float = 10) -> dict[str, Any]:
    async def get() -> dict[str, Any] | None:
        doc = client.get_raw(RSV, name, "default")
        c = condition(doc, ctype)
        return doc if c is not None and (status is None or c["status"] == status) else None

    return await eventually(get, timeout, f"{name}: {ctype}={status or 'any'}")  # type: ignore[no-any-return]


async def _bound(client: Client, names: list[str], timeout: float = 15) -> dict[str, str]:
    async def get() -> dict[str, str] | None:
        out = {}
        for n in names:
            ref = client.get_raw(M, n, "default")["spec"].get("machinePoolRef")
            if ref is None:
                return None
            out[n] = ref["name"]
        return out

    return await eventually(get, timeout, f"{len(names)} machines bound")  # type: ignore[no-any-return]


def _fill(client: Client, prefix: str, count: int) -> None:
    for i in range(count):
        client.create_raw(M, machine(f"{prefix}{i}", "x-small"), "default")


async def test_ten_accepted_across_both_twenty_refused_and_nothing_held(
        cluster: tuple[Client, AsyncClient, SchedulerRunner]) -> None:
    client, _, _ = cluster
    client.create_raw(RSV, reservation("ten", 10), "default")
    doc = await _answered(client, "ten", "Accepted", "True")
    parts = {e["ref"]: int(e["resources"]["class/machine.x-small"]) for e in doc["status"]["pools"]}
    assert parts == {"a": 5, "b": 5} and {e["state"] for e in doc["status"]["pools"]} == {"Accepted"}
    assert condition(doc)["message"] == "10 machines on 2 pools: a (5 x-small), b (5 x-small)"  # type: ignore[index]

    client.create_raw(RSV, reservation("twenty", 20), "default")
    refused = await _answered(client, "twenty", "Scheduled", "False")
    message = condition(refused)["message"]  # type: ignore[index]
    assert message.startswith("needs 20 x-small: 4 fit") and "short by 16 x-small" in message
    assert "pools" not in refused.get("status", {})
    # Free capacity is what it was: the 4 cpus the first one left, taken by plain Machines.
    _fill(client, "plain", 5)
    bound = await _bound(client, [f"plain{i}" for i in range(4)])
    assert sorted(bound.values()) == ["a", "a", "b", "b"]

    async def last_refused() -> bool:
        c = condition(client.get_raw(M, "plain4", "default"))
        return c is not None and c["status"] == "False"

    await eventually(last_refused, 10, "the fifth plain machine refused")


async def test_machines_within_consume_it_and_the_one_beyond_waits(
        cluster: tuple[Client, AsyncClient, SchedulerRunner]) -> None:
    client, _, _ = cluster
    client.create_raw(RSV, reservation("web", 3), "default")
    await _answered(client, "web", "Accepted", "True")
    _fill(client, "plain", 11)  # everything else: 11 of the 14 cpus
    for i in range(4):
        body = machine(f"w{i}", "x-small", labels={LABEL: "web"})
        client.create_raw(M, body, "default")
    held = {e["ref"] for e in client.get_raw(RSV, "web", "default")["status"]["pools"]}
    bound = await _bound(client, ["w0", "w1", "w2"])
    assert set(bound.values()) <= held

    async def waiting() -> dict[str, Any] | None:
        c = condition(client.get_raw(M, "w3", "default"))
        return c if c is not None and c["status"] == "False" else None

    cond = await eventually(waiting, 10, "the fourth to wait")
    assert cond["message"] == "reservation web holds no more x-small: 3 of 3 in use"

    async def consumed() -> bool:
        entries = client.get_raw(RSV, "web", "default")["status"]["pools"]
        return sum(int((e.get("consumed") or {}).get("class/machine.x-small", 0)) for e in entries) == 3

    await eventually(consumed, 10, "consumed to count the three")
    # One within leaves: its part is the reservation's, and the waiting one takes it.
    client.delete_raw(M, "w0", "default")
    assert (await _bound(client, ["w3"]))["w3"] in held


async def test_expiry_releases_what_no_machine_uses(
        cluster: tuple[Client, AsyncClient, SchedulerRunner]) -> None:
    client, _, _ = cluster
    client.create_raw(RSV, reservation("brief", 14, ttlSecondsAfterCreation=2), "default")
    await _answered(client, "brief", "Accepted", "True")
    client.create_raw(M, machine("inside", "x-small", labels={LABEL: "brief"}), "default")
    await _bound(client, ["inside"])
    _fill(client, "plain", 14)

    async def none_bound() -> bool:
        return all(condition(client.get_raw(M, f"plain{i}", "default")) is not None for i in range(14))

    await eventually(none_bound, 10, "the plain machines to be judged")
    assert all("machinePoolRef" not in client.get_raw(M, f"plain{i}", "default")["spec"] for i in range(14))
    expired = await _answered(client, "brief", "Expired", "True", timeout=15)
    assert condition(expired, "Expired")["message"] == "released what no machine used after 2s"  # type: ignore[index]
    # 13 plain machines fit now: the one within keeps its place.
    async def thirteen() -> bool:
        refs = [client.get_raw(M, f"plain{i}", "default")["spec"].get("machinePoolRef") for i in range(14)]
        return sum(r is not None for r in refs) == 13

    await eventually(thirteen, 15, "13 plain machines bound after the expiry")


async def test_dry_runs_are_answered_hold_nothing_and_go(cluster: tuple[Client, AsyncClient, SchedulerRunner]
                                                         ) -> None:
    client, _, _ = cluster
    client.create_raw(RSV, reservation("probe-ok", 14, dryRun=True, ttlSecondsAfterCreation=2), "default")
    client.create_raw(RSV, reservation("probe-no", 15, dryRun=True), "default")
    ok = await _answered(client, "probe-ok")
    assert condition(ok)["reason"] == "Fits"  # type: ignore[index]
    no = await _answered(client, "probe-no")
    c = condition(no)
    assert c is not None and c["reason"] == "DoesNotFit" and "short by 1 x-small" in c["message"]
    # The part that fits is shown, and nothing is held: both answers saw all 14 cpus.
    assert sum(int(e["resources"]["class/machine.x-small"]) for e in no["status"]["pools"]) == 14

    async def gone() -> bool:
        return not any(r["metadata"]["name"] == "probe-ok" for r in client.list_raw(RSV, "default").items)

    await eventually(gone, 15, "the dry run to be removed at its time to live")


async def test_a_pool_rejecting_its_part_releases_everything(apiserver: Any) -> None:
    client = sync_client(apiserver)
    aclient = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    client.create_raw(MC, machine_class("x-small", 1, "256Mi"))
    for name in ("a", "b"):
        create_pool(client, machine_pool(name, 2, "64Gi", classes=["x-small"]))
    runner = SchedulerRunner(aclient, parse_config({}))
    stop = asyncio.Event()
    tasks = [asyncio.create_task(runner.run(stop)),
             asyncio.create_task(accept_parts(aclient, stop, reject="b"))]
    try:
        await asyncio.wait_for(runner.ready.wait(), 20)
        client.create_raw(RSV, reservation("four", 4), "default")
        doc = await _answered(client, "four", "Accepted", "False")

        async def rejected() -> dict[str, Any] | None:
            d = client.get_raw(RSV, "four", "default")
            c = condition(d, "Accepted")
            return d if c is not None and c["reason"] == "Rejected" else None

        doc = await eventually(rejected, 10, "Accepted=False/Rejected")
        assert "rejected by the runtime of pool b" in condition(doc, "Accepted")["message"]  # type: ignore[index]
        _fill(client, "plain", 4)
        bound = await _bound(client, [f"plain{i}" for i in range(4)])
        assert sorted(bound.values()) == ["a", "a", "b", "b"]
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 15)
        await aclient.aclose()
        client.close()
