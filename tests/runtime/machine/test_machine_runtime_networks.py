"""NICs on real libvirt and QEMU, through the runtime's IRI: the guest gets exactly the allocated
address in every mode, SSH goes through the user-mode forward on 127.0.0.1 (also after the runtime
restarted), NICs are hot-plugged and unplugged, and a refused create leaves no libvirt network.

One guest for all of it. Traffic goes only to 127.0.0.1; the guests' own DHCP stays on bridges this
test made. The subnets that reach the host (isolated networks, the bridge) are /24s of 198.18.0.0/15
(benchmarking, RFC 2544) that nothing on the host uses, picked per run (tests/helpers/net.py).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import libvirt
import pytest
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.runtime.machine.nics import libvirt_network_name, qemu_ids
from machine_runtime_helpers import RuntimeProc, machine_request, session_domains

from tests.helpers import ssh
from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.net import free_subnets
from tests.helpers.runtimes import LIBVIRT_URI
from tests.helpers.wait import wait_for


def nic(name: str, network_id: str, address: str, mode: str = "", bridge: str = "") -> mpb.NetworkInterface:
    labels = {"networking.ironpool.dev/mode": mode} if mode else {}
    if bridge:
        labels["networking.ironpool.dev/bridge"] = bridge
    attributes = {"addresses": json.dumps([address]), "rawNetworkLabels": json.dumps(labels, sort_keys=True)}
    return mpb.NetworkInterface(name=name, network_id=network_id, ips=[address.split("/")[0]],
                                attributes=attributes)


def libvirt_networks() -> set[str]:
    conn = libvirt.open(LIBVIRT_URI)
    try:
        return {n.name() for n in conn.listAllNetworks(0)}
    finally:
        conn.close()


def virsh(*args: str) -> None:
    subprocess.run(["virsh", "-c", LIBVIRT_URI, *args], capture_output=True, check=True, timeout=30)


def qemu_devices(machine_id: str) -> set[str]:
    out = subprocess.run(["virsh", "-c", LIBVIRT_URI, "qemu-monitor-command", f"ironpool-{machine_id}",
                          '{"execute": "qom-list", "arguments": {"path": "/machine/peripheral"}}'],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    return {p["name"] for p in json.loads(out)["return"]}


@pytest.fixture
def subnets() -> dict[str, ipaddress.IPv4Network]:
    """The host-side subnets of one test: free on this host now, so two runs side by side differ."""
    return dict(zip(("isolated", "bridge", "clash_a", "clash_b"), free_subnets(4), strict=True))


def addr(net: ipaddress.IPv4Network, host: int) -> str:
    """``net``'s ``host``-th address with its prefix, as IPAM hands a NIC one (``198.18.4.9/24``)."""
    return f"{net[host]}/{net.prefixlen}"


@pytest.fixture
def bridge(test_session: str, subnets: dict[str, ipaddress.IPv4Network]) -> Iterator[str]:
    """A host bridge carrying its subnet's first address, as a platform team's bridge carries the
    host's address."""
    name = f"ipt{test_session[:8]}"
    subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", addr(subnets["bridge"], 1), "dev", name], check=True)
        subprocess.run(["ip", "link", "set", name, "up"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "link", "del", name], check=False)


@pytest.fixture
def network_ids(test_session: str) -> Iterator[dict[str, str]]:
    """Network ids unique to this run; libvirt networks the runtime may have left are removed after."""
    ids = {k: f"test://{test_session}/{k}" for k in ("user", "isolated", "clash")}
    yield ids
    conn = libvirt.open(LIBVIRT_URI)
    try:
        for network_id in ids.values():
            for mode in ("nat", "isolated"):
                with contextlib.suppress(libvirt.libvirtError):
                    net = conn.networkLookupByName(libvirt_network_name(network_id, mode))
                    with contextlib.suppress(libvirt.libvirtError):
                        net.destroy()
                    net.undefine()
    finally:
        conn.close()


def console(runtime: RuntimeProc, machine_id: str) -> str:
    path = runtime.console_log(machine_id)
    return path.read_text(errors="replace") if path.exists() else ""


