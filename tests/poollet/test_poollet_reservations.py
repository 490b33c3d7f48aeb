"""Reservations on two hosts with real parts: an apiserver, the scheduler, two libvirt machine
runtimes and their machinepoollets under their own pool identities (the apiserver's pool authorizer
lets each write only its part). Each host has room for 7 ``x-small`` (the runtime and the poollet are
given 7 cores and 4Gi, as an operator states a host's capacity).

Needs libvirtd at qemu:///system; only the second test boots guests (two tiny ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ironpool.api.compute import Machine, MachineClass, MachinePool, Reservation
from ironpool.api.errors import NotFound
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncMachineRuntimeClient
from ironpool.iri.reservations import RESERVATION_KEY_ANNOTATION
from ironpool.poollet import keys
from ironpool.poollet.capacity import HostResources
from ironpool.poollet.machinepoollet import MachinePoollet, MachinePoolletOptions
from ironpool.scheduler.config import parse_config
from ironpool.scheduler.runner import SchedulerRunner

from tests.conftest import ApiServer, start_apiserver, stop_apiserver
from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import (
    LIBVIRT_URI,
    build_tiny_image,
    require_libvirt,
    start_ironpool,
    stop_process,
)
from tests.helpers.wait import eventually

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

GiB = 1 << 30
CLASSES = """\
- apiVersion: compute.ironcore.dev/v1alpha1
  kind: MachineClass
  metadata: {name: x-small}
  capabilities: {cpu: "1", memory: 256Mi}
"""
ACCEPTED, REJECTED = 1, 2


@dataclass
class HostParts:
    """One host: its runtime process, the poollet's client of it, the poollet and its stop switch."""

    pool: str
    workdir: Path
    client: AsyncClient
    runtime_log: Path
    proc: subprocess.Popen[bytes] | None = None
    runtime: AsyncMachineRuntimeClient | None = None
    poollet_task: asyncio.Task[None] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def socket(self) -> Path:
        return self.workdir / "m.sock"

    def start_runtime(self, images: Path) -> None:
        self.proc = start_ironpool(
            ["libvirt-runtime", "--libvirt-uri", LIBVIRT_URI, "--classes", str(self.workdir / "classes.yaml"),
             "--images", str(images), "--image-cache", str(self.workdir / "image-cache"),
             "--state-dir", str(self.workdir / "state"), "--address", f"unix://{self.socket}",
             "--streaming-address", "127.0.0.1:0", "--shutdown-timeout", "5",
             "--capacity-cpu", "7", "--capacity-memory", "4Gi"], self.runtime_log)
        self.runtime = AsyncMachineRuntimeClient.connect(f"unix://{self.socket}")

    async def serving(self) -> bool:
        assert self.proc is not None and self.runtime is not None
        if self.proc.poll() is not None:
            pytest.fail(f"runtime exited: {self.runtime_log.read_text()[-2000:]}")
        try:
            await asyncio.wait_for(self.runtime.version(), 1)
            return True
        except Exception:
            return False

    async def kill_runtime(self) -> None:
        assert self.proc is not None and self.runtime is not None
        self.proc.kill()
        self.proc.wait()
        await self.runtime.close()

    def start_poollet(self) -> None:
        assert self.runtime is not None
        self.stop = asyncio.Event()
        opts = MachinePoolletOptions(pool=self.pool, provider_id=f"libvirt://{self.pool}", relist_period=0.5,
                                     heartbeat_interval=1.0, delete_requeue=0.2, resync_period=2.0,
                                     capacity=HostResources(7, 4 * GiB))
        poollet = MachinePoollet(self.client, self.runtime, opts)
        self.poollet_task = asyncio.create_task(poollet.run(self.stop))

    async def stop_poollet(self) -> None:
        self.stop.set()
        if self.poollet_task is not None:
            await asyncio.wait_for(self.poollet_task, 20)


