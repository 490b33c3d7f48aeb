"""A returning host's poollet collects the domain of a Machine that was evicted while it was away and
now runs on another pool: the Machine still exists (same uid), but bound elsewhere it counts as gone
for this pool, after the collector's grace and two relists. A Machine still bound here is kept.

The machinepoollet's own ``is_live`` against a real apiserver; the runtime is a stub that
records deletions (the IRI side of collection is covered in tests/poollet)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ironpool.api import Machine, MachineClass
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.poollet import keys
from ironpool.poollet.collector import CollectOptions
from ironpool.poollet.machinepoollet import MachinePoollet, MachinePoolletOptions
from ironpool.poollet.ownership import cluster_uid

from tests.scheduler.sched_docs import machine_class


@dataclass
class StubRuntime:
    deleted: list[str] = field(default_factory=list)

    async def list_machines(self, **_: Any) -> list[mpb.Machine]:
        return []

    async def delete_machine(self, machine_id: str, missing_ok: bool = False) -> None:
        self.deleted.append(machine_id)


def machine(name: str, pool: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"machineClassRef": {"name": "small"}, "machinePoolRef": {"name": pool}}}


async def test_a_machine_bound_elsewhere_is_collected_here_after_the_grace(apiserver: Any) -> None:
    async with AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token)) as client:
        await client.create_raw(resource_for_model(MachineClass), machine_class("small", 1, "1Gi"))
        machines = resource_for_model(Machine)
        moved = await client.create_raw(machines, machine("moved", "other-pool"), "default")
        stays = await client.create_raw(machines, machine("stays", "this-pool"), "default")
        runtime = StubRuntime()
        poollet = MachinePoollet(client, runtime, MachinePoolletOptions(  # type: ignore[arg-type]
            pool="this-pool", provider_id="test://this-pool", gc=CollectOptions(grace=5.0)))
        poollet.own(await cluster_uid(client))
        assert poollet.collector is not None and poollet.ownership is not None
        now = [100.0]
        poollet.collector.clock = lambda: now[0]

        owner = poollet.ownership.labels()

        def iri(oid: str, m: dict[str, Any]) -> mpb.Machine:
            out = mpb.Machine()
            out.metadata.id = oid
            out.metadata.labels.update({**owner, keys.MACHINE_UID_LABEL: m["metadata"]["uid"],
                                        keys.MACHINE_NAMESPACE_LABEL: "default",
                                        keys.MACHINE_NAME_LABEL: m["metadata"]["name"]})
            return out

        listing = [iri("old-domain", moved), iri("live-domain", stays)]
        assert not await poollet.is_live("default/moved", moved["metadata"]["uid"])
        assert await poollet.is_live("default/stays", stays["metadata"]["uid"])

        await poollet.collector.collect(listing)
        now[0] += 10  # past the grace, but seen in one relist only
        assert runtime.deleted == [] and poollet.collector.status.pending == 1
        await poollet.collector.collect(listing)
        assert runtime.deleted == ["old-domain"]  # never the domain of the Machine still bound here
