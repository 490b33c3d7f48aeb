"""Pool capacity and allocatable figures (docs/architecture.md, "Capacity accounting").

A machine pool publishes its shared cpu/memory figures — ``capacity`` (the host's totals) and
``allocatable`` (what ironpool machines may use in total, *not* reduced by the machines bound to the
pool; the scheduler subtracts those once) — plus IronCore's ``class/machine.<name>`` counts:
in ``capacity`` how many fit on the empty host, in ``allocatable`` how many more fit now.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ironpool.api.quantity import Quantity
from ironpool.poollet.keys import machine_class_key, volume_class_key


@dataclass(frozen=True)
class HostResources:
    """Whole cores and bytes of memory."""

    cpu: int
    memory: int

    def minus(self, other: HostResources) -> HostResources:
        return HostResources(self.cpu - other.cpu, self.memory - other.memory)


def local_host_resources(meminfo: Path = Path("/proc/meminfo")) -> HostResources:
    """This host's cores and memory (the poollet runs beside its runtime, as IronCore's DaemonSet does)."""
    cpu = os.cpu_count() or 1
    memory = 0
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemTotal:"):
            memory = int(line.split()[1]) * 1024
            break
    if memory <= 0:
        raise RuntimeError(f"cannot read MemTotal from {meminfo}")
    return HostResources(cpu, memory)


def given_capacity(cpu: int | None, memory: int | None) -> HostResources | None:
    """The capacity a poollet was told (``--capacity-cpu``/``--capacity-memory``), what is not told
    taken from this host; None when neither is told (then it is this host's, read at each report)."""
    if cpu is None and memory is None:
        return None
    local = local_host_resources()
    return HostResources(cpu if cpu is not None else local.cpu,
                         memory if memory is not None else local.memory)


def fits(free: HostResources, caps: Mapping[str, int]) -> int:
    """How many instances with these capabilities fit into ``free`` (cpu and memory only)."""
    cpu, mem = caps.get("cpu", 0), caps.get("memory", 0)
    if cpu <= 0 or mem <= 0:
        return 0
    return max(0, min(free.cpu // cpu, free.memory // mem))


def _mem(value: int) -> str:
    return str(Quantity(value, "BinarySI"))


def machine_pool_resources(
    capacity: HostResources,
    allocatable: HostResources,
    classes: Mapping[str, Mapping[str, int]],
    bound_classes: Iterable[Mapping[str, int]],
) -> tuple[dict[str, str], dict[str, str]]:
    """``(status.capacity, status.allocatable)`` as JSON resource lists.

    ``classes`` are the API classes this pool offers (name -> IRI capabilities); ``bound_classes``
    the capabilities of every machine bound to the pool, used for the class counts only.
    """
    used = HostResources(0, 0)
    for caps in bound_classes:
        used = HostResources(used.cpu + caps.get("cpu", 0), used.memory + caps.get("memory", 0))
    free = allocatable.minus(used)
    cap: dict[str, str] = {"cpu": str(capacity.cpu), "memory": _mem(capacity.memory)}
    alloc: dict[str, str] = {"cpu": str(max(0, allocatable.cpu)), "memory": _mem(max(0, allocatable.memory))}
    for name, caps in sorted(classes.items()):
        cap[machine_class_key(name)] = str(fits(capacity, caps))
        alloc[machine_class_key(name)] = str(fits(free, caps))
    return cap, alloc


def volume_pool_resources(
    capacity_bytes: int, allocatable_bytes: int, classes: Iterable[str], bound_bytes: int
) -> tuple[dict[str, str], dict[str, str]]:
    """``(status.capacity, status.allocatable)`` of a volume pool.

    ``storage`` is shared like cpu/memory (allocatable not reduced by bound volumes); the
    ``class/volume.<name>`` keys are bytes, as in IronCore: total, and still free.
    """
    free = max(0, allocatable_bytes - bound_bytes)
    cap: dict[str, str] = {"storage": _mem(capacity_bytes)}
    alloc: dict[str, str] = {"storage": _mem(max(0, allocatable_bytes))}
    for name in sorted(classes):
        cap[volume_class_key(name)] = _mem(capacity_bytes)
        alloc[volume_class_key(name)] = _mem(free)
    return cap, alloc
