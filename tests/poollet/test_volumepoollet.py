"""The volumepoollet and the pool-lifecycle controller against a real apiserver and fake IRI runtimes."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from ironpool.api.compute import Machine, MachineClass, MachinePool
from ironpool.api.coordination import Lease
from ironpool.api.core import Namespace
from ironpool.api.errors import NotFound
from ironpool.api.fleet import MACHINE_POOL_LEASE_NAMESPACE, VOLUME_POOL_LEASE_NAMESPACE
from ironpool.api.storage import Volume, VolumeClass, VolumePool
from ironpool.client.rest import AsyncClient
from ironpool.fleet.decisions import UNKNOWN_REASON
from ironpool.fleet.lifecycle import LifecycleOptions, PoolLifecycleController
from ironpool.poollet import keys
from poollet_helpers import GiB, Iri, start_machinepoollet, start_volumepoollet

from tests.helpers.wait import eventually

VPOOL = "vpool-a"


async def make_volume_class(client: AsyncClient, name: str = "fast", policy: str = "ExpandOnly") -> None:
    await client.create(
        VolumeClass.model_validate(
            {
                "metadata": {"name": name},
                "capabilities": {"tps": "100", "iops": "1000"},
                "resizePolicy": policy,
            }
        )
    )


async def make_volume(client: AsyncClient, name: str, size: str = "1Gi", pool: str = VPOOL) -> Volume:
    return await client.create(
        Volume.model_validate(
            {
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "volumeClassRef": {"name": "fast"},
                    "volumePoolRef": {"name": pool},
                    "resources": {"storage": size},
                },
            }
        ),
        namespace="default",
    )


async def available(client: AsyncClient, name: str, size: str | None = None) -> Volume | None:
    v = await client.get(Volume, name, "default")
    if v.status is None or v.status.state != "Available":
        return None
    if size is not None and str((v.status.resources or {}).get("storage")) != size:
        return None
    return v


async def test_volume_created_available_expanded_and_deleted(client: AsyncClient, iri: Iri) -> None:
    await make_volume_class(client)
    running = await start_volumepoollet(client, iri)
    try:
        vol = await make_volume(client, "data")
        got = await eventually(lambda: available(client, "data"), message="Volume Available")
        (created,) = [c.request for c in iri.volumes.calls if c.method == "CreateVolume"]
        assert dict(created.volume.metadata.labels) == {
            keys.VOLUME_UID_LABEL: vol.metadata.uid,
            keys.VOLUME_NAMESPACE_LABEL: "default",
            keys.VOLUME_NAME_LABEL: "data",
            keys.VOLUME_POOL_LABEL: VPOOL,
            keys.VOLUME_CLUSTER_LABEL: (await client.get(Namespace, "kube-system")).metadata.uid,
        }
        assert created.volume.spec.resources.storage_bytes == GiB
        assert getattr(created.volume.spec, "class") == "fast"
        iri_id = next(iter(iri.volumes.volumes))
        assert got.status is not None and got.status.access is not None
        assert got.status.volume_id == f"fake-volume-runtime://{iri_id}"
        assert (got.status.access.driver, got.status.access.handle) == ("ironpool-local", iri_id)
        assert (got.status.access.volume_attributes or {})["format"] == "qcow2"
        assert keys.VOLUME_FINALIZER in (got.metadata.finalizers or [])

        await client.patch(Volume, "data", {"spec": {"resources": {"storage": "2Gi"}}}, namespace="default")
        await eventually(lambda: available(client, "data", "2Gi"), message="expanded to 2Gi")
        assert iri.volumes.count("ExpandVolume") == 1
        assert iri.volumes.volumes[iri_id].spec.resources.storage_bytes == 2 * GiB

        await client.delete(Volume, "data", "default")

        async def gone() -> bool:
            try:
                await client.get(Volume, "data", "default")
            except NotFound:
                return True
            return False

        await eventually(gone, message="Volume removed")
        assert iri.volumes.volumes == {}
    finally:
        await running.stop()


async def test_volume_pool_status_and_stale_claim_release(client: AsyncClient, iri: Iri) -> None:
    await make_volume_class(client)
    running = await start_volumepoollet(client, iri)
    try:
        await make_volume(client, "data", "10Gi")
        await eventually(lambda: available(client, "data"), message="Available")
        await client.patch(
            Volume, "data", {"spec": {"claimRef": {"name": "nobody", "uid": "x"}}}, namespace="default"
        )

        async def released() -> bool:
            v = await client.get(Volume, "data", "default")
            return v.spec.claim_ref is None

        await eventually(released, message="claim of a missing machine released")

        async def pool_figures() -> dict[str, str] | None:
            p = await client.get(VolumePool, VPOOL)
            if not p.status or not p.status.allocatable:
                return None
            a = {k: str(v) for k, v in p.status.allocatable.items()}
            return a if a.get("class/volume.fast") == "90Gi" else None

        alloc = await eventually(pool_figures, message="volume pool allocatable")
        assert alloc["storage"] == "100Gi"  # not reduced by the bound volume; the class key is
        pool = await client.get(VolumePool, VPOOL)
        assert pool.status is not None and pool.status.state == "Available"
        assert [c.name for c in pool.status.available_volume_classes or []] == ["fast"]
        assert pool.spec.provider_id == "fake://vpool-a"
    finally:
        await running.stop()


async def test_machine_uses_volume_made_by_the_volumepoollet(client: AsyncClient, iri: Iri) -> None:
    await make_volume_class(client)
    await client.create(
        MachineClass.model_validate(
            {"metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}
        )
    )
    vp = await start_volumepoollet(client, iri)
    mp = await start_machinepoollet(client, iri)
    try:
        await client.create(
            Machine.model_validate(
                {
                    "metadata": {"name": "vm1", "namespace": "default"},
                    "spec": {
                        "machineClassRef": {"name": "small"},
                        "machinePoolRef": {"name": "pool-a"},
                        "volumes": [{"name": "data", "volumeRef": {"name": "data"}}],
                    },
                }
            ),
            namespace="default",
        )
        await make_volume(client, "data")

        async def attached() -> Machine | None:
            m = await client.get(Machine, "vm1", "default")
            vols = (m.status.volumes or []) if m.status else []
            return (
                m
                if m.status and m.status.state == "Running" and vols and vols[0].state == "Attached"
                else None
            )

        m = await eventually(attached, message="machine running with volume attached")
        v = await client.get(Volume, "data", "default")
        assert v.spec.claim_ref is not None and v.spec.claim_ref.uid == m.metadata.uid
        (iri_machine,) = iri.machines.machines.values()
        assert iri_machine.spec.volumes[0].connection.handle == next(iter(iri.volumes.volumes))

        # Deleting the machine releases the claim.
        await client.delete(Machine, "vm1", "default")

        async def unclaimed() -> bool:
            return (await client.get(Volume, "data", "default")).spec.claim_ref is None

        await eventually(unclaimed, message="claim released")
    finally:
        await mp.stop()
        await vp.stop()


async def test_silent_pool_becomes_unknown_and_recovers(client: AsyncClient, iri: Iri) -> None:
    """The machinepoollet's own Lease heartbeat keeps its pool Ready; stopped, the pool lifecycle
    controller turns it Unknown; started again, the poollet sets Ready back."""
    running = await start_machinepoollet(client, iri, heartbeat_interval=0.2)
    stop = asyncio.Event()
    controller = PoolLifecycleController(client, LifecycleOptions(grace=1.0, monitor_period=0.1))
    lifecycle = asyncio.create_task(controller.run(stop))

    async def ready_status(expected: str) -> Any:
        p = await client.get(MachinePool, "pool-a")
        ready = (
            next((c for c in (p.status.conditions or []) if c.type == "Ready"), None) if p.status else None
        )
        return ready if ready is not None and ready.status == expected else None

    try:
        await eventually(lambda: ready_status("True"), message="Ready=True")
        await asyncio.sleep(1.5)  # longer than the grace: a live poollet must keep the pool Ready
        assert await ready_status("True"), "a heartbeating pool was marked not Ready"
        await running.stop()
        cond = await eventually(lambda: ready_status("Unknown"), timeout=10, message="Ready=Unknown")
        assert cond.reason == UNKNOWN_REASON
        running = await start_machinepoollet(client, iri, heartbeat_interval=0.2)
        await eventually(lambda: ready_status("True"), message="Ready=True again")
    finally:
        stop.set()
        await lifecycle
        await running.stop()


async def test_volumepoollet_restart_after_create_without_reply_makes_one_volume(
        client: AsyncClient, iri: Iri) -> None:
    await make_volume_class(client)
    iri.volumes.stall_create = True
    first = await start_volumepoollet(client, iri)
    await make_volume(client, "data")
    await eventually(lambda: len(iri.volumes.volumes) == 1, message="CreateVolume")
    await first.stop()
    iri.volumes.stall_create = False
    second = await start_volumepoollet(client, iri)
    try:
        await eventually(lambda: available(client, "data"), message="Available after restart")
        assert len(iri.volumes.volumes) == 1 and iri.volumes.count("CreateVolume") == 1
    finally:
        await second.stop()


async def test_volumepoollet_command_announces_its_pool_and_stops_cleanly_on_sigterm(
        client: AsyncClient, iri: Iri, apiserver: Any, tmp_path: Any) -> None:
    token = tmp_path / "token"
    token.write_text(apiserver.admin_token)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ironpool.cli.main", "volumepoollet", "--pool", "cli-pool", "--provider-id",
        "fake://cli", "--iri", iri.server.endpoint, "--server", apiserver.url, "--token-file", str(token),
        "--zone", "z9", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    try:
        async def announced() -> VolumePool | None:
            try:
                p = await client.get(VolumePool, "cli-pool")
            except NotFound:
                return None
            return p if p.status is not None and p.status.state == "Available" else None

        pool = await eventually(announced, timeout=30, message="VolumePool announced")
        assert (pool.metadata.labels or {}).get(keys.TOPOLOGY_ZONE_LABEL) == "z9"
    finally:
        proc.terminate()
        out, _ = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 0, out.decode()[-2000:]


async def test_both_poollets_renew_their_pools_leases(client: AsyncClient, iri: Iri) -> None:
    """Each poollet's heartbeat is a Lease named after its pool, in its kind's lease namespace, owned
    by the pool, renewed every heartbeat interval."""
    vp = await start_volumepoollet(client, iri, heartbeat_interval=0.2)
    mp = await start_machinepoollet(client, iri, heartbeat_interval=0.2)
    try:
        for name, namespace, kind in ((VPOOL, VOLUME_POOL_LEASE_NAMESPACE, "VolumePool"),
                                      ("pool-a", MACHINE_POOL_LEASE_NAMESPACE, "MachinePool")):
            async def lease_of(name: str = name, namespace: str = namespace) -> Lease | None:
                try:
                    return await client.get(Lease, name, namespace)
                except NotFound:
                    return None

            first = await eventually(lease_of, message=f"the Lease of {kind} {name}")

            async def renewed(lease_of: Any = lease_of, first: Lease = first) -> Lease | None:
                later = await lease_of()
                return later if later is not None and later.spec != first.spec else None

            lease = await eventually(renewed, message=f"the Lease of {kind} {name} renewed")
            assert lease.spec is not None and lease.spec.holder_identity == name
            assert lease.spec.lease_duration_seconds == 40
            owners = lease.metadata.owner_references or []
            assert [(o.kind, o.name) for o in owners] == [(kind, name)]
    finally:
        await mp.stop()
        await vp.stop()
