"""The networked scheduler: informers feed SchedulerCore and the queue, one loop decides, binds run
concurrently (assumed in the cache at once, confirmed by the watch, forgotten on failure).

``run_scheduler(client, config, stop_event)`` is what ``ironpool scheduler`` and ``ironpool up`` run.
One informer per kind watches all Machines (and Volumes): bound ones feed the cache, unbound ones the
queue. A single watch keeps the two views consistent when an object moves from one to the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections import OrderedDict
from collections.abc import Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from pydantic import BaseModel

from ironpool.api import Machine, MachineClass, MachinePool, Volume, VolumeClass, VolumePool
from ironpool.api.errors import Conflict, NotFound
from ironpool.client.informer import Informer, SharedInformerFactory
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.scheduler.config import SchedulerConfig
from ironpool.scheduler.core import SchedulerCore
from ironpool.scheduler.framework.runtime import Decision
from ironpool.scheduler.ledger import ClaimRejected, PoolLedger
from ironpool.scheduler.model import (
    SCHEDULER_NAME_ANNOTATION,
    Kind,
    object_key,
    pool_ref_of,
    request_from_json,
)
from ironpool.scheduler.queue import QueuedItem, SchedulingQueue
from ironpool.scheduler.reporting import Reporter

log = logging.getLogger(__name__)

_MODELS: dict[Kind, tuple[type[BaseModel], type[BaseModel], type[BaseModel]]] = {
    "machine": (Machine, MachineClass, MachinePool),
    "volume": (Volume, VolumeClass, VolumePool),
}
_REF_FIELD: dict[Kind, str] = {"machine": "machinePoolRef", "volume": "volumePoolRef"}


def _doc(obj: BaseModel) -> dict[str, Any]:
    return obj.model_dump(mode="json", by_alias=True, exclude_none=True)


def _significant(old: Any, new: Any) -> bool:
    """Whether an update to an unscheduled object could change its decision (not a status write)."""
    if old is None:
        return True
    return bool(old.spec != new.spec or old.metadata.labels != new.metadata.labels
                or old.metadata.annotations != new.metadata.annotations)


@dataclass
class RunnerStats:
    """Counters a test, the bench or /metrics can read."""

    decisions: int = 0
    bound: int = 0
    unschedulable: int = 0
    conflicts: int = 0
    errors: int = 0


class SchedulerRunner:
    """Informers + queue + core + binder, in one asyncio loop."""

    def __init__(self, client: AsyncClient, config: SchedulerConfig | None = None, *,
                 bind_concurrency: int = 64, report: bool = True) -> None:
        self.client = client
        self.config = config or SchedulerConfig()
        self.core = SchedulerCore(self.config)
        q = self.config.queue
        self.queue = SchedulingQueue(q.initial_backoff, q.max_backoff, q.unschedulable_flush)
        self.factory = SharedInformerFactory(client)
        self.reporter = Reporter(client, busy=self._binding) if report else None
        self.stats = RunnerStats()
        self.ready = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._bind_slots = asyncio.Semaphore(bind_concurrency)
        self._binds_in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_message: dict[tuple[Kind, str], str] = {}
        #: objects whose bind lost a resourceVersion race -> the stale resourceVersion; the newer
        #: version arriving through the watch sends them straight back to active
        self._stale_binds: dict[tuple[Kind, str], str] = {}
        self._objects: dict[Kind, Informer[Any]] = {}
        # what the watch says about each uid, for pruning pool ledgers
        self._uid_states: dict[Kind, dict[str, str]] = {"machine": {}, "volume": {}}
        self._deleted_uids: dict[Kind, OrderedDict[str, None]] = {"machine": OrderedDict(),
                                                                  "volume": OrderedDict()}
        self.ledger = (PoolLedger(client, self.core.cache, self._uid_state, self.config.assume_ttl)
                       if self.config.pool_ledger else None)
        self._next_sweep = 0.0
        #: volume key -> keys of unscheduled Machines that use it: such a Volume waits for its
        #: Machine, which places both together (like WaitForFirstConsumer)
        self._consumers: dict[str, set[str]] = {}
        self._consumes: dict[str, tuple[str, ...]] = {}

    def _binding(self) -> bool:
        return self._binds_in_flight > 0 or bool(self.queue.stats()["active"])

    # ---- wiring --------------------------------------------------------------------------------
    def _setup(self) -> None:
        for kind, (obj_model, class_model, pool_model) in _MODELS.items():
            self.factory.informer(class_model).add_event_handler(
                on_add=partial(self._on_class, kind), on_update=partial(self._on_class_update, kind),
                on_delete=partial(self._on_class_deleted, kind))
            self.factory.informer(pool_model).add_event_handler(
                on_add=partial(self._on_pool, kind), on_update=partial(self._on_pool_update, kind),
                on_delete=partial(self._on_pool_deleted, kind))
            informer = self.factory.informer(obj_model)
            informer.add_event_handler(
                on_add=partial(self._on_object, kind, None), on_update=partial(self._on_object, kind),
                on_delete=partial(self._on_object_deleted, kind))
            self._objects[kind] = informer

    def _wake(self, keys: set[str]) -> None:
        if keys and self.queue.on_event(keys):
            self._wakeup.set()

    def _on_class(self, kind: Kind, obj: BaseModel) -> None:
        self._wake(self.core.set_class(kind, _doc(obj)))

    def _on_class_update(self, kind: Kind, _old: BaseModel, new: BaseModel) -> None:
        self._on_class(kind, new)

    def _on_class_deleted(self, kind: Kind, obj: BaseModel) -> None:
        self.core.delete_class(kind, str(_doc(obj)["metadata"]["name"]))

    def _on_pool(self, kind: Kind, obj: BaseModel) -> None:
        doc = _doc(obj)
        if self.ledger is not None:
            self.ledger.observe_pool(kind, doc)
        self._wake(self.core.set_pool(kind, doc))

    def _on_pool_update(self, kind: Kind, _old: BaseModel, new: BaseModel) -> None:
        self._on_pool(kind, new)

    def _on_pool_deleted(self, kind: Kind, obj: BaseModel) -> None:
        self.core.delete_pool(kind, str(_doc(obj)["metadata"]["name"]))

    def _track_consumer(self, machine_key: str, volume_names: tuple[str, ...]) -> None:
        ns = machine_key.split("/", 1)[0]
        new = tuple(f"{ns}/{v}" for v in volume_names)
        old = self._consumes.pop(machine_key, ())
        if new:
            self._consumes[machine_key] = new
        for vkey in set(old) - set(new):
            users = self._consumers.get(vkey)
            if users is not None:
                users.discard(machine_key)
                if not users:
                    del self._consumers[vkey]
                    self._wake({f"consumer-gone:{vkey}"})  # the Volume may now go on its own
        for vkey in new:
            self._consumers.setdefault(vkey, set()).add(machine_key)

    def _uid_state(self, kind: Kind, uid: str) -> str | None:
        if uid in self._deleted_uids[kind]:
            return "deleted"
        return self._uid_states[kind].get(uid)

    def _on_object(self, kind: Kind, old: BaseModel | None, new: BaseModel) -> None:
        doc = _doc(new)
        key = object_key(doc)
        uid = str((doc.get("metadata") or {}).get("uid", ""))
        ref = pool_ref_of(kind, doc)
        self._uid_states[kind][uid] = f"bound:{ref}" if ref is not None else "unbound"
        if kind == "machine":
            pending = ref is None and not (doc.get("metadata") or {}).get("deletionTimestamp")
            self._track_consumer(key, request_from_json(kind, doc).volume_names if pending else ())
        if ref is not None:
            self.queue.delete(kind, key)
            self._last_message.pop((kind, key), None)
            self._stale_binds.pop((kind, key), None)
            self._wake(self.core.set_object(kind, doc))
            return
        if (doc.get("metadata") or {}).get("deletionTimestamp"):
            self.queue.delete(kind, key)
            return
        req = request_from_json(kind, doc)
        if kind == "volume":
            self.core.cache.volume_requests[key] = req
        annotations = (doc.get("metadata") or {}).get("annotations") or {}
        if annotations.get(SCHEDULER_NAME_ANNOTATION, "default") != self.config.scheduler_name:
            self.queue.delete(kind, key)  # another scheduler's object
            return
        stale_rv = self._stale_binds.get((kind, key))
        if _significant(old, new) or (
                stale_rv is not None and (doc.get("metadata") or {}).get("resourceVersion") != stale_rv):
            self._stale_binds.pop((kind, key), None)
            self.queue.add(req)
            self._wakeup.set()
        else:
            self.queue.refresh(req)

    def _on_object_deleted(self, kind: Kind, obj: BaseModel) -> None:
        doc = _doc(obj)
        key = object_key(doc)
        uid = str((doc.get("metadata") or {}).get("uid", ""))
        self._uid_states[kind].pop(uid, None)
        deleted = self._deleted_uids[kind]
        deleted[uid] = None
        while len(deleted) > 100_000:
            deleted.popitem(last=False)
        if kind == "machine":
            self._track_consumer(key, ())
        placed = self.core.cache.placements.get((kind, key))
        if self.ledger is not None and placed is not None:
            pool = self.core.cache.pools.get((kind, placed.pool))
            if pool is not None and uid in pool.claims:
                self._spawn(self.ledger.prune(kind, placed.pool))
        self.queue.delete(kind, key)
        self._last_message.pop((kind, key), None)
        self._stale_binds.pop((kind, key), None)
        self._wake(self.core.delete_object(kind, key))

    # ---- the loop --------------------------------------------------------------------------------
    async def run(self, stop_event: asyncio.Event) -> None:
        self._setup()
        self.factory.start()
        try:
            await self._wait_synced(stop_event)
            # The synced cache is long-lived: keep full GC passes from walking it on every cycle.
            gc.collect()
            gc.freeze()
            self.ready.set()
            log.info("scheduler ready: %d machine pools, %d volume pools, %d pending",
                     self.core.cache.pool_count("machine"), self.core.cache.pool_count("volume"),
                     len(self.queue))
            handled = 0
            while not stop_event.is_set():
                item = self.queue.pop()
                if item is None:
                    timeout = self.queue.next_ready_in()
                    await self._sleep(stop_event, 1.0 if timeout is None else min(timeout, 1.0))
                    self._expire_assumed()
                    continue
                await self._schedule_one(item)
                handled += 1
                if handled % 32 == 0:
                    await asyncio.sleep(0)  # let the informers and binds run
        finally:
            for task in list(self._tasks):
                task.cancel()
            for task in list(self._tasks):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if self.reporter is not None:
                await self.reporter.stop()
            await self.factory.stop()
            self.core.close()

    async def _wait_synced(self, stop_event: asyncio.Event) -> None:
        sync = asyncio.ensure_future(self.factory.wait_for_sync())
        stop = asyncio.ensure_future(stop_event.wait())
        await asyncio.wait({sync, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not sync.done():
            sync.cancel()

    async def _sleep(self, stop_event: asyncio.Event, timeout: float) -> None:
        self._wakeup.clear()
        if self.queue.next_ready_in() == 0.0:
            return
        waiters = {asyncio.ensure_future(self._wakeup.wait()), asyncio.ensure_future(stop_event.wait())}
        _, pending = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()

    def _sweep_ledgers(self) -> None:
        """Every assume-TTL: prune claims of objects gone, moved or abandoned by a dead binder."""
        now = time.monotonic()
        if self.ledger is None or now < self._next_sweep:
            return
        self._next_sweep = now + self.config.assume_ttl
        wall = time.time()
        for (kind, name), pool in list(self.core.cache.pools.items()):
            for uid, (t, _) in pool.claims.items():
                state = self._uid_state(kind, uid)
                if (state == "deleted" or ((state or "").startswith("bound:") and state != f"bound:{name}")
                        or (state == "unbound" and wall - t > self.config.assume_ttl)):
                    self._spawn(self.ledger.prune(kind, name))
                    break

    def _expire_assumed(self) -> None:
        self._sweep_ledgers()
        for placement in self.core.cache.cleanup_expired(time.monotonic()):
            log.warning("%s %s: binding to %s never showed up; retrying", placement.kind, placement.key,
                        placement.pool)
            current = self._objects[placement.kind].get(placement.key)
            if current is not None:
                doc = _doc(current)
                if pool_ref_of(placement.kind, doc) is None:
                    self.queue.add(request_from_json(placement.kind, doc))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _schedule_one(self, item: QueuedItem) -> None:
        req = item.request
        if (req.kind, req.key) in self.core.cache.placements:
            self.queue.done(item)  # already placed, together with the Machine that uses it
            return
        if req.kind == "volume" and req.key in self._consumers:
            users = ", ".join(sorted(self._consumers[req.key]))
            self.queue.unschedulable(item, f"waiting for Machine {users} (placed together)",
                                     frozenset({f"consumer-gone:{req.key}"}))
            return
        self.stats.decisions += 1
        decision = self.core.schedule(req)
        if decision.pool is None:
            self.stats.unschedulable += 1
            self.queue.unschedulable(item, decision.message, decision.wake)
            k = (req.kind, req.key)
            if self._last_message.get(k) != decision.message:
                self._last_message[k] = decision.message
                if self.reporter is not None and req.obj is not None:
                    self.reporter.submit(req.kind, req.obj, False, "FailedScheduling", decision.message)
            return
        await self._bind_slots.acquire()
        self._binds_in_flight += 1
        self._spawn(self._bind(item, decision))

    # ---- binding --------------------------------------------------------------------------------
    async def _patch_ref(self, kind: Kind, req_key: str, rv: str, pool: str) -> dict[str, Any]:
        ns, _, name = req_key.partition("/")
        info = resource_for_model(_MODELS[kind][0])
        patch = {"metadata": {"resourceVersion": rv}, "spec": {_REF_FIELD[kind]: {"name": pool}}}
        return await self.client.patch_raw(info, name, patch, ns or None)

    async def _bind(self, item: QueuedItem, decision: Decision) -> None:
        req = decision.request
        assert decision.pool is not None
        claimed: list[tuple[Kind, str, str]] = []
        colocated = decision.state.data.get("colocated", []) if decision.state is not None else []
        try:
            if self.ledger is not None:
                for vol, vpool in colocated:
                    await self.ledger.claim("volume", vpool, vol.uid, {"storage": vol.storage})
                    claimed.append(("volume", vpool, vol.uid))
                demand = decision.state.demand if decision.state is not None else {}
                await self.ledger.claim(req.kind, decision.pool, req.uid, demand)
                claimed.append((req.kind, decision.pool, req.uid))
            for vol, vpool in colocated:
                await self._patch_ref("volume", vol.key, vol.resource_version, vpool)
            bound = await self._patch_ref(req.kind, req.key, req.resource_version, decision.pool)
        except ClaimRejected as exc:
            self.stats.conflicts += 1
            self._release(claimed)
            self.core.unreserve(decision)
            self.queue.backoff(item, str(exc))
        except Conflict:
            self._release(claimed)
            self.stats.conflicts += 1
            self.core.unreserve(decision)
            self.queue.backoff(item, "conflict while binding")
            self._requeue_if_changed(req.kind, req.key, req.resource_version)
        except NotFound:
            self._release(claimed)
            self.core.unreserve(decision)
            self.queue.delete(req.kind, req.key)
            self.queue.done(item)
        except Exception as exc:
            self._release(claimed)
            self.stats.errors += 1
            log.warning("binding %s %s to %s failed: %s", req.kind, req.key, decision.pool, exc)
            self.core.unreserve(decision)
            self.queue.backoff(item, str(exc))
        else:
            self.stats.bound += 1
            now = time.monotonic()
            self.core.cache.finish_binding(req.kind, req.key, now)
            for vol, _ in colocated:
                self.core.cache.finish_binding("volume", vol.key, now)
            self.queue.done(item)
            self._last_message.pop((req.kind, req.key), None)
            if self.reporter is not None:
                self.reporter.submit(req.kind, bound, True, "Scheduled",
                                     f"Successfully assigned {req.key} to {decision.pool}")
        finally:
            self._binds_in_flight -= 1
            self._bind_slots.release()
            self._wakeup.set()

    def _release(self, claimed: list[tuple[Kind, str, str]]) -> None:
        if self.ledger is not None:
            for kind, pool, uid in claimed:
                self._spawn(self.ledger.release(kind, pool, uid))

    def _requeue_if_changed(self, kind: Kind, key: str, rv: str) -> None:
        """A conflict because the object changed (often our own status write): retry at once if the
        watch already brought the newer version, else as soon as it does (see ``_on_object``)."""
        current = self._objects[kind].get(key)
        if current is None:
            return
        doc = _doc(current)
        if pool_ref_of(kind, doc) is not None:
            return
        if (doc.get("metadata") or {}).get("resourceVersion") != rv:
            self.queue.add(request_from_json(kind, doc))
        else:
            self._stale_binds[(kind, key)] = rv


async def run_scheduler(client: AsyncClient, config: SchedulerConfig | None, stop_event: asyncio.Event,
                        **options: Any) -> None:
    """Run the scheduler until ``stop_event`` is set (used by ``ironpool scheduler`` and ``ironpool up``)."""
    await SchedulerRunner(client, config, **options).run(stop_event)
