"""Pool maintenance, as ``kubectl cordon / uncordon / drain`` does it for nodes.

- **cordon** adds the ``pool.ironpool.dev/unschedulable:NoSchedule`` taint (kubectl sets
  ``spec.unschedulable``, which Kubernetes turns into ``node.kubernetes.io/unschedulable``; IronCore's
  pools have no such field, and the scheduler's TaintToleration already keeps new objects off a
  tainted pool); **uncordon** removes it. Both write with the pool's resourceVersion and retry on a
  conflict, so a concurrent poollet or controller write is never lost.
- **drain** cordons the pool, then for each Machine bound to it either evicts it (``move``: unbound
  through the ``eviction`` subresource and scheduled elsewhere with its name, uid, NICs and Volume
  references) or deletes it (``delete``), and waits until each runs on another pool (or has been
  realised there, with ``wait="bound"`` only until it is bound there) or is gone. Volumes are not
  moved: a Volume lives on its pool's storage, so a Machine whose Volumes are on the drained host
  can only be placed where the scheduler's volume rules allow.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ironpool.api.compute import Machine, MachinePool
from ironpool.api.errors import Conflict, NotFound
from ironpool.api.meta import now_rfc3339
from ironpool.api.storage import VolumePool
from ironpool.client.events import EventRecorder
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.fleet.decisions import UNSCHEDULABLE, with_taint, without_taint

MACHINES = resource_for_model(Machine)
POOLS: dict[str, type[MachinePool] | type[VolumePool]] = {"machinepool": MachinePool,
                                                          "volumepool": VolumePool}
Policy = Literal["move", "delete"]
WaitFor = Literal["running", "bound"]
Progress = Callable[[str], None]


async def set_cordoned(client: AsyncClient, kind: str, name: str, cordoned: bool) -> bool:
    """Cordon (or uncordon) a pool; whether it changed (False: it already was). NotFound if missing."""
    model = POOLS[kind]
    while True:
        pool = await client.get(model, name)
        taints = (with_taint(pool.spec.taints, UNSCHEDULABLE, now_rfc3339()) if cordoned
                  else without_taint(pool.spec.taints, UNSCHEDULABLE))
        if taints is None:
            return False
        patch = {"metadata": {"resourceVersion": pool.metadata.resource_version},
                 "spec": {"taints": [t.to_dict() for t in taints] or None}}
        try:
            await client.patch(model, name, patch)
            return True
        except Conflict:
            continue  # the pool moved on (a poollet, the lifecycle controller): decide again


@dataclass
class DrainedMachine:
    """One Machine of a drain and what became of it."""

    namespace: str
    name: str
    uid: str
    result: str = "pending"  # evicting or deleting while under way; then moved, deleted, gone or timeout
    pool: str | None = None  # where it runs now
    state: str | None = None
    message: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class DrainReport:
    """The summary ``ironpool drain -o json`` prints."""

    pool: str
    policy: str
    cordoned: bool
    machines: list[DrainedMachine] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return all(m.result in ("moved", "deleted", "gone") for m in self.machines)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "complete": self.complete}


def _settled(m: Machine | None, drained: DrainedMachine, pool: str, wait: WaitFor) -> str | None:
    """What became of ``drained`` given its current object (None: still under way)."""
    if m is None or m.metadata.uid != drained.uid:
        return "deleted" if drained.result == "deleting" else "gone"
    ref = m.spec.machine_pool_ref
    drained.pool = ref.name if ref is not None else None
    drained.state = m.status.state if m.status else None
    if drained.result == "deleting" or drained.pool in (None, pool):
        return None
    if wait == "bound":
        return "moved"
    power_off = (m.spec.power or "On") == "Off"
    realised = drained.state == "Running" or (power_off and drained.state not in (None, "Pending"))
    return "moved" if realised else None


async def drain(client: AsyncClient, pool: str, policy: Policy = "move", timeout: float = 300.0,
                wait: WaitFor = "running", progress: Progress = lambda line: None,
                poll: float = 0.5) -> DrainReport:
    """Cordon ``pool``, move or delete its Machines, wait for them (module docstring)."""
    start = time.monotonic()
    await client.get(MachinePool, pool)  # NotFound names the pool before anything is changed
    cordoned = await set_cordoned(client, "machinepool", pool, True)
    progress(f"machinepool/{pool} cordoned" if cordoned else f"machinepool/{pool} already cordoned")
    report = DrainReport(pool, policy, cordoned)
    selector = f"spec.machinePoolRef.name={pool}"
    events = EventRecorder(client, "ironpool-drain")
    listed = [m async for m in client.list_all(Machine, namespace=None, field_selector=selector)]
    for m in listed:
        d = DrainedMachine(m.metadata.namespace or "default", m.metadata.name or "", m.metadata.uid or "")
        report.machines.append(d)
        try:
            if policy == "move":
                await client.evict_raw(MACHINES, d.name, d.namespace, uid=d.uid)
                d.result = "evicting"
                progress(f"evicting machine {d.key}")
                await events.record(m, "Normal", "Evicted", f"Evicted by ironpool drain of machine pool "
                                    f"{pool}; it will be scheduled again")
            else:
                await client.delete(Machine, d.name, namespace=d.namespace)
                d.result = "deleting"
                progress(f"deleting machine {d.key}")
        except NotFound:
            d.result = "gone"
        except Conflict as exc:  # unbound or made again meanwhile: nothing of this pool's left
            d.result, d.message = "gone", str(exc)
    deadline = start + timeout
    while True:
        waiting = [d for d in report.machines if d.result in ("evicting", "deleting")]
        for d in waiting:
            try:
                current: Machine | None = await client.get(Machine, d.name, namespace=d.namespace)
            except NotFound:
                current = None
            done = _settled(current, d, pool, wait)
            if done is not None:
                d.result = done
                where = f" on machinepool/{d.pool} ({d.state or 'no state yet'})" if done == "moved" else ""
                progress(f"machine {d.key} {done}{where}")
        if not any(d.result in ("evicting", "deleting") for d in report.machines):
            break
        if time.monotonic() >= deadline:
            for d in report.machines:
                if d.result in ("evicting", "deleting"):
                    d.result = "timeout"
                    d.message = (f"still bound to {d.pool or 'no pool'}, state {d.state or 'unknown'} after "
                                 f"{timeout:.0f}s")
                    progress(f"machine {d.key} timed out: {d.message}")
            break
        await asyncio.sleep(poll)
    report.seconds = round(time.monotonic() - start, 3)
    return report