@dataclass
class Fleet:
    admin: AsyncClient
    hosts: list[HostParts]

    @property
    def a(self) -> HostParts:
        return self.hosts[0]

    @property
    def b(self) -> HostParts:
        return self.hosts[1]


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    require_libvirt()
    images = build_tiny_image()
    tag = secrets.token_hex(3)
    pools = [f"rsv-a-{tag}", f"rsv-b-{tag}"]
    tokens = {p: secrets.token_hex(16) for p in pools}
    admin = secrets.token_hex(16)
    lines = [f'{admin},admin,1,"system:masters"', f'{secrets.token_hex(16)},alice,2,"developers"']
    lines += [f'{tokens[p]},compute.ironcore.dev:system:machinepool:{p},{10 + i},'
              f'"compute.ironcore.dev:system:machinepools"' for i, p in enumerate(pools)]
    (tmp_path / "tokens.csv").write_text("\n".join(lines) + "\n")
    server: ApiServer = start_apiserver(tmp_path)
    admin_client = AsyncClient(ClientConfig(server=server.url, token=admin))
    hosts = []
    for p in pools:
        work = qemu_tmpdir("prsv-")
        (work / "classes.yaml").write_text(CLASSES)
        hosts.append(HostParts(p, work, AsyncClient(ClientConfig(server=server.url, token=tokens[p])),
                               work / "runtime.log"))
    runner = SchedulerRunner(admin_client, parse_config({"queue": {"initialBackoffSeconds": 0.05,
                                                                   "maxBackoffSeconds": 0.5}}))
    sched_stop = asyncio.Event()
    sched = asyncio.create_task(runner.run(sched_stop))
    try:
        await admin_client.create(MachineClass.model_validate(
            {"metadata": {"name": "x-small"}, "capabilities": {"cpu": "1", "memory": "256Mi"}}))
        for h in hosts:
            h.start_runtime(images)
            await eventually(h.serving, timeout=60, message=f"runtime of {h.pool}")
            h.start_poollet()
        await asyncio.wait_for(runner.ready.wait(), 30)
        for h in hosts:
            await eventually(lambda h=h: _allocatable(admin_client, h.pool, 7), timeout=30,
                             message=f"{h.pool} to offer 7 x-small")
        yield Fleet(admin_client, hosts)
    finally:
        sched_stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(sched, 15)
        for h in hosts:
            with contextlib.suppress(Exception):
                await h.stop_poollet()
            with contextlib.suppress(Exception):  # never leave domains behind
                if h.runtime is not None:
                    for m in await h.runtime.list_machines(labels={keys.MACHINE_POOL_LABEL: h.pool}):
                        await h.runtime.delete_machine(m.metadata.id, missing_ok=True)
                    await eventually(lambda h=h: _no_machines(h), timeout=60, message="domains removed")
                    await h.runtime.close()
            if h.proc is not None:
                stop_process(h.proc)
            await h.client.aclose()
            shutil.rmtree(h.workdir, ignore_errors=True)
        await admin_client.aclose()
        stop_apiserver(server)


async def _no_machines(h: HostParts) -> bool:
    assert h.runtime is not None
    return not await h.runtime.list_machines(labels={keys.MACHINE_POOL_LABEL: h.pool})


async def _allocatable(client: AsyncClient, pool: str, count: int) -> bool:
    try:
        p = await client.get(MachinePool, pool)
    except NotFound:
        return False
    alloc = (p.status.allocatable or {}) if p.status else {}
    q = alloc.get("class/machine.x-small")
    return q is not None and q.value() == count


def reservation(name: str, count: int, **spec: Any) -> Reservation:
    return Reservation.model_validate({"metadata": {"name": name, "namespace": "default"},
                                       "spec": {"resources": {"class/machine.x-small": str(count)}, **spec}})


async def _condition(client: AsyncClient, name: str, ctype: str, status: str) -> Reservation | None:
    r = await client.get(Reservation, name, "default")
    for c in (r.status.conditions or []) if r.status else []:
        if c.type == ctype and c.status == status:
            return r
    return None


async def _runtime_holds(h: HostParts, uid: str | None = None) -> list[Any]:
    assert h.runtime is not None
    labels = {keys.RESERVATION_UID_LABEL: uid} if uid else {keys.MACHINE_POOL_LABEL: h.pool}
    return await h.runtime.list_reservations(labels=labels)


async def test_ten_across_both_twenty_refused_restarts_keep_and_delete_removes(fleet: Fleet) -> None:
    admin, a, b = fleet.admin, fleet.a, fleet.b
    await admin.create(reservation("ten", 10), namespace="default")
    ten = await eventually(lambda: _condition(admin, "ten", "Accepted", "True"), timeout=30,
                           message="ten Accepted by both pools")
    assert ten.status is not None
    parts = {e.ref: (e.state, e.resources["class/machine.x-small"].value()) for e in ten.status.pools or []}
    assert parts == {a.pool: ("Accepted", 5), b.pool: ("Accepted", 5)}
    assert sorted(ten.metadata.finalizers or []) == sorted(
        f"machinepoollet.ironcore.dev/reservation-{p}" for p in (a.pool, b.pool))
    held = {}
    for h in (a, b):
        found = await _runtime_holds(h, ten.metadata.uid)
        assert [r.status.state for r in found] == [ACCEPTED]
        assert found[0].metadata.annotations[RESERVATION_KEY_ANNOTATION] == "default/ten"
        held[h.pool] = found[0].metadata.id
        await eventually(lambda h=h: _allocatable(admin, h.pool, 2), timeout=20,
                         message=f"{h.pool}'s allocatable to leave 2 x-small")

    await admin.create(reservation("twenty", 20), namespace="default")
    twenty = await eventually(lambda: _condition(admin, "twenty", "Scheduled", "False"), timeout=30,
                              message="twenty refused")
    message = next(c.message for c in twenty.status.conditions or [] if c.type == "Scheduled")  # type: ignore[union-attr]
    assert message is not None and message.startswith("needs 20 x-small: 4 fit")
    assert "short by 16 x-small" in message
    for h in (a, b):  # nothing of it reached a runtime; free capacity is what it was
        assert [r.metadata.id for r in await _runtime_holds(h)] == [held[h.pool]]
        assert await _allocatable(admin, h.pool, 2)

    # The poollet of a restarts, the runtime of b is killed and restarted: both keep what was accepted.
    await a.stop_poollet()
    a.start_poollet()
    await b.kill_runtime()
    b.start_runtime(build_tiny_image())
    await eventually(b.serving, timeout=60, message="b's runtime back")
    await b.stop_poollet()  # its client was of the killed runtime
    b.start_poollet()
    for h in (a, b):
        found = await _runtime_holds(h, ten.metadata.uid)
        assert [(r.metadata.id, r.status.state) for r in found] == [(held[h.pool], ACCEPTED)]
    await eventually(lambda: _condition(admin, "ten", "Accepted", "True"), timeout=20,
                     message="still Accepted")
    for h in (a, b):
        await eventually(lambda h=h: _allocatable(admin, h.pool, 2), timeout=20, message="still held")

    # Deleting the Reservation removes the runtimes' and frees the pools.
    await admin.delete(Reservation, "ten", "default")

    async def gone() -> bool:
        try:
            await admin.get(Reservation, "ten", "default")
        except NotFound:
            return True
        return False

    await eventually(gone, timeout=30, message="ten gone (both finalizers removed)")
    for h in (a, b):
        assert await _runtime_holds(h) == []
        await eventually(lambda h=h: _allocatable(admin, h.pool, 7), timeout=20, message="7 free again")


