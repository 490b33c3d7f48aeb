"""Capacity admission of Reservations against a real apiserver process: a plan is charged to all its
pools in one write or refused whole, Machines placed within a Reservation use its share, and what
it holds leaves the pools when it expires, is rejected or deleted."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.apiserver.test_apiserver_admission import (
    COMPUTE,
    MACHINES,
    MERGE,
    bind,
    client,
    machine,
    machine_class,
    make_pool,
)
from tests.helpers.reservation_race import (
    Op,
    race_last_capacity,
    run_property,
    schedulers_race_for_the_last_capacity,
    start_racing_schedulers,
)
from tests.helpers.runtimes import stop_process

if TYPE_CHECKING:
    from tests.conftest import ApiServer

RESERVATIONS = f"{COMPUTE}/namespaces/default/reservations"
LABEL = "compute.ironcore.dev/reservation"


def reservation(name: str, count: int = 1, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Reservation",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"resources": {"class/machine.x-small": str(count)}, **spec}}


def plan(c: httpx.Client, name: str, parts: dict[str, int], **status: Any) -> httpx.Response:
    """Write a plan as the scheduler does: every pool's part in ``status.pools`` (resourceVersion kept)."""
    rv = c.get(f"{RESERVATIONS}/{name}").json()["metadata"]["resourceVersion"]
    pools = [{"ref": pool, "state": "Pending", "resources": {"class/machine.x-small": str(n)}}
             for pool, n in parts.items()]
    return c.patch(f"{RESERVATIONS}/{name}/status", headers=MERGE,
                   json={"metadata": {"resourceVersion": rv}, "status": {"pools": pools, **status}})


def within(name: str, reservation_name: str) -> dict[str, Any]:
    m = machine(name, "x-small")
    m["metadata"]["labels"] = {LABEL: reservation_name}
    return m


def setup(c: httpx.Client, pools: dict[str, int]) -> None:
    """x-small (1 cpu, 256Mi) and pools with that many cpus (memory plenty)."""
    assert c.post(f"{COMPUTE}/machineclasses", json=machine_class("x-small", "1", "256Mi")).status_code == 201
    for pool, cpu in pools.items():
        make_pool(c, "machinepools", pool, {"cpu": str(cpu), "memory": "64Gi"})


def fill(c: httpx.Client, pool: str, prefix: str, most: int = 20) -> int:
    """Bind plain x-small Machines to ``pool`` until it refuses; how many fit."""
    for i in range(most):
        assert c.post(MACHINES, json=machine(f"{prefix}{i}", "x-small")).status_code == 201
        r = bind(c, f"{prefix}{i}", pool)
        if r.status_code == 409:
            assert c.delete(f"{MACHINES}/{prefix}{i}").status_code == 200
            return i
        assert r.status_code == 200, r.text
    raise AssertionError(f"{pool} took {most} machines")


def test_a_plan_is_charged_to_every_pool_or_refused_whole(apiserver: ApiServer) -> None:
    with client(apiserver) as c:
        setup(c, {"a": 7, "b": 7})
        for name in ("r10", "r20"):
            assert c.post(RESERVATIONS, json=reservation(name)).status_code == 201
        assert plan(c, "r10", {"a": 7, "b": 3}).status_code == 200
        refused = plan(c, "r20", {"a": 0, "b": 5})  # b has 4 left
        assert refused.status_code == 409
        message = refused.json()["message"]
        assert 'machinepool "b" has too little cpu for reservation "r20": needs 5, 4 free of 7' in message
        stored = c.get(f"{RESERVATIONS}/r20").json()
        assert "status" not in stored  # nothing of the refused plan was written
        assert fill(c, "a", "pa") == 0
        assert fill(c, "b", "pb") == 4  # the refused plan took nothing from b


def test_machines_within_a_reservation_use_its_share(apiserver: ApiServer) -> None:
    with client(apiserver) as c:
        setup(c, {"a": 4})
        assert c.post(RESERVATIONS, json=reservation("web", 3)).status_code == 201
        assert plan(c, "web", {"a": 3}).status_code == 200
        assert fill(c, "a", "plain") == 1  # 3 of 4 cpus are held
        for i in range(3):
            assert c.post(MACHINES, json=within(f"w{i}", "web")).status_code == 201
            assert bind(c, f"w{i}", "a").status_code == 200
        assert c.post(MACHINES, json=within("w3", "web")).status_code == 201
        refused = bind(c, "w3", "a")
        assert refused.status_code == 409 and "needs 1, 0 free of 4" in refused.json()["message"]
        # A Machine gone gives its part back to the Reservation, not to everyone.
        assert c.delete(f"{MACHINES}/w0").status_code == 200
        assert c.post(MACHINES, json=machine("plain-x", "x-small")).status_code == 201
        assert bind(c, "plain-x", "a").status_code == 409
        assert bind(c, "w3", "a").status_code == 200


