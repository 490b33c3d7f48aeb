"""SchedulingQueue: ordering, backoff, parking by wake-ups (cluster events and their hints), move
cycle, flush."""

from __future__ import annotations

from ironpool.scheduler.cache import Placement
from ironpool.scheduler.framework.events import ActionType, ClusterEvent, EventResource, on
from ironpool.scheduler.framework.profile import CLASS_CREATED
from ironpool.scheduler.model import PRIORITY_ANNOTATION, class_from_json, pool_from_json, request_from_json
from ironpool.scheduler.plugins.class_available import ClassAvailable
from ironpool.scheduler.plugins.resources_fit import ResourcesFit
from ironpool.scheduler.queue import SchedulingQueue

from tests.scheduler.sched_docs import machine, machine_class, machine_pool

# The wake-ups in the statuses of the framework and the plugins: a class appearing, a pool offering
# the class, and room (a pool added or grown, or an object leaving one).
CLASS_APPEARS = CLASS_CREATED
(OFFERED,) = ClassAvailable().events_to_register()
MORE_POOL, FREED, _RELEASED = ResourcesFit().events_to_register()
ANY_POOL_CHANGE = on(EventResource.POOL, ActionType.ADD | ActionType.UPDATE)


def class_added(name: str) -> ClusterEvent:
    info = class_from_json("machine", machine_class(name, 1, "1Gi"))
    return ClusterEvent(EventResource.CLASS, ActionType.ADD, info)


def pool_event(action: ActionType, classes: list[str] | None) -> ClusterEvent:
    info = pool_from_json("machine", machine_pool("p", 8, "8Gi", classes=classes))
    return ClusterEvent(EventResource.POOL, action, info)


MACHINE_FREED = ClusterEvent(EventResource.PLACEMENT, ActionType.DELETE,
                             Placement("machine", "default/z", "p", "x", {}))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def req(name: str, priority: int = 0):  # type: ignore[no-untyped-def]
    return request_from_json("machine", machine(name, "x", annotations={PRIORITY_ANNOTATION: str(priority)}))


def make(clock: FakeClock, **kw: float) -> SchedulingQueue:
    return SchedulingQueue(clock=clock, **kw)


def test_priority_then_age() -> None:
    clock = FakeClock()
    q = make(clock)
    for name, prio in (("old-low", 0), ("high", 5), ("new-low", 0)):
        q.add(req(name, prio))
        clock.now += 1
    order = []
    while (item := q.pop()) is not None:
        order.append(item.request.key)
        q.done(item)
    assert order == ["default/high", "default/old-low", "default/new-low"]


def test_backoff_doubles_up_to_the_cap() -> None:
    clock = FakeClock()
    q = make(clock, initial_backoff=1.0, max_backoff=10.0)
    q.add(req("a"))
    waits = []
    for _ in range(6):
        item = q.pop()
        assert item is not None
        q.backoff(item, "conflict")
        assert q.pop() is None
        wait = q.next_ready_in()
        assert wait is not None
        waits.append(wait)
        clock.now += wait
    assert waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_parked_objects_wake_only_on_matching_events() -> None:
    clock = FakeClock()
    q = make(clock, unschedulable_flush=1e9)
    q.add(req("needs-x"))
    q.add(req("needs-room"))
    a, b = q.pop(), q.pop()
    assert a is not None and b is not None
    q.unschedulable(a, "class x not found", (CLASS_APPEARS,))
    q.unschedulable(b, "too little memory", (MORE_POOL, FREED))
    assert q.stats()["unschedulable"] == 2
    assert q.on_event(class_added("y")) == 0
    assert q.on_event(pool_event(ActionType.UPDATE_OFFER, ["y"])) == 0
    assert q.on_event(MACHINE_FREED) == 1
    woken = q.pop()
    assert woken is not None and woken.request.key == "default/needs-room"
    assert q.pop() is None
    assert q.on_event(class_added("x")) == 1
    woken = q.pop()
    assert woken is not None and woken.request.key == "default/needs-x"


def test_offer_any_wakes_objects_waiting_for_any_offer() -> None:
    clock = FakeClock()
    q = make(clock, unschedulable_flush=1e9)
    q.add(req("a"))
    item = q.pop()
    assert item is not None
    q.unschedulable(item, "no pool offers x", (OFFERED,))
    # a pool without a class list offers every class
    assert q.on_event(pool_event(ActionType.UPDATE_OFFER | ActionType.UPDATE_LABEL, None)) == 1


def test_event_during_attempt_sends_failure_to_backoff_not_parking() -> None:
    clock = FakeClock()
    q = make(clock, unschedulable_flush=1e9)
    q.add(req("a"))
    item = q.pop()
    assert item is not None
    q.on_event(pool_event(ActionType.ADD, ["x"]))  # a pool appeared while we were deciding
    q.unschedulable(item, "nothing fits", (ANY_POOL_CHANGE,))
    assert q.stats()["unschedulable"] == 0 and q.stats()["backoff"] == 1


def test_flush_retries_objects_parked_too_long_and_delete_forgets() -> None:
    clock = FakeClock()
    q = make(clock, unschedulable_flush=60.0)
    q.add(req("a"))
    q.add(req("b"))
    for _ in range(2):
        item = q.pop()
        assert item is not None
        q.unschedulable(item, "nothing fits", (ANY_POOL_CHANGE,))
    q.delete("machine", "default/b")
    assert q.next_ready_in() == 60.0
    clock.now += 60
    item = q.pop()
    assert item is not None and item.request.key == "default/a"
    assert q.pop() is None
    assert len(q) == 1


def test_update_while_in_flight_requeues_the_new_version() -> None:
    clock = FakeClock()
    q = make(clock, unschedulable_flush=1e9)
    q.add(req("a"))
    item = q.pop()
    assert item is not None
    newer = req("a", priority=3)
    q.add(newer)
    q.unschedulable(item, "nothing fits", (ANY_POOL_CHANGE,))
    again = q.pop()
    assert again is not None and again.request is newer
