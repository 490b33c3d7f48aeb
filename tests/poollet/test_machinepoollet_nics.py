"""The machinepoollet's network interfaces, against a real apiserver (IPAM) and the in-memory IRI
runtime: IRI NICs as the networking contract says, claims, the
NIC mapping annotation, status and SSH endpoint back, hot-plug and unplug, waiting, release."""

from __future__ import annotations

import json
from typing import Any

from ironpool.api.compute import Machine, MachineNetworkInterface
from ironpool.api.ipam import Prefix
from ironpool.api.networking import Network, NetworkInterface
from ironpool.client.rest import AsyncClient
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.poollet import keys
from poollet_helpers import Iri
from test_machinepoollet import _events, cond, get_machine, make_class, make_machine

from tests.helpers.wait import eventually

MODE_LABEL = "networking.ironpool.dev/mode"


async def make_network(client: AsyncClient, name: str = "lab", **labels: str) -> Network:
    net = await client.create(Network.model_validate(
        {"metadata": {"name": name, "namespace": "default", "labels": labels}}), namespace="default")
    await client.create(Prefix.model_validate(
        {"metadata": {"name": f"{name}-v4", "namespace": "default"}, "spec": {"prefix": "10.0.0.0/24"}}),
        namespace="default")
    return net


def ephemeral(name: str, network: str = "lab") -> dict[str, Any]:
    ips = [{"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": f"{network}-v4"}}}}}]
    return {"name": name, "ephemeral": {"networkInterfaceTemplate": {
        "spec": {"networkRef": {"name": network}, "ipFamilies": ["IPv4"], "ips": ips}}}}


async def get_nic(client: AsyncClient, name: str) -> NetworkInterface:
    return await client.get(NetworkInterface, name, "default")


def nic_statuses(m: Machine) -> list[dict[str, Any]]:
    return [{k: v for k, v in n.to_dict().items() if k != "lastStateTransitionTime"}
            for n in (m.status.network_interfaces if m.status else None) or []]


def only_iri(iri: Iri, uid: str) -> mpb.Machine | None:
    found = iri.machines.by_uid(uid)
    return found[0] if len(found) == 1 else None


