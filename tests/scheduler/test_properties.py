"""Property tests: random pools, classes and arrival orders never overcommit, the per-class index
answers exactly like a full scan, and the same input always gives the same placements."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ironpool.scheduler import SchedulerCore, parse_config
from ironpool.scheduler.model import request_from_json

from tests.scheduler.sched_docs import machine, machine_class, machine_pool

CLASSES = st.lists(
    st.tuples(st.integers(1, 8), st.integers(1, 16)), min_size=1, max_size=4
)
POOLS = st.lists(
    st.fixed_dictionaries({
        "cpu": st.integers(0, 24),
        "mem": st.integers(0, 48),
        "offers": st.one_of(st.none(), st.sets(st.integers(0, 3), max_size=4)),
        "ready": st.booleans(),
        "tainted": st.integers(0, 5),
        "label": st.sampled_from(["a", "b"]),
    }),
    min_size=1, max_size=6,
)
# an event: ("add", class index, selector?, tolerates?) or ("delete", which earlier machine)
EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 3), st.booleans(), st.booleans()),
        st.tuples(st.just("delete"), st.integers(0, 50), st.just(False), st.just(False)),
    ),
    min_size=1, max_size=40,
)


def build(classes: list[tuple[int, int]], pools: list[dict[str, Any]], strategy: str,
          use_index: bool) -> SchedulerCore:
    core = SchedulerCore(parse_config({"profiles": [{"strategy": strategy}]}), use_index=use_index)
    for i, (cpu, mem) in enumerate(classes):
        core.set_class("machine", machine_class(f"c{i}", cpu, f"{mem}Gi"))
    for i, p in enumerate(pools):
        offers = None if p["offers"] is None else [f"c{j}" for j in sorted(p["offers"])]
        taints = [{"key": "t", "effect": "NoSchedule"}] if p["tainted"] == 0 else []
        core.set_pool("machine", machine_pool(f"pool-{i}", p["cpu"], f"{p['mem']}Gi", classes=offers,
                                              ready=p["ready"], labels={"l": p["label"]}, taints=taints))
    return core


def run(core: SchedulerCore, n_classes: int, events: list[tuple[str, int, bool, bool]]) -> list[Any]:
    out: list[Any] = []
    placed: list[str] = []
    for n, (op, arg, sel, tol) in enumerate(events):
        if op == "delete":
            if placed:
                key = placed.pop(arg % len(placed))
                core.delete_object("machine", key)
                out.append(("deleted", key))
            continue
        doc = machine(f"m{n}", f"c{arg % n_classes}", selector={"l": "a"} if sel else None,
                      tolerations=[{"key": "t", "operator": "Exists"}] if tol else None)
        d = core.schedule(request_from_json("machine", doc))
        if d.pool is not None:
            placed.append(d.request.key)
            if n % 2:  # half confirmed by the "watch", half left assumed: both must count
                core.cache.observe_bound("machine", d.request.key, d.pool, d.request.class_name)
        out.append((d.request.key, d.pool, d.message))
        check_no_overcommit(core)
    return out


def check_no_overcommit(core: SchedulerCore) -> None:
    demand: dict[str, dict[str, int]] = {}
    for p in core.cache.placements.values():
        assert p.demand is not None
        tot = demand.setdefault(p.pool, {})
        for r, v in p.demand.items():
            tot[r] = tot.get(r, 0) + v
    for name, used in demand.items():
        pool = core.cache.pools[("machine", name)]
        for r, v in used.items():
            assert v <= pool.allocatable.get(r, 0), f"{name} overcommitted on {r}: {v}"
        assert {r: v for r, v in pool.used.items() if v} == {r: v for r, v in used.items() if v}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(classes=CLASSES, pools=POOLS, events=EVENTS,
       strategy=st.sampled_from(["LeastAllocated", "MostAllocated"]))
def test_never_overcommits_and_index_equals_scan(classes: list[tuple[int, int]], pools: list[dict[str, Any]],
                                                 events: list[tuple[str, int, bool, bool]],
                                                 strategy: str) -> None:
    indexed = run(build(classes, pools, strategy, True), len(classes), events)
    scanned = run(build(classes, pools, strategy, False), len(classes), events)
    assert [e[:2] for e in indexed] == [e[:2] for e in scanned]
    assert indexed == run(build(classes, pools, strategy, True), len(classes), events)


@settings(max_examples=60, deadline=None)
@given(classes=CLASSES, pools=POOLS, events=EVENTS, seed=st.randoms(use_true_random=False))
def test_arrival_order_of_pools_does_not_change_decisions(classes: list[tuple[int, int]],
                                                          pools: list[dict[str, Any]],
                                                          events: list[tuple[str, int, bool, bool]],
                                                          seed: Any) -> None:
    a = build(classes, pools, "MostAllocated", True)
    b = SchedulerCore(parse_config({"profiles": [{"strategy": "MostAllocated"}]}))
    # same pools added to b in a shuffled order, classes after pools
    ref = build(classes, pools, "MostAllocated", True)
    docs = [_pool_doc(ref, i) for i in range(len(pools))]
    seed.shuffle(docs)
    for doc in docs:
        b.set_pool("machine", doc)
    for i, (cpu, mem) in enumerate(classes):
        b.set_class("machine", machine_class(f"c{i}", cpu, f"{mem}Gi"))
    assert run(a, len(classes), events) == run(b, len(classes), events)


def _pool_doc(core: SchedulerCore, i: int) -> dict[str, Any]:
    p = core.cache.pools[("machine", f"pool-{i}")]
    return machine_pool(
        p.name, f"{p.allocatable.get('cpu', 0)}m", f"{p.allocatable.get('memory', 0)}",
        classes=None if p.offered is None else sorted(p.offered), ready=p.ready, labels=p.labels,
        taints=[{"key": t.key, "effect": t.effect} for t in p.taints])
