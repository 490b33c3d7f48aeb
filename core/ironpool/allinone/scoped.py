"""A machine-runtime client that sees only the machines of one ``ironpool up`` instance.

The libvirt machine runtime adopts every ``ironpool-`` domain of its libvirtd when it starts. With
two instances on one libvirtd (the demo and a test run, say), the machinepoollet's garbage
collection would then delete the other instance's domains: their Machines are not in its API.
This adapter stamps every machine it creates with an instance label and filters every listing by
it, so creation, lookup by UID and garbage collection stay within the instance.
"""

from __future__ import annotations

from collections.abc import Mapping

from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.poollet.runtime import MachineRuntime

INSTANCE_LABEL = "ironpool.dev/up-instance"


class ScopedMachineRuntime(MachineRuntime):
    """:class:`MachineRuntime` restricted to machines labelled ``INSTANCE_LABEL=<instance>``."""

    instance: str = ""

    @classmethod
    def connect_scoped(cls, endpoint: str, instance: str, timeout: float = 30.0) -> ScopedMachineRuntime:
        runtime = cls.connect(endpoint, timeout)
        assert isinstance(runtime, ScopedMachineRuntime)
        runtime.instance = instance
        return runtime

    async def list_machines(self, machine_id: str = "", labels: Mapping[str, str] | None = None,
                            ) -> list[mpb.Machine]:
        return await super().list_machines(machine_id, {**(labels or {}), INSTANCE_LABEL: self.instance})

    async def create_machine(self, machine: mpb.Machine) -> mpb.Machine:
        stamped = mpb.Machine()
        stamped.CopyFrom(machine)
        stamped.metadata.labels[INSTANCE_LABEL] = self.instance
        return await super().create_machine(stamped)
