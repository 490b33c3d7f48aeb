"""SchedulerCore: accounting, filters, scoring, messages, assume cache (no HTTP)."""

from __future__ import annotations

import pytest
from ironpool.scheduler import SchedulerCore, parse_config
from ironpool.scheduler.cache import Placement
from ironpool.scheduler.config import ConfigError
from ironpool.scheduler.framework.events import ActionType, ClusterEvent, EventResource
from ironpool.scheduler.framework.profile import Decision
from ironpool.scheduler.model import class_from_json, pool_from_json, request_from_json
from ironpool.scheduler.quantity import parse_int_quantity

from tests.scheduler.sched_docs import machine, machine_class, machine_pool, volume, volume_class, volume_pool


def core_with(strategy: str = "LeastAllocated", **profile: object) -> SchedulerCore:
    return SchedulerCore(parse_config({"profiles": [{"name": "p", "strategy": strategy, **profile}]}))


def place(core: SchedulerCore, doc: dict) -> str | None:  # type: ignore[type-arg]
    d = core.schedule(request_from_json("machine", doc))
    if d.pool is not None:
        core.cache.observe_bound(
            "machine", d.request.key, d.pool, d.request.class_name, labels=d.request.labels
        )
    return d.pool


def wakes(decision: Decision, event: ClusterEvent) -> bool:
    """Whether the queue would move the object refused by ``decision`` back to active on ``event``."""
    return any(w.wakes(decision.request, event) for w in decision.wakeups)


POOL, CLASS, PLACEMENT = EventResource.POOL, EventResource.CLASS, EventResource.PLACEMENT
#: a Machine left some pool: resources were freed
MACHINE_FREED = ClusterEvent(PLACEMENT, ActionType.DELETE, Placement("machine", "default/gone", "p", "x", {}))


def test_quantities() -> None:
    assert parse_int_quantity("2", "cpu") == 2000
    assert parse_int_quantity("500m", "cpu") == 500
    assert parse_int_quantity("8Gi", "memory") == 8 * 2**30
    assert parse_int_quantity("1G", "memory") == 10**9
    assert parse_int_quantity(3, "memory") == 3
    with pytest.raises(ValueError, match="memory"):
        parse_int_quantity("lots", "memory")


def test_each_class_is_charged_once_against_total_allocatable() -> None:
    core = core_with()
    core.set_class("machine", machine_class("x", 2, "2Gi"))
    # the informational class count says 0 left: the scheduler must not use (or subtract from) it
    core.set_pool(
        "machine", machine_pool("p1", 8, "8Gi", classes=["x"], extra_allocatable={"class/machine.x": "0"})
    )
    placed = [place(core, machine(f"m{i}", "x")) for i in range(5)]
    assert placed == ["p1", "p1", "p1", "p1", None]
    pool = core.cache.pools[("machine", "p1")]
    assert pool.used == {"cpu": 8000, "memory": 8 * 2**30}


def test_capacity_is_the_fallback_for_allocatable() -> None:
    core = core_with()
    core.set_class("machine", machine_class("x", 4, "4Gi"))
    core.set_pool("machine", machine_pool("p1", 4, "4Gi", classes=["x"], use_capacity=True))
    assert place(core, machine("a", "x")) == "p1"
    assert place(core, machine("b", "x")) is None


def test_failure_message_counts_each_reason() -> None:
    core = core_with()
    core.set_class("machine", machine_class("x", 2, "8Gi"))
    for i in range(3):
        core.set_pool("machine", machine_pool(f"offers-no-x-{i}", 64, "64Gi", classes=["y"]))
    for i in range(2):
        core.set_pool("machine", machine_pool(f"small-{i}", 64, "4Gi", classes=["x"]))
    core.set_pool("machine", machine_pool("down", 64, "64Gi", classes=["x"], ready=False))
    d = core.schedule(request_from_json("machine", machine("m", "x")))
    assert d.pool is None
    assert d.message == "0/6 pools: 3 do not offer class x, 2 have too little memory, 1 not ready"
    assert d.rejectors == {"ClassAvailable", "ResourcesFit", "PoolReady"}
    # woken by a pool that starts to offer x, by freed resources, and by a pool becoming ready
    offers_x = pool_from_json("machine", machine_pool("new", 64, "64Gi", classes=["x"]))
    assert wakes(d, ClusterEvent(POOL, ActionType.UPDATE_OFFER, offers_x))
    assert wakes(d, MACHINE_FREED)
    up = pool_from_json("machine", machine_pool("down", 64, "64Gi", classes=["x"]))
    assert wakes(d, ClusterEvent(POOL, ActionType.UPDATE_READY, up))
    assert not wakes(d, ClusterEvent(POOL, ActionType.UPDATE_READY, core.cache.pools[("machine", "down")]))
    offers_y = pool_from_json("machine", machine_pool("other", 64, "64Gi", classes=["y"]))
    assert not wakes(d, ClusterEvent(POOL, ActionType.UPDATE_OFFER, offers_y))
    # the scan path (tolerations make the index not enough) explains it the same way
    tol = [{"key": "unrelated", "operator": "Exists"}]
    d2 = core.schedule(request_from_json("machine", machine("m2", "x", tolerations=tol)))
    assert d2.message == "0/6 pools: 3 do not offer class x, 2 have too little memory, 1 not ready"


