"""The machinepoollet against a real apiserver and an in-memory IRI runtime on a real gRPC socket."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import signal
import sys
import tempfile
from typing import Any

from fake_iri import FakeIriServer, FakeMachineRuntime
from ironpool.api.compute import Machine, MachineClass, MachinePool
from ironpool.api.core import Event, Namespace, Secret
from ironpool.api.errors import NotFound
from ironpool.api.storage import Volume
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncMachineRuntimeClient
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.poollet import keys
from ironpool.poollet.collector import CollectOptions
from ironpool.poollet.machinepoollet import run_machinepoollet
from poollet_helpers import GiB, Iri, machine_options, start_machinepoollet

from tests.helpers.wait import eventually

POOL = "pool-a"


async def make_class(client: AsyncClient, name: str = "small", cpu: str = "1", memory: str = "1Gi") -> None:
    await client.create(
        MachineClass.model_validate(
            {"metadata": {"name": name}, "capabilities": {"cpu": cpu, "memory": memory}}
        )
    )


async def make_machine(
    client: AsyncClient, name: str, cls: str = "small", pool: str | None = POOL, **spec: Any
) -> Machine:
    body: dict[str, Any] = {"machineClassRef": {"name": cls}, **spec}
    if pool:
        body["machinePoolRef"] = {"name": pool}
    return await client.create(
        Machine.model_validate({"metadata": {"name": name, "namespace": "default"}, "spec": body}),
        namespace="default",
    )


async def get_machine(client: AsyncClient, name: str) -> Machine:
    return await client.get(Machine, name, "default")


def cond(obj: Any, ctype: str) -> Any:
    for c in (obj.status.conditions if obj.status else None) or []:
        if c.type == ctype:
            return c
    return None


async def test_bound_machine_is_created_with_ironcore_labels_and_status_flows_back(
    client: AsyncClient, iri: Iri, machinepoollet: Any
) -> None:
    await make_class(client)
    m = await make_machine(client, "vm1")
    await eventually(lambda: iri.machines.count("CreateMachine") == 1, message="CreateMachine")
    req = next(c.request for c in iri.machines.calls if c.method == "CreateMachine")
    labels = dict(req.machine.metadata.labels)
    assert labels == {
        keys.MACHINE_UID_LABEL: m.metadata.uid,
        keys.MACHINE_NAMESPACE_LABEL: "default",
        keys.MACHINE_NAME_LABEL: "vm1",
        keys.MACHINE_POOL_LABEL: POOL,
        keys.MACHINE_CLUSTER_LABEL: (await client.get(Namespace, "kube-system")).metadata.uid,
    }
    assert req.machine.metadata.annotations[keys.MACHINE_GENERATION_ANNOTATION] == "1"
    assert getattr(req.machine.spec, "class") == "small"

    async def running() -> Machine | None:
        got = await get_machine(client, "vm1")
        return got if got.status and got.status.state == "Running" else None

    got = await eventually(running, message="Machine Running")
    iri_id = next(iter(iri.machines.machines))
    assert got.status.machine_id == f"fake-machine-runtime://{iri_id}"
    assert got.status.observed_generation == 1
    assert keys.MACHINE_FINALIZER in (got.metadata.finalizers or [])
    assert cond(got, "Ready").status == "True"
    assert cond(got, "VolumesReady").status == "True"
    assert cond(got, "NetworkInterfacesReady").status == "True"


async def test_power_off_and_runtime_side_changes_flow_back(
    client: AsyncClient, iri: Iri, machinepoollet: Any
) -> None:
    await make_class(client)
    await make_machine(client, "vm1")
    await eventually(lambda: iri.machines.machines, message="IRI machine")
    await eventually(lambda: _state(client, "vm1", "Running"), message="Running")
    await client.patch(Machine, "vm1", {"spec": {"power": "Off"}}, namespace="default")
    await eventually(lambda: iri.machines.count("UpdateMachinePower") == 1, message="UpdateMachinePower")
    got = await eventually(lambda: _state(client, "vm1", "Shutdown"), message="Shutdown")
    assert got.status.observed_generation == got.metadata.generation
    # The guest powers itself on (a runtime-side change): the periodic relist brings it back.
    only = next(iter(iri.machines.machines.values()))
    only.status.state = mpb.MACHINE_RUNNING
    only.metadata.generation += 1
    only.status.observed_generation = only.metadata.generation
    await eventually(lambda: _state(client, "vm1", "Running"), message="Running from runtime")


async def _events(client: AsyncClient, reason: str, name: str = "vm1") -> list[Event]:
    page = await client.list(Event, "default")
    return [e for e in page.items if e.reason == reason and e.involved_object.name == name]


async def test_runtime_events_become_events_on_the_machine(
        client: AsyncClient, iri: Iri, machinepoollet: Any) -> None:
    await make_class(client)
    m = await make_machine(client, "vm1")
    await eventually(lambda: _state(client, "vm1", "Running"), message="Running")
    (iri_m,) = iri.machines.machines.values()
    iri.machines.add_event(iri_m, "ImagePullFailed", "image 'nope' is not in the catalog")
    (ev,) = await eventually(lambda: _events(client, "ImagePullFailed"), message="forwarded event")
    assert (ev.type, ev.message, ev.involved_object.uid) == ("Warning", "image 'nope' is not in the catalog",
                                                             m.metadata.uid)
    assert ev.involved_object.kind == "Machine"


async def _state(client: AsyncClient, name: str, state: str) -> Machine | None:
    got = await get_machine(client, name)
    return got if got.status and got.status.state == state else None


async def test_restart_after_crash_between_create_and_status_makes_exactly_one_machine(
    client: AsyncClient, iri: Iri
) -> None:
    await make_class(client)
    iri.machines.stall_create = True  # the runtime made the machine; the poollet dies before the reply
    first = await start_machinepoollet(client, iri)
    await make_machine(client, "vm1")
    await eventually(lambda: len(iri.machines.machines) == 1, message="CreateMachine")
    await first.stop()
    assert (await get_machine(client, "vm1")).status is None  # no status was written
    iri.machines.stall_create = False
    second = await start_machinepoollet(client, iri)
    try:
        await eventually(lambda: _state(client, "vm1", "Running"), message="Running after restart")
        assert len(iri.machines.machines) == 1
        assert iri.machines.count("CreateMachine") == 1
    finally:
        await second.stop()


async def test_waits_for_missing_volume_and_secret_then_proceeds(
    client: AsyncClient, iri: Iri, machinepoollet: Any
) -> None:
    await make_class(client)
    await make_machine(
        client,
        "vm1",
        ignitionRef={"name": "ign"},
        volumes=[{"name": "data", "volumeRef": {"name": "data-vol"}}],
    )

    async def waiting() -> Any:
        c = cond(await get_machine(client, "vm1"), "Ready")
        return c if c is not None and c.reason == "WaitingForDependencies" else None

    c = await eventually(waiting, message="waiting condition")
    assert "Volume default/data-vol (not found)" in c.message
    assert "Secret default/ign (not found)" in c.message
    assert iri.machines.count("CreateMachine") == 0
    events = await eventually(lambda: _events(client, "WaitingForDependencies"), message="waiting Event")
    assert "Volume default/data-vol (not found)" in (events[0].message or "")

    await client.create(
        Secret.model_validate(
            {
                "metadata": {"name": "ign", "namespace": "default"},
                "data": {"ignition.yaml": base64.b64encode(b"{ignition: {}}").decode()},
            }
        ),
        namespace="default",
    )
    vol = await client.create(
        Volume.model_validate({"metadata": {"name": "data-vol", "namespace": "default"}, "spec": {}}),
        namespace="default",
    )

    async def only_volume_pending() -> Any:
        c = cond(await get_machine(client, "vm1"), "Ready")
        msg = (c.message or "") if c is not None else ""
        return c if "Secret" not in msg and "data-vol (not Available yet" in msg else None

    c = await eventually(only_volume_pending, message="secret resolved, volume found but not Available")
    assert c.message == "waiting for Volume default/data-vol (not Available yet, state Pending)"
    # The volume becomes Available with access (what the volumepoollet would write).
    await client.patch(
        Volume,
        "data-vol",
        {
            "status": {
                "state": "Available",
                "resources": {"storage": "1Gi"},
                "access": {
                    "driver": "ironpool-local",
                    "handle": "h-1",
                    "volumeAttributes": {"path": "/x.qcow2"},
                },
            }
        },
        namespace="default",
        subresource="status",
    )
    await eventually(lambda: iri.machines.count("CreateMachine") == 1, message="CreateMachine")
    req = next(c.request for c in iri.machines.calls if c.method == "CreateMachine")
    assert req.machine.spec.ignition_data == b"{ignition: {}}"
    (v,) = req.machine.spec.volumes
    assert (v.name, v.device, v.connection.driver) == ("data", "oda", "ironpool-local")
    assert v.connection.handle == "h-1"
    assert v.connection.effective_storage_bytes == GiB
    got = await eventually(lambda: _state(client, "vm1", "Running"), message="Running")
    assert cond(got, "VolumesReady").status == "True"
    claimed = await client.get(Volume, "data-vol", "default")
    assert claimed.spec.claim_ref is not None and claimed.spec.claim_ref.uid == got.metadata.uid
    assert vol.metadata.uid


async def test_delete_goes_through_the_finalizer(client: AsyncClient, iri: Iri, machinepoollet: Any) -> None:
    await make_class(client)
    await make_machine(client, "vm1")
    await eventually(lambda: _state(client, "vm1", "Running"), message="Running")
    await client.delete(Machine, "vm1", "default")

    async def gone() -> bool:
        try:
            await get_machine(client, "vm1")
        except NotFound:
            return True
        return False

    await eventually(gone, message="Machine removed")
    assert iri.machines.machines == {}
    assert iri.machines.count("DeleteMachine") == 1


def _iri_machine(mid: str, **labels: str) -> mpb.Machine:
    m = mpb.Machine()
    m.metadata.id = mid
    m.metadata.labels.update(labels)
    return m


async def test_orphans_of_this_installation_are_collected_and_nothing_else(client: AsyncClient,
                                                                          iri: Iri) -> None:
    await make_class(client)
    gc = CollectOptions(grace=0.0)
    running = await start_machinepoollet(client, iri, gc=gc)
    await make_machine(client, "vm1")
    await eventually(lambda: _state(client, "vm1", "Running"), message="Running")
    await running.stop()
    # While the poollet is down, the Machine is deleted with its finalizer stripped.
    m = await get_machine(client, "vm1")
    m.metadata.finalizers = []
    await client.update(m, namespace="default")
    await client.delete(Machine, "vm1", "default")
    ours = (await client.get(Namespace, "kube-system")).metadata.uid
    ghost = {keys.MACHINE_UID_LABEL: "no-such-uid", keys.MACHINE_NAMESPACE_LABEL: "default",
             keys.MACHINE_NAME_LABEL: "ghost"}
    for made in (
        # Ours, for a UID nobody has: an orphan as well.
        _iri_machine("orphan", **ghost, **{keys.MACHINE_POOL_LABEL: POOL, keys.MACHINE_CLUSTER_LABEL: ours}),
        # Not made by a poollet; another pool's; another installation's pool of the same name; and
        # one of ours from before ownership labels: all left alone.
        _iri_machine("foreign"),
        _iri_machine("other-pool", **ghost, **{keys.MACHINE_POOL_LABEL: "pool-b",
                                                keys.MACHINE_CLUSTER_LABEL: ours}),
        _iri_machine("other-cluster", **ghost, **{keys.MACHINE_POOL_LABEL: POOL,
                                                   keys.MACHINE_CLUSTER_LABEL: "another-installation"}),
        _iri_machine("legacy", **ghost, **{keys.MACHINE_POOL_LABEL: POOL}),
    ):
        iri.machines.machines[made.metadata.id] = made
    assert len(iri.machines.machines) == 6
    again = await start_machinepoollet(client, iri, gc=gc)
    try:
        survivors = {"foreign", "other-pool", "other-cluster", "legacy"}
        await eventually(lambda: set(iri.machines.machines) == survivors, message="orphans collected")
        relists = again.poollet.relister.relists
        await eventually(lambda: again.poollet.relister.relists >= relists + 3, message="more relists")
        assert set(iri.machines.machines) == survivors

        async def reported() -> Any:
            c = cond(await client.get(MachinePool, POOL), "GarbageCollection")
            return c if c is not None and "2 collected" in (c.message or "") else None

        c = await eventually(reported, message="the pool reports what was collected and left alone")
        assert (c.status, c.reason) == ("True", "Clean")
        assert "3 machine(s) of other installations or pools left alone" in c.message
        assert "1 orphaned machine(s) without an installation label left alone" in c.message
        events = (await client.list(Event, "default")).items
        collected = [e for e in events if e.reason == "GarbageCollected" and e.involved_object.name == POOL]
        assert len(collected) == 2, [e.message for e in events]
    finally:
        await again.stop()


async def test_pool_announced_with_capacity_allocatable_and_class_counts(
    client: AsyncClient, iri: Iri, machinepoollet: Any
) -> None:
    await make_class(client, "small", "1", "1Gi")
    await make_class(client, "large", "4", "8Gi")
    await make_class(client, "odd", "3", "3Gi")  # the runtime has no such class

    async def pool_ready() -> MachinePool | None:
        p = await client.get(MachinePool, POOL)
        names = [r.name for r in (p.status.available_machine_classes or [])] if p.status else []
        return p if names == ["large", "small"] else None

    pool = await eventually(pool_ready, message="pool classes")
    assert pool.spec.provider_id == "fake://pool-a"
    assert pool.metadata.labels == {keys.TOPOLOGY_REGION_LABEL: "r1", keys.TOPOLOGY_ZONE_LABEL: "z1"}
    assert pool.status is not None
    assert [(a.type, a.address) for a in pool.status.addresses or []] == [("InternalIP", "127.0.0.1")]
    cap = {k: str(v) for k, v in (pool.status.capacity or {}).items()}
    alloc = {k: str(v) for k, v in (pool.status.allocatable or {}).items()}
    # host 8 cpu / 16Gi, 1 cpu / 1Gi reserved
    assert cap == {"cpu": "8", "memory": "16Gi", "class/machine.small": "8", "class/machine.large": "2"}
    assert alloc == {"cpu": "7", "memory": "15Gi", "class/machine.small": "7", "class/machine.large": "1"}
    ready = cond(pool, "Ready")
    assert (ready.status, ready.reason) == ("True", "HeartbeatReceived")

    await make_machine(client, "vm1", "large")

    async def counted() -> dict[str, str] | None:
        p = await client.get(MachinePool, POOL)
        a = {k: str(v) for k, v in (p.status.allocatable or {}).items()} if p.status else {}
        return a if a.get("class/machine.large") == "0" else None

    alloc = await eventually(counted, message="allocatable counts after binding")
    # shared figures are not reduced by bound machines (the scheduler subtracts them once) ...
    assert (alloc["cpu"], alloc["memory"]) == ("7", "15Gi")
    # ... but the class counts are: 7-4=3 cpu, 15-8=7Gi left
    assert alloc["class/machine.small"] == "3"


async def test_kill_9_of_the_poollet_process_between_create_and_status(
        client: AsyncClient, iri: Iri, apiserver: Any, tmp_path: Any) -> None:
    """``ironpool machinepoollet`` as a real process, SIGKILLed while CreateMachine is in flight."""
    await make_class(client)
    token = tmp_path / "token"
    token.write_text(apiserver.admin_token + "\n")
    args = [sys.executable, "-m", "ironpool.cli.main", "machinepoollet", "--pool", POOL,
            "--provider-id", "fake://pool-a", "--iri", iri.server.endpoint, "--server", apiserver.url,
            "--token-file", str(token), "--relist-period", "0.2", "--capacity-cpu", "8",
            "--capacity-memory", "16Gi"]
    log = open(tmp_path / "poollet.log", "ab")  # noqa: SIM115 - handed to the child
    iri.machines.stall_create = True
    proc = await asyncio.create_subprocess_exec(*args, stdout=log, stderr=log)
    try:
        await make_machine(client, "vm1")
        await eventually(lambda: len(iri.machines.machines) == 1, timeout=30, message="CreateMachine")
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        assert (await get_machine(client, "vm1")).status is None
        iri.machines.stall_create = False
        proc = await asyncio.create_subprocess_exec(*args, stdout=log, stderr=log)
        await eventually(lambda: _state(client, "vm1", "Running"), timeout=30,
                         message="Running after restart")
        assert len(iri.machines.machines) == 1
        assert iri.machines.count("CreateMachine") == 1
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        log.close()


async def _available_volume(client: AsyncClient, name: str, handle: str, size: str = "1Gi") -> None:
    await client.create(Volume.model_validate(
        {"metadata": {"name": name, "namespace": "default"}, "spec": {}}), namespace="default")
    await client.patch(Volume, name, {"status": {
        "state": "Available", "resources": {"storage": size},
        "access": {"driver": "ironpool-local", "handle": handle,
                   "volumeAttributes": {"path": f"/{handle}"}}}},
        namespace="default", subresource="status")


async def test_volume_resize_detach_and_attach_on_a_running_machine(
        client: AsyncClient, iri: Iri, machinepoollet: Any) -> None:
    await make_class(client)
    await _available_volume(client, "a", "h-a")
    await _available_volume(client, "b", "h-b")
    await make_machine(client, "vm1", volumes=[{"name": "da", "volumeRef": {"name": "a"}}])
    await eventually(lambda: _state(client, "vm1", "Running"), message="Running")
    (iri_m,) = iri.machines.machines.values()

    # The volume grows (the volumepoollet expanded it): online resize through UpdateVolume.
    await client.patch(Volume, "a", {"status": {"resources": {"storage": "2Gi"}}}, namespace="default",
                       subresource="status")
    await eventually(lambda: iri.machines.count("UpdateVolume") == 1, message="UpdateVolume")
    assert iri_m.spec.volumes[0].connection.effective_storage_bytes == 2 * GiB

    # Swap volume a for b: detach, attach, claims follow.
    await client.patch(Machine, "vm1", {"spec": {"volumes": [{"name": "db", "volumeRef": {"name": "b"}}]}},
                       namespace="default")
    await eventually(lambda: [v.name for v in iri_m.spec.volumes] == ["db"], message="volume swapped")
    assert iri.machines.count("DetachVolume") == 1 and iri.machines.count("AttachVolume") == 1

    async def claims() -> bool:
        a = await client.get(Volume, "a", "default")
        b = await client.get(Volume, "b", "default")
        return a.spec.claim_ref is None and b.spec.claim_ref is not None

    await eventually(claims, message="claim moved from a to b")

    async def observed() -> Machine | None:
        m = await get_machine(client, "vm1")
        ok = (m.status is not None and m.status.observed_generation == m.metadata.generation
              and [v.name for v in m.status.volumes or []] == ["db"])
        return m if ok else None

    m = await eventually(observed, message="observedGeneration caught up")
    assert iri_m.metadata.annotations[keys.MACHINE_GENERATION_ANNOTATION] == str(m.metadata.generation)
    assert cond(m, "VolumesReady").status == "True"

    # A volume added before it exists: the machine keeps running, VolumesReady says what it waits for.
    await client.patch(Machine, "vm1", {"spec": {"volumes": [
        {"name": "db", "volumeRef": {"name": "b"}}, {"name": "dc", "volumeRef": {"name": "later"}}]}},
        namespace="default")

    async def volume_waiting() -> Any:
        c = cond(await get_machine(client, "vm1"), "VolumesReady")
        return c if c is not None and c.status == "False" else None

    c = await eventually(volume_waiting, message="VolumesReady=False")
    assert c.message == "waiting for Volume default/later (not found)"
    assert cond(await get_machine(client, "vm1"), "Ready").status == "True"
    await _available_volume(client, "later", "h-later")
    await eventually(lambda: [v.name for v in iri_m.spec.volumes] == ["db", "dc"], message="dc attached")


async def test_a_refused_create_is_reported_and_retried(
        client: AsyncClient, iri: Iri, machinepoollet: Any) -> None:
    await make_class(client)
    iri.machines.refuse_create = "image 'nope' is not in the catalog"
    await make_machine(client, "vm1")

    async def failed() -> Any:
        c = cond(await get_machine(client, "vm1"), "Ready")
        return c if c is not None and c.reason == "CreateFailed" else None

    c = await eventually(failed, message="CreateFailed condition")
    assert c.message == "runtime refused CreateMachine: INVALID_ARGUMENT: image 'nope' is not in the catalog"
    assert await eventually(lambda: _events(client, "FailedCreate"), message="FailedCreate event")
    assert iri.machines.machines == {}
    iri.machines.refuse_create = ""
    await eventually(lambda: _state(client, "vm1", "Running"), timeout=30, message="Running after the fix")
    assert len(iri.machines.machines) == 1


async def test_machine_removed_without_the_finalizer_is_deleted_from_the_runtime(
        client: AsyncClient, iri: Iri, machinepoollet: Any) -> None:
    await make_class(client)
    await make_machine(client, "vm1")
    await eventually(lambda: _state(client, "vm1", "Running"), message="Running")
    # Someone strips the finalizer (a merge patch: the poollet's own status writes cannot make it a
    # conflict, as they did a read-modify-write) ...
    await client.patch(Machine, "vm1", {"metadata": {"finalizers": None}}, namespace="default")
    await client.delete(Machine, "vm1", "default")  # ... so the object is gone at once
    await eventually(lambda: iri.machines.machines == {}, message="IRI machine deleted (deleteGone)")


async def test_poollet_started_before_its_runtime_waits_for_it(client: AsyncClient) -> None:
    d = tempfile.mkdtemp(prefix="iri-")
    sock = os.path.join(d, "late.sock")
    runtime = AsyncMachineRuntimeClient.connect(f"unix://{sock}")
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_machinepoollet(client, runtime, machine_options(), stop, ready))
    server = None
    try:
        await asyncio.sleep(0.5)  # the poollet is retrying meanwhile; it must neither crash nor be ready
        assert not task.done() and not ready.is_set()
        server = FakeIriServer(sock, [FakeMachineRuntime()])  # type: ignore[arg-type]
        await server.start()
        await asyncio.wait_for(ready.wait(), 30)
        pool = await client.get(MachinePool, POOL)
        assert pool.spec.provider_id == "fake://pool-a"
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await runtime.close()
        if server is not None:
            await server.stop()
        shutil.rmtree(d, ignore_errors=True)
