"""Encrypted Volumes through both poollets (real apiserver, fake IRI runtimes): the volumepoollet hands
the Secret's key to the volume runtime, the machinepoollet to the machine runtime with the attachment
(IRI's ``encryption_data``), and neither acts before the Secret is there."""

from __future__ import annotations

import base64

from ironpool.api.compute import Machine, MachineClass
from ironpool.api.core import Secret
from ironpool.api.storage import Volume, VolumeClass
from ironpool.client.rest import AsyncClient
from poollet_helpers import Iri, start_machinepoollet, start_volumepoollet

from tests.helpers.wait import eventually

KEY = b"volume-key-\x00\xffbinary"
VPOOL = "vpool-a"  # the volumepoollet's pool (poollet_helpers)


async def test_the_key_of_an_encrypted_volume_reaches_both_runtimes(client: AsyncClient, iri: Iri) -> None:
    caps = {"tps": "100", "iops": "1000"}
    await client.create(VolumeClass.model_validate({"metadata": {"name": "fast"}, "capabilities": caps}))
    await client.create(MachineClass.model_validate(
        {"metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}))
    vp = await start_volumepoollet(client, iri)
    mp = await start_machinepoollet(client, iri)
    try:
        await client.create(Volume.model_validate({
            "metadata": {"name": "secure", "namespace": "default"},
            "spec": {"volumeClassRef": {"name": "fast"}, "volumePoolRef": {"name": VPOOL},
                     "resources": {"storage": "1Gi"}, "encryption": {"secretRef": {"name": "vol-key"}}},
        }), namespace="default")  # fmt: skip
        await client.create(Machine.model_validate({
            "metadata": {"name": "vm-enc", "namespace": "default"},
            "spec": {"machineClassRef": {"name": "small"}, "machinePoolRef": {"name": "pool-a"},
                     "volumes": [{"name": "data", "volumeRef": {"name": "secure"}}]},
        }), namespace="default")  # fmt: skip

        async def volume_waits() -> bool:
            v = await client.get(Volume, "secure", "default")
            return bool(v.status and v.status.state == "Pending")

        await eventually(volume_waits, message="the volume to wait for its Secret")
        assert iri.volumes.volumes == {} and iri.machines.machines == {}

        await client.create(Secret.model_validate({
            "metadata": {"name": "vol-key", "namespace": "default"},
            "data": {"encryptionKey": base64.b64encode(KEY).decode()},
        }), namespace="default")  # fmt: skip

        async def attached() -> Machine | None:
            m = await client.get(Machine, "vm-enc", "default")
            vols = (m.status.volumes or []) if m.status else []
            return m if vols and vols[0].state == "Attached" else None

        await eventually(attached, message="the machine with its encrypted volume attached")
        (iri_volume,) = iri.volumes.volumes.values()
        assert dict(iri_volume.spec.encryption.secret_data) == {"encryptionKey": KEY}
        (iri_machine,) = iri.machines.machines.values()
        connection = iri_machine.spec.volumes[0].connection
        assert dict(connection.encryption_data) == {"encryptionKey": KEY}
        assert not connection.secret_data  # the key is no access secret
    finally:
        await mp.stop()
        await vp.stop()
