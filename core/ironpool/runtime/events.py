"""Runtime events answering IRI ``ListEvents``: a bounded, time-limited ring in memory.

IronCore's providers keep events the same way (a maximum count and a time to live) and lose them
on restart; both runtimes use this ring and convert events with :func:`event_message`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ironpool.iri.gen.event.v1alpha1 import api_pb2 as event_pb2
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.meta.v1alpha1 import api_pb2 as meta_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2

from .metadata import matches_labels


@dataclass(frozen=True)
class RuntimeEvent:
    """One event about one machine or volume, with a snapshot of its metadata at the time.

    ``object_id`` is empty for a request that failed before an object was made.
    """

    object_id: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    reason: str
    message: str
    type: str  # "Normal" | "Warning"
    action: str
    created_at: int = 0  # Unix ns of the object
    event_time: int = field(default_factory=lambda: int(time.time()))  # Unix seconds, as IRI wants


class EventRing:
    """Thread-safe ring: at most ``max_events`` events, each kept for ``ttl`` seconds."""

    def __init__(
        self, max_events: int = 100, ttl: float = math.inf, clock: Callable[[], float] = time.time
    ) -> None:
        if max_events <= 0:
            raise ValueError(f"max_events: must be positive, not {max_events}")
        self._events: deque[RuntimeEvent] = deque(maxlen=max_events)
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()

    def add(self, event: RuntimeEvent) -> None:
        with self._lock:
            self._events.append(event)

    def list(
        self,
        object_id: str = "",
        label_selector: Mapping[str, str] | None = None,
        from_time: int = 0,
        to_time: int = 0,
    ) -> list[RuntimeEvent]:
        """Events matching the filter, oldest first; times are Unix seconds, 0 = unbounded."""
        cutoff = self._clock() - self._ttl
        with self._lock:
            while self._events and self._events[0].event_time < cutoff:
                self._events.popleft()
            events = list(self._events)
        selector = dict(label_selector or {})
        return [
            e
            for e in events
            if (not object_id or e.object_id == object_id)
            and matches_labels(e.labels, selector)
            and (not from_time or e.event_time >= from_time)
            and (not to_time or e.event_time <= to_time)
        ]


def event_message(event: RuntimeEvent) -> event_pb2.Event:
    """The IRI ``Event`` of ``event`` (the same message type for machines and volumes)."""
    meta = meta_pb2.ObjectMetadata(
        id=event.object_id, labels=event.labels, annotations=event.annotations, created_at=event.created_at
    )
    return event_pb2.Event(
        spec=event_pb2.EventSpec(
            involved_object_meta=meta,
            reason=event.reason,
            message=event.message,
            type=event.type,
            event_time=event.event_time,
            action=event.action,
        )
    )


def listed_events(
    ring: EventRing, flt: machine_pb2.EventFilter | volume_pb2.EventFilter
) -> list[event_pb2.Event]:
    """The events an IRI ``ListEvents`` filter asks for (machine and volume filters are alike)."""
    events = ring.list(flt.id, dict(flt.label_selector), flt.events_from_time, flt.events_to_time)
    return [event_message(e) for e in events]