def handles(runtime: RuntimeProc, machine_id: str) -> dict[str, str]:
    m = runtime.machine(machine_id)
    assert m is not None
    return {n.name: n.handle for n in m.status.network_interfaces}


def test_guest_gets_its_address_in_every_mode_and_ssh_goes_through_the_forward(
    runtime: RuntimeProc, test_session: str, tmp_path: Path, bridge: str, network_ids: dict[str, str],
    subnets: dict[str, ipaddress.IPv4Network],
) -> None:
    stub = runtime.stub
    eth1, eth2 = addr(subnets["isolated"], 9), addr(subnets["bridge"], 7)
    key, public = ssh.keypair(tmp_path)
    req = machine_request(test_session)
    req.machine.spec.ignition_data = ssh.ignition(public)
    req.machine.spec.network_interfaces.append(nic("eth0", network_ids["user"], "198.18.3.5/24"))
    mid = stub.CreateMachine(req).machine.metadata.id

    # -- user mode: exactly the allocated address, SSH through the reported endpoint ---------
    wait_for(lambda: "eth0 address 198.18.3.5/24" in console(runtime, mid), GUEST_SECONDS, "eth0's address")
    handle = handles(runtime, mid)["eth0"]
    assert handle.startswith("user://127.0.0.1:"), handle
    endpoint = handle.removeprefix("user://")
    out = ssh.wait_run(endpoint, key, "uname -a; ip -4 addr show eth0",
                       GUEST_SECONDS, "SSH through the forward")
    assert "ironpool-tiny" in out and "inet 198.18.3.5/24" in out
    # the pause that plugs the NIC before the guest runs is no news of the machine's
    reasons = [e.spec.reason for e in stub.ListEvents(mpb.ListEventsRequest()).events
               if e.spec.involved_object_meta.id == mid]
    assert "Started" in reasons and not {"Suspended", "Resumed"} & set(reasons), reasons

    # -- isolated mode, hot-plugged: a libvirt network with a reservation for the NIC's MAC ----
    net_name = libvirt_network_name(network_ids["isolated"], "isolated")
    stub.AttachNetworkInterface(mpb.AttachNetworkInterfaceRequest(
        machine_id=mid, network_interface=nic("eth1", network_ids["isolated"], eth1, "isolated")))
    assert net_name in libvirt_networks()
    wait_for(lambda: f"eth1 address {eth1}" in console(runtime, mid), GUEST_SECONDS, "eth1's address")
    assert handles(runtime, mid)["eth1"].startswith(f"isolated://{net_name}/52:54:00:")

    # -- bridge mode: the runtime's DHCP server on an existing bridge -----------------------
    stub.AttachNetworkInterface(mpb.AttachNetworkInterfaceRequest(
        machine_id=mid, network_interface=nic("eth2", "test://bridged", eth2, "bridge", bridge)))
    wait_for(lambda: f"eth2 address {eth2}" in console(runtime, mid), GUEST_SECONDS, "eth2's address")
    dhcp_dir = runtime.state_dir / "dhcp" / bridge
    assert (dhcp_dir / "pid").exists()

    # -- unplug: gone from the guest and the domain, the network and the DHCP server with them --
    stub.DetachNetworkInterface(mpb.DetachNetworkInterfaceRequest(machine_id=mid, name="eth1"))
    stub.DetachNetworkInterface(mpb.DetachNetworkInterfaceRequest(machine_id=mid, name="eth2"))
    assert net_name not in libvirt_networks()
    assert not dhcp_dir.exists()
    conn = libvirt.open(LIBVIRT_URI)
    try:
        assert "<interface" not in conn.lookupByName(f"ironpool-{mid}").XMLDesc(0)
    finally:
        conn.close()
    wait_for(lambda: guest_nics(console(runtime, mid)) == ["eth0"],
             GUEST_SECONDS, "the guest to show only eth0")

    # -- the same NIC (same MAC) plugged in again, as a replaced NIC is: the guest serves it again --
    stub.AttachNetworkInterface(mpb.AttachNetworkInterfaceRequest(
        machine_id=mid, network_interface=nic("eth1", network_ids["isolated"], eth1, "isolated")))
    wait_for(lambda: console(runtime, mid).count(f"eth1 address {eth1}") == 2, GUEST_SECONDS,
             "eth1's address on the console again")
    stub.DetachNetworkInterface(mpb.DetachNetworkInterfaceRequest(machine_id=mid, name="eth1"))
    assert net_name not in libvirt_networks()
    wait_for(lambda: guest_nics(console(runtime, mid)) == ["eth0"],
             GUEST_SECONDS, "the guest to show only eth0 again")

    # -- a second user-mode NIC, hot-plugged and unplugged through the QEMU monitor --------------
    stub.AttachNetworkInterface(mpb.AttachNetworkInterfaceRequest(
        machine_id=mid, network_interface=nic("eth3", "test://other", "198.18.9.20/24")))
    # (the guest names it after the interfaces it has now, eth1)
    wait_for(lambda: "address 198.18.9.20/24" in console(runtime, mid),
             GUEST_SECONDS, "the new NIC's address")
    assert qemu_ids("eth3")[1] in qemu_devices(mid)
    second = handles(runtime, mid)["eth3"]
    assert second.startswith("user://127.0.0.1:") and second != handle

    # -- a guest that cannot answer the unplug (paused) keeps the NIC, and the runtime says so --
    virsh("suspend", f"ironpool-{mid}")
    with pytest.raises(grpc.RpcError) as pending:
        stub.DetachNetworkInterface(mpb.DetachNetworkInterfaceRequest(machine_id=mid, name="eth3"))
    assert pending.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "eth3" in (pending.value.details() or "")
    assert handles(runtime, mid)["eth3"] == second
    assert qemu_ids("eth3")[1] in qemu_devices(mid)
    virsh("resume", f"ironpool-{mid}")

    def detached() -> bool:
        try:
            stub.DetachNetworkInterface(mpb.DetachNetworkInterfaceRequest(machine_id=mid, name="eth3"))
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            return False
        return True

    wait_for(detached, GUEST_SECONDS, "the detach of eth3 once the guest runs again")
    assert qemu_ids("eth3")[1] not in qemu_devices(mid)
    assert "eth3" not in handles(runtime, mid)

    # -- the forward survives a restart of the runtime (QEMU holds it; the record names it) ---
    runtime.kill9()
    runtime.start()
    assert handles(runtime, mid) == {"eth0": handle}
    out = ssh.wait_run(endpoint, key, "cat /proc/uptime", GUEST_SECONDS, "SSH after the runtime restarted")
    assert out.strip()

    runtime.stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    wait_for(lambda: runtime.machine(mid) is None, 60, "the machine to be deleted")


