"""Lookups for Pulumi programs: the pools, the classes and a Machine, read when the program runs.

They run in the program's process (in preview too), configured like the provider: the stack config
``ironpool:server``/``token``/``namespace``/``caFile``, else the environment, else the client config
file. Each call reads the apiserver once and returns plain, frozen values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
from ironpool.api.errors import NotFound
from ironpool.api.machine_access import ssh_endpoint
from ironpool.api.resources import resolve
from ironpool.client import Client

from ironpool_pulumi.connection import CONFIG_KEYS, client_config
from ironpool_pulumi.machine import ip_addresses

MACHINES, MACHINE_CLASSES = resolve("machines"), resolve("machineclasses")
MACHINE_POOLS = resolve("machinepools")


@dataclass(frozen=True)
class MachinePoolInfo:
    """A MachinePool as its machinepoollet reports it."""

    name: str
    """The pool's name."""
    state: str | None
    """``Ready``, ``Pending``, ``Error`` or ``Offline``."""
    machine_classes: list[str]
    """The MachineClasses the pool offers."""
    capacity: dict[str, str]
    """Total resources (cpu, memory, ``class/machine.<name>`` counts)."""
    allocatable: dict[str, str]
    """What is left for Machines."""
    labels: dict[str, str] = field(default_factory=dict)
    """The pool's labels (match them with a Machine's ``pool_selector``)."""


@dataclass(frozen=True)
class MachineClassInfo:
    """A MachineClass."""

    name: str
    """The class's name."""
    capabilities: dict[str, str]
    """cpu, memory and other resources as quantity strings."""


@dataclass(frozen=True)
class MachineInfo:
    """A Machine as the API reports it now."""

    name: str
    """The Machine's name."""
    namespace: str
    """The Machine's namespace."""
    uid: str
    """The API object's uid."""
    machine_class: str
    """The MachineClass."""
    power: str
    """The desired power state."""
    state: str | None
    """The reported state (``Running``, ...)."""
    machine_pool: str | None
    """The MachinePool it is bound to."""
    machine_id: str | None
    """The runtime's id of the machine."""
    ip_addresses: list[str]
    """Addresses of its network interfaces, once networking reports them."""
    ssh_host: str | None = None
    """Where the guest answers SSH (see :attr:`ironpool_pulumi.Machine.ssh_host`)."""
    ssh_port: int | None = None
    """The port of ``ssh_host``."""
    labels: dict[str, str] = field(default_factory=dict)
    """The Machine's labels."""


def _client() -> Client:
    config = pulumi.Config("ironpool")
    return Client(client_config({k: config.get(k) for k in CONFIG_KEYS}))


def get_machine_pools() -> list[MachinePoolInfo]:
    """Every MachinePool, sorted by name."""
    with _client() as client:
        items = client.list_raw(MACHINE_POOLS).items
    out = []
    for p in sorted(items, key=lambda p: p["metadata"]["name"]):
        status = p.get("status") or {}
        out.append(MachinePoolInfo(
            name=p["metadata"]["name"], state=status.get("state"),
            machine_classes=[c["name"] for c in status.get("availableMachineClasses") or []],
            capacity=dict(status.get("capacity") or {}), allocatable=dict(status.get("allocatable") or {}),
            labels=dict(p["metadata"].get("labels") or {})))
    return out


def get_machine_classes() -> list[MachineClassInfo]:
    """Every MachineClass, sorted by name."""
    with _client() as client:
        items = client.list_raw(MACHINE_CLASSES).items
    return [MachineClassInfo(c["metadata"]["name"], dict(c.get("capabilities") or {}))
            for c in sorted(items, key=lambda c: c["metadata"]["name"])]


def get_machine(name: str, namespace: str | None = None) -> MachineInfo:
    """The Machine ``name`` (in ``namespace``, default the configured one); raises LookupError if absent."""
    with _client() as client:
        ns = namespace or client.config.namespace
        try:
            m: dict[str, Any] = client.get_raw(MACHINES, name, ns)
        except NotFound:
            raise LookupError(f"Machine {ns}/{name} does not exist") from None
    meta, spec, status = m["metadata"], m.get("spec") or {}, m.get("status") or {}
    endpoint = ssh_endpoint(m)
    return MachineInfo(
        name=meta["name"], namespace=meta["namespace"], uid=meta.get("uid", ""),
        machine_class=(spec.get("machineClassRef") or {}).get("name", ""), power=spec.get("power", "On"),
        state=status.get("state"), machine_pool=(spec.get("machinePoolRef") or {}).get("name"),
        machine_id=status.get("machineID"), ip_addresses=ip_addresses(m),
        ssh_host=endpoint.host if endpoint else None, ssh_port=endpoint.port if endpoint else None,
        labels=dict(meta.get("labels") or {}))