def test_unknown_class_and_no_pools() -> None:
    core = core_with()
    d = core.schedule(request_from_json("machine", machine("m", "ghost")))
    assert d.pool is None and d.message == "machine class ghost not found"
    # only the class appearing can help; the framework refuses it (it cannot know what it demands)
    assert {w.event.resource for w in d.wakeups} == {CLASS} and d.rejectors == frozenset()
    ghost, other = (class_from_json("machine", machine_class(n, 1, "1Gi")) for n in ("ghost", "other"))
    assert wakes(d, ClusterEvent(CLASS, ActionType.ADD, ghost))
    assert not wakes(d, ClusterEvent(CLASS, ActionType.ADD, other))
    core.set_class("machine", machine_class("ghost", 1, "1Gi"))
    d = core.schedule(request_from_json("machine", machine("m", "ghost")))
    assert d.message == "0/0 pools: no machine pools exist"


def test_pool_without_class_list_offers_every_class_that_fits() -> None:
    core = core_with()
    core.set_class("machine", machine_class("x", 2, "2Gi"))
    core.set_pool("machine", machine_pool("open", 4, "4Gi"))
    core.set_pool("machine", machine_pool("listed", 64, "64Gi", classes=[]))
    assert place(core, machine("a", "x")) == "open"
    # class-count keys without a list also define the offer
    core.set_pool("machine", machine_pool("keyed", 64, "64Gi", extra_allocatable={"class/machine.x": "3"}))
    assert core.cache.pools[("machine", "keyed")].offered == frozenset({"x"})


def test_spread_and_binpack_and_name_tie_break() -> None:
    for strategy, expected in (("LeastAllocated", ["a", "b", "a", "b"]), ("MostAllocated", ["a"] * 4)):
        core = core_with(strategy)
        core.set_class("machine", machine_class("x", 1, "1Gi"))
        for name in ("b", "a"):  # insertion order must not matter: ties go to the smaller name
            core.set_pool("machine", machine_pool(name, 8, "8Gi", classes=["x"]))
        assert [place(core, machine(f"m{i}", "x")) for i in range(4)] == expected, strategy


def test_the_index_follows_pools_that_change_after_it_was_built() -> None:
    """A pool's ready/taint verdict is kept for every class until the pool changes; superseded index
    entries (a pool re-keyed by each placement, a pool gone) are never handed out."""
    core = core_with()
    for cls in ("x", "y"):
        core.set_class("machine", machine_class(cls, 1, "1Gi"))
    for name in ("a", "b"):
        core.set_pool("machine", machine_pool(name, 4, "4Gi", classes=["x", "y"]))
    assert [place(core, machine(f"m{i}", "x")) for i in range(3)] == ["a", "b", "a"]  # both classes indexed
    assert place(core, machine("y0", "y")) == "b"
    core.set_pool("machine", machine_pool("b", 4, "4Gi", classes=["x", "y"], ready=False))
    assert [place(core, machine(f"n{i}", c)) for i, c in enumerate("xyx")] == ["a", "a", None]  # a fills up
    core.set_pool("machine", machine_pool("b", 4, "4Gi", classes=["x", "y"]))
    assert [place(core, machine(f"r{i}", c)) for i, c in enumerate("yx")] == ["b", "b"]
    core.delete_pool("machine", "b")
    d = core.schedule(request_from_json("machine", machine("z", "y")))
    assert d.pool is None and d.message == "0/1 pools: 1 have too little cpu"


def test_taints_tolerations_and_selector() -> None:
    core = core_with()
    core.set_class("machine", machine_class("x", 1, "1Gi"))
    core.set_pool(
        "machine",
        machine_pool(
            "tainted",
            64,
            "64Gi",
            classes=["x"],
            taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}],
        ),
    )
    core.set_pool("machine", machine_pool("plain", 2, "2Gi", classes=["x"], labels={"tier": "b"}))
    assert place(core, machine("a", "x")) == "plain"
    tol = [{"key": "gpu", "operator": "Exists"}]
    assert place(core, machine("b", "x", tolerations=tol)) == "tainted"  # emptier, and tolerated
    assert place(core, machine("c", "x", selector={"tier": "b"})) == "plain"
    d = core.schedule(request_from_json("machine", machine("d", "x", selector={"tier": "b"})))
    assert d.pool is None
    assert d.message == "0/2 pools: 1 have taints the object does not tolerate, 1 have too little cpu"


