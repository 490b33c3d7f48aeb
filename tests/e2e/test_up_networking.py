"""Networking end to end on real libvirtd with ``ironpool up`` (default network mode ``user``): two
Machines on one Network each get their allocated address (status, the guest's console) and answer
SSH through the endpoint they report; a NIC hot-plugged into a running Machine shows in the guest and
in status, and unplugging takes it out of the domain; a NIC the host cannot realise leaves nothing.

One ``ironpool up`` for the module; traffic goes only to the forwarded ports on 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import libvirt
import pytest
from ironpool.api.errors import NotFound
from ironpool.api.resources import resolve
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers import ssh
from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.runtimes import LIBVIRT_URI

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINES, NICS, NETWORKS = resolve("machines"), resolve("networkinterfaces"), resolve("networks")
PREFIXES, SECRETS = resolve("prefixes"), resolve("secrets")
SSH_ENDPOINT = "machinepoollet.ironpool.dev/ssh-endpoint"
NS = "default"


@pytest.fixture(scope="module")
def up(tiny_images: Path) -> Iterator[UpInstance]:
    inst = UpInstance(images=tiny_images)
    try:
        inst.start()
        yield inst
    finally:
        inst.cleanup()


@pytest.fixture(scope="module")
def key(up: UpInstance, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SSH key, the Network ``lab`` with its Prefix, and the Ignition Secret authorising the key."""
    private, public = ssh.keypair(tmp_path_factory.mktemp("ssh"))
    client = up.client()
    client.create_raw(NETWORKS, {"metadata": {"name": "lab", "namespace": NS}}, NS)
    client.create_raw(PREFIXES, {"metadata": {"name": "lab-v4", "namespace": NS},
                                 "spec": {"prefix": "10.10.0.0/24"}}, NS)
    client.create_raw(SECRETS, {"metadata": {"name": "ssh-ignition", "namespace": NS},
                                "data": {"ignition.yaml": base64.b64encode(ssh.ignition(public)).decode()}},
                      NS)
    return private


def nic_template(name: str, network: str = "lab") -> dict[str, Any]:
    ips = [{"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": f"{network}-v4"}}}}}]
    return {"name": name, "ephemeral": {"networkInterfaceTemplate": {
        "spec": {"networkRef": {"name": network}, "ipFamilies": ["IPv4"], "ips": ips}}}}


def machine(name: str, nics: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "spec": {
        "machineClassRef": {"name": "x-small"}, "ignitionRef": {"name": "ssh-ignition"},
        "volumes": [{"name": "root", "localDisk": {"image": "tiny"}}], "networkInterfaces": nics}}


def nic_status(up: UpInstance, name: str) -> dict[str, dict[str, Any]]:
    m = up.client().get_raw(MACHINES, name, NS)
    return {n["name"]: n for n in (m.get("status") or {}).get("networkInterfaces") or []}


def reachable(up: UpInstance, name: str) -> tuple[str, str, str]:
    """``(iri id, address, ssh endpoint)`` once the Machine runs with its address and endpoint."""

    def ready() -> tuple[str, str, str] | None:
        m = up.client().get_raw(MACHINES, name, NS)
        status = m.get("status") or {}
        nics = status.get("networkInterfaces") or []
        endpoint = (m["metadata"].get("annotations") or {}).get(SSH_ENDPOINT)
        if status.get("state") != "Running" or not nics or not nics[0].get("ips") or not endpoint:
            return None
        return machine_domain(status["machineID"])[0], nics[0]["ips"][0], endpoint

    return wait_for(ready, 120, f"machine {name} running with an address and an SSH endpoint")


def test_two_machines_on_one_network_answer_ssh_at_their_addresses(up: UpInstance, key: Path) -> None:
    client = up.client()
    for name in ("a", "b"):
        client.create_raw(MACHINES, machine(name, [nic_template("primary")]), NS)
    seen = {}
    for name in ("a", "b"):
        iri_id, address, endpoint = reachable(up, name)
        assert address.startswith("10.10.0.") and endpoint.startswith("127.0.0.1:")
        wait_for(lambda: f"eth0 address {address}/24" in up.console_log(iri_id), GUEST_SECONDS,  # noqa: B023
                 f"{name}'s address on its console")
        out = ssh.wait_run(endpoint, key, "uname -n; ip -4 addr show eth0", GUEST_SECONDS, f"SSH into {name}")
        assert "ironpool-tiny" in out and f"inet {address}/24" in out
        nic = client.get_raw(NICS, f"{name}-primary", NS)
        assert nic["spec"]["providerID"] == f"user://{endpoint}"
        assert nic["spec"]["machineRef"]["name"] == name
        seen[name] = (address, endpoint)
    assert seen["a"][0] != seen["b"][0] and seen["a"][1] != seen["b"][1]
    # `ironpool get machines -o wide` shows the addresses; `ironpool ssh` runs a command through the endpoint
    wide = up.cli("get", "machines", "-o", "wide").stdout
    assert seen["a"][0] in wide and seen["b"][0] in wide
    out = up.cli("ssh", "a", "-i", str(key), "-o", "BatchMode=yes", "-o", "UserKnownHostsFile=/dev/null",
                 "--", "ip", "-4", "addr", "show", "eth0").stdout
    assert f"inet {seen['a'][0]}/24" in out

    # deleting a Machine takes its ephemeral NIC (and so its address) with it
    for name in ("a", "b"):
        client.delete_raw(MACHINES, name, NS)
    wait_for(lambda: gone(up, NICS, "b-primary") and gone(up, MACHINES, "a"), 60,
             "the Machines and their ephemeral NICs to go")


