"""The machine update plan on its own: desired volumes, NICs and power against what the runtime has."""

from __future__ import annotations

from typing import Any

from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.poollet import keys
from ironpool.poollet.machine_plan import (
    AttachNic,
    AttachVolume,
    DetachNic,
    DetachVolume,
    RecordGeneration,
    ResizeVolume,
    SetPower,
    apply,
    plan,
)


def local(name: str) -> mpb.Volume:
    return mpb.Volume(name=name, device="oda", local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image="tiny")))


def remote(name: str, handle: str, size: int = 1 << 30) -> mpb.Volume:
    return mpb.Volume(name=name, device="odb", connection=mpb.VolumeConnection(
        driver="libvirt", handle=handle, effective_storage_bytes=size))


def nic(name: str, network: str = "net", ips: tuple[str, ...] = ()) -> mpb.NetworkInterface:
    return mpb.NetworkInterface(name=name, network_id=network, ips=list(ips))


def machine(volumes: list[mpb.Volume] = (), nics: list[mpb.NetworkInterface] = (),  # type: ignore[assignment]
            power: Any = mpb.POWER_ON, generation: str | None = "3") -> mpb.Machine:
    m = mpb.Machine(spec=mpb.MachineSpec(volumes=volumes, network_interfaces=nics, power=power))
    m.metadata.id = "m1"
    if generation is not None:
        m.metadata.annotations[keys.MACHINE_GENERATION_ANNOTATION] = generation
    return m


def test_in_sync_is_an_empty_plan() -> None:
    iri = machine([local("root"), remote("data", "h1")], [nic("eth0")])
    assert plan(iri, {"root": local("root"), "data": remote("data", "h1")}, {"eth0": nic("eth0")},
                mpb.POWER_ON, 3, {"root", "data"}) == []


def test_a_new_generation_alone_is_recorded() -> None:
    iri = machine([local("root")])
    assert plan(iri, {"root": local("root")}, {}, mpb.POWER_ON, 4, {"root"}) == [RecordGeneration(4)]
    assert plan(machine(generation=None), {}, {}, mpb.POWER_ON, 1, set()) == [RecordGeneration(1)]


def test_volumes_detach_attach_swap_and_resize_in_order() -> None:
    iri = machine([local("root"), remote("old", "h1"), remote("swap", "h2"), remote("grow", "h3")])
    want = {"root": local("root"), "swap": remote("swap", "h9"), "grow": remote("grow", "h3", 2 << 30),
            "new": remote("new", "h4")}
    actions = plan(iri, want, {}, mpb.POWER_ON, 3, set(want))
    assert actions == [DetachVolume("old"), DetachVolume("swap"), AttachVolume(want["swap"]),
                       ResizeVolume(want["grow"]), AttachVolume(want["new"]), RecordGeneration(3)]


def test_a_volume_whose_object_is_not_resolved_yet_stays_attached() -> None:
    iri = machine([local("root"), remote("data", "h1")])
    assert plan(iri, {"root": local("root")}, {}, mpb.POWER_ON, 3, {"root", "data"}) == []


def test_local_disk_turned_into_a_connection_is_replaced() -> None:
    iri = machine([local("data")])
    want = {"data": remote("data", "h1")}
    actions = plan(iri, want, {}, mpb.POWER_ON, 3, {"data"})
    assert actions[:2] == [DetachVolume("data"), AttachVolume(want["data"])]


def test_nics_and_power() -> None:
    iri = machine(nics=[nic("gone"), nic("moved", "a"), nic("same", "b", ("10.0.0.2",))], power=mpb.POWER_ON)
    want = {"moved": nic("moved", "c"), "same": nic("same", "b", ("10.0.0.2",)), "added": nic("added")}
    assert plan(iri, {}, want, mpb.POWER_OFF, 3, set()) == [
        DetachNic("gone"), DetachNic("moved"), AttachNic(want["moved"]), AttachNic(want["added"]),
        SetPower(mpb.POWER_OFF), RecordGeneration(3)]


