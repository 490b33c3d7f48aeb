"""Fleet health against a real apiserver process: heartbeat Leases written by the test (the poollets'
own PoolHeartbeat), the scheduler and the pool lifecycle controller in this process.

One pool stops renewing its Lease: it turns Ready=Unknown and gets the unreachable NoExecute taint;
its Machine that does not tolerate the taint is evicted (same uid) and bound to the other pool, one
tolerating it for ever stays, one tolerating it for two seconds moves after them; when the Lease
moves again the taint goes. Also: the eviction subresource's refusals, and a pool identity writing
only its own Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from ironpool.api import Event, Machine, MachineClass, MachinePool
from ironpool.api.errors import Conflict, Forbidden, NotFound
from ironpool.api.fleet import MACHINE_POOL_LEASE_NAMESPACE, UNREACHABLE_TAINT_KEY
from ironpool.api.resources import resolve
from ironpool.client.config import ClientConfig
from ironpool.client.leaderelection import LeaderElectionConfig
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.fleet.lifecycle import LifecycleOptions, PoolLifecycleController
from ironpool.fleet.manager import ELECTION_NAME, run_controller_manager
from ironpool.poollet.heartbeat import LEASES, PoolHeartbeat
from ironpool.scheduler.runner import SchedulerRunner

from tests.helpers.wait import eventually
from tests.scheduler.sched_docs import machine_class, machine_pool

MC, MP, M, EV = (resource_for_model(x) for x in (MachineClass, MachinePool, Machine, Event))
GRACE = 2.0


@dataclass
class Fleet:
    client: AsyncClient
    beats: dict[str, tuple[asyncio.Event, asyncio.Task[None]]]
    controller: PoolLifecycleController

    def beat(self, pool: str) -> None:
        stop = asyncio.Event()
        hb = PoolHeartbeat(self.client, "MachinePool", pool, f"test-{pool}", interval=0.3, duration=GRACE)
        self.beats[pool] = (stop, asyncio.create_task(hb.run(stop)))

    async def silence(self, *pools: str) -> None:
        """The pools' heartbeats stop together (each after the renewal it is making)."""
        stopped = [self.beats.pop(pool) for pool in pools]
        for stop, _ in stopped:
            stop.set()
        await asyncio.gather(*(task for _, task in stopped))

    async def machine(self, name: str) -> dict[str, Any]:
        return await self.client.get_raw(M, name, "default")


def _machine(name: str, pool: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"machineClassRef": {"name": "small"}, "machinePoolRef": {"name": pool},
                     "tolerations": tolerations or []}}


def _pool_of(m: dict[str, Any]) -> str | None:
    return ((m.get("spec") or {}).get("machinePoolRef") or {}).get("name")


def _ready(pool: dict[str, Any]) -> str | None:
    return next((c.get("status") for c in (pool.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), None)


def _taints(pool: dict[str, Any]) -> list[str]:
    return [f"{t['key']}:{t['effect']}" for t in (pool.get("spec") or {}).get("taints") or []]


@pytest.fixture
async def fleet(apiserver: Any) -> AsyncIterator[Fleet]:
    client = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    await client.create_raw(MC, machine_class("small", 1, "1Gi"))
    for name in ("p1", "p2", "manual"):  # "manual" (no class) never gets a Lease: it is never judged
        doc = machine_pool(name, 8, "8Gi", classes=[] if name == "manual" else ["small"])
        status = doc.pop("status")
        await client.create_raw(MP, doc)
        await client.patch_raw(MP, name, {"status": status}, subresource="status")
    controller = PoolLifecycleController(client, LifecycleOptions(grace=GRACE, monitor_period=0.2,
                                                                  eviction_rate=10, eviction_burst=5))
    f = Fleet(client, {}, controller)
    f.beat("p1")
    f.beat("p2")
    stop = asyncio.Event()
    scheduler = SchedulerRunner(client)
    tasks = [asyncio.create_task(scheduler.run(stop)), asyncio.create_task(controller.run(stop))]
    try:
        await asyncio.wait_for(scheduler.ready.wait(), 20)
        yield f
    finally:
        stop.set()
        for hb_stop, _ in f.beats.values():
            hb_stop.set()
        for task in [*tasks, *(t for _, t in f.beats.values())]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 10)
        await client.aclose()


