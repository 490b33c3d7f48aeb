"""The pool lifecycle controller (Kubernetes' node lifecycle controller, for MachinePools and VolumePools).

Every ``monitor_period`` it looks at each pool's heartbeat Lease through informers (no extra reads);
a pool without a Lease (no poollet ever beat for it) is left alone:

- a pool whose Lease has not changed for ``grace`` seconds gets ``Ready=Unknown`` (reason
  ``PoolStatusUnknown``) at once, and the ``pool.ironpool.dev/unreachable:NoExecute`` taint as the
  eviction rate allows (none while every pool of its kind is unreachable: see
  :mod:`ironpool.fleet.decisions`);
- a pool whose Lease moves again loses that taint; its poollet sets ``Ready`` back itself;
- a Machine bound to a pool with a ``NoExecute`` taint it does not tolerate (or tolerates for less
  than the time since the taint was added) is evicted through the ``eviction`` subresource: it is
  unbound and the scheduler places it again, keeping its name, uid, NICs and Volume references.
  Volumes are not moved: a Volume lives on its pool's storage.
- a pool whose poollet fences itself (its Lease publishes ``--fence-after``) is not evicted on the
  unreachable taint alone: once its Lease has been silent for the fence time plus ``fence_margin``
  (and the grace period), the controller takes it over (:mod:`ironpool.fleet.takeover`): it marks the
  Lease, releases the Volumes the pool's domains held, evicts every Machine that does not opt out,
  and unmarks the Lease when none is left; the taint stays until then.

Pool writes carry the resourceVersion they were decided on, so a concurrent ``ironpool cordon`` or
poollet write is never overwritten; the next pass decides again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ironpool.api.compute import Machine, MachinePool
from ironpool.api.coordination import Lease
from ironpool.api.errors import ApiError, Conflict, NotFound
from ironpool.api.fleet import lease_namespace
from ironpool.api.meta import now_rfc3339
from ironpool.api.storage import Volume, VolumePool
from ironpool.client.events import EventRecorder
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import ServerUnreachable, resource_for_model
from ironpool.fleet.decisions import (
    UNKNOWN_REASON,
    UNREACHABLE,
    LeaseSeen,
    TokenBucket,
    eviction_at,
    fully_disrupted,
    needs_unknown,
    observe,
    unknown_message,
    unreachable,
    with_taint,
    without_taint,
)
from ironpool.fleet.fence_timing import (
    DEFAULT_FENCE_MARGIN,
    published_fence_after,
    takeover_due,
    timing_problem,
    to_move,
)
from ironpool.fleet.takeover import Takeover, attached_uid, marked

log = logging.getLogger(__name__)

MACHINES = resource_for_model(Machine)
POOL_MODELS: dict[str, type[MachinePool] | type[VolumePool]] = {"MachinePool": MachinePool,
                                                                "VolumePool": VolumePool}


@dataclass(frozen=True)
class LifecycleOptions:
    """Kubernetes' node lifecycle flags, for pools (seconds; rate in pools per second)."""

    grace: float = 40.0
    monitor_period: float = 5.0
    eviction_rate: float = 0.1
    eviction_burst: int = 1
    #: seconds beyond a pool's published fence time before its Machines are moved
    fence_margin: float = DEFAULT_FENCE_MARGIN

    def __post_init__(self) -> None:
        if self.grace <= 0 or self.monitor_period <= 0:
            raise ValueError(f"the grace period and monitor period must be positive (got {self.grace}, "
                             f"{self.monitor_period})")
        if self.eviction_rate <= 0 or self.eviction_burst < 1:
            raise ValueError(f"the eviction rate must be positive and the burst at least 1 "
                             f"(got {self.eviction_rate}, {self.eviction_burst})")
        if self.fence_margin <= 0:
            raise ValueError(f"--fence-margin must be positive (got {self.fence_margin})")


@dataclass
class PassReport:
    """What one monitor pass did (for tests and logs)."""

    unknown: list[str] = field(default_factory=list)
    tainted: list[str] = field(default_factory=list)
    untainted: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    taken_over: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)  # machine pools whose takeover ended


def _machine_pool(m: Machine) -> list[str]:
    ref = m.spec.machine_pool_ref
    return [ref.name] if ref is not None and ref.name else []


