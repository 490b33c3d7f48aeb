"""Scheduler replicas elect one leader through a coordination.k8s.io/v1 Lease; /metrics tells who
leads; a standby takes over when the leader dies, resumes from the store and never double-binds."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ha.conftest import ControlPlane, SchedulerProcess, start_control_plane, start_scheduler
from tests.helpers.etcd import EtcdCluster
from tests.helpers.runtimes import stop_process
from tests.helpers.wait import wait_for
from tests.scheduler.sched_docs import machine_class, machine_pool

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
MACHINES = f"{COMPUTE}/namespaces/default/machines"
MERGE = {"Content-Type": "application/merge-patch+json"}
FAST = ("--leader-elect-lease-duration", "3", "--leader-elect-renew-deadline", "2",
        "--leader-elect-retry-period", "0.5")


@pytest.fixture
def plane(etcd: EtcdCluster, tmp_path: Path) -> Iterator[ControlPlane]:
    """Two apiservers of its own (the replicas must not meet another test's Lease or Machines)."""
    control = start_control_plane(etcd, tmp_path)
    try:
        yield control
    finally:
        control.stop()


@pytest.fixture
def replicas() -> Iterator[list[SchedulerProcess]]:
    started: list[SchedulerProcess] = []
    yield started
    for replica in started:
        stop_process(replica.process, timeout=10)


def setup_pools(c: httpx.Client, pools: dict[str, int], cls_cpu: int = 1) -> None:
    assert c.post(f"{COMPUTE}/machineclasses", json=machine_class("small", cls_cpu, "1Gi")).status_code == 201
    for name, cpu in pools.items():
        doc = machine_pool(name, cpu, "1Ti")
        status = doc.pop("status")
        assert c.post(f"{COMPUTE}/machinepools", json=doc).status_code == 201
        r = c.patch(f"{COMPUTE}/machinepools/{name}/status", json={"status": status}, headers=MERGE)
        assert r.status_code == 200, r.text


def machine(name: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name}, "spec": {"machineClassRef": {"name": "small"}}}


def bound(c: httpx.Client) -> dict[str, str]:
    return {m["metadata"]["name"]: m["spec"]["machinePoolRef"]["name"]
            for m in c.get(MACHINES).json()["items"] if m["spec"].get("machinePoolRef")}


def the_leader(replicas: list[SchedulerProcess]) -> SchedulerProcess | None:
    leaders = [r for r in replicas if r.leading]
    assert len(leaders) <= 1, "two replicas lead at once"
    return leaders[0] if leaders else None


def test_a_lease_is_validated_as_kubernetes_does(two_apiservers: ControlPlane) -> None:
    a = two_apiservers.servers[0]
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "bad"},
            "spec": {"holderIdentity": "x", "leaseDurationSeconds": 0, "renewTime": "yesterday"}}
    r = httpx.post(a.url + LEASES, json=body, headers=a.headers())
    assert r.status_code == 422, r.text
    fields = {c["field"] for c in r.json()["details"]["causes"]}
    assert fields == {"spec.leaseDurationSeconds", "spec.renewTime"}


def test_one_replica_leads_and_a_standby_takes_over(plane: ControlPlane, replicas: list[SchedulerProcess],
                                                    tmp_path: Path) -> None:
    a = plane.servers[0]
    with httpx.Client(base_url=a.url, headers=a.headers(), timeout=30) as c:
        setup_pools(c, {"p1": 100, "p2": 100})
        replicas += [start_scheduler(plane, tmp_path, f"s{i}", *FAST) for i in range(2)]
        leader = wait_for(lambda: the_leader(replicas), 15, "a leader")
        standby = next(r for r in replicas if r is not leader)
        # Every replica's /metrics names the same holder: the leader.
        assert wait_for(lambda: standby.holder() == leader.identity() == leader.holder(), 10, "one holder")
        lease = c.get(f"{LEASES}/ironpool-scheduler").json()
        assert lease["spec"]["holderIdentity"] == leader.identity()
        for i in range(10):
            assert c.post(MACHINES, json=machine(f"before-{i}")).status_code == 201
        wait_for(lambda: len(bound(c)) == 10, 30, "10 machines bound by the leader")
        assert standby.metrics()["ironpool_scheduler_bound_total{}"] == 0

        leader.process.send_signal(signal.SIGKILL)
        leader.process.wait()
        died = time.monotonic()
        wait_for(lambda: standby.leading, 15, "the standby leading")
        assert time.monotonic() - died < 3 + 0.5 + 2  # a lease, a retry period, and slack
        for i in range(10):
            assert c.post(MACHINES, json=machine(f"after-{i}")).status_code == 201
        wait_for(lambda: len(bound(c)) == 20, 30, "the new machines bound by the new leader")
        lease = c.get(f"{LEASES}/ironpool-scheduler").json()["spec"]
        assert lease["holderIdentity"] == standby.identity() and lease["leaseTransitions"] >= 1


