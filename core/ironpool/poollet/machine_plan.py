"""What to do to an existing IRI machine so it matches its Machine: a pure plan, then a small executor.

:func:`plan` compares the desired volumes, network interfaces and power with what the runtime reports
and returns the IRI operations in the order IronCore's poollet applies them (detach before attach,
power last, then the annotations: generations and the NIC mapping). A NIC that differs in anything
is detached and attached anew, never updated in place, as IronCore does. It touches nothing, so every
case is a plain unit test; :func:`apply` runs a plan against a runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.poollet import keys


@dataclass(frozen=True)
class DetachVolume:
    name: str


@dataclass(frozen=True)
class AttachVolume:
    volume: mpb.Volume


@dataclass(frozen=True)
class ResizeVolume:
    """Online resize: the same connection with a new effective size."""

    volume: mpb.Volume


@dataclass(frozen=True)
class DetachNic:
    name: str


@dataclass(frozen=True)
class AttachNic:
    nic: mpb.NetworkInterface


@dataclass(frozen=True)
class SetPower:
    power: mpb.Power.ValueType


@dataclass(frozen=True)
class RecordGeneration:
    """Annotate the IRI machine with the Machine generation it now reflects and its own generation
    after the changes (IronCore's ``machine-generation`` / ``irimachine-generation``), and with
    ``annotations`` (the NIC mapping)."""

    machine_generation: int
    annotations: tuple[tuple[str, str], ...] = ()


Action = DetachVolume | AttachVolume | ResizeVolume | DetachNic | AttachNic | SetPower | RecordGeneration


def _connection(v: mpb.Volume) -> tuple[str, str] | None:
    return (v.connection.driver, v.connection.handle) if v.HasField("connection") else None


def _volume_actions(current: Mapping[str, mpb.Volume], want: Mapping[str, mpb.Volume],
                    keep: set[str]) -> list[Action]:
    """``keep``: names still in the Machine's spec whose volume is not resolved yet (left attached)."""
    actions: list[Action] = [DetachVolume(name) for name in current if name not in want and name not in keep]
    for name, volume in want.items():
        cur = current.get(name)
        if cur is None:
            actions.append(AttachVolume(volume))
        elif _connection(cur) != _connection(volume):
            actions += [DetachVolume(name), AttachVolume(volume)]  # another volume, or disk kind changed
        elif (_connection(volume) is not None
              and cur.connection.effective_storage_bytes != volume.connection.effective_storage_bytes):
            actions.append(ResizeVolume(volume))
    return actions


def _nic_actions(current: Mapping[str, mpb.NetworkInterface], want: Mapping[str, mpb.NetworkInterface],
                 keep: set[str]) -> list[Action]:
    """``keep``: names still in the Machine's spec whose NIC is not resolved yet (left attached)."""
    actions: list[Action] = [DetachNic(name) for name in current if name not in want and name not in keep]
    for name, nic in want.items():
        cur = current.get(name)
        if cur is not None and cur == nic:
            continue
        if cur is not None:
            actions.append(DetachNic(name))
        actions.append(AttachNic(nic))
    return actions


def plan(iri: mpb.Machine, volumes: Mapping[str, mpb.Volume], nics: Mapping[str, mpb.NetworkInterface],
         power: mpb.Power.ValueType, machine_generation: int, spec_volume_names: set[str],
         spec_nic_names: AbstractSet[str] = frozenset(), annotations: Mapping[str, str] | None = None,
         ) -> list[Action]:
    """The operations that make ``iri`` match the desired state (empty: nothing to do).

    ``volumes`` and ``nics`` are the resolved desired ones; a name in ``spec_volume_names`` or
    ``spec_nic_names`` that is not among them is still waiting for its object and stays attached as
    it is. ``annotations`` are recorded on the IRI machine beside the generations.
    """
    actions = _volume_actions({v.name: v for v in iri.spec.volumes}, volumes, spec_volume_names)
    actions += _nic_actions({n.name: n for n in iri.spec.network_interfaces}, nics, set(spec_nic_names))
    if iri.spec.power != power:
        actions.append(SetPower(power))
    recorded = iri.metadata.annotations.get(keys.MACHINE_GENERATION_ANNOTATION)
    extra = tuple(sorted((annotations or {}).items()))
    if (actions or recorded != str(machine_generation)
            or any(iri.metadata.annotations.get(k) != v for k, v in extra)):
        actions.append(RecordGeneration(machine_generation, extra))
    return actions


class MachineOperations(Protocol):
    """The IRI calls a plan needs (an :class:`~ironpool.iri.client.AsyncMachineRuntimeClient`)."""

    async def list_machines(self, machine_id: str = ..., labels: Mapping[str, str] | None = ...,
                            ) -> list[mpb.Machine]: ...
    async def attach_volume(self, machine_id: str, volume: mpb.Volume) -> None: ...
    async def update_volume(self, machine_id: str, volume: mpb.Volume) -> None: ...
    async def detach_volume(self, machine_id: str, name: str, missing_ok: bool = ...) -> bool: ...
    async def attach_network_interface(self, machine_id: str, nic: mpb.NetworkInterface) -> None: ...
    async def detach_network_interface(self, machine_id: str, name: str, missing_ok: bool = ...) -> bool: ...
    async def update_machine_power(self, machine_id: str, power: mpb.Power.ValueType) -> None: ...
    async def update_machine_annotations(self, machine_id: str, annotations: Mapping[str, str]) -> None: ...


async def refetch(runtime: MachineOperations, iri: mpb.Machine) -> mpb.Machine:
    """The IRI machine as the runtime reports it now (``iri`` itself if it is gone meanwhile)."""
    again = await runtime.list_machines(iri.metadata.id)
    return again[0] if again else iri


async def apply(runtime: MachineOperations, iri: mpb.Machine, actions: list[Action]) -> mpb.Machine:
    """Run ``actions`` in order; returns the IRI machine as the runtime reports it afterwards."""
    mid = iri.metadata.id
    for i, action in enumerate(actions):
        match action:
            case DetachVolume(name):
                await runtime.detach_volume(mid, name, missing_ok=True)
            case AttachVolume(volume):
                await runtime.attach_volume(mid, volume)
            case ResizeVolume(volume):
                await runtime.update_volume(mid, volume)
            case DetachNic(name):
                await runtime.detach_network_interface(mid, name, missing_ok=True)
            case AttachNic(nic):
                await runtime.attach_network_interface(mid, nic)
            case SetPower(power):
                await runtime.update_machine_power(mid, power)
            case RecordGeneration(generation, extra):
                if i:  # the runtime's generation moved with the changes before
                    iri = await refetch(runtime, iri)
                annotations = dict(iri.metadata.annotations)
                annotations.update(extra)
                annotations[keys.MACHINE_GENERATION_ANNOTATION] = str(generation)
                annotations[keys.IRI_MACHINE_GENERATION_ANNOTATION] = str(iri.metadata.generation)
                await runtime.update_machine_annotations(mid, annotations)
    return await refetch(runtime, iri) if actions else iri
