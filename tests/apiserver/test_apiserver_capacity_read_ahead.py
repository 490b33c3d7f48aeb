"""Capacity admission reads pools' usage ahead in batches: a burst of binds over many pools reads each
usage key once, 64 to a round trip (in-process, over a real SQLite store)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from ironpool.api import errors
from ironpool.api.resources import resolve
from ironpool.apiserver.registry.generic import Registry
from ironpool.apiserver.registry.subresources import HANDLERS
from ironpool.store.interface import GuardValue
from ironpool.store.sqlite import SQLiteStore

COMPUTE = "compute.ironcore.dev/v1alpha1"
POOLS = 150
BIND = HANDLERS["binding"]


def binding(pool: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "MachinePool", "name": pool}}


async def test_a_burst_of_binds_reads_each_pools_usage_once_in_batches(store: SQLiteStore) -> None:
    reg = Registry(store)
    machines, pools = resolve("machines"), resolve("machinepools")
    await reg.create(resolve("machineclasses"), None, {
        "apiVersion": COMPUTE, "kind": "MachineClass", "metadata": {"name": "small"},
        "capabilities": {"cpu": "1", "memory": "1Gi"}})
    room = {"cpu": "1", "memory": "1Gi"}
    for i in range(POOLS):
        await reg.create(pools, None, {"apiVersion": COMPUTE, "kind": "MachinePool",
                                       "metadata": {"name": f"p{i}"}})
        await reg.patch(pools, None, f"p{i}", {"status": {"allocatable": room, "capacity": room}},
                        subresource="status")
        await reg.create(machines, "default", {"apiVersion": COMPUTE, "kind": "Machine",
                                               "metadata": {"name": f"m{i}"},
                                               "spec": {"machineClassRef": {"name": "small"}}})
    reads: list[list[str]] = []
    read_guards = store.read_guards

    async def counted(keys: Sequence[str]) -> list[GuardValue]:
        reads.append(list(keys))
        return await read_guards(keys)

    store.read_guards = counted
    for i in range(POOLS):
        await BIND.create(reg, machines, "default", f"m{i}", binding(f"p{i}"))
    keys = [key for batch in reads for key in batch]
    assert len(keys) == len(set(keys)) == POOLS  # every pool's usage, each read once
    assert len(reads) == -(-POOLS // 64)
    # Each pool holds one machine now: a second one finds it full, on the usage it read then.
    await reg.create(machines, "default", {"apiVersion": COMPUTE, "kind": "Machine",
                                           "metadata": {"name": "x"},
                                           "spec": {"machineClassRef": {"name": "small"}}})
    with pytest.raises(errors.Conflict, match='machinepool "p7" has too little cpu'):
        await BIND.create(reg, machines, "default", "x", binding("p7"))
