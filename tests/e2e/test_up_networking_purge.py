"""``ironpool up --network-mode isolated``: a Machine's NIC gets a libvirt network with a DHCP
reservation for its MAC, and ``ironpool down --purge`` removes that network with the domain.

No guest boots (the Machine is powered off) and nothing is sent anywhere; the subnet is from
198.18.0.0/15, which nothing here routes.
"""

from __future__ import annotations

import contextlib
import ipaddress
import subprocess
import sys
from collections.abc import Callable, Iterator

import libvirt
import pytest
from ironpool.api.resources import resolve
from up_harness import UpInstance, wait_for

from tests.helpers.net import free_subnets
from tests.helpers.runtimes import LIBVIRT_URI

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINES, NETWORKS, PREFIXES = resolve("machines"), resolve("networks"), resolve("prefixes")
NS = "default"


def ironpool_networks() -> dict[str, str]:
    """Our libvirt networks on the host, with their XML."""
    conn = libvirt.open(LIBVIRT_URI)
    try:
        return {n.name(): n.XMLDesc(0) for n in conn.listAllNetworks(0)
                if n.name().startswith("ironpool-net-")}
    finally:
        conn.close()


@pytest.fixture
def subnet() -> Iterator[ipaddress.IPv4Network]:
    """A /24 nothing on this host uses now (two runs side by side pick different ones); whatever
    happens, no libvirt network of it stays on the host."""
    subnet, = free_subnets(1)
    yield subnet
    conn = libvirt.open(LIBVIRT_URI)
    try:
        for net in conn.listAllNetworks(0):
            if net.name().startswith("ironpool-net-") and f"'{subnet[1]}'" in net.XMLDesc(0):
                with contextlib.suppress(libvirt.libvirtError):
                    net.destroy()
                net.undefine()
    finally:
        conn.close()


def test_isolated_network_made_for_the_nic_and_purged_with_the_installation(
    make_up: Callable[..., UpInstance], subnet: ipaddress.IPv4Network,
) -> None:
    up = make_up(extra_args=["--network-mode", "isolated"])
    up.start()
    client = up.client()
    client.create_raw(NETWORKS, {"metadata": {"name": "lab", "namespace": NS}}, NS)
    client.create_raw(PREFIXES, {"metadata": {"name": "lab-v4", "namespace": NS},
                                 "spec": {"prefix": str(subnet)}}, NS)
    ips = [{"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "lab-v4"}}}}}]
    client.create_raw(MACHINES, {"metadata": {"name": "m", "namespace": NS}, "spec": {
        "machineClassRef": {"name": "x-small"}, "power": "Off",
        "volumes": [{"name": "root", "localDisk": {"image": "tiny"}}],
        "networkInterfaces": [{"name": "primary", "ephemeral": {"networkInterfaceTemplate": {"spec": {
            "networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"], "ips": ips}}}}]}}, NS)

    def attached() -> dict[str, str] | None:
        nic = client.get_raw(resolve("networkinterfaces"), "m-primary", NS)
        return nic if str(nic["spec"].get("providerID", "")).startswith("isolated://") else None

    nic = wait_for(attached, 60, "the NIC realised in an isolated libvirt network")
    mac, ip = nic["spec"]["macAddress"], nic["status"]["ips"][0]
    (name, xml), = [(n, x) for n, x in ironpool_networks().items() if f"'{subnet[1]}'" in x]
    assert nic["spec"]["providerID"] == f"isolated://{name}/{mac}"
    assert f"<host mac='{mac}' ip='{ip}'/>" in xml and "<forward" not in xml  # isolated: no way out

    assert up.stop() == 0
    done = subprocess.run([sys.executable, "-m", "ironpool.cli.main", "down", "--data-dir", str(up.data_dir),
                           "--purge", "--yes"], capture_output=True, text=True, timeout=120, check=False,
                          env=up.env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"removed libvirt network {name}" in done.stdout
    assert name not in ironpool_networks()
