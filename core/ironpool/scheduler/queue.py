"""The scheduling queue, as kube-scheduler's: active heap, backoff queue, unschedulable set.

* active: a heap ordered by priority (higher first), then by when the object first queued (older first);
* backoff: objects whose attempt failed for a transient reason (a bind conflict, an API error) wait
  ``initial_backoff · 2^(attempts-1)`` seconds, capped at ``max_backoff``;
* unschedulable: objects no pool could take, parked with the *wake-ups* of the statuses that refused
  them (see framework/events.py): which cluster events could change that, each with a queueing hint.
  Parked objects are indexed by (resource, action), so an event looks only at the objects waiting
  for that kind of change, and moves back to active those whose hint accepts the changed object
  (kube's QueueingHint); ``unschedulable_flush`` is the safety net that re-tries everything parked
  that long (kube's podMaxInUnschedulablePodsDuration).

If an event arrives while an object is being scheduled, a failure of that attempt goes to backoff
rather than being parked, so the event is not lost (kube's moveRequestCycle).
The queue is a plain data structure with an injectable clock; the runner adds the waiting.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from ironpool.scheduler.framework.events import ActionType, ClusterEvent, ClusterEventWithHint, EventResource
from ironpool.scheduler.model import Kind, SchedulingRequest

QueueKey = tuple[Kind, str]


@dataclass(slots=True)
class QueuedItem:
    """One pending object and its scheduling history."""

    request: SchedulingRequest
    first_queued: float
    attempts: int = 0
    last_failure: float = 0.0
    message: str = ""
    #: the move cycle at the time the item was popped
    popped_cycle: int = -1
    #: while parked: the cluster events that can make it schedulable
    wakeups: tuple[ClusterEventWithHint, ...] = ()

    @property
    def key(self) -> QueueKey:
        return (self.request.kind, self.request.key)


class SchedulingQueue:
    """Active heap + backoff heap + unschedulable set indexed by the events that can wake them."""

    def __init__(self, initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 unschedulable_flush: float = 300.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.unschedulable_flush = unschedulable_flush
        self.clock = clock
        self._seq = itertools.count()
        self._items: dict[QueueKey, QueuedItem] = {}
        self._active: list[tuple[int, float, int, QueueKey]] = []
        self._active_seq: dict[QueueKey, int] = {}
        self._backoff: list[tuple[float, int, QueueKey]] = []
        self._backoff_seq: dict[QueueKey, int] = {}
        self._parked: dict[QueueKey, float] = {}
        self._wake_index: dict[tuple[EventResource, ActionType], set[QueueKey]] = {}
        self._in_flight: dict[QueueKey, QueuedItem] = {}
        #: requests that changed while in flight: re-queued when the attempt ends
        self._dirty: dict[QueueKey, SchedulingRequest] = {}
        self.move_cycle = 0

    # ---- producers ----------------------------------------------------------------------------
    def add(self, req: SchedulingRequest) -> None:
        """A new or changed unscheduled object: (re)queue it in active."""
        k = (req.kind, req.key)
        if k in self._in_flight:
            self._dirty[k] = req
            return
        item = self._items.get(k)
        if item is None:
            item = self._items[k] = QueuedItem(req, self.clock())
        else:
            item.request = req
            self._unpark(k)
            self._backoff_seq.pop(k, None)
        self._push_active(item)

    def refresh(self, req: SchedulingRequest) -> None:
        """A newer version that does not change the decision (e.g. a status write): keep its place."""
        k = (req.kind, req.key)
        item = self._items.get(k)
        if item is None:
            self.add(req)
        elif k in self._in_flight:
            item.request = req if k not in self._dirty else item.request
        else:
            item.request = req

    def delete(self, kind: Kind, key: str) -> None:
        """The object was deleted or got bound by someone else: forget it everywhere."""
        k = (kind, key)
        self._unpark(k)
        self._items.pop(k, None)
        self._active_seq.pop(k, None)
        self._backoff_seq.pop(k, None)
        self._dirty.pop(k, None)
        # an in-flight item is dropped when its attempt ends (done/requeue see it is gone)

    def on_event(self, event: ClusterEvent) -> int:
        """A cluster event: move the parked objects it may help to active. Returns how many."""
        self.move_cycle += 1
        waiting: set[QueueKey] = set()
        for action in event.action:
            waiting |= self._wake_index.get((event.resource, action), set())
        hit = [k for k in waiting
               if any(w.wakes(self._items[k].request, event) for w in self._items[k].wakeups)]
        for k in sorted(hit, key=lambda k: self._items[k].first_queued):
            self._unpark(k)
            self._push_active(self._items[k])
        return len(hit)

    # ---- consumer -----------------------------------------------------------------------------
    def pop(self) -> QueuedItem | None:
        """The next object to schedule, or None if nothing is ready now."""
        self.flush()
        while self._active:
            _, _, seq, k = heapq.heappop(self._active)
            if self._active_seq.get(k) != seq:
                continue  # superseded entry
            del self._active_seq[k]
            item = self._items[k]
            item.popped_cycle = self.move_cycle
            self._in_flight[k] = item
            return item
        return None

    def done(self, item: QueuedItem) -> None:
        """Scheduled (bound): the object leaves the queue, unless it changed meanwhile."""
        k = item.key
        self._in_flight.pop(k, None)
        self._items.pop(k, None)
        self._dirty.pop(k, None)

    def unschedulable(self, item: QueuedItem, message: str,
                      wakeups: tuple[ClusterEventWithHint, ...]) -> None:
        """No pool fits: park the object under the events that could change that."""
        k = item.key
        if not self._finish(item):
            return
        item.attempts += 1
        item.last_failure = self.clock()
        item.message = message
        item.wakeups = wakeups
        if self.move_cycle != item.popped_cycle:
            self._push_backoff(item)  # something moved while we were deciding: try again soon
            return
        self._parked[k] = item.last_failure
        for wk in _index_keys(wakeups):
            self._wake_index.setdefault(wk, set()).add(k)

    def backoff(self, item: QueuedItem, message: str = "") -> None:
        """A transient failure (bind conflict, API error): retry after the backoff."""
        if not self._finish(item):
            return
        item.attempts += 1
        item.last_failure = self.clock()
        item.message = message
        self._push_backoff(item)

    def flush(self) -> None:
        """Move finished backoffs to active, and objects parked too long back to active."""
        now = self.clock()
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, k = heapq.heappop(self._backoff)
            if self._backoff_seq.get(k) == seq:
                del self._backoff_seq[k]
                self._push_active(self._items[k])
        if self._parked:
            stale = [k for k, t in self._parked.items() if now - t >= self.unschedulable_flush]
            for k in stale:
                self._unpark(k)
                self._push_active(self._items[k])

    def next_ready_in(self) -> float | None:
        """Seconds until something becomes ready without an event (0 if active now), or None."""
        if self._active_seq:
            return 0.0
        now = self.clock()
        while self._backoff and self._backoff_seq.get(self._backoff[0][2]) != self._backoff[0][1]:
            heapq.heappop(self._backoff)  # drop superseded entries
        candidates = [self._backoff[0][0]] if self._backoff else []
        if self._parked:
            candidates.append(min(self._parked.values()) + self.unschedulable_flush)
        return max(0.0, min(candidates) - now) if candidates else None

    # ---- introspection ------------------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        return {"active": len(self._active_seq), "backoff": len(self._backoff_seq),
                "unschedulable": len(self._parked), "in_flight": len(self._in_flight)}

    def is_parked(self, kind: Kind, key: str) -> bool:
        return (kind, key) in self._parked

    def __len__(self) -> int:
        return len(self._items)

    # ---- internals ----------------------------------------------------------------------------
    def _finish(self, item: QueuedItem) -> bool:
        """End an attempt; False if the object is gone or changed (then it is re-queued fresh)."""
        k = item.key
        self._in_flight.pop(k, None)
        if k not in self._items:
            return False
        changed = self._dirty.pop(k, None)
        if changed is not None:
            item.request = changed
            self._push_active(item)
            return False
        return True

    def _push_active(self, item: QueuedItem) -> None:
        k = item.key
        seq = next(self._seq)
        self._active_seq[k] = seq
        heapq.heappush(self._active, (-item.request.priority, item.first_queued, seq, k))

    def _push_backoff(self, item: QueuedItem) -> None:
        k = item.key
        delay = min(self.max_backoff, self.initial_backoff * (2 ** max(0, item.attempts - 1)))
        seq = next(self._seq)
        self._backoff_seq[k] = seq
        heapq.heappush(self._backoff, (self.clock() + delay, seq, k))

    def _unpark(self, k: QueueKey) -> None:
        if self._parked.pop(k, None) is None:
            return
        item = self._items.get(k)
        for wk in _index_keys(item.wakeups) if item is not None else ():
            ks = self._wake_index.get(wk)
            if ks is not None:
                ks.discard(k)
                if not ks:
                    del self._wake_index[wk]


def _index_keys(wakeups: tuple[ClusterEventWithHint, ...]) -> set[tuple[EventResource, ActionType]]:
    return {(w.event.resource, action) for w in wakeups for action in w.event.action}
