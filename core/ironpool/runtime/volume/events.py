"""A bounded in-memory event log answering IRI ``ListEvents`` (lost on restart, like IronCore's)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RuntimeEvent:
    """One event about one object; ``event_time`` is Unix seconds as IRI wants."""

    object_id: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    reason: str
    message: str
    type: str  # "Normal" | "Warning"
    action: str
    event_time: int = field(default_factory=lambda: int(time.time()))


class EventLog:
    """Keeps the newest ``capacity`` events."""

    def __init__(self, capacity: int = 1000) -> None:
        self._events: deque[RuntimeEvent] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def record(self, event: RuntimeEvent) -> None:
        with self._lock:
            self._events.append(event)

    def list(
        self,
        object_id: str = "",
        selector: Mapping[str, str] | None = None,
        from_time: int = 0,
        to_time: int = 0,
    ) -> list[RuntimeEvent]:
        with self._lock:
            events = list(self._events)
        return [
            e
            for e in events
            if (not object_id or e.object_id == object_id)
            and all(e.labels.get(k) == v for k, v in (selector or {}).items())
            and (not from_time or e.event_time >= from_time)
            and (not to_time or e.event_time <= to_time)
        ]