async def test_unreachable_pool_is_tainted_and_its_machines_move(fleet: Fleet) -> None:
    c = fleet.client
    await c.create_raw(M, _machine("plain", "p1"), "default")
    await c.create_raw(M, _machine("patient", "p1", [
        {"key": UNREACHABLE_TAINT_KEY, "operator": "Exists", "effect": "NoExecute"}]), "default")
    await c.create_raw(M, _machine("brief", "p1", [
        {"key": UNREACHABLE_TAINT_KEY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}]),
        "default")
    uid = (await fleet.machine("plain"))["metadata"]["uid"]

    lease = await c.get_raw(LEASES, "p1", MACHINE_POOL_LEASE_NAMESPACE)
    assert lease["spec"]["holderIdentity"] == "test-p1"
    assert lease["spec"]["leaseDurationSeconds"] == 2

    await fleet.silence("p1")

    async def unknown_and_tainted() -> dict[str, Any] | None:
        pool = await c.get_raw(MP, "p1")
        tainted = f"{UNREACHABLE_TAINT_KEY}:NoExecute" in _taints(pool)
        return pool if _ready(pool) == "Unknown" and tainted else None

    pool = await eventually(unknown_and_tainted, 15, "p1 Ready=Unknown and tainted")
    ready = next(cond for cond in pool["status"]["conditions"] if cond["type"] == "Ready")
    assert ready["reason"] == "PoolStatusUnknown"
    taint = next(t for t in pool["spec"]["taints"] if t["key"] == UNREACHABLE_TAINT_KEY)
    assert taint.get("timeAdded")

    async def plain_moved() -> dict[str, Any] | None:
        m = await fleet.machine("plain")
        return m if _pool_of(m) == "p2" else None

    moved = await eventually(plain_moved, 15, "machine plain rebound to p2")
    assert moved["metadata"]["uid"] == uid  # the same Machine, not a new one
    scheduled = next(cond for cond in moved["status"]["conditions"] if cond["type"] == "Scheduled")
    assert scheduled["status"] == "True"
    events = (await c.list_raw(EV, "default")).items
    assert any(e["reason"] == "Evicted" and e["involvedObject"]["name"] == "plain" for e in events)

    async def brief_moved() -> bool:
        return _pool_of(await fleet.machine("brief")) == "p2"

    await eventually(brief_moved, 15, "machine brief rebound after its tolerationSeconds")
    assert _pool_of(await fleet.machine("patient")) == "p1"  # tolerates the taint for ever
    healthy = await c.get_raw(MP, "p2")
    assert _ready(healthy) == "True" and not _taints(healthy)  # its Lease kept moving
    manual = await c.get_raw(MP, "manual")
    assert _ready(manual) == "True" and not _taints(manual)  # no Lease: no heartbeat to miss

    fleet.beat("p1")

    async def untainted() -> bool:
        return UNREACHABLE_TAINT_KEY not in " ".join(_taints(await c.get_raw(MP, "p1")))

    await eventually(untainted, 15, "the unreachable taint removed once p1 renews its Lease")
    assert _pool_of(await fleet.machine("patient")) == "p1"


async def test_eviction_subresource_refusals(fleet: Fleet) -> None:
    c = fleet.client
    await c.create_raw(M, _machine("e1", "p2"), "default")
    with pytest.raises(Conflict, match="uid precondition"):
        await c.evict_raw(M, "e1", "default", uid="not-its-uid")
    await c.evict_raw(M, "e1", "default")
    m = await fleet.machine("e1")
    if _pool_of(m) is None:  # not placed again yet: a second eviction has nothing to unbind
        with pytest.raises(Conflict):
            await c.evict_raw(M, "e1", "default", resource_version=m["metadata"]["resourceVersion"])

    async def rebound() -> bool:
        return _pool_of(await fleet.machine("e1")) is not None

    await eventually(rebound, 15, "e1 placed again after its eviction")


async def test_pool_identity_writes_only_its_own_lease(apiserver: Any, tmp_path: Any) -> None:
    pool_token, other = "pool-p9-token-0123456789", "p8"
    with apiserver.token_file.open("a") as f:
        f.write(f"{pool_token},compute.ironcore.dev:system:machinepool:p9,9,"
                '"compute.ironcore.dev:system:machinepools"\n')
    client = AsyncClient(ClientConfig(server=apiserver.url, token=pool_token))
    try:
        async def renewed() -> bool:
            try:
                await PoolHeartbeat(client, "MachinePool", "p9", "p9").renew_once()
            except Exception as exc:  # the token file may not be read again yet
                raise AssertionError(str(exc)) from exc
            return True

        await eventually(renewed, 10, "the pool identity's heartbeat")
        with pytest.raises(Forbidden):
            await PoolHeartbeat(client, "MachinePool", other, "p9").renew_once()
    finally:
        await client.aclose()


