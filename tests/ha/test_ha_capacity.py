"""Capacity admission with two apiservers over one etcd: binds race through both, and no pool is
ever overcommitted; the usage keys stay equal to what is really bound."""

from __future__ import annotations

import asyncio
import itertools

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ironpool.store.etcd import EtcdStore

from tests.conftest import ApiServer
from tests.ha.conftest import ControlPlane

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
MERGE = {"Content-Type": "application/merge-patch+json"}
_RUNS = itertools.count()


def machines(ns: str) -> str:
    return f"{COMPUTE}/namespaces/{ns}/machines"


def machine(name: str, cls: str) -> dict[str, object]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine", "metadata": {"name": name},
            "spec": {"machineClassRef": {"name": cls}}}


def pool_ref(pool: str) -> dict[str, object]:
    return {"spec": {"machinePoolRef": {"name": pool}}}


def clients(servers: list[ApiServer]) -> list[httpx.AsyncClient]:
    return [httpx.AsyncClient(base_url=s.url, headers=s.headers(), timeout=60) for s in servers]


async def setup(c: httpx.AsyncClient, ns: str, pools: dict[str, int], classes: dict[str, int]) -> None:
    """A namespace, MachineClasses (cpu only) and MachinePools reporting ``cpu`` allocatable."""
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    r = await c.post("/api/v1/namespaces", json=body)
    assert r.status_code == 201, r.text
    for name, cpu in classes.items():
        r = await c.post(f"{COMPUTE}/machineclasses", json={
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass", "metadata": {"name": name},
            "capabilities": {"cpu": str(cpu), "memory": "1Gi"}})
        assert r.status_code == 201, r.text
    for name, cpu in pools.items():
        r = await c.post(f"{COMPUTE}/machinepools", json={
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachinePool", "metadata": {"name": name}})
        assert r.status_code == 201, r.text
        room = {"cpu": str(cpu), "memory": "1Ti"}
        status = {"allocatable": room, "capacity": room}
        r = await c.patch(f"{COMPUTE}/machinepools/{name}/status", json={"status": status}, headers=MERGE)
        assert r.status_code == 200, r.text


async def bind(c: httpx.AsyncClient, ns: str, name: str, pool: str) -> int:
    """Bind by merge patch (no resourceVersion: only capacity can refuse it); the HTTP status."""
    r = await c.patch(f"{machines(ns)}/{name}", json=pool_ref(pool), headers=MERGE)
    assert r.status_code in (200, 409), r.text
    return r.status_code


async def bound_cpu(c: httpx.AsyncClient, ns: str, classes: dict[str, int]) -> dict[str, int]:
    """cpu bound per pool, from the Machines themselves."""
    items = (await c.get(machines(ns))).json()["items"]
    used: dict[str, int] = {}
    for m in items:
        pool = (m["spec"].get("machinePoolRef") or {}).get("name")
        if pool:
            used[pool] = used.get(pool, 0) + classes[m["spec"]["machineClassRef"]["name"]]
    return used


async def usage_cpu(store: EtcdStore, pools: list[str]) -> dict[str, int]:
    """cpu charged per pool in the usage keys."""
    values = await store.read_guards([f"capacity/machinepools/{p}" for p in pools])
    out: dict[str, int] = {}
    for pool, value in zip(pools, values, strict=True):
        charges = (value.value or {}).get("charges") or {}
        total = sum(int(a.get("cpu", 0)) for a in charges.values()) // 10**9
        if total:
            out[pool] = total
    return out


async def test_binds_racing_through_two_apiservers_fill_a_pool_exactly(two_apiservers: ControlPlane) -> None:
    ns = f"race-{next(_RUNS)}"
    a, b = clients(two_apiservers.servers)
    try:
        await setup(a, ns, {f"{ns}-p": 10}, {f"{ns}-c2": 2})  # room for 5 machines
        for i in range(40):
            r = await (a, b)[i % 2].post(machines(ns), json=machine(f"m{i}", f"{ns}-c2"))
            assert r.status_code == 201, r.text
        codes = await asyncio.gather(*(bind((a, b)[i % 2], ns, f"m{i}", f"{ns}-p") for i in range(40)))
        assert codes.count(200) == 5
        assert await bound_cpu(a, ns, {f"{ns}-c2": 2}) == {f"{ns}-p": 10}
        # Deleting through one apiserver frees the room for a bind through the other.
        bound = [m["metadata"]["name"] for m in (await a.get(machines(ns))).json()["items"]
                 if m["spec"].get("machinePoolRef")]
        assert (await a.delete(f"{machines(ns)}/{bound[0]}")).status_code == 200
        free = next(f"m{i}" for i in range(40) if f"m{i}" not in bound)
        assert await bind(b, ns, free, f"{ns}-p") == 200
        assert await bind(a, ns, next(f"m{i}" for i in range(40) if f"m{i}" not in [*bound, free]),
                          f"{ns}-p") == 409
    finally:
        await a.aclose()
        await b.aclose()


POOLS = st.lists(st.integers(0, 12), min_size=1, max_size=3)
CLASSES = st.lists(st.integers(1, 4), min_size=1, max_size=3)
# rounds of operations run concurrently: ("bind", machine, pool, via) or ("delete", machine, _, via)
OPS = st.lists(
    st.lists(st.tuples(st.sampled_from(["bind", "bind", "delete"]), st.integers(0, 11), st.integers(0, 2),
                       st.integers(0, 1)), min_size=1, max_size=12),
    min_size=1, max_size=3)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pools=POOLS, classes=CLASSES, rounds=OPS)
def test_no_interleaving_overcommits_and_usage_matches_what_is_bound(
        two_apiservers: ControlPlane, pools: list[int], classes: list[int],
        rounds: list[list[tuple[str, int, int, int]]]) -> None:
    asyncio.run(_property(two_apiservers, pools, classes, rounds))


async def _property(plane: ControlPlane, pool_cpus: list[int], class_cpus: list[int],
                    rounds: list[list[tuple[str, int, int, int]]]) -> None:
    ns = f"prop-{next(_RUNS)}"
    pools = {f"{ns}-p{i}": cpu for i, cpu in enumerate(pool_cpus)}
    classes = {f"{ns}-c{i}": cpu for i, cpu in enumerate(class_cpus)}
    pool_names, class_names = list(pools), list(classes)
    vias = clients(plane.servers)
    store = EtcdStore(plane.store_url.removeprefix("etcd://"), compaction_interval=0)
    try:
        await setup(vias[0], ns, pools, classes)
        for i in range(12):
            r = await vias[i % 2].post(machines(ns), json=machine(f"m{i}", class_names[i % len(class_names)]))
            assert r.status_code == 201, r.text

        async def run(op: tuple[str, int, int, int]) -> None:
            kind, index, pool, via = op
            c = vias[via]
            if kind == "bind":
                target = pool_names[pool % len(pool_names)]
                r = await c.patch(f"{machines(ns)}/m{index}", json=pool_ref(target), headers=MERGE)
                # 409: no room, or already bound elsewhere (the pool ref is set once); 422 likewise
                assert r.status_code in (200, 404, 409, 422), r.text
            else:
                r = await c.delete(f"{machines(ns)}/m{index}")
                assert r.status_code in (200, 404), r.text

        for ops in rounds:
            await asyncio.gather(*(run(op) for op in ops))
            used = await bound_cpu(vias[1], ns, classes)
            for pool, cpu in used.items():
                assert cpu <= pools[pool], f"{pool} overcommitted: {cpu} > {pools[pool]}"
            assert await usage_cpu(store, pool_names) == used
    finally:
        await store.close()
        for c in vias:
            await c.aclose()