def _machine(name: str, reservation_name: str) -> Machine:
    return Machine.model_validate({
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"compute.ironcore.dev/reservation": reservation_name}},
        "spec": {"machineClassRef": {"name": "x-small"},
                 "volumes": [{"name": "root", "localDisk": {"image": "tiny"}}]}})


async def test_machines_within_land_on_its_pool_and_expiry_frees_the_rest(fleet: Fleet) -> None:
    admin, a, b = fleet.admin, fleet.a, fleet.b
    await admin.create(reservation("web", 2, pools=[{"name": a.pool}]), namespace="default")
    await eventually(lambda: _condition(admin, "web", "Accepted", "True"), timeout=30, message="web Accepted")
    await eventually(lambda: _allocatable(admin, a.pool, 5), timeout=20, message="a holds 2 for web")
    for i in range(3):
        await admin.create(_machine(f"web-{i}", "web"), namespace="default")

    async def two_bound() -> list[Machine] | None:
        ms = [await admin.get(Machine, f"web-{i}", "default") for i in range(3)]
        bound = [m for m in ms if m.spec.machine_pool_ref is not None]
        return bound if len(bound) == 2 else None

    bound = await eventually(two_bound, timeout=60, message="two of three bound")
    assert {m.spec.machine_pool_ref.name for m in bound} == {a.pool}  # type: ignore[union-attr]
    machines = [await admin.get(Machine, f"web-{i}", "default") for i in range(3)]
    waiting = next(m.metadata.name for m in machines if m.spec.machine_pool_ref is None)

    async def told_why() -> str | None:
        m = await admin.get(Machine, waiting or "", "default")
        conditions = (m.status.conditions or []) if m.status else []
        cond = next((c for c in conditions if c.type == "Scheduled"), None)
        return cond.message if cond is not None and cond.status == "False" else None

    assert await eventually(told_why, timeout=20, message="the third told why it waits") == \
        "reservation web holds no more x-small: 2 of 2 in use"

    async def consumed() -> bool:
        r = await admin.get(Reservation, "web", "default")
        entries = r.status.pools or [] if r.status else []
        return sum((e.consumed or {}).get("class/machine.x-small", 0) for e in entries) == 2  # type: ignore[arg-type]

    await eventually(consumed, timeout=20, message="web's consumed to count two")
    runtime = a.runtime
    assert runtime is not None

    async def two_made() -> list[Any] | None:
        made = await runtime.list_machines(labels={keys.MACHINE_POOL_LABEL: a.pool})
        return made if len(made) == 2 else None

    iri = await eventually(two_made, timeout=60, message="two IRI machines on a")
    assert {m.metadata.annotations.get(RESERVATION_KEY_ANNOTATION) for m in iri} == {"default/web"}
    # Within the hold: a's runtime still has 5 free, and the pool still offers 5.
    assert await _allocatable(admin, a.pool, 5)
    status = {s.machine_class.name: s.quantity for s in await runtime.status()}
    assert status == {"x-small": 5}

    # An expiring Reservation on b: held, then released, as the pool's allocatable shows.
    await admin.create(reservation("brief", 3, pools=[{"name": b.pool}], ttlSecondsAfterCreation=4),
                       namespace="default")
    await eventually(lambda: _condition(admin, "brief", "Accepted", "True"), timeout=30, message="brief held")
    await eventually(lambda: _allocatable(admin, b.pool, 4), timeout=20, message="b holds 3 for brief")
    await eventually(lambda: _condition(admin, "brief", "Expired", "True"), timeout=30,
                     message="brief expired")
    await eventually(lambda: _allocatable(admin, b.pool, 7), timeout=20, message="b offers 7 again")
    await eventually(lambda: _holds_gone(b), timeout=20, message="b's runtime let brief go")


async def _holds_gone(h: HostParts) -> bool:
    return not await _runtime_holds(h)