def guest_nics(text: str) -> list[str]:
    """The interfaces the guest listed last on its console (``nics: eth0=MAC eth1=MAC``)."""
    lines = [line for line in text.splitlines() if "ironpool-tiny-image: nics:" in line]
    return [item.split("=")[0] for item in lines[-1].split("nics:")[1].split()] if lines else []


def test_a_refused_create_leaves_no_network_behind(
    runtime: RuntimeProc, test_session: str, network_ids: dict[str, str],
    subnets: dict[str, ipaddress.IPv4Network],
) -> None:
    """The first NIC makes its libvirt network, the second cannot join it (another subnet on the
    same Network): nothing of the machine stays, the network neither."""
    req = machine_request(test_session, power=mpb.POWER_OFF)
    for name, subnet in (("a", subnets["clash_a"]), ("b", subnets["clash_b"])):
        req.machine.spec.network_interfaces.append(
            nic(name, network_ids["clash"], addr(subnet, 7), "isolated"))

    def leftovers() -> tuple[set[str], set[Path]]:
        return set(session_domains(test_session)), set(runtime.state_dir.joinpath("machines").iterdir())

    before = leftovers()
    with pytest.raises(grpc.RpcError) as exc:
        runtime.stub.CreateMachine(req)
    assert exc.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "machine.spec.network_interfaces[1].attributes.addresses" in (exc.value.details() or "")
    assert libvirt_network_name(network_ids["clash"], "isolated") not in libvirt_networks()
    assert leftovers() == before
