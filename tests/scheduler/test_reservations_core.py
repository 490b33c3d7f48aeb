"""Reservations in the scheduler without HTTP: gang plans (all or none, with the shortfall), the hold
counted on the pools, Machines placed only within their Reservation, and the wake-ups that bring a
waiting Machine back."""

from __future__ import annotations

from typing import Any

from ironpool.scheduler import SchedulerCore
from ironpool.scheduler.cache import Placement
from ironpool.scheduler.framework.events import ActionType, ClusterEvent, EventResource
from ironpool.scheduler.model import request_from_json

from tests.scheduler.sched_docs import machine, machine_class, machine_pool
from tests.scheduler.test_core import wakes

LABEL = "compute.ironcore.dev/reservation"


def reservation(name: str, count: int, *, status: dict[str, Any] | None = None,
                **spec: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Reservation",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"resources": {"class/machine.x-small": str(count)}, **spec}}
    if status is not None:
        doc["status"] = status
    return doc


def held(parts: dict[str, int], state: str = "Accepted") -> dict[str, Any]:
    return {"pools": [{"ref": p, "state": state, "resources": {"class/machine.x-small": str(n)}}
                      for p, n in parts.items()],
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "Planned"}]}


def place(core: SchedulerCore, doc: dict[str, Any]) -> str | None:
    """Decide, then let the watch show it bound (as the runner's informer does)."""
    d = core.schedule(request_from_json("machine", doc))
    if d.pool is not None:
        core.set_object("machine", {**doc, "spec": {**doc["spec"], "machinePoolRef": {"name": d.pool}}})
    return d.pool


def two_hosts(core: SchedulerCore, cpu: int = 7, **pool: Any) -> None:
    core.set_class("machine", machine_class("x-small", 1, "256Mi"))
    core.set_class("machine", machine_class("small", 2, "1Gi"))
    for name in ("a", "b"):
        core.set_pool("machine", machine_pool(name, cpu, "64Gi", classes=["x-small", "small"], **pool))


def test_a_set_is_planned_whole_or_refused_with_the_shortfall() -> None:
    core = SchedulerCore()
    two_hosts(core)
    info, _ = core.set_reservation(reservation("ten", 10))
    plan = core.plan_reservation(info)
    assert plan.fits
    assert {pool: part.classes for pool, part in plan.parts.items()} == {"a": {"x-small": 5},
                                                                         "b": {"x-small": 5}}
    assert plan.message(core.cache) == "10 machines on 2 pools: a (5 x-small), b (5 x-small)"
    # The plan is held at once: 4 cpus are left.
    assert sum(p.free("cpu") for p in core.cache.pools_of("machine")) == 4000

    big, _ = core.set_reservation(reservation("twenty", 20))
    refused = core.plan_reservation(big)
    assert not refused.fits and refused.short == {"x-small": 16}
    message = refused.message(core.cache)
    assert message.startswith("needs 20 x-small: 4 fit (a (2 x-small), b (2 x-small)); short by 16 x-small = "
                              "16 cpu and 4Gi memory (0/2 pools: 2 have too little cpu)"), message
    # Nothing of the refused plan stays: still 4 cpus free.
    assert sum(p.free("cpu") for p in core.cache.pools_of("machine")) == 4000


def test_bigger_machines_first_pools_selector_and_zone_spread() -> None:
    core = SchedulerCore()
    two_hosts(core, cpu=3, labels={"tier": "gold"})
    core.set_pool("machine", machine_pool("c", 3, "64Gi", classes=["x-small", "small"]))
    mixed = reservation("mixed", 2, pools=[{"name": "a"}, {"name": "b"}])
    mixed["spec"]["resources"]["class/machine.small"] = "2"
    plan = core.plan_reservation(core.set_reservation(mixed)[0])
    # 2 small (2 cpu) fill a and b first; the x-small go in the cpu left: no pool outside a and b.
    assert plan.fits and set(plan.parts) == {"a", "b"}
    assert {p: part.classes for p, part in plan.parts.items()} == {"a": {"small": 1, "x-small": 1},
                                                                  "b": {"small": 1, "x-small": 1}}
    core.delete_reservation("default/mixed")
    gold = core.plan_reservation(core.set_reservation(reservation("gold", 6,
                                                                  poolSelector={"tier": "gold"}))[0])
    assert gold.fits and set(gold.parts) == {"a", "b"}
    core.delete_reservation("default/gold")

    spread = SchedulerCore()
    spread.set_class("machine", machine_class("x-small", 1, "256Mi"))
    for name, zone in (("a1", "z1"), ("a2", "z1"), ("b1", "z2")):
        spread.set_pool("machine", machine_pool(name, 4, "64Gi", classes=["x-small"], zone=zone))
    skew = {"zoneSpread": {"maxSkew": 1}}
    even = spread.plan_reservation(spread.set_reservation(reservation("even", 6, **skew))[0])
    zones = {"a1": "z1", "a2": "z1", "b1": "z2"}
    per_zone: dict[str, int] = {}
    for pool, part in even.parts.items():
        per_zone[zones[pool]] = per_zone.get(zones[pool], 0) + part.classes["x-small"]
    assert even.fits and per_zone == {"z1": 3, "z2": 3}
    # z2 has room for one more: four spread over the two zones cannot keep the skew.
    assert not spread.plan_reservation(spread.set_reservation(reservation("more", 4, **skew))[0]).fits


