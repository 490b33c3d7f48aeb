"""Reservations racing through the apiserver(s): plans, binds within and outside them, releases and
deletions sent concurrently, and the invariant checked after every round from the objects
themselves: what a pool's bound Machines use plus what its Reservations hold there unused never
exceeds the pool. Used on SQLite (one apiserver) and on etcd (two apiservers)."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.runtimes import start_ironpool

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
MERGE = {"Content-Type": "application/merge-patch+json"}
LABEL = "compute.ironcore.dev/reservation"
RUNS = itertools.count()

#: one operation: (what, index, pool or count, via)
Op = tuple[str, int, int, int]


def machines(ns: str) -> str:
    return f"{COMPUTE}/namespaces/{ns}/machines"


def reservations(ns: str) -> str:
    return f"{COMPUTE}/namespaces/{ns}/reservations"


async def setup(c: httpx.AsyncClient, ns: str, pools: dict[str, int]) -> None:
    """A namespace, the class ``<ns>-one`` (1 cpu) and pools with ``cpu`` allocatable."""
    r = await c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": ns}})
    assert r.status_code == 201, r.text
    r = await c.post(f"{COMPUTE}/machineclasses", json={
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
        "metadata": {"name": f"{ns}-one"}, "capabilities": {"cpu": "1", "memory": "1Mi"}})
    assert r.status_code == 201, r.text
    for name, cpu in pools.items():
        r = await c.post(f"{COMPUTE}/machinepools", json={
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachinePool", "metadata": {"name": name}})
        assert r.status_code == 201, r.text
        room = {"cpu": str(cpu), "memory": "1Ti"}
        ready = [{"type": "Ready", "status": "True", "reason": "HeartbeatReceived"}]
        r = await c.patch(f"{COMPUTE}/machinepools/{name}/status", headers=MERGE,
                          json={"status": {"allocatable": room, "capacity": room, "conditions": ready}})
        assert r.status_code == 200, r.text


async def create_reservation(c: httpx.AsyncClient, ns: str, name: str, count: int) -> None:
    r = await c.post(reservations(ns), json={
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Reservation", "metadata": {"name": name},
        "spec": {"resources": {f"class/machine.{ns}-one": str(count)}}})
    assert r.status_code == 201, r.text


async def write_plan(c: httpx.AsyncClient, ns: str, name: str, parts: dict[str, int]) -> int:
    """The scheduler's write of a plan, on the version just read; the HTTP status (409: no room, or
    the Reservation moved on)."""
    doc = (await c.get(f"{reservations(ns)}/{name}")).json()
    pools = [{"ref": p, "state": "Pending", "resources": {f"class/machine.{ns}-one": str(n)}}
             for p, n in parts.items() if n]
    r = await c.patch(f"{reservations(ns)}/{name}/status", headers=MERGE, json={
        "metadata": {"resourceVersion": doc["metadata"]["resourceVersion"]}, "status": {"pools": pools}})
    assert r.status_code in (200, 409), r.text
    return r.status_code


async def used_per_pool(c: httpx.AsyncClient, ns: str) -> dict[str, int]:
    """cpu in use per pool from the objects: bound Machines, plus what each holding Reservation holds
    there that no Machine within it uses."""
    ms = (await c.get(machines(ns))).json()["items"]
    rs = (await c.get(reservations(ns))).json()["items"]
    used: dict[str, int] = {}
    within: dict[tuple[str, str], int] = {}
    for m in ms:
        pool = (m["spec"].get("machinePoolRef") or {}).get("name")
        if pool:
            used[pool] = used.get(pool, 0) + 1
            name = (m["metadata"].get("labels") or {}).get(LABEL)
            if name:
                within[(name, pool)] = within.get((name, pool), 0) + 1
    for r in rs:
        status = r.get("status") or {}
        conds = {c["type"]: c["status"] for c in status.get("conditions") or []}
        entries = status.get("pools") or []
        if r["metadata"].get("deletionTimestamp") or conds.get("Expired") == "True" or any(
                e.get("state") == "Rejected" for e in entries):
            continue
        for e in entries:
            count = int((e.get("resources") or {}).get(f"class/machine.{ns}-one", "0"))
            unused = count - within.get((r["metadata"]["name"], e["ref"]), 0)
            if unused > 0:
                used[e["ref"]] = used.get(e["ref"], 0) + unused
    return used


async def race_last_capacity(vias: list[httpx.AsyncClient]) -> None:
    """Two Reservations, each fitting alone, planned at once through ``vias``: exactly one plan
    is taken, and the pools hold exactly it."""
    ns = f"last-{next(RUNS)}"
    pools = {f"{ns}-a": 3, f"{ns}-b": 2}
    c = vias[0]
    await setup(c, ns, pools)
    await create_reservation(c, ns, "first", 4)
    await create_reservation(c, ns, "second", 4)
    codes = await asyncio.gather(
        write_plan(vias[0], ns, "first", {f"{ns}-a": 2, f"{ns}-b": 2}),
        write_plan(vias[-1], ns, "second", {f"{ns}-a": 3, f"{ns}-b": 1}))
    assert sorted(codes) == [200, 409], codes
    used = await used_per_pool(c, ns)
    assert sum(used.values()) == 4 and all(used[p] <= cpu for p, cpu in pools.items())


async def run_property(vias: list[httpx.AsyncClient], pool_cpus: list[int], rounds: list[list[Op]]) -> None:
    """Random rounds of concurrent operations through ``vias``; the invariant after each round."""
    ns = f"rsv-{next(RUNS)}"
    pools = {f"{ns}-p{i}": cpu for i, cpu in enumerate(pool_cpus)}
    names = list(pools)
    c0 = vias[0]
    await setup(c0, ns, pools)
    for i in range(3):
        await create_reservation(c0, ns, f"r{i}", 4)
    for i in range(8):
        body: dict[str, Any] = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
                                "metadata": {"name": f"m{i}"},
                                "spec": {"machineClassRef": {"name": f"{ns}-one"}}}
        if i % 2:
            body["metadata"]["labels"] = {LABEL: f"r{i % 3}"}
        r = await c0.post(machines(ns), json=body)
        assert r.status_code == 201, r.text

    async def run(op: Op) -> None:
        what, index, arg, via = op
        c = vias[via % len(vias)]
        if what == "plan":
            parts = {names[(arg + k) % len(names)]: 1 + (index + k) % 2 for k in range(2)}
            await write_plan(c, ns, f"r{index % 3}", parts)
        elif what == "bind":
            r = await c.patch(f"{machines(ns)}/m{index % 8}", headers=MERGE,
                              json={"spec": {"machinePoolRef": {"name": names[arg % len(names)]}}})
            assert r.status_code in (200, 404, 409, 422), r.text
        elif what == "expire":
            expired = {"type": "Expired", "status": "True", "reason": "TTLExpired", "message": "-"}
            r = await c.patch(f"{reservations(ns)}/r{index % 3}/status", headers=MERGE,
                              json={"status": {"conditions": [expired]}})
            assert r.status_code in (200, 404, 409), r.text
        else:
            r = await c.delete(f"{machines(ns)}/m{index % 8}")
            assert r.status_code in (200, 404), r.text

    for ops in rounds:
        await asyncio.gather(*(run(op) for op in ops))
        used = await used_per_pool(vias[-1], ns)
        for pool, cpu in used.items():
            assert cpu <= pools[pool], f"{pool} overcommitted: {cpu} > {pools[pool]} after {ops}"


# -- schedulers racing: two scheduler processes, each through its own apiserver -------------------

def start_racing_schedulers(urls: list[str], token_file: Path, tmp: Path) -> list[subprocess.Popen[bytes]]:
    """Two ``ironpool scheduler`` processes without leader election, both named ``default`` (each
    plans every Reservation), the n-th talking to ``urls[n % len(urls)]``."""
    procs = []
    for i in range(2):
        config = tmp / f"sched-{i}.yaml"
        config.write_text("queue: {initialBackoffSeconds: 0.05, maxBackoffSeconds: 0.2}\n")
        procs.append(start_ironpool(["scheduler", "--server", urls[i % len(urls)], "--token-file",
                                     str(token_file), "--config", str(config), "--no-leader-elect"],
                                    tmp / f"scheduler-{i}.log"))
    return procs


async def _answers(c: httpx.AsyncClient, ns: str, names: list[str], timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        docs = {n: (await c.get(f"{reservations(ns)}/{n}")).json() for n in names}
        if all(_condition(d, "Scheduled") is not None for d in docs.values()):
            return docs
        if time.monotonic() > deadline:
            raise AssertionError(f"not answered in {timeout}s: {docs}")
        await asyncio.sleep(0.05)


def _condition(doc: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (doc.get("status") or {}).get("conditions") or [] if c["type"] == ctype), None)


async def schedulers_race_for_the_last_capacity(vias: list[httpx.AsyncClient], rounds: int = 4) -> None:
    """Per round: fresh pools (3 and 2 cpus), two Reservations of 4 machines made at once through
    different apiservers, each fitting alone: exactly one is planned and held, the other refused,
    and the pools hold exactly the planned one."""
    ns = f"sched-race-{next(RUNS)}"
    c = vias[0]
    pools = {f"{ns}-a": 3, f"{ns}-b": 2}
    await setup(c, ns, pools)
    for r in range(rounds):
        names = [f"r{r}-x", f"r{r}-y"]
        await asyncio.gather(*(vias[i % len(vias)].post(reservations(ns), json={
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Reservation", "metadata": {"name": n},
            "spec": {"resources": {f"class/machine.{ns}-one": "4"}, "pools": [{"name": p} for p in pools]}})
            for i, n in enumerate(names)))
        docs = await _answers(c, ns, names)
        verdicts = sorted(_condition(d, "Scheduled")["status"] for d in docs.values())  # type: ignore[index]
        assert verdicts == ["False", "True"], docs
        used = await used_per_pool(c, ns)
        assert used == {f"{ns}-a": 3, f"{ns}-b": 1} or sum(used.values()) == 4, used
        assert all(used.get(p, 0) <= cpu for p, cpu in pools.items()), used
        for n in names:  # release for the next round
            r_ = await c.delete(f"{reservations(ns)}/{n}")
            assert r_.status_code == 200, r_.text
        released = time.monotonic() + 30
        while used := await used_per_pool(c, ns):
            if not sum(used.values()):
                break
            assert time.monotonic() < released, f"round {r}: the pools hold {used} 30 s after the deletes"
            await asyncio.sleep(0.05)