async def test_nic_reaches_the_runtime_and_its_address_comes_back(
    client: AsyncClient, iri: Iri, machinepoollet: Any
) -> None:
    await make_class(client)
    network = await make_network(client, **{MODE_LABEL: "nat"})
    await client.create(NetworkInterface.model_validate({
        "metadata": {"name": "nic1", "namespace": "default", "labels": {"role": "front"}},
        "spec": {"networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"], "ips": [
            {"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "lab-v4"}}}}}]}}),
        namespace="default")
    m = await make_machine(client, "m1", networkInterfaces=[
        {"name": "primary", "networkInterfaceRef": {"name": "nic1"}}])
    created = await eventually(lambda: only_iri(iri, m.metadata.uid or ""), 10, "the IRI machine")
    nic = await get_nic(client, "nic1")
    assert nic.status is not None and nic.status.ips == ["10.0.0.2"]
    assert nic.spec.machine_ref is not None and nic.spec.machine_ref.uid == m.metadata.uid  # claimed

    (iri_nic,) = created.spec.network_interfaces
    assert (iri_nic.name, iri_nic.network_id, list(iri_nic.ips)) == (
        "primary", network.spec.provider_id or "-", ["10.0.0.2"])
    attrs = dict(iri_nic.attributes)
    assert attrs[keys.MAC_ADDRESS_ATTRIBUTE] == nic.spec.mac_address
    assert json.loads(attrs[keys.ADDRESSES_ATTRIBUTE]) == ["10.0.0.2/24"]
    net_labels = json.loads(attrs[keys.NETWORK_LABELS_ATTRIBUTE])
    assert net_labels[MODE_LABEL] == "nat" and net_labels[keys.NETWORK_NAME_LABEL] == "lab"
    assert net_labels[keys.NETWORK_UID_LABEL] == network.metadata.uid
    nic_labels = json.loads(attrs[keys.NIC_LABELS_ATTRIBUTE])
    assert nic_labels[keys.NIC_NAME_LABEL] == "nic1" and nic_labels["role"] == "front"
    assert json.loads(created.metadata.annotations[keys.NETWORK_INTERFACE_MAPPING_ANNOTATION]) == {
        "primary": {"name": "nic1", "uid": nic.metadata.uid}}

    async def reported() -> Machine | None:
        got = await get_machine(client, "m1")
        return got if got.status and got.status.network_interfaces and \
            (got.metadata.annotations or {}).get(keys.SSH_ENDPOINT_ANNOTATION) else None

    got = await eventually(reported, 10, "the NIC status and SSH endpoint on the Machine")
    handle = f"user://127.0.0.1:{iri.machines.forwards[(created.metadata.id, 'primary')]}"
    assert nic_statuses(got) == [{"name": "primary", "handle": handle, "state": "Attached",
                                  "networkInterfaceRef": {"name": "nic1"}, "ips": ["10.0.0.2"]}]
    assert (got.metadata.annotations or {})[keys.SSH_ENDPOINT_ANNOTATION] == handle.removeprefix("user://")
    assert cond(got, "NetworkInterfacesReady").status == "True"
    await eventually(lambda: _provider_id(client, "nic1", handle), 10, "the NIC's providerID")


async def test_referenced_nic_is_claimed_hot_plugged_unplugged_and_released(
    client: AsyncClient, iri: Iri, machinepoollet: Any
) -> None:
    await make_class(client)
    await make_network(client)
    await client.create(NetworkInterface.model_validate({
        "metadata": {"name": "shared", "namespace": "default"},
        "spec": {"networkRef": {"name": "lab"}, "ips": [{"value": "10.0.0.50"}]}}), namespace="default")
    m2 = await make_machine(client, "m2")
    await eventually(lambda: only_iri(iri, m2.metadata.uid or ""), 10, "m2's IRI machine")

    # -- hot-plug: the NIC is claimed for m2 and attached to its running IRI machine ----------
    await client.patch(Machine, "m2", {"spec": {"networkInterfaces": [
        {"name": "eth1", "networkInterfaceRef": {"name": "shared"}}]}}, namespace="default")

    def attached() -> bool:
        m = only_iri(iri, m2.metadata.uid or "")
        return m is not None and [n.name for n in m.spec.network_interfaces] == ["eth1"]

    await eventually(attached, 10, "eth1 attached to m2")
    assert iri.machines.count("AttachNetworkInterface") == 1
    nic = await get_nic(client, "shared")
    assert nic.spec.machine_ref is not None and nic.spec.machine_ref.uid == m2.metadata.uid

    async def m2_ips() -> bool:
        return nic_statuses(await get_machine(client, "m2"))[:1] == [{
            "name": "eth1", "handle": _handle(iri, m2, "eth1"), "state": "Attached",
            "networkInterfaceRef": {"name": "shared"}, "ips": ["10.0.0.50"]}]

    await eventually(m2_ips, 10, "eth1's address in m2's status")

    # -- another machine wanting the same NIC waits, saying who holds it ------------------------
    m3 = await make_machine(client, "m3", networkInterfaces=[
        {"name": "eth0", "networkInterfaceRef": {"name": "shared"}}])

    async def m3_waits() -> bool:
        c = cond(await get_machine(client, "m3"), "NetworkInterfacesReady")
        return c is not None and c.status == "False" and "claimed by machine m2" in (c.message or "")

    await eventually(m3_waits, 10, "m3 to wait for the NIC m2 holds")
    assert not iri.machines.by_uid(m3.metadata.uid or "")

    # -- unplug from m2: detached, released (machineRef and providerID cleared), then m3 gets it --
    await client.patch(Machine, "m2", {"spec": {"networkInterfaces": None}}, namespace="default")
    await eventually(lambda: not attached() and iri.machines.count("DetachNetworkInterface") == 1, 10,
                     "eth1 detached from m2")
    created = await eventually(lambda: only_iri(iri, m3.metadata.uid or ""), 10, "m3's IRI machine")
    assert [n.name for n in created.spec.network_interfaces] == ["eth0"]
    nic = await eventually(lambda: _claimed_by(client, "shared", m3.metadata.uid or ""), 10, "m3's claim")

    async def m2_endpoint_gone() -> bool:
        annotations = (await get_machine(client, "m2")).metadata.annotations or {}
        return keys.SSH_ENDPOINT_ANNOTATION not in annotations

    await eventually(m2_endpoint_gone, 10, "m2's SSH endpoint annotation removed with its last NIC")

    # -- a deleted machine gives its referenced NIC back ---------------------------------------------
    await client.delete(Machine, "m3", namespace="default")
    await eventually(lambda: _claimed_by(client, "shared", None), 10, "the NIC released by m3")
    assert (await get_nic(client, "shared")).spec.provider_id is None


async def test_missing_nic_keeps_the_machine_waiting(
    client: AsyncClient, iri: Iri, machinepoollet: Any
) -> None:
    await make_class(client)
    missing = {"name": "eth0", "networkInterfaceRef": {"name": "nope"}}
    m = await make_machine(client, "m4", networkInterfaces=[missing])

    async def waiting() -> bool:
        got = await get_machine(client, "m4")
        c = cond(got, "NetworkInterfacesReady")
        return c is not None and c.status == "False" and "default/nope (not found)" in (c.message or "") \
            and cond(got, "Ready").reason == "WaitingForDependencies"

    await eventually(waiting, 10, "m4 to wait for its NIC")
    assert not iri.machines.by_uid(m.metadata.uid or "")
    (event,) = await eventually(lambda: _events(client, "NetworkInterfaceNotReady", "m4"), 10, "the Event")
    assert event.message == "waiting for NetworkInterface default/nope (not found)"


# -- helpers ----------------------------------------------------------------------------------------
async def _provider_id(client: AsyncClient, name: str, want: str) -> bool:
    return (await get_nic(client, name)).spec.provider_id == want


async def _claimed_by(client: AsyncClient, name: str, uid: str | None) -> NetworkInterface | None:
    nic = await get_nic(client, name)
    ref = nic.spec.machine_ref
    return nic if (ref.uid if ref else None) == uid else None


def _handle(iri: Iri, machine: Machine, nic: str) -> str:
    m = only_iri(iri, machine.metadata.uid or "")
    assert m is not None
    return f"user://127.0.0.1:{iri.machines.forwards[(m.metadata.id, nic)]}"


def test_nic_problems_and_ssh_endpoint_without_an_apiserver() -> None:
    from ironpool.poollet.machine_nics import nic_problem, ssh_endpoint

    m = Machine.model_validate({"metadata": {"name": "m", "namespace": "default", "uid": "u1"},
                                "spec": {"machineClassRef": {"name": "c"}}})
    ref = MachineNetworkInterface.model_validate({"name": "eth0", "networkInterfaceRef": {"name": "n"}})
    eph = MachineNetworkInterface.model_validate(ephemeral("eth0"))
    net = Network.model_validate({"metadata": {"name": "lab"}, "spec": {"providerID": "p"}})

    def obj(**spec: Any) -> NetworkInterface:
        return NetworkInterface.model_validate({
            "metadata": {"name": "n", "ownerReferences": spec.pop("owners", [])},
            "spec": {"networkRef": {"name": "lab"}, **spec},
            "status": {"state": "Available", "ips": ["10.0.0.2"]}})

    assert nic_problem(m, ref, None, net) == "not found"
    assert nic_problem(m, ref, obj(), net) == ""
    for other in ({"name": "other", "uid": "u2"}, {"name": "other"}):
        assert nic_problem(m, ref, obj(machineRef=other), net) == "claimed by machine other"
    assert nic_problem(m, eph, obj(), net) == "not controlled by this machine"
    owner = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine", "name": "m", "uid": "u1",
             "controller": True}
    assert nic_problem(m, eph, obj(owners=[owner]), net) == ""
    assert nic_problem(m, ref, obj(), None) == "Network lab not found"
    assert nic_problem(m, ref, obj(), Network.model_validate({"metadata": {"name": "lab"}})) == \
        "Network lab has no provider ID yet"
    reported = [mpb.NetworkInterfaceStatus(name="b", handle="user://127.0.0.1:2"),
                mpb.NetworkInterfaceStatus(name="a", handle="nat://net/52:54:00:00:00:01"),
                mpb.NetworkInterfaceStatus(name="c", handle="user://127.0.0.1:3")]
    assert ssh_endpoint(["a", "c", "b"], reported) == "127.0.0.1:3"  # the first in spec order
    assert ssh_endpoint(["a"], reported) == ""