def _cli(apiserver: Any, *args: str) -> Any:
    from click.testing import CliRunner
    from ironpool.cli.main import cli

    env = {"IRONPOOL_SERVER": apiserver.url, "IRONPOOL_TOKEN": apiserver.admin_token,
           "IRONPOOL_CONFIG": "/nonexistent/ironpool-config.yaml"}
    return CliRunner().invoke(cli, list(args), env=env)


async def test_cordon_uncordon_and_drain(fleet: Fleet, apiserver: Any) -> None:
    c = fleet.client
    out = await asyncio.to_thread(_cli, apiserver, "cordon", "p1")
    assert out.exit_code == 0, out.output
    assert "machinepool/p1 cordoned" in out.output
    again = await asyncio.to_thread(_cli, apiserver, "cordon", "p1")
    assert "already cordoned" in again.output
    for i in range(3):
        doc = _machine(f"d{i}", "p1")
        del doc["spec"]["machinePoolRef"]
        await c.create_raw(M, doc, "default")

    async def all_on_p2() -> bool:
        return all([_pool_of(await fleet.machine(f"d{i}")) == "p2" for i in range(3)])

    await eventually(all_on_p2, 15, "new machines placed on p2 only (p1 cordoned)")
    out = await asyncio.to_thread(_cli, apiserver, "uncordon", "p1")
    assert out.exit_code == 0 and "machinepool/p1 uncordoned" in out.output, out.output

    # No poollet runs here, so "moved" means bound elsewhere (--wait-for bound).
    out = await asyncio.to_thread(_cli, apiserver, "drain", "p2", "--wait-for", "bound", "--timeout", "30",
                                  "-o", "json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["complete"] and report["policy"] == "move" and report["cordoned"]
    assert sorted(m["name"] for m in report["machines"]) == ["d0", "d1", "d2"]
    assert {m["result"] for m in report["machines"]} == {"moved"}
    assert {m["pool"] for m in report["machines"]} == {"p1"}
    assert "evicting machine default/d0" in out.stderr
    assert "pool.ironpool.dev/unschedulable:NoSchedule" in _taints(await c.get_raw(MP, "p2"))

    out = await asyncio.to_thread(_cli, apiserver, "drain", "p1", "--policy", "delete", "--timeout", "30")
    assert out.exit_code == 0, out.output
    assert "machinepool/p1 drained (3 machine(s)" in out.output
    assert not [m for m in (await c.list_raw(M, "default")).items if m["metadata"]["name"].startswith("d")]

    missing = await asyncio.to_thread(_cli, apiserver, "drain", "nope")
    assert missing.exit_code == 1 and "nope" in missing.output


async def test_edit_role_may_evict_but_not_cordon(fleet: Fleet, apiserver: Any) -> None:
    """As Kubernetes' edit role may create pods/eviction but not change nodes."""
    c = fleet.client
    await c.create_raw(M, _machine("mine", "p2"), "default")
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "alice-edit", "namespace": "default"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}
    await c.create_raw(resolve("RoleBinding"), binding, "default")
    async with AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.user_token)) as alice:
        async def evicted() -> bool:
            try:
                await alice.evict_raw(M, "mine", "default")
            except Forbidden as exc:  # the RBAC index may be a moment behind the binding
                raise AssertionError(str(exc)) from exc
            return True

        await eventually(evicted, 10, "alice's eviction allowed by the edit role")
        with pytest.raises(Forbidden):
            await alice.patch_raw(MP, "p1", {"spec": {"taints": [
                {"key": "pool.ironpool.dev/unschedulable", "effect": "NoSchedule"}]}})


async def test_eviction_subresource_edges_over_http(fleet: Fleet, apiserver: Any) -> None:
    await fleet.client.create_raw(M, _machine("edge", "p2"), "default")
    base = f"{apiserver.url}/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines/edge/eviction"
    pool_token = "pool-p2-token-0123456789"
    with apiserver.token_file.open("a") as f:
        f.write(f"{pool_token},compute.ironcore.dev:system:machinepool:p2,7,"
                '"compute.ironcore.dev:system:machinepools"\n')
    async with httpx.AsyncClient(headers=apiserver.headers()) as h:
        assert (await h.get(base)).status_code == 405
        volumes = f"{apiserver.url}/apis/storage.ironcore.dev/v1alpha1/namespaces/default/volumes/v/eviction"
        assert (await h.post(volumes, json={})).status_code == 404
        wrong = await h.post(base, json={"apiVersion": "v1", "kind": "Binding"})
        assert wrong.status_code == 400 and "Eviction" in wrong.text

        async def pool_refused() -> bool:  # the token file is read again within a second
            r = await h.post(base, json={}, headers={"Authorization": f"Bearer {pool_token}"})
            assert r.status_code == 403, r.text
            return True

        await eventually(pool_refused, 10, "a pool identity refused to evict its own Machine")
        done = await h.post(base, json={"apiVersion": "policy/v1", "kind": "Eviction",
                                        "metadata": {"name": "edge", "namespace": "default"}})
        assert done.status_code == 201 and done.json()["status"] == "Success"