class PoolLifecycleController:
    """Watches pools, their Leases and Machines; :meth:`monitor_once` is one pass (module docstring).

    ``clock`` measures Lease ages (monotonic); ``wall`` is the time taints are stamped and
    ``tolerationSeconds`` counted with.
    """

    def __init__(self, client: AsyncClient, options: LifecycleOptions | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.client = client
        self.options = options or LifecycleOptions()
        self._clock = clock
        self._wall = wall
        self.pools: dict[str, Informer[Any]] = {kind: Informer(client, model)
                                                for kind, model in POOL_MODELS.items()}
        self.leases: dict[str, Informer[Lease]] = {
            kind: Informer(client, Lease, namespace=lease_namespace(kind)) for kind in POOL_MODELS}
        self.machines: Informer[Machine] = Informer(client, Machine, indexers={"pool": _machine_pool})
        self.volumes: Informer[Volume] = Informer(client, Volume, indexers={"attached-uid": attached_uid})
        self.takeover = Takeover(client, self.volumes)
        self._seen: dict[tuple[str, str], LeaseSeen] = {}
        now = clock()
        self._buckets = {kind: TokenBucket(self.options.eviction_rate, self.options.eviction_burst, now)
                         for kind in POOL_MODELS}
        self.events = EventRecorder(client, "pool-lifecycle-controller", dedupe_seconds=self.options.grace)
        self.passes = 0  # monitor passes completed (what a test that expects nothing to happen waits for)

    def informers(self) -> list[Informer[Any]]:
        return [*self.pools.values(), *self.leases.values(), self.machines, self.volumes]

    # -- one pass ----------------------------------------------------------------------------------

    async def monitor_once(self) -> PassReport:
        """Observe every pool's Lease, set conditions and taints, evict what must go."""
        report = PassReport()
        now = self._clock()
        for kind in POOL_MODELS:
            await self._monitor_kind(kind, now, report)
        await self._evict(report)
        self.passes += 1
        return report

    async def _monitor_kind(self, kind: str, now: float, report: PassReport) -> None:
        pools = self.pools[kind].list()
        names = {p.metadata.name for p in pools}
        for key in [k for k in self._seen if k[0] == kind and k[1] not in names]:
            del self._seen[key]
        down: list[Any] = []
        monitored = 0
        for pool in pools:
            name = pool.metadata.name or ""
            lease = self.leases[kind].get_by_name(name, lease_namespace(kind))
            if lease is None:
                # No poollet ever beat for it (made by hand, or announced by a poollet that writes no
                # Lease): there is no heartbeat to miss.
                self._seen.pop((kind, name), None)
                continue
            monitored += 1
            record = lease.metadata.resource_version or ""
            previous = self._seen.get((kind, name))
            if previous is not None and record == self.takeover.written.get(name):
                previous = LeaseSeen(record, previous.at)  # our own mark or unmark: no sign of life
            seen = self._seen[(kind, name)] = observe(previous, record, now)
            if kind == "MachinePool":
                await self._check_fencing(pool, lease, now - seen.at, report)
            if unreachable(seen, now, self.options.grace):
                down.append(pool)
                continue
            if marked(lease):
                continue  # taken over: the taint stays until every Machine to move has moved
            kept = without_taint(pool.spec.taints, UNREACHABLE)
            if kept is not None and await self._set_taints(kind, pool, kept):
                log.info("%s %s: its Lease is renewed again; removed the unreachable taint", kind, name)
                await self._event(pool, "Normal", "PoolReachable",
                                  "The poollet renews the pool's Lease again: removed the unreachable taint.")
                report.untainted.append(name)
        disrupted = fully_disrupted(len(down), monitored)
        for pool in down:
            await self._mark_unreachable(kind, pool, disrupted, report)

    async def _mark_unreachable(self, kind: str, pool: Any, disrupted: bool, report: PassReport) -> None:
        name = pool.metadata.name or ""
        conditions = pool.status.conditions if pool.status else None
        if needs_unknown(conditions) and await self._set_unknown(kind, pool):
            log.warning("%s %s: no Lease renewal for %.0fs: Ready=Unknown", kind, name, self.options.grace)
            await self._event(pool, "Warning", UNKNOWN_REASON, unknown_message(self.options.grace))
            report.unknown.append(name)
        if disrupted:
            # Every pool of the kind is down: most likely our own network. As Kubernetes' node
            # lifecycle does on entering full disruption, stop evicting and take back the taints of
            # the pools that went down first (pools rarely stop in the same monitor pass).
            kept = without_taint(pool.spec.taints, UNREACHABLE)
            if kept is not None and await self._set_taints(kind, pool, kept):
                log.warning("%s %s: every %s is unreachable: removed the unreachable taint", kind, name, kind)
                await self._event(pool, "Normal", "FullDisruption",
                                  f"Every {kind} is unreachable (most likely the control plane's own "
                                  "network): removed the unreachable taint; nothing is evicted.")
                report.untainted.append(name)
            report.held.append(name)
            return
        taints = with_taint(pool.spec.taints, UNREACHABLE, now_rfc3339())
        if taints is None:
            return
        if not self._buckets[kind].try_take(self._clock()):
            report.held.append(name)  # the eviction rate: this pool's turn comes in a later pass
            return
        if await self._set_taints(kind, pool, taints):
            log.warning("%s %s: unreachable; tainted %s:NoExecute", kind, name, UNREACHABLE.key)
            report.tainted.append(name)

    # -- eviction ----------------------------------------------------------------------------------

    async def _check_fencing(self, pool: MachinePool, lease: Lease, silent_for: float,
                             report: PassReport) -> None:
        """Flag a fence time that does not fit the grace period; take a tainted pool over once its
        fence is due (its Lease still at the revision seen go silent)."""
        name = pool.metadata.name or ""
        fence_after = published_fence_after(lease.metadata.annotations)
        if fence_after is None:
            return
        problem = timing_problem(fence_after, self.options.grace, self.options.fence_margin)
        if problem:
            await self._event(pool, "Warning", "FenceTimingMismatch",
                              f"{problem} (evictions from this pool wait for its fence)")
        tainted = any(t.key == UNREACHABLE.key for t in pool.spec.taints or ())
        if (not tainted or marked(lease)
                or not takeover_due(silent_for, self.options.grace, fence_after, self.options.fence_margin)):
            return
        if await self.takeover.mark(lease, lease.metadata.resource_version or ""):
            message = (f"no Lease renewal seen for {silent_for:.0f}s, past the poollet's fence "
                       f"({fence_after:g}s) plus --fence-margin {self.options.fence_margin:g}s: its "
                       "domains are off; moving its machines")
            log.warning("MachinePool %s taken over: %s", name, message)
            await self._event(pool, "Warning", "PoolTakenOver", message)
            report.taken_over.append(name)

    async def _evict(self, report: PassReport) -> None:
        wall = self._wall()
        for pool in self.pools["MachinePool"].list():
            taints = pool.spec.taints or []
            lease = self.leases["MachinePool"].get_by_name(pool.metadata.name or "",
                                                           lease_namespace("MachinePool"))
            if marked(lease) or (lease is not None and published_fence_after(lease.metadata.annotations)
                                 and any(t.effect == "NoExecute" for t in taints)):
                assert lease is not None
                seen = self._seen.get(("MachinePool", pool.metadata.name or ""))
                back = seen is not None and not unreachable(seen, self._clock(), self.options.grace)
                await self._evict_fenced(pool, lease, back, report)
                continue
            if not any(t.effect == "NoExecute" for t in taints):
                continue
            for machine in self.machines.by_index("pool", pool.metadata.name or ""):
                if machine.metadata.deletion_timestamp:
                    continue
                at = eviction_at(machine.spec.tolerations, taints, wall)
                if at is None or at > wall:
                    continue
                if await self._evict_machine(machine, pool.metadata.name or "", taints):
                    report.evicted.append(f"{machine.metadata.namespace}/{machine.metadata.name}")

    async def _evict_fenced(self, pool: MachinePool, lease: Lease, back: bool, report: PassReport) -> None:
        """A pool that fences itself: its Machines move only once it is taken over (then all but those
        opting out, each after its Volumes are released; the mark goes once none is left and the
        poollet renews again: ``back``); other NoExecute taints evict as usual."""
        name = pool.metadata.name or ""
        bound = self.machines.by_index("pool", name)
        if marked(lease):
            moving = to_move(bound)
            for machine in moving:
                if not await self.takeover.release_volumes(machine, name):
                    continue
                if await self._evict_machine(machine, name, [UNREACHABLE], fenced=True):
                    report.evicted.append(f"{machine.metadata.namespace}/{machine.metadata.name}")
            if not moving and back and await self.takeover.unmark(lease):
                log.info("MachinePool %s: every machine to move has moved: takeover ended", name)
                await self._event(pool, "Normal", "PoolTakeoverEnded",
                                  "Every machine to move runs elsewhere now: the poollet may start what is "
                                  "still bound to it.")
                report.released.append(name)
            return
        others = [t for t in pool.spec.taints or () if t.key != UNREACHABLE.key]
        wall = self._wall()
        for machine in bound:
            at = eviction_at(machine.spec.tolerations, others, wall)
            if not machine.metadata.deletion_timestamp and at is not None and at <= wall \
                    and await self._evict_machine(machine, name, others):
                report.evicted.append(f"{machine.metadata.namespace}/{machine.metadata.name}")

    async def _evict_machine(self, machine: Machine, pool: str, taints: list[Any],
                             fenced: bool = False) -> bool:
        name, ns = machine.metadata.name or "", machine.metadata.namespace
        # A fenced pool's Machines are evicted on the revision seen bound there: never from the pool
        # one was placed on since.
        version = machine.metadata.resource_version if fenced else None
        try:
            await self.client.evict_raw(MACHINES, name, ns, machine.metadata.uid, version)
        except (Conflict, NotFound):
            return False  # unbound, deleted or made again meanwhile: nothing of ours to evict
        except (ApiError, ServerUnreachable) as exc:
            log.warning("evicting machine %s/%s from %s failed: %s", ns, name, pool, exc)
            return False
        shown = ", ".join(f"{t.key}:{t.effect}" for t in taints if t.effect == "NoExecute")
        message = (f"Evicted from machine pool {pool} (taint {shown} not tolerated); "
                   "it will be scheduled again")
        if fenced:
            message = (f"Evicted from machine pool {pool}, which fenced itself (its domain is off, its "
                       "volumes released); it will be scheduled again")
        log.warning("machine %s/%s: %s", ns, name, message)
        await self._event(machine, "Warning", "Evicted", message)
        return True

    # -- writes ------------------------------------------------------------------------------------

    async def _set_taints(self, kind: str, pool: Any, taints: list[Any] | None) -> bool:
        patch = {"metadata": {"resourceVersion": pool.metadata.resource_version},
                 "spec": {"taints": [t.to_dict() for t in taints or ()] or None}}
        return await self._patch(kind, pool, patch)

    async def _set_unknown(self, kind: str, pool: Any) -> bool:
        conditions = pool.status.conditions if pool.status else None
        ready = {"type": "Ready", "status": "Unknown", "reason": UNKNOWN_REASON,
                 "message": unknown_message(self.options.grace), "lastTransitionTime": now_rfc3339()}
        others = [c.to_dict() for c in conditions or () if c.type != "Ready"]
        patch = {"metadata": {"resourceVersion": pool.metadata.resource_version},
                 "status": {"conditions": [*others, ready]}}
        return await self._patch(kind, pool, patch, subresource="status")

    async def _patch(self, kind: str, pool: Any, patch: dict[str, Any],
                     subresource: str | None = None) -> bool:
        try:
            await self.client.patch(POOL_MODELS[kind], pool.metadata.name or "", patch,
                                    subresource=subresource)
        except (Conflict, NotFound):
            return False  # it moved on: the next pass decides on what the informer shows then
        except (ApiError, ServerUnreachable) as exc:
            log.warning("updating %s %s failed: %s", kind, pool.metadata.name, exc)
            return False
        return True

    async def _event(self, obj: Any, type_: str, reason: str, message: str) -> None:
        try:
            await self.events.record(obj, type_, reason, message)
        except Exception as exc:  # events are best effort
            log.debug("could not record %s: %s", reason, exc)

    # -- running -----------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, sync_timeout: float = 120.0) -> None:
        """Start the informers, then one pass per ``monitor_period`` until ``stop``."""
        informers = self.informers()
        for inf in informers:
            inf.start()
        try:
            await asyncio.gather(*(inf.wait_for_sync(sync_timeout) for inf in informers))
            o = self.options
            log.info("pool lifecycle controller running (grace %.0fs, monitor period %.1fs, eviction rate "
                     "%.2g pools/s)", o.grace, o.monitor_period, o.eviction_rate)
            while not stop.is_set():
                try:
                    await self.monitor_once()
                except Exception:
                    log.exception("pool lifecycle pass failed")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.options.monitor_period)
        finally:
            for inf in informers:
                await inf.stop()
