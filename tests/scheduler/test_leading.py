"""The elected scheduler lists and watches while it campaigns (as kube-scheduler starts its informers
before it waits for the Lease): a replica that becomes the leader decides on a cache already synced,
and a replica that lost its term syncs a fresh runner while it campaigns again."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from ironpool.client.config import ClientConfig
from ironpool.client.leaderelection import LEASES, LeaderElectionConfig, LeaderElector
from ironpool.client.rest import AsyncClient
from ironpool.scheduler.binding import RunnerStats
from ironpool.scheduler.config import parse_config
from ironpool.scheduler.leading import run_elected
from ironpool.scheduler.runner import SchedulerRunner

from tests.scheduler.sched_docs import machine, machine_class, machine_pool
from tests.scheduler.test_integration import MC, M, create_pool, eventually, sync_client


def held_by(holder: str, duration: int) -> dict[str, Any]:
    """A Lease another replica holds, renewed just now."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"apiVersion": LEASES.api_version, "kind": "Lease",
            "metadata": {"name": "sched", "namespace": "default"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": now,
                     "renewTime": now, "leaseTransitions": 0}}


class Terms:
    """What run_elected reports (the metrics interface), with the runners it started."""

    def __init__(self) -> None:
        self.runners: list[SchedulerRunner] = []
        #: one entry per time this replica became the leader: whether the runner it leads with had
        #: listed the pool by then
        self.synced_when_leading: list[bool] = []
        self._leading = False

    def elector_changed(self, elector: LeaderElector) -> None:
        if elector.leading and not self._leading:
            runner = self.runners[-1]
            self.synced_when_leading.append(runner.core.cache.pool_count("machine") == 1)
        self._leading = elector.leading

    def term(self, stats: RunnerStats | None) -> None:
        pass


@pytest.fixture
def terms(monkeypatch: pytest.MonkeyPatch) -> Terms:
    found = Terms()
    start = SchedulerRunner.start

    def recording_start(self: SchedulerRunner) -> None:
        if self not in found.runners:
            found.runners.append(self)
        start(self)

    monkeypatch.setattr(SchedulerRunner, "start", recording_start)
    return found


async def test_a_standby_syncs_before_it_leads_and_again_after_losing_the_lease(
        apiserver: Any, terms: Terms) -> None:
    quiet_config = parse_config({"queue": {"initialBackoffSeconds": 120, "maxBackoffSeconds": 120,
                                           "unschedulableFlushSeconds": 3600}})
    client = sync_client(apiserver)
    aclient = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    client.create_raw(MC, machine_class("small", 2, "2Gi"))
    create_pool(client, machine_pool("host-a", 16, "32Gi", classes=["small"]))
    client.create_raw(M, machine("first", "small", namespace="default"), "default")
    client.create_raw(LEASES, held_by("other", 1), "default")
    election = LeaderElectionConfig("sched", "default", "me", lease_duration=1.0, renew_deadline=0.6,
                                    retry_period=0.1)
    stop = asyncio.Event()
    task = asyncio.create_task(run_elected(aclient, quiet_config, stop, election, terms))  # type: ignore[arg-type]

    async def pool_of(name: str) -> str | None:
        ref = client.get_raw(M, name, "default")["spec"].get("machinePoolRef")
        return ref["name"] if ref else None

    async def runners(n: int) -> bool:
        return len(terms.runners) == n

    try:
        assert await eventually(lambda: pool_of("first"), 15, "the first binding") == "host-a"
        # The standby had listed the pool while the other replica held the Lease.
        assert terms.synced_when_leading == [True]
        lease = client.get_raw(LEASES, "sched", "default")
        assert lease["spec"]["holderIdentity"] == "me"

        # Another replica takes the Lease over: this one stops leading, starts a fresh runner that
        # syncs while it campaigns, and leads with it once the other stops renewing.
        client.update_raw(LEASES, {**lease, "spec": {**held_by("other", 1)["spec"],
                                                    "leaseTransitions": 1}}, "default")
        await eventually(lambda: runners(2), 15, "a second runner")
        client.create_raw(M, machine("second", "small", namespace="default"), "default")
        assert await eventually(lambda: pool_of("second"), 15, "the second binding") == "host-a"
        assert terms.synced_when_leading == [True, True]
        assert terms.runners[0]._closed and not terms.runners[1]._closed
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await aclient.aclose()
        client.close()
    assert terms.runners[1]._closed
