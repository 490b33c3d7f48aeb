"""Informer event handlers: what the scheduler does with each change it watches (kube-scheduler's
``eventhandlers.go``).

One raw informer per resource keeps the JSON documents as the apiserver sent them; each event is
decoded once, by the core, into the scheduler's own dataclasses. One informer per kind watches all
Machines (and Volumes): bound ones feed the cache, unbound ones the queue, so a single watch keeps
both views consistent when an object moves from one to the other. Every change the core turns into
a cluster event goes to the queue, which moves the parked objects that event may help back to active.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import BaseModel

from ironpool.api import Machine, MachineClass, MachinePool, Volume, VolumeClass, VolumePool
from ironpool.api.compute import Reservation
from ironpool.api.meta import object_key
from ironpool.client.informer import RawInformer, SharedInformerFactory, without_managed_fields
from ironpool.scheduler.binding import Binder
from ironpool.scheduler.config import SchedulerConfig
from ironpool.scheduler.core import SchedulerCore
from ironpool.scheduler.framework.events import ClusterEvent
from ironpool.scheduler.model import (
    SCHEDULER_NAME_ANNOTATION,
    Kind,
    pool_ref_of,
    request_from_json,
    reservation_of,
)
from ironpool.scheduler.queue import SchedulingQueue
from ironpool.scheduler.reporting import Reporter
from ironpool.scheduler.reservation_controller import ReservationController

log = logging.getLogger(__name__)
Doc = dict[str, Any]
_MODELS: dict[Kind, tuple[type[BaseModel], type[BaseModel], type[BaseModel]]] = {
    "machine": (Machine, MachineClass, MachinePool),
    "volume": (Volume, VolumeClass, VolumePool),
}


def _meta(doc: Doc) -> Doc:
    return doc.get("metadata") or {}


def _significant(old: Doc | None, new: Doc) -> bool:
    """Whether an update to an unscheduled object could change its decision (not a status write)."""
    if old is None:
        return True
    o, n = _meta(old), _meta(new)
    return bool(old.get("spec") != new.get("spec") or o.get("labels") != n.get("labels")
                or o.get("annotations") != n.get("annotations"))


class EventHandlers:
    """Feeds the core and the queue from the informers; ``wake`` tells the loop there is work."""

    def __init__(self, core: SchedulerCore, queue: SchedulingQueue, binder: Binder, reporter: Reporter | None,
                 config: SchedulerConfig, wake: Callable[[], None],
                 reservations: ReservationController | None = None) -> None:
        self.core = core
        self.queue = queue
        self.binder = binder
        self.reporter = reporter
        self.config = config
        self.wake = wake
        self.reservations = reservations
        self.objects: dict[Kind, RawInformer] = {}

    def register(self, factory: SharedInformerFactory) -> None:
        reservations = factory.raw_informer(Reservation)
        reservations.set_transform(without_managed_fields)
        reservations.add_event_handler(on_add=self.on_reservation,
                                       on_update=lambda _old, new: self.on_reservation(new),
                                       on_delete=self.on_reservation_deleted)
        for kind, models in _MODELS.items():
            for model in models:  # no handler reads who last wrote which field
                factory.raw_informer(model).set_transform(without_managed_fields)
            obj_model, class_model, pool_model = models
            factory.raw_informer(class_model).add_event_handler(
                on_add=partial(self.on_class, kind), on_update=partial(self._on_update, self.on_class, kind),
                on_delete=partial(self.on_class_deleted, kind))
            factory.raw_informer(pool_model).add_event_handler(
                on_add=partial(self.on_pool, kind), on_update=partial(self._on_update, self.on_pool, kind),
                on_delete=partial(self.on_pool_deleted, kind))
            informer = factory.raw_informer(obj_model)
            informer.add_event_handler(
                on_add=partial(self.on_object, kind, None), on_update=partial(self.on_object, kind),
                on_delete=partial(self.on_object_deleted, kind))
            self.objects[kind] = informer

    def current(self, kind: Kind, key: str) -> Doc | None:
        """The object as the watch last showed it."""
        informer = self.objects.get(kind)
        return informer.get(key) if informer is not None else None

    def _events(self, events: list[ClusterEvent]) -> None:
        moved = 0
        for event in events:
            moved += self.queue.on_event(event)
        if moved:
            self.wake()

    @staticmethod
    def _on_update(handler: Callable[[Kind, Doc], None], kind: Kind, _old: Doc, new: Doc) -> None:
        handler(kind, new)

    # ---- classes and pools ------------------------------------------------------------------------
    def on_class(self, kind: Kind, doc: Doc) -> None:
        self._events(self.core.set_class(kind, doc))

    def on_class_deleted(self, kind: Kind, doc: Doc) -> None:
        self.core.delete_class(kind, str(_meta(doc).get("name", "")))

    def on_pool(self, kind: Kind, doc: Doc) -> None:
        self._events(self.core.set_pool(kind, doc))

    def on_pool_deleted(self, kind: Kind, doc: Doc) -> None:
        self.core.delete_pool(kind, str(_meta(doc).get("name", "")))

    # ---- Reservations ------------------------------------------------------------------------------
    def on_reservation(self, doc: Doc) -> None:
        try:
            info, events = self.core.set_reservation(doc)
        except ValueError as exc:  # validation keeps these out; a foreign writer might not
            log.warning("reservation %s: %s", object_key(doc), exc)
            return
        self._events(events)
        if self.reservations is not None:
            self.reservations.observe(info)

    def on_reservation_deleted(self, doc: Doc) -> None:
        key = object_key(doc)
        self._events(self.core.delete_reservation(key))
        if self.reservations is not None:
            self.reservations.forget(key)

    def _within_changed(self, kind: Kind, doc: Doc) -> None:
        reservation = reservation_of(kind, doc)
        if reservation is not None and self.reservations is not None:
            self.reservations.placements_changed(reservation)

    # ---- Machines and Volumes ---------------------------------------------------------------------
    def _settled(self, kind: Kind, key: str) -> None:
        """The object needs no decision any more (bound, or going away)."""
        self.queue.delete(kind, key)
        self.binder.forget(kind, key)
        if self.reporter is not None:
            self.reporter.forget(kind, key)

    def on_object(self, kind: Kind, old: Doc | None, doc: Doc) -> None:
        key = object_key(doc)
        if pool_ref_of(kind, doc) is not None:
            self._settled(kind, key)
            self._events(self.core.set_object(kind, doc))
            self._within_changed(kind, doc)
            return
        if _meta(doc).get("deletionTimestamp"):
            self._settled(kind, key)
            self._events(self.core.forget_pending(kind, key))
            return
        placed = self.core.cache.placements.get((kind, key))
        if placed is not None and not placed.assumed:
            # Evicted (the watch showed it bound, now its pool reference is cleared): its charge leaves
            # the old pool before it is placed again. An assumed placement is our own bind in flight.
            self._events(self.core.delete_object(kind, key))
        req = request_from_json(kind, doc)
        self._events(self.core.set_pending(req))
        annotations = _meta(doc).get("annotations") or {}
        if annotations.get(SCHEDULER_NAME_ANNOTATION, "default") != self.config.scheduler_name:
            self.queue.delete(kind, key)  # another scheduler's object
            return
        newer = self.binder.newer_version(kind, key, req.resource_version)
        if _significant(old, doc) or newer:
            self.queue.add(req)
            self.wake()
        else:
            self.queue.refresh(req)

    def on_object_deleted(self, kind: Kind, doc: Doc) -> None:
        key = object_key(doc)
        self._settled(kind, key)
        self._events(self.core.delete_object(kind, key))
        self._within_changed(kind, doc)