def gone(up: UpInstance, info: Any, name: str) -> bool:
    try:
        up.client().get_raw(info, name, NS)
        return False
    except NotFound:
        return True


def test_nic_hot_plugged_into_a_running_machine_and_unplugged(up: UpInstance, key: Path) -> None:
    client = up.client()
    client.create_raw(MACHINES, machine("c", [nic_template("primary")]), NS)
    iri_id, _address, endpoint = reachable(up, "c")
    ssh.wait_run(endpoint, key, "true", GUEST_SECONDS, "SSH into c")

    client.patch_raw(MACHINES, "c", {"spec": {"networkInterfaces": [
        nic_template("primary"), nic_template("second")]}}, NS)
    second = wait_for(lambda: (n := nic_status(up, "c").get("second")) and n.get("state") == "Attached"
                      and n.get("ips") and n, 60, "the second NIC attached with an address")
    address = second["ips"][0]
    wait_for(lambda: f"eth1 address {address}/24" in up.console_log(iri_id),
             GUEST_SECONDS, "eth1 in the guest")
    assert f"inet {address}/24" in ssh.run(endpoint, key, "ip -4 addr show eth1").stdout

    client.patch_raw(MACHINES, "c", {"spec": {"networkInterfaces": [nic_template("primary")]}}, NS)
    wait_for(lambda: set(nic_status(up, "c")) == {"primary"}, GUEST_SECONDS,
             "the second NIC gone from status")
    out = subprocess.run(["virsh", "-c", LIBVIRT_URI, "qemu-monitor-command", f"ironpool-{iri_id}",
                          '{"execute": "qom-list", "arguments": {"path": "/machine/peripheral"}}'],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    assert len([p for p in json.loads(out)["return"] if p["name"].startswith("ipnic-")]) == 1
    wait_for(lambda: "eth1" not in ssh.run(endpoint, key, "ls /sys/class/net").stdout, GUEST_SECONDS,
             "eth1 gone from the guest")
    client.delete_raw(MACHINES, "c", NS)  # room for the next test on a small host
    wait_for(lambda: gone(up, MACHINES, "c"), 60, "machine c to go")


def test_a_nic_the_host_cannot_realise_is_reported_and_leaves_nothing(up: UpInstance, key: Path) -> None:
    client = up.client()
    client.create_raw(NETWORKS, {"metadata": {"name": "wired", "namespace": NS, "labels": {
        "networking.ironpool.dev/mode": "bridge", "networking.ironpool.dev/bridge": "nosuchbr0"}}}, NS)
    client.create_raw(PREFIXES, {"metadata": {"name": "wired-v4", "namespace": NS},
                                 "spec": {"prefix": "10.20.0.0/24"}}, NS)
    client.create_raw(MACHINES, machine("d", [nic_template("primary", "wired")]), NS)

    def refused() -> str | None:
        m = client.get_raw(MACHINES, "d", NS)
        ready = next((c for c in (m.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})
        return ready.get("message") if ready.get("reason") == "CreateFailed" else None

    message = wait_for(refused, 60, "the runtime's refusal on the Machine")
    assert "network_interfaces[0]" in message and "nosuchbr0" in message, message
    assert "d" not in {_machine_of(domain) for domain in up.domains()}
    conn = libvirt.open(LIBVIRT_URI)
    try:
        assert not [n for n in conn.listAllNetworks(0) if n.name().startswith("ironpool-net-")
                    and n.XMLDesc(0).count("10.20.0.")]
    finally:
        conn.close()


def _machine_of(domain: str) -> str:
    from ironpool.runtime.machine.domain_xml import parse_metadata
    from ironpool.runtime.machine.model import METADATA_NS

    conn = libvirt.open(LIBVIRT_URI)
    try:
        rec = parse_metadata(conn.lookupByName(domain).metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                                                                 METADATA_NS, 0))
        return rec.labels.get("machinepoollet.ironcore.dev/machine-name", "")
    finally:
        conn.close()
