"""A bounded, time-limited ring of machine events, as IronCore's providers keep (max count, TTL)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MachineEvent:
    """One event about a machine, with a snapshot of its metadata at the time."""

    machine_id: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    created_at: int  # Unix ns of the machine
    reason: str
    message: str
    type: str  # "Normal" | "Warning"
    action: str
    event_time: int = field(default_factory=lambda: int(time.time()))  # Unix seconds


class EventRing:
    """Thread-safe ring: at most ``max_events`` events, each kept for ``ttl`` seconds."""

    def __init__(self, max_events: int = 100, ttl: float = 300.0, clock: Callable[[], float] = time.time):
        if max_events <= 0:
            raise ValueError(f"max_events: must be positive, not {max_events}")
        self._events: deque[MachineEvent] = deque(maxlen=max_events)
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()

    def add(self, event: MachineEvent) -> None:
        with self._lock:
            self._events.append(event)

    def list(
        self,
        machine_id: str = "",
        label_selector: Mapping[str, str] | None = None,
        from_time: int = 0,
        to_time: int = 0,
    ) -> list[MachineEvent]:
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
            if (not machine_id or e.machine_id == machine_id)
            and all(e.labels.get(k) == v for k, v in selector.items())
            and (not from_time or e.event_time >= from_time)
            and (not to_time or e.event_time <= to_time)
        ]
