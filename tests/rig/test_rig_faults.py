"""Fault tests on the multi-host rig: 3 etcd members, 2 HTTPS apiservers, 2 leader-elected schedulers and
3 hosts joined with ``ironpool join``, every part in its own process and every client over HTTPS.

- a Machine lands as a running QEMU domain on one of the joined hosts, and survives its host's restart;
- SIGKILL of the leading scheduler during a burst of 500 Machines: every Machine bound exactly once,
  no pool overcommitted, the standby leading within 15 s (printed);
- SIGKILL of the etcd leader: writes through both apiservers go on, watches carry on, nothing
  acknowledged is lost;
- SIGKILL of the apiserver a client and its watch use: both carry on through the other, nothing
  acknowledged is lost.

Each test brings back what it killed, so the next one starts from a whole rig.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import libvirt
import orjson
import pytest
from ironpool.api import MachineClass
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import ServerUnreachable, resource_for_model
from ironpool.rig.rig import Rig, Scheduler

from tests.e2e.up_harness import machine_domain
from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.runtimes import LIBVIRT_URI
from tests.helpers.wait import wait_for
from tests.rig.harness import admin_http
from tests.scheduler.sched_docs import machine_class, machine_pool

pytestmark = [pytest.mark.libvirt, pytest.mark.slow, pytest.mark.guests]

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
MERGE = {"Content-Type": "application/merge-patch+json"}
CLASSES = resource_for_model(MachineClass)


def machines(namespace: str = "default") -> str:
    return f"{COMPUTE}/namespaces/{namespace}/machines"


def tiny_machine(name: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine", "metadata": {"name": name},
            "spec": {"machineClassRef": {"name": "x-small"}, "power": "On",
                     "volumes": [{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "1Gi"}}]}}


def test_a_machine_lands_as_a_running_domain_on_a_joined_host(rig: Rig) -> None:
    conn = libvirt.open(LIBVIRT_URI)
    with admin_http(rig, timeout=30) as c:
        created = c.post(machines(), json=tiny_machine("vm-1"))
        assert created.status_code == 201, created.text

        def running() -> dict[str, Any] | None:
            m = c.get(f"{machines()}/vm-1").json()
            return m if (m.get("status") or {}).get("state") == "Running" else None

        machine = wait_for(running, GUEST_SECONDS, "vm-1 running")
        pool = machine["spec"]["machinePoolRef"]["name"]
        assert pool in rig.hosts
        _, name = machine_domain(machine["status"]["machineID"])
        domain = conn.lookupByName(name)
        assert domain.isActive()
        # The domain is that host's: its runtime's state folder is in the joined host's data dir.
        assert str(Path(rig.hosts[pool].data_dir) / "machine-runtime") in domain.XMLDesc(0)

        # Ctrl-C on the host and a new `ironpool join`: it resumes with the same domain running.
        rig.stop_host(pool)
        assert rig.hosts[pool].proc.returncode == 0, rig.hosts[pool].proc.tail()
        assert "ironpool join stopped." in rig.hosts[pool].proc.tail(5)
        rig.start_host(pool)
        wait_for(lambda: c.get(f"{COMPUTE}/machinepools/{pool}").json()["status"]["state"] == "Ready", 30,
                 f"pool {pool} ready again")
        assert running() is not None and conn.lookupByName(name).isActive()

        assert c.delete(f"{machines()}/vm-1").status_code == 200
        wait_for(lambda: c.get(f"{machines()}/vm-1").status_code == 404, 60, "vm-1 gone")
    assert name not in [d.name() for d in conn.listAllDomains(0)]
    conn.close()


def test_join_refuses_a_token_ca_or_pool_the_control_plane_does_not_accept(rig: Rig, tmp_path: Path) -> None:
    """Nothing starts, and the message says what is wrong: the token, the CA, or the pool."""
    from ironpool.allinone.join_token import JoinToken
    from ironpool.apiserver.serving.certs import CertificateAuthority

    good = rig.hosts["host1"].proc.argv
    token = good[good.index("--token") + 1]
    other_ca = CertificateAuthority.ensure(tmp_path / "other-pki").paths.cert
    cases = {
        "the machinepool token is not accepted": ["--token", str(JoinToken.generate()), "--ca-file",
                                                  str(rig.ca_file)],
        "not signed by the CA given": ["--token", token, "--ca-file", str(other_ca)],
        # The bootstrap token of host1 buys host1's certificates only: host2's request is denied.
        "PoolIdentityMismatch": ["--token", token, "--ca-file", str(rig.ca_file),
                                 "--pool", "host2"],  # the last --pool counts
    }
    for message, args in cases.items():
        data_dir = tmp_path / "joining"
        joined = subprocess.run(
            [sys.executable, "-m", "ironpool.cli.main", "join", rig.servers, "--pool", "host1", *args,
             "--data-dir", str(data_dir), "--no-tiny-image"],
            capture_output=True, text=True, timeout=60, check=False)
        assert joined.returncode == 1 and message in joined.stdout, (message, joined.stdout, joined.stderr)
        assert not (data_dir / "installation.json").exists()  # no runtime was started


def test_killing_the_leader_scheduler_during_a_burst_of_500_machines(rig: Rig) -> None:
    """Every Machine bound exactly once, no pool overcommitted, the standby leading within 15 s.

    The burst goes to five pools without hosts that alone offer the class ``burst`` (500 real domains
    would measure libvirt, not the scheduler); the hosts' pools are in the scheduler's view all along.
    """
    pools = {f"burst-{i}": 110 for i in range(5)}  # room for 550 machines of 1 cpu
    with admin_http(rig, timeout=60) as c:
        assert c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "burst"}}).status_code == 201
        assert c.post(f"{COMPUTE}/machineclasses", json=machine_class("burst", 1, "64Mi")).status_code == 201
        for name, cpu in pools.items():
            doc = machine_pool(name, cpu, "1Ti", classes=["burst"])
            status = doc.pop("status")
            assert c.post(f"{COMPUTE}/machinepools", json=doc).status_code == 201
            r = c.patch(f"{COMPUTE}/machinepools/{name}/status", json={"status": status}, headers=MERGE)
            assert r.status_code == 200, r.text
        leader = wait_for(lambda: _the_leader(rig.schedulers), 30, "a leading scheduler")
        standby = next(s for s in rig.schedulers if s is not leader)
        result = asyncio.run(_burst_with_a_kill(rig, leader, standby))
        print(f"\nrig: the standby scheduler took over {result['took_over']:.1f}s after the leader's SIGKILL "
              f"({result['binds']} binds, {result['rebinds']} rebinds)")

        def all_bound() -> dict[str, str] | None:
            items = c.get(machines("burst")).json()["items"]
            placed = {m["metadata"]["name"]: m["spec"]["machinePoolRef"]["name"]
                      for m in items if m["spec"].get("machinePoolRef")}
            return placed if len(placed) == 500 else None

        placed = wait_for(all_bound, 60, "500 machines bound")
        rig.restart(leader.proc)
        c.delete("/api/v1/namespaces/burst")
        for name in pools:
            c.delete(f"{COMPUTE}/machinepools/{name}")
    assert result["took_over"] < 15.0, result
    used: dict[str, int] = {}
    for pool in placed.values():
        used[pool] = used.get(pool, 0) + 1
    assert set(used) <= set(pools) and all(used[p] <= pools[p] for p in used), used
    assert result["rebinds"] == 0 and result["binds"] == 500, result


def _the_leader(schedulers: list[Scheduler]) -> Scheduler | None:
    leaders = [s for s in schedulers if s.proc.alive and s.leading]
    assert len(leaders) <= 1, "two schedulers lead at once"
    return leaders[0] if leaders else None


async def _burst_with_a_kill(rig: Rig, leader: Scheduler, standby: Scheduler) -> dict[str, Any]:
    """500 creates through both apiservers; SIGKILL the leader once 100 are bound; a watch through the
    second apiserver records every bind (and any change of a bind)."""
    a, b = (s.url for s in rig.apiservers)
    binds: dict[str, str] = {}
    rebinds = 0
    headers = {"Authorization": f"Bearer {rig.admin_token}"}
    async with httpx.AsyncClient(headers=headers, verify=rig.ssl_context(), timeout=60) as http:
        rv = (await http.get(a + machines("burst"))).json()["metadata"]["resourceVersion"]

        async def watch() -> None:
            nonlocal rebinds
            async with http.stream("GET", b + machines("burst"), timeout=None,
                                   params={"watch": "true", "resourceVersion": rv}) as stream:
                async for line in stream.aiter_lines():
                    m = orjson.loads(line)["object"]
                    pool = (m["spec"].get("machinePoolRef") or {}).get("name")
                    if pool is not None:
                        name = m["metadata"]["name"]
                        if name in binds and binds[name] != pool:
                            rebinds += 1
                        binds.setdefault(name, pool)

        watching = asyncio.ensure_future(watch())
        sem = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            body = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
                    "metadata": {"name": f"m{i:03d}"}, "spec": {"machineClassRef": {"name": "burst"}}}
            async with sem:
                r = await http.post((a, b)[i % 2] + machines("burst"), json=body)
                assert r.status_code == 201, r.text

        creating = asyncio.ensure_future(asyncio.gather(*(create(i) for i in range(500))))
        deadline = time.monotonic() + 120
        while len(binds) < 100:  # kill the leader in the middle of the burst
            assert time.monotonic() < deadline, f"only {len(binds)} binds before the kill"
            await asyncio.sleep(0.05)
        leader.proc.signal(signal.SIGKILL)
        died = time.monotonic()
        while not await asyncio.to_thread(lambda: standby.leading):
            assert time.monotonic() - died < 60, "the standby never led"
            await asyncio.sleep(0.2)
        took_over = time.monotonic() - died
        await creating
        deadline = time.monotonic() + 60
        while len(binds) < 500 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        watching.cancel()
    return {"took_over": took_over, "binds": len(binds), "rebinds": rebinds}


async def _writes_and_a_watch(prefix: str, clients: list[AsyncClient], fault: Any,
                              count: int = 60) -> tuple[list[str], set[str]]:
    """``count`` MachineClass creates spread over ``clients``, ``fault()`` after a third of them, and a
    watch through the first client; returns the acknowledged names and those the watch saw.

    A create that fails (the answer lost with a server, the store electing a leader) is retried until
    it is acknowledged or found stored, within 30 s: writes must go on, not merely not break."""
    seen: set[str] = set()
    acknowledged: list[str] = []
    rv = (await clients[0].list_raw(CLASSES)).resource_version

    async def watch() -> None:
        nonlocal rv
        while True:
            try:
                async for event in clients[0].watch_raw(CLASSES, resource_version=rv):
                    rv = event.resource_version or rv
                    if event.type == "ADDED":
                        seen.add(event.object["metadata"]["name"])
            except Exception:  # the server or its store went away: watch again from where it was
                await asyncio.sleep(0.1)

    watching = asyncio.ensure_future(watch())
    try:
        for i in range(count):
            if i == count // 3:
                await asyncio.to_thread(fault)
            name = f"{prefix}-{i}"
            client = clients[i % len(clients)]
            deadline = time.monotonic() + 30
            while True:
                try:
                    await client.create_raw(CLASSES, machine_class(name, 1, "1Gi"))
                    acknowledged.append(name)
                    break
                except ServerUnreachable:
                    pass
                except Exception as exc:
                    if "already exists" in str(exc).lower():
                        break  # an earlier try was stored though its answer was lost
                    if time.monotonic() > deadline:
                        raise
                await asyncio.sleep(0.1)

        async def all_seen() -> None:
            while not set(acknowledged) <= seen:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(all_seen(), 30)
    finally:
        watching.cancel()
    return acknowledged, seen


async def test_killing_the_etcd_leader_writes_and_watches_go_on(rig: Rig) -> None:
    victim = rig.etcd_leader()
    token, ca = rig.admin_token, str(rig.ca_file)
    clients = [AsyncClient(ClientConfig(server=a.url, token=token, ca_file=ca)) for a in rig.apiservers]
    try:
        acknowledged, _ = await _writes_and_a_watch("etcd-fault", clients, victim.proc.kill)
        stored = {c["metadata"]["name"] for c in (await clients[1].list_raw(CLASSES)).items}
    finally:
        for client in clients:
            await client.aclose()
    assert not victim.proc.alive
    assert len(acknowledged) >= 59, acknowledged  # at most the write in flight at the kill is unknown
    assert set(acknowledged) <= stored
    await asyncio.to_thread(rig.restart, victim.proc)
    assert rig.etcd_leader() is not None


async def test_killing_an_apiserver_clients_and_watches_carry_on(rig: Rig) -> None:
    first = rig.apiservers[0]
    config = ClientConfig.from_file(rig.admin_config)  # both apiservers, the first one first
    async with AsyncClient(config) as client:
        acknowledged, _ = await _writes_and_a_watch("api-fault", [client], first.proc.kill)
        assert client.servers.current == rig.apiservers[1].url
        stored = {c["metadata"]["name"] for c in (await client.list_raw(CLASSES)).items}
    assert len(acknowledged) >= 59, acknowledged
    assert set(acknowledged) <= stored
    await asyncio.to_thread(rig.restart, first.proc)
