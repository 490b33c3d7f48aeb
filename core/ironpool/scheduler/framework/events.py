"""Cluster events: the changes that can make a parked Machine or Volume schedulable again.

This is kube-scheduler's ``ClusterEvent`` / ``EnqueueExtensions`` / ``QueueingHint`` design. A plugin
that rejects an object says in its :class:`~ironpool.scheduler.framework.interface.Status` which
changes could make it accept the object, each as a :class:`ClusterEventWithHint`: a resource, the
actions on it, and optionally a *queueing hint*, a cheap check of the changed object against the
request ("does this new pool offer the class the Machine needs?"). The scheduler core turns every
informer event into an observed :class:`ClusterEvent` carrying the changed object; the scheduling
queue moves a parked object back to active only when one of its wake-ups matches the event and its
hint says yes. A hint that raises counts as yes: an object must never stay parked by mistake.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ironpool.scheduler.model import SchedulingRequest

log = logging.getLogger(__name__)


class EventResource(enum.Enum):
    """What changed. The observed event's ``obj`` is named after each member."""

    #: a MachinePool or VolumePool (obj: the new ``PoolInfo``)
    POOL = "Pool"
    #: a MachineClass or VolumeClass (obj: the new ``ClassInfo``)
    CLASS = "Class"
    #: a Machine or Volume counted on a pool, kube's "assigned Pod" (obj: the ``Placement``)
    PLACEMENT = "Placement"
    #: a pending Machine's use of a Volume (obj: the Volume's ``namespace/name``)
    CONSUMER = "Consumer"
    #: a Reservation (obj: its ``namespace/name``)
    RESERVATION = "Reservation"


class ActionType(enum.Flag):
    """How it changed; registrations combine flags, an observed update names the fields that changed."""

    ADD = enum.auto()
    DELETE = enum.auto()
    UPDATE_READY = enum.auto()
    #: labels, hence also the zone and host a pool is on
    UPDATE_LABEL = enum.auto()
    UPDATE_TAINT = enum.auto()
    UPDATE_ALLOCATABLE = enum.auto()
    #: the classes a pool offers
    UPDATE_OFFER = enum.auto()
    #: the resources a class demands
    UPDATE_DEMAND = enum.auto()
    UPDATE = UPDATE_READY | UPDATE_LABEL | UPDATE_TAINT | UPDATE_ALLOCATABLE | UPDATE_OFFER | UPDATE_DEMAND
    ALL = ADD | DELETE | UPDATE


#: ``hint(request, changed object)``: True if the change may make the request schedulable
QueueingHintFn = Callable[["SchedulingRequest", Any], bool]


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change in the cluster: registered by plugins as a pattern, observed with the changed object."""

    resource: EventResource
    action: ActionType
    #: the changed object (observed events only; not part of equality)
    obj: Any = field(default=None, compare=False)

    def matches(self, observed: ClusterEvent) -> bool:
        return self.resource is observed.resource and bool(self.action & observed.action)


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    """One wake-up of a rejection: the event pattern, and the hint that filters its occurrences."""

    event: ClusterEvent
    hint: QueueingHintFn | None = None

    def wakes(self, request: SchedulingRequest, observed: ClusterEvent) -> bool:
        """Whether ``observed`` may make ``request`` schedulable again."""
        if not self.event.matches(observed):
            return False
        if self.hint is None:
            return True
        try:
            return bool(self.hint(request, observed.obj))
        except Exception:  # a broken hint must not keep the object parked
            log.exception("queueing hint %r failed; requeueing %s", self.hint, request.key)
            return True


def on(resource: EventResource, action: ActionType,
       hint: QueueingHintFn | None = None) -> ClusterEventWithHint:
    """Shorthand for plugins: ``on(POOL, ADD | UPDATE_READY, hint)``."""
    return ClusterEventWithHint(ClusterEvent(resource, action), hint)


def same_kind(request: SchedulingRequest, obj: Any) -> bool:
    """Hint: the changed pool, class or placement is of the request's kind (Machine or Volume)."""
    return bool(obj.kind == request.kind)