def test_a_nic_differing_in_anything_is_replaced_and_an_unresolved_one_stays() -> None:
    old = nic("eth0", "n", ("10.0.0.2",))
    old.attributes["macAddress"] = "52:54:00:00:00:01"
    changed = mpb.NetworkInterface()
    changed.CopyFrom(old)
    changed.attributes["macAddress"] = "52:54:00:00:00:02"
    iri = machine(nics=[old, nic("eth1")])
    assert plan(iri, {}, {"eth0": changed}, mpb.POWER_ON, 3, set(), {"eth0", "eth1"}) == [
        DetachNic("eth0"), AttachNic(changed), RecordGeneration(3)]


def test_annotations_are_recorded_when_they_differ() -> None:
    mapping = {keys.NETWORK_INTERFACE_MAPPING_ANNOTATION: '{"eth0":{"name":"m-eth0","uid":"u"}}'}
    iri = machine(nics=[nic("eth0")])
    assert plan(iri, {}, {"eth0": nic("eth0")}, mpb.POWER_ON, 3, set(), {"eth0"}, mapping) == [
        RecordGeneration(3, tuple(mapping.items()))]
    iri.metadata.annotations.update(mapping)
    assert plan(iri, {}, {"eth0": nic("eth0")}, mpb.POWER_ON, 3, set(), {"eth0"}, mapping) == []


class Recorder:
    """An IRI runtime that records calls and bumps the generation on every change, as ours does."""

    def __init__(self, iri: mpb.Machine) -> None:
        self.iri = iri
        self.calls: list[tuple[str, Any]] = []

    def _changed(self, name: str, arg: Any) -> None:
        self.calls.append((name, arg))
        self.iri.metadata.generation += 1

    async def list_machines(self, machine_id: str = "", labels: Any = None) -> list[mpb.Machine]:
        return [mpb.Machine.FromString(self.iri.SerializeToString())]

    async def attach_volume(self, machine_id: str, volume: mpb.Volume) -> None:
        self._changed("attach_volume", volume.name)

    async def update_volume(self, machine_id: str, volume: mpb.Volume) -> None:
        self._changed("update_volume", volume.name)

    async def detach_volume(self, machine_id: str, name: str, missing_ok: bool = False) -> bool:
        assert missing_ok
        self._changed("detach_volume", name)
        return True

    async def attach_network_interface(self, machine_id: str, n: mpb.NetworkInterface) -> None:
        self._changed("attach_nic", n.name)

    async def detach_network_interface(self, machine_id: str, name: str, missing_ok: bool = False) -> bool:
        assert missing_ok
        self._changed("detach_nic", name)
        return True

    async def update_machine_power(self, machine_id: str, power: Any) -> None:
        self._changed("power", power)

    async def update_machine_annotations(self, machine_id: str, annotations: Any) -> None:
        self.calls.append(("annotations", dict(annotations)))
        self.iri.metadata.annotations.clear()
        self.iri.metadata.annotations.update(annotations)


async def test_apply_runs_the_plan_and_records_the_generation_reached() -> None:
    iri = machine([local("root")], generation="2")
    iri.metadata.generation = 5
    runtime = Recorder(iri)
    actions = plan(iri, {"root": local("root"), "data": remote("data", "h1")}, {}, mpb.POWER_OFF, 3,
                   {"root", "data"})
    after = await apply(runtime, iri, actions)
    assert [c[0] for c in runtime.calls] == ["attach_volume", "power", "annotations"]
    annotations = runtime.calls[-1][1]
    assert annotations[keys.MACHINE_GENERATION_ANNOTATION] == "3"
    assert annotations[keys.IRI_MACHINE_GENERATION_ANNOTATION] == "7"  # after the two changes
    assert after.metadata.annotations[keys.MACHINE_GENERATION_ANNOTATION] == "3"


async def test_apply_of_nothing_calls_nothing() -> None:
    iri = machine()
    runtime = Recorder(iri)
    assert await apply(runtime, iri, []) is iri and runtime.calls == []