def test_assume_forget_and_expire() -> None:
    core = core_with()
    core.set_class("machine", machine_class("x", 4, "4Gi"))
    core.set_pool("machine", machine_pool("p", 4, "4Gi", classes=["x"]))
    d = core.schedule(request_from_json("machine", machine("a", "x")))
    assert d.pool == "p" and core.cache.is_assumed("machine", "default/a")
    assert core.schedule(request_from_json("machine", machine("b", "x"))).pool is None  # counted at once
    core.unreserve(d)  # the bind failed
    assert core.cache.pools[("machine", "p")].used == {"cpu": 0, "memory": 0}
    d = core.schedule(request_from_json("machine", machine("b", "x")))
    assert d.pool == "p"
    core.cache.finish_binding("machine", "default/b", now=100.0)
    assert core.cache.cleanup_expired(now=100.0 + core.cache.assume_ttl - 1) == []
    expired = core.cache.cleanup_expired(now=100.0 + core.cache.assume_ttl)
    assert [p.key for p in expired] == ["default/b"]
    assert core.schedule(request_from_json("machine", machine("c", "x"))).pool == "p"


def test_bound_machine_seen_before_its_class_is_charged_when_the_class_arrives() -> None:
    core = core_with()
    core.set_pool("machine", machine_pool("p", 4, "4Gi", classes=["x"]))
    core.set_object("machine", machine("early", "x", pool="p"))
    assert core.cache.pools[("machine", "p")].used == {}
    core.set_class("machine", machine_class("x", 4, "4Gi"))
    assert core.cache.pools[("machine", "p")].used == {"cpu": 4000, "memory": 4 * 2**30}
    assert place(core, machine("late", "x")) is None
    assert core.delete_object("machine", "default/early") == [ClusterEvent(PLACEMENT, ActionType.DELETE)]
    assert place(core, machine("late", "x")) == "p"


def test_pool_heartbeat_does_not_wake_but_a_real_change_does() -> None:
    core = core_with()
    doc = machine_pool("p", 4, "4Gi", classes=["x"])
    [added] = core.set_pool("machine", doc)
    assert added == ClusterEvent(POOL, ActionType.ADD) and added.obj.offers("x")
    doc["status"]["conditions"][0]["lastUpdateTime"] = "later"
    assert core.set_pool("machine", doc) == []
    doc["status"]["allocatable"]["cpu"] = "8"
    assert core.set_pool("machine", doc) == [ClusterEvent(POOL, ActionType.UPDATE_ALLOCATABLE)]


def test_topology_spread_across_zones() -> None:
    core = core_with("MostAllocated", pluginArgs={"TopologySpread": {"whenUnsatisfiable": "DoNotSchedule"}})
    core.set_class("machine", machine_class("x", 1, "1Gi"))
    for zone in ("z1", "z2", "z3"):
        core.set_pool("machine", machine_pool(f"pool-{zone}", 64, "64Gi", classes=["x"], zone=zone))
    ann = {"scheduler.ironpool.dev/spread-by": "app"}
    zones = [place(core, machine(f"w{i}", "x", labels={"app": "web"}, annotations=ann)) for i in range(6)]
    assert sorted(zones) == ["pool-z1", "pool-z1", "pool-z2", "pool-z2", "pool-z3", "pool-z3"]
    # without the annotation, bin-packing puts everything on one pool
    others = {place(core, machine(f"o{i}", "x", labels={"app": "web"})) for i in range(3)}
    assert len(others) == 1


def test_volumes_schedule_on_storage_and_machines_follow_local_volumes() -> None:
    core = core_with()
    core.set_class("volume", volume_class("fast"))
    core.set_class("machine", machine_class("x", 1, "1Gi"))
    core.set_pool("volume", volume_pool("host-a", "10Gi", classes=["fast"]))
    core.set_pool("volume", volume_pool("host-b", "100Gi", classes=["fast"]))
    for name in ("host-a", "host-b"):
        core.set_pool("machine", machine_pool(name, 8, "8Gi", classes=["x"]))
    d = core.schedule(request_from_json("volume", volume("big", "fast", "50Gi")))
    assert d.pool == "host-b"
    core.set_object("volume", volume("big", "fast", "50Gi", pool="host-b"))
    d = core.schedule(request_from_json("volume", volume("huge", "fast", "60Gi")))
    assert d.pool is None and "have too little storage" in d.message
    # host-a is emptier for the machine, but its volume lives on host-b
    assert place(core, machine("m", "x", volumes=["big"])) == "host-b"
    # an unbound volume is placed together with its machine, on a host that can take both
    core.cache.volume_requests["default/new"] = request_from_json("volume", volume("new", "fast", "40Gi"))
    d = core.schedule(request_from_json("machine", machine("m2", "x", volumes=["new"])))
    assert d.pool == "host-b"
    assert core.cache.placements[("volume", "default/new")].pool == "host-b"


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match=r"profiles\.0\.strategy"):
        parse_config({"profiles": [{"strategy": "Random"}]})
    with pytest.raises(ConfigError, match="unknown plugin"):
        parse_config({"profiles": [{"disabledPlugins": ["Nope"]}]})
    with pytest.raises(ConfigError, match=r"queue\.bogus"):
        parse_config({"queue": {"bogus": 1}})
    with pytest.raises(ConfigError, match="mode"):
        SchedulerCore(
            parse_config(
                {"profiles": [{"strategy": "MostAllocated", "pluginArgs": {"MostAllocated": {"mode": "x"}}}]}
            )
        )