def test_machines_go_only_within_their_reservation_and_use_its_share() -> None:
    core = SchedulerCore()
    two_hosts(core, cpu=2)
    core.set_reservation(reservation("web", 3, status=held({"a": 2, "b": 1})))
    # 1 cpu is free (on b): a plain machine takes it, the next one finds nothing.
    assert place(core, machine("plain-1", "x-small")) == "b"
    refused = core.schedule(request_from_json("machine", machine("plain-2", "x-small")))
    assert refused.pool is None and "have too little cpu" in refused.message
    # Within the reservation: its three machines fit though the pools are full, and only there.
    pools = [place(core, machine(f"w{i}", "x-small", labels={LABEL: "web"})) for i in range(3)]
    assert sorted(pools) == ["a", "a", "b"]  # type: ignore[type-var]
    fourth = core.schedule(request_from_json("machine", machine("w3", "x-small", labels={LABEL: "web"})))
    assert fourth.pool is None and fourth.message == "reservation web holds no more x-small: 3 of 3 in use"
    left = ClusterEvent(EventResource.PLACEMENT, ActionType.DELETE,
                        Placement("machine", "default/w0", "a", "x-small", {}, reservation="default/web"))
    other = ClusterEvent(EventResource.PLACEMENT, ActionType.DELETE,
                         Placement("machine", "default/plain-1", "b", "x-small", {}))
    assert wakes(fourth, left) and not wakes(fourth, other)
    core.delete_object("machine", "default/w0")
    assert place(core, machine("w3", "x-small", labels={LABEL: "web"})) == "a"
    # Another class is not what it holds.
    small = core.schedule(request_from_json("machine", machine("s", "small", labels={LABEL: "web"})))
    assert small.pool is None and small.message == "reservation web holds no more room for small"


def test_a_machine_waits_for_its_reservation_saying_why() -> None:
    core = SchedulerCore()
    two_hosts(core)
    want = request_from_json("machine", machine("m", "x-small", labels={LABEL: "web"}))
    missing = core.schedule(want)
    assert missing.message == "reservation web does not exist"
    assert wakes(missing, ClusterEvent(EventResource.RESERVATION, ActionType.ADD, "default/web"))
    assert not wakes(missing, ClusterEvent(EventResource.RESERVATION, ActionType.ADD, "default/other"))
    core.set_reservation(reservation("web", 2, status=held({"a": 2}, state="Pending")))
    assert core.schedule(want).message == "reservation web is not accepted by its pools yet"
    expired = held({"a": 2})
    expired["conditions"].append({"type": "Expired", "status": "True", "reason": "TTLExpired"})
    core.set_reservation(reservation("web", 2, status=expired))
    assert core.schedule(want).message == "reservation web expired: it holds nothing"
    # Expired: what it held is free again.
    assert core.cache.pools[("machine", "a")].free("cpu") == 7000
    core.set_reservation(reservation("web", 2, status=held({"a": 2})))
    assert core.schedule(want).pool == "a"


def test_bound_machines_within_count_first_when_a_reservation_is_made_again() -> None:
    core = SchedulerCore()
    two_hosts(core, cpu=2)
    for i, pool in enumerate(("a", "a", "b")):
        core.set_object("machine", machine(f"w{i}", "x-small", pool=pool, labels={LABEL: "web"}))
    plan = core.plan_reservation(core.set_reservation(reservation("web", 4))[0])
    # The three bound ones count where they are; only the fourth needs room (b's last cpu).
    assert plan.fits
    assert {p: part.classes for p, part in plan.parts.items()} == {"a": {"x-small": 2}, "b": {"x-small": 2}}
    assert sum(p.free("cpu") for p in core.cache.pools_of("machine")) == 0


def test_a_refusal_waits_only_for_decisions_that_could_change_it() -> None:
    """While other decisions are not written yet, a set that would fit were they to fail is not
    refused; one that would not fit anyway is, however many decisions keep coming."""
    core = SchedulerCore()
    two_hosts(core)
    first, _ = core.set_reservation(reservation("first", 9))
    assert core.plan_reservation(first).fits  # held while its write is on its way
    assert core.schedule(request_from_json("machine", machine("m", "x-small"))).pool is not None  # assumed
    assert core.cache.assumed_count == 1 and core.planning == {first.key}
    free = sum(p.free("cpu") for p in core.cache.pools_of("machine"))
    assert free == 4000

    second, _ = core.set_reservation(reservation("second", 12))
    assert not core.plan_reservation(second).fits
    assert not core.refusal_is_final(second)  # 14 cpus free were the first plan and the Machine to fail
    third, _ = core.set_reservation(reservation("third", 15))
    assert core.refusal_is_final(third)  # 14 at most
    # Asking changed nothing: the plan and the Machine are still counted, as before.
    assert sum(p.free("cpu") for p in core.cache.pools_of("machine")) == free
    assert core.cache.assumed_count == 1 and core.planning == {first.key}
    assert core.cache.holds[first.key]