def _expire(c: httpx.Client, name: str) -> None:
    r = c.patch(f"{RESERVATIONS}/{name}/status", headers=MERGE, json={"status": {"conditions": [
        {"type": "Expired", "status": "True", "reason": "TTLExpired", "message": "unused after 60s"}]}})
    assert r.status_code == 200, r.text


def _reject_a_part(c: httpx.Client, name: str) -> None:
    pools = c.get(f"{RESERVATIONS}/{name}").json()["status"]["pools"]
    pools[0]["state"] = "Rejected"
    r = c.patch(f"{RESERVATIONS}/{name}/status", headers=MERGE, json={"status": {"pools": pools}})
    assert r.status_code == 200, r.text


def _delete(c: httpx.Client, name: str) -> None:
    assert c.delete(f"{RESERVATIONS}/{name}").status_code == 200


def _delete_with_finalizer(c: httpx.Client, name: str) -> None:
    r = c.patch(f"{RESERVATIONS}/{name}", headers=MERGE, json={"metadata": {"finalizers": ["x/held"]}})
    assert r.status_code == 200, r.text
    _delete(c, name)  # marked: deletionTimestamp set, the finalizer keeps the object


@pytest.mark.parametrize("release", [_expire, _reject_a_part, _delete, _delete_with_finalizer])
def test_what_is_released_is_free_again(apiserver: ApiServer, release: Any) -> None:
    with client(apiserver) as c:
        setup(c, {"a": 4, "b": 2})
        assert c.post(RESERVATIONS, json=reservation("web", 5)).status_code == 201
        assert plan(c, "web", {"a": 3, "b": 2}).status_code == 200
        # Two Machines within it stay charged after the Reservation is released.
        for i in range(2):
            assert c.post(MACHINES, json=within(f"w{i}", "web")).status_code == 201
            assert bind(c, f"w{i}", "a").status_code == 200
        release(c, "web")
        assert fill(c, "a", "pa") == 2
        assert fill(c, "b", "pb") == 2


def test_a_dry_run_holds_nothing_and_unknown_classes_cannot_be_held(apiserver: ApiServer) -> None:
    with client(apiserver) as c:
        setup(c, {"a": 2})
        assert c.post(RESERVATIONS, json=reservation("probe", 2, dryRun=True)).status_code == 201
        fits = [{"type": "Scheduled", "status": "True", "reason": "Fits", "message": "2 on 1 pool"}]
        assert plan(c, "probe", {"a": 2}, conditions=fits).status_code == 200
        assert fill(c, "a", "pa") == 2
        body = reservation("odd")
        body["spec"]["resources"] = {"class/machine.none": "1"}
        assert c.post(RESERVATIONS, json=body).status_code == 201
        rv = c.get(f"{RESERVATIONS}/odd").json()["metadata"]["resourceVersion"]
        r = c.patch(f"{RESERVATIONS}/odd/status", headers=MERGE, json={
            "metadata": {"resourceVersion": rv},
            "status": {"pools": [{"ref": "a", "resources": {"class/machine.none": "1"}}]}})
        assert r.status_code == 409 and 'machineclass "none" does not exist' in r.json()["message"]


# -- racing (one apiserver over SQLite; the same on etcd with two: tests/ha/test_ha_reservations.py) ---

POOL_CPUS = st.lists(st.integers(0, 6), min_size=1, max_size=3)
ROUNDS = st.lists(st.lists(st.tuples(st.sampled_from(["plan", "plan", "bind", "bind", "expire", "delete"]),
                                     st.integers(0, 7), st.integers(0, 2), st.integers(0, 1)),
                           min_size=1, max_size=10), min_size=1, max_size=3)


def _async_clients(server: ApiServer, count: int) -> list[httpx.AsyncClient]:
    return [httpx.AsyncClient(base_url=server.url, headers=server.headers(), timeout=60)
            for _ in range(count)]


async def _with_clients(server: ApiServer, body: Any) -> None:
    vias = _async_clients(server, 2)
    try:
        await body(vias)
    finally:
        for c in vias:
            await c.aclose()


def test_two_reservations_racing_for_the_last_capacity(apiserver: ApiServer) -> None:
    asyncio.run(_with_clients(apiserver, race_last_capacity))


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pool_cpus=POOL_CPUS, rounds=ROUNDS)
def test_no_interleaving_of_plans_binds_and_releases_overcommits(
        apiserver: ApiServer, pool_cpus: list[int], rounds: list[list[Op]]) -> None:
    asyncio.run(_with_clients(apiserver, lambda vias: run_property(vias, pool_cpus, rounds)))


def test_two_scheduler_processes_race_for_the_last_capacity(apiserver: ApiServer, tmp_path: Any) -> None:
    procs = start_racing_schedulers([apiserver.url], apiserver.token_file, tmp_path)
    try:
        asyncio.run(_with_clients(apiserver, schedulers_race_for_the_last_capacity))
    finally:
        for proc in procs:
            stop_process(proc)
