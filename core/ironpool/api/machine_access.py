"""Where a Machine's guest answers SSH, from what its machinepoollet reports, for the front ends.

A host that forwards the guest's SSH port (QEMU user networking, the default of ``ironpool up``)
reports the forward as the Machine annotation ``machinepoollet.ironpool.dev/ssh-endpoint``
(``127.0.0.1:40022``);
otherwise the guest is reached at its first address on port 22 (a libvirt nat or isolated network,
a bridge). The tiny image, like most cloud images, takes root's keys from Ignition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The Machine annotation a machinepoollet writes: ``host:port`` where the Machine's SSH server is
#: reachable (a port forwarded on 127.0.0.1 in user-mode networking). Front ends and ``ironpool ssh``
#: read it. Defined here, not among the networking models, so front ends read it without pydantic.
SSH_ENDPOINT_ANNOTATION = "machinepoollet.ironpool.dev/ssh-endpoint"
SSH_PORT = 22
DEFAULT_SSH_USER = "root"


@dataclass(frozen=True)
class SshEndpoint:
    """A host and port to SSH to."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def machine_addresses(machine: Mapping[str, Any]) -> list[str]:
    """The addresses of a Machine's network interfaces (``status.networkInterfaces[].ips``), in order."""
    out: list[str] = []
    for nic in (machine.get("status") or {}).get("networkInterfaces") or ():
        for ip in nic.get("ips") or ():
            if isinstance(ip, str) and ip not in out:
                out.append(ip)
    return out


def parse_endpoint(value: str) -> SshEndpoint | None:
    """``host:port`` (``[v6]:port``) as an endpoint; None when it is not one."""
    host, sep, port = value.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return SshEndpoint(host, int(port))


def ssh_endpoint(machine: Mapping[str, Any]) -> SshEndpoint | None:
    """Where the Machine's guest answers SSH: the reported forward, else its first address on port
    22; None while it has neither."""
    annotations = (machine.get("metadata") or {}).get("annotations") or {}
    forwarded = parse_endpoint(str(annotations.get(SSH_ENDPOINT_ANNOTATION) or ""))
    if forwarded is not None:
        return forwarded
    addresses = machine_addresses(machine)
    return SshEndpoint(addresses[0], SSH_PORT) if addresses else None
