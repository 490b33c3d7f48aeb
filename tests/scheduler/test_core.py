"""SchedulerCore: accounting, filters, scoring, messages, assume cache (no HTTP)."""

from __future__ import annotations

import pytest
from ironpool.scheduler import SchedulerCore, parse_config
from ironpool.scheduler.config import ConfigError
from ironpool.scheduler.framework.interface import WAKE_CAPACITY, WAKE_POOL, wake_class, wake_offer
from ironpool.scheduler.model import request_from_json
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
    assert wake_offer("x") in d.wake and WAKE_CAPACITY in d.wake and WAKE_POOL in d.wake
    # the scan path (tolerations make the index not enough) explains it the same way
    tol = [{"key": "unrelated", "operator": "Exists"}]
    d2 = core.schedule(request_from_json("machine", machine("m2", "x", tolerations=tol)))
    assert d2.message == "0/6 pools: 3 do not offer class x, 2 have too little memory, 1 not ready"


def test_unknown_class_and_no_pools() -> None:
    core = core_with()
    d = core.schedule(request_from_json("machine", machine("m", "ghost")))
    assert d.pool is None and d.message == "machine class ghost not found"
    assert d.wake == frozenset({wake_class("ghost")})
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
    assert core.delete_object("machine", "default/early") == {WAKE_CAPACITY}
    assert place(core, machine("late", "x")) == "p"


def test_pool_heartbeat_does_not_wake_but_a_real_change_does() -> None:
    core = core_with()
    doc = machine_pool("p", 4, "4Gi", classes=["x"])
    assert wake_offer("x") in core.set_pool("machine", doc)
    doc["status"]["conditions"][0]["lastUpdateTime"] = "later"
    assert core.set_pool("machine", doc) == set()
    doc["status"]["allocatable"]["cpu"] = "8"
    assert WAKE_POOL in core.set_pool("machine", doc)


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


def test_ledger_claims_are_charged_once_with_the_placement() -> None:
    from ironpool.scheduler.model import CLAIMS_ANNOTATION, encode_claims, parse_claims

    core = core_with()
    core.set_class("machine", machine_class("x", 2, "2Gi"))
    doc = machine_pool("p", 8, "8Gi", classes=["x"])
    claims = {"uid-a": (1.0, {"cpu": 2000, "memory": 2 * 2**30}),
              "uid-other": (1.0, {"cpu": 2000, "memory": 2 * 2**30})}  # another scheduler's, in flight
    assert parse_claims(encode_claims(claims)) == claims
    assert parse_claims("not json") == {} and parse_claims('{"u": [1, "x"]}') == {}
    doc["metadata"]["annotations"] = {CLAIMS_ANNOTATION: encode_claims(claims)}
    core.set_pool("machine", doc)
    pool = core.cache.pools[("machine", "p")]
    assert pool.used["cpu"] == 4000
    core.set_object("machine", machine("a", "x", pool="p"))  # uid-a: already charged by its claim
    assert pool.used["cpu"] == 4000
    core.set_object("machine", machine("b", "x", pool="p"))  # bound without a claim
    assert pool.used["cpu"] == 6000
    assert place(core, machine("c", "x")) == "p"
    assert place(core, machine("d", "x")) is None
    # the ledger drops the other scheduler's claim: capacity comes back and parked objects wake
    doc["metadata"]["annotations"] = {CLAIMS_ANNOTATION: encode_claims({"uid-a": claims["uid-a"]})}
    assert WAKE_CAPACITY in core.set_pool("machine", doc)
    assert core.cache.pools[("machine", "p")].used["cpu"] == 6000