def test_a_stopped_leader_hands_the_lease_over_at_once(plane: ControlPlane, replicas: list[SchedulerProcess],
                                                       tmp_path: Path) -> None:
    slow = ("--leader-elect-lease-duration", "60", "--leader-elect-renew-deadline", "40",
            "--leader-elect-retry-period", "0.5")
    replicas += [start_scheduler(plane, tmp_path, f"s{i}", *slow) for i in range(2)]
    leader = wait_for(lambda: the_leader(replicas), 15, "a leader")
    standby = next(r for r in replicas if r is not leader)
    stop_process(leader.process)  # SIGTERM: releases the Lease instead of letting it run out
    wait_for(lambda: standby.leading, 10, "the standby leading long before the 60 s lease ran out")


def test_killing_the_leader_in_a_burst_of_500_machines(plane: ControlPlane, replicas: list[SchedulerProcess],
                                                      tmp_path: Path) -> None:
    """Fault test: every Machine bound exactly once, no pool overcommitted, and the standby took
    over within 15 s of the leader's death (default lease timings)."""
    pools = {f"p{i}": 110 for i in range(5)}  # room for 550 machines of 1 cpu
    a = plane.servers[0]
    with httpx.Client(base_url=a.url, headers=a.headers(), timeout=60) as c:
        setup_pools(c, pools)
        replicas += [start_scheduler(plane, tmp_path, f"s{i}") for i in range(2)]
        leader = wait_for(lambda: the_leader(replicas), 20, "a leader")
        standby = next(r for r in replicas if r is not leader)
        transitions = asyncio.run(_burst_with_a_kill(plane, leader, standby))
        placed = wait_for(lambda: (lambda m: m if len(m) == 500 else None)(bound(c)), 60,
                          "500 machines bound")
    assert transitions["took_over"] < 15.0, transitions
    used: dict[str, int] = {}
    for pool in placed.values():
        used[pool] = used.get(pool, 0) + 1
    assert all(used[p] <= pools[p] for p in used), used
    # Exactly once: no Machine was ever bound twice (its pool reference went from unset to set once,
    # and never changed after).
    assert transitions["rebinds"] == 0 and transitions["binds"] == 500, transitions


async def _burst_with_a_kill(plane: ControlPlane, leader: SchedulerProcess,
                             standby: SchedulerProcess) -> dict[str, Any]:
    a, b = plane.servers
    binds: dict[str, str] = {}
    rebinds = 0
    async with httpx.AsyncClient(headers=a.headers(), timeout=60) as http:
        rv = (await http.get(a.url + MACHINES)).json()["metadata"]["resourceVersion"]

        async def watch() -> None:
            nonlocal rebinds
            async with http.stream("GET", b.url + MACHINES, params={"watch": "true", "resourceVersion": rv},
                                   timeout=None) as stream:
                async for line in stream.aiter_lines():
                    event = httpx.Response(200, content=line).json()
                    m = event["object"]
                    pool = (m["spec"].get("machinePoolRef") or {}).get("name")
                    name = m["metadata"]["name"]
                    if pool is not None:
                        if name in binds and binds[name] != pool:
                            rebinds += 1
                        binds.setdefault(name, pool)

        watching = asyncio.ensure_future(watch())
        sem = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            async with sem:
                r = await http.post((a.url, b.url)[i % 2] + MACHINES, json=machine(f"m{i:03d}"))
                assert r.status_code == 201, r.text

        creating = asyncio.ensure_future(asyncio.gather(*(create(i) for i in range(500))))
        while len(binds) < 100:  # kill the leader in the middle of the burst
            await asyncio.sleep(0.05)
        leader.process.send_signal(signal.SIGKILL)
        died = time.monotonic()
        while not await asyncio.to_thread(lambda: standby.leading):
            await asyncio.sleep(0.2)
        took_over = time.monotonic() - died
        await creating
        deadline = time.monotonic() + 60
        while len(binds) < 500 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        watching.cancel()
    return {"took_over": took_over, "binds": len(binds), "rebinds": rebinds}
