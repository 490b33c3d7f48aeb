"""A pool as its poollet keeps it, whichever kind: announced under its identity, and its status
written as IronCore's poollets write it (:class:`PoolReconciler`, :class:`PoolReport`).

The runtime is probed every heartbeat; the status says ``Ready=True/HeartbeatReceived`` or
``Ready=False/RuntimeUnreachable`` (a single slow probe is tolerated, see :class:`ProbeHealth`) beside
the orphan collector's ``GarbageCollection`` condition, and is written when it says something new and
at least every ``report_interval`` (kubelet's node status report frequency). Liveness is the pool's
Lease (:mod:`ironpool.poollet.heartbeat`), not these writes.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ironpool.api.conditions import condition, status_differs
from ironpool.api.errors import AlreadyExists, NotFound
from ironpool.api.meta import now_rfc3339
from ironpool.client.controller import ObjectKey, Result
from ironpool.client.rest import AsyncClient
from ironpool.poollet import keys
from ironpool.poollet.classes import ClassMapper, RuntimeClass
from ironpool.poollet.collector import OrphanCollector

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolIdentity:
    """How a pool announces itself: name, provider ID, topology labels and addresses."""

    name: str
    provider_id: str
    region: str | None = None
    zone: str | None = None
    addresses: Sequence[tuple[str, str]] = field(default_factory=tuple)

    def labels(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.region:
            out[keys.TOPOLOGY_REGION_LABEL] = self.region
        if self.zone:
            out[keys.TOPOLOGY_ZONE_LABEL] = self.zone
        return out


async def announce_pool(client: AsyncClient, model: type[Any], identity: PoolIdentity) -> Any:
    """Create the pool, or re-apply its provider ID and topology labels (manual edits are overwritten)."""
    labels = identity.labels()
    try:
        pool = await client.get(model, identity.name)
    except NotFound:
        obj = model.model_validate({"metadata": {"name": identity.name, "labels": labels},
                                    "spec": {"providerID": identity.provider_id}})
        try:
            return await client.create(obj)
        except AlreadyExists:
            pool = await client.get(model, identity.name)
    patch: dict[str, Any] = {}
    current = pool.metadata.labels or {}
    if any(current.get(k) != v for k, v in labels.items()):
        patch["metadata"] = {"labels": labels}
    if not pool.spec.provider_id:
        patch["spec"] = {"providerID": identity.provider_id}
    elif pool.spec.provider_id != identity.provider_id:
        log.warning("pool %s has providerID %r, not %r (immutable once set; keeping it)",
                    identity.name, pool.spec.provider_id, identity.provider_id)
    if patch:
        pool = await client.patch(model, identity.name, patch)
    return pool


class ProbeHealth:
    """Debounces the runtime probe behind a pool's ``Ready`` condition.

    One slow ``Status`` call (libvirt busy starting twenty domains on a loaded host) must not flip the
    pool to ``Ready=False`` and make the scheduler skip it; ``threshold`` failures in a row do.
    """

    def __init__(self, threshold: int = 3) -> None:
        self.threshold = threshold
        self.failures = 0

    def record(self, ok: bool, message: str) -> tuple[bool, str]:
        """The (ok, message) to publish for this probe result."""
        if ok:
            self.failures = 0
            return True, message
        self.failures += 1
        if self.failures < self.threshold:
            return True, f"{message} (failure {self.failures} of {self.threshold} tolerated)"
        return False, message


class PoolReport:
    """The pool object of one poollet: found (announced again when missing or its topology labels were
    changed) and its status written."""

    def __init__(self, client: AsyncClient, model: type[Any], identity: PoolIdentity,
                 report_interval: float = 300.0) -> None:
        self.client = client
        self.model = model
        self.identity = identity
        self.report_interval = report_interval
        self.health = ProbeHealth()
        self.collection: OrphanCollector | None = None  # its findings go on the pool's conditions
        #: more conditions (the machinepoollet's ``Fenced``): each gives one, or None for none yet
        self.extra_conditions: list[Callable[[Any, str], dict[str, Any] | None]] = []
        self.uid: str | None = None
        self._last_write = 0.0

    async def current(self) -> Any:
        """The pool as the apiserver has it, announced if it is missing or its labels were changed."""
        try:
            pool = await self.client.get(self.model, self.identity.name)
        except NotFound:
            pool = await announce_pool(self.client, self.model, self.identity)
        labels = pool.metadata.labels or {}
        if any(labels.get(k) != v for k, v in self.identity.labels().items()):
            pool = await announce_pool(self.client, self.model, self.identity)
        self.uid = pool.metadata.uid
        return pool

    def conditions(self, pool: Any, ok: bool, message: str, now: str) -> list[dict[str, Any]]:
        """``Ready`` from the probe (``ok``, ``message``: see :class:`ProbeHealth`) and, once the
        collector runs, ``GarbageCollection``."""
        previous = pool.status.conditions if pool.status else None
        conditions = [condition("Ready", "True" if ok else "False",
                                "HeartbeatReceived" if ok else "RuntimeUnreachable", message, previous, now,
                                lastUpdateTime=now, observedGeneration=pool.metadata.generation)]
        if self.collection is not None:
            c = self.collection
            conditions.append(c.status.condition(c.what, c.options.grace, previous, now))
        conditions += [c for c in (extra(previous, now) for extra in self.extra_conditions) if c is not None]
        return conditions

    async def write(self, pool: Any, status: dict[str, Any]) -> None:
        """Write ``status`` if it says something new (update stamps aside) or the report is due."""
        current = pool.status.to_dict() if pool.status else {}
        due = time.monotonic() - self._last_write >= self.report_interval
        if due or status_differs(current, status):
            await self.client.patch(self.model, self.identity.name, {"status": status}, subresource="status")
            self._last_write = time.monotonic()


class PoolReconciler(abc.ABC):
    """Keeps one pool's status current: probes the runtime's classes, finds the pool, writes what it
    says now; ``reconcile`` returns the heartbeat delay to requeue."""

    what: ClassVar[str]  # "machine" or "volume", for messages

    def __init__(self, client: AsyncClient, runtime: Any, model: type[Any], identity: PoolIdentity,
                 mapper: ClassMapper, heartbeat_interval: float = 10.0, probe_timeout: float = 5.0,
                 status_report_interval: float = 300.0) -> None:
        self.runtime = runtime
        self.identity = identity
        self.mapper = mapper
        self.heartbeat_interval = heartbeat_interval
        self.probe_timeout = probe_timeout
        self.report = PoolReport(client, model, identity, status_report_interval)
        self.on_classes_changed: list[Callable[[], None]] = []

    @abc.abstractmethod
    def runtime_classes(self, status: Any) -> list[RuntimeClass]:
        """The classes of the runtime's ``Status`` answer."""

    @abc.abstractmethod
    def desired_status(self, pool: Any, ok: bool, message: str, now: str) -> dict[str, Any]:
        """The pool's status now, given the probe's verdict."""

    async def refresh_classes(self) -> tuple[bool, str]:
        """Probe the runtime's ``Status``; updates the class mapper. Returns (ok, message)."""
        try:
            classes = self.runtime_classes(await asyncio.wait_for(self.runtime.status(), self.probe_timeout))
        except Exception as exc:
            return self.report.health.record(False, f"{self.what} runtime status probe failed: {exc}")
        # Quantities change with every object; only a change of the classes themselves re-maps objects.
        def shape(cs: Sequence[RuntimeClass]) -> list[tuple[str, dict[str, int]]]:
            return [(c.name, dict(c.capabilities)) for c in cs]

        changed = shape(classes) != shape(self.mapper.classes)
        self.mapper.classes = classes
        if changed:
            for cb in self.on_classes_changed:
                cb()
        return self.report.health.record(True, f"{self.what} runtime status probe succeeded")

    async def reconcile(self, key: ObjectKey) -> Result:
        ok, message = await self.refresh_classes()
        pool = await self.report.current()
        await self.report.write(pool, self.desired_status(pool, ok, message, now_rfc3339()))
        return Result(requeue_after=self.heartbeat_interval)