async def test_every_pool_silent_is_a_full_disruption_nothing_is_evicted(fleet: Fleet) -> None:
    """All pools unreachable at once: Ready=Unknown on each, but no taint and no eviction (most likely
    the control plane's own network); once one pool beats again, the other is tainted.

    Two heartbeats never stop in the same instant: a monitor pass may find p1 past its grace while
    p2 is not yet, and taint p1. Once both are down that taint is taken back, as Kubernetes does on
    entering full disruption; the Machine tolerates the taint for longer than that takes, as pods
    tolerate ``unreachable`` for 300 s by default."""
    c = fleet.client
    await c.create_raw(M, _machine("stay", "p1", [{"key": UNREACHABLE_TAINT_KEY, "operator": "Exists",
                                                    "effect": "NoExecute", "tolerationSeconds": 60}]),
                       "default")
    await fleet.silence("p1", "p2")

    async def both_unknown() -> bool:
        return all([_ready(await c.get_raw(MP, p)) == "Unknown" for p in ("p1", "p2")])

    await eventually(both_unknown, 15, "both pools Ready=Unknown")
    passes = fleet.controller.passes
    await eventually(lambda: fleet.controller.passes >= passes + 5, 10, "five more monitor passes")
    # none of them may taint or evict
    for p in ("p1", "p2"):
        assert not _taints(await c.get_raw(MP, p))
    assert _pool_of(await fleet.machine("stay")) == "p1"

    fleet.beat("p2")

    async def p1_tainted() -> bool:
        return f"{UNREACHABLE_TAINT_KEY}:NoExecute" in _taints(await c.get_raw(MP, "p1"))

    await eventually(p1_tainted, 15, "p1 tainted once p2 is back")
    fleet.beat("p1")


async def test_the_taint_of_the_first_pool_down_is_taken_back_when_every_pool_is_down(fleet: Fleet) -> None:
    c = fleet.client
    await c.create_raw(M, _machine("stay", "p1", [{"key": UNREACHABLE_TAINT_KEY, "operator": "Exists",
                                                    "effect": "NoExecute", "tolerationSeconds": 60}]),
                       "default")
    unreachable = f"{UNREACHABLE_TAINT_KEY}:NoExecute"

    async def p1_tainted() -> bool:
        return unreachable in _taints(await c.get_raw(MP, "p1"))

    async def p1_untainted() -> bool:
        return not await p1_tainted()

    await fleet.silence("p1")
    await eventually(p1_tainted, 15, "p1 tainted while p2 beats")
    await fleet.silence("p2")
    await eventually(p1_untainted, 15, "p1's taint taken back once p2 is down too")
    assert not _taints(await c.get_raw(MP, "p2"))
    assert _pool_of(await fleet.machine("stay")) == "p1"
    events = (await c.list_raw(EV, "default")).items
    assert any(e["reason"] == "FullDisruption" and e["involvedObject"]["name"] == "p1" for e in events)


async def test_controller_managers_elect_one_leader_and_a_standby_takes_over(apiserver: Any) -> None:
    options = LifecycleOptions(grace=30, monitor_period=0.2)
    async with AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token)) as c:
        stops = {who: asyncio.Event() for who in ("cm-a", "cm-b")}
        tasks = {who: asyncio.create_task(run_controller_manager(
            c, options, stops[who], LeaderElectionConfig(ELECTION_NAME, identity=who, lease_duration=3,
                                                         renew_deadline=2, retry_period=0.3)))
            for who in stops}

        async def holder() -> str | None:
            try:
                lease = await c.get_raw(LEASES, ELECTION_NAME, "kube-system")
            except NotFound:
                return None  # not taken yet
            return lease["spec"].get("holderIdentity") or None

        try:
            first = await eventually(holder, 15, "a leading controller-manager")
            assert first in stops
            stops[first].set()
            await asyncio.wait_for(tasks[first], 10)
            other = next(w for w in stops if w != first)

            async def taken_over() -> bool:
                return await holder() == other

            await eventually(taken_over, 15, f"{other} leading after {first} stopped")
        finally:
            for who, stop in stops.items():
                stop.set()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(tasks[who], 10)
