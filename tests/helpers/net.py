"""Local ports and host subnets for tests."""

from __future__ import annotations

import ipaddress
import json
import random
import re
import subprocess

from ironpool.ports import free_port

__all__ = ["free_port", "free_subnets", "host_subnets"]


def host_subnets() -> list[ipaddress.IPv4Network]:
    """The IPv4 subnets on this host's interfaces and in its libvirt networks, defined or running."""
    out = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True, check=True, timeout=30)
    found = [ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}").network
             for link in json.loads(out.stdout) for a in link.get("addr_info", ())]
    virsh = subprocess.run(["virsh", "-c", "qemu:///system", "net-list", "--all", "--name"],
                           capture_output=True, text=True, check=False, timeout=30)
    for name in filter(None, map(str.strip, virsh.stdout.splitlines())):
        xml = subprocess.run(["virsh", "-c", "qemu:///system", "net-dumpxml", name],
                             capture_output=True, text=True, check=False, timeout=30).stdout
        for address, prefix in re.findall(r"<ip address=['\"]([\d.]+)['\"] prefix=['\"](\d+)['\"]", xml):
            found.append(ipaddress.IPv4Interface(f"{address}/{prefix}").network)
    return found


def free_subnets(count: int) -> list[ipaddress.IPv4Network]:
    """``count`` /24s of 198.18.0.0/15 (benchmarking, RFC 2544; nothing here routes it) that no
    interface or libvirt network of this host uses now, picked at random so that two test runs on
    one host (two clones, or a developer's run beside CI) do not pick the same ones."""
    used = host_subnets()
    candidates = [n for n in ipaddress.IPv4Network("198.18.0.0/15").subnets(new_prefix=24)
                  if not any(n.overlaps(u) for u in used)]
    return random.sample(candidates, count)
