"""ResourceQuota with two apiservers over one etcd: creates and resizes race through both, exactly
the limit is admitted (never more), a quota made or changed through one binds the other at once,
and both report the same ``status.used``."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
from ironpool.store.etcd import EtcdStore

from tests.apiserver.test_apiserver_quota import (
    CPU,
    MERGE,
    STORAGE_REQ,
    machine,
    machines,
    quota,
    quotas,
    volume,
    volumes,
)
from tests.ha.conftest import ControlPlane
from tests.ha.test_ha_capacity import clients
from tests.helpers.wait import eventually

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
STORAGE = "/apis/storage.ironcore.dev/v1alpha1"
_RUNS = itertools.count()


async def setup(c: httpx.AsyncClient, ns: str) -> tuple[str, str]:
    """A namespace, a MachineClass of 1 cpu and an ExpandOnly VolumeClass (named after it)."""
    r = await c.post("/api/v1/namespaces", json={"metadata": {"name": ns}})
    assert r.status_code == 201, r.text
    r = await c.post(f"{COMPUTE}/machineclasses", json={
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
        "metadata": {"name": f"{ns}-one"}, "capabilities": {"cpu": "1", "memory": "1Gi"}})
    assert r.status_code == 201, r.text
    r = await c.post(f"{STORAGE}/volumeclasses", json={
        "apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "VolumeClass",
        "metadata": {"name": f"{ns}-grow"}, "capabilities": {"tps": "100Mi", "iops": "1000"},
        "resizePolicy": "ExpandOnly"})
    assert r.status_code == 201, r.text
    return f"{ns}-one", f"{ns}-grow"


async def created(r: Any) -> int:
    response: httpx.Response = await r
    assert response.status_code in (201, 403), response.text
    if response.status_code == 403:
        assert "exceeded quota" in response.json()["message"], response.text
    return response.status_code


async def used_everywhere(vias: list[httpx.AsyncClient], ns: str, name: str, used: dict[str, str]) -> None:
    """Wait until every apiserver answers the quota with ``status.used`` = ``used``."""

    async def shown() -> bool:
        for c in vias:
            doc = (await c.get(f"{quotas(ns)}/{name}")).json()
            if (doc.get("status") or {}).get("used") != used:
                return False
        return True

    await eventually(shown, timeout=15, message=f"status.used {used} through both apiservers")


async def tallied(plane: ControlPlane, ns: str) -> dict[str, int]:
    """The namespace's quota key's tally of Machines (class -> count)."""
    store = EtcdStore(plane.store_url.removeprefix("etcd://"), compaction_interval=0)
    try:
        (value,) = await store.read_guards([f"quota/{ns}"])
    finally:
        await store.close()
    machines = ((value.value or {}).get("tally") or {}).get("machines") or {}
    return {cls: int(entry["count"]) for cls, entry in machines.items()}


async def test_creates_racing_through_two_apiservers_admit_exactly_the_limit(
        two_apiservers: ControlPlane) -> None:
    ns = f"quota-race-{next(_RUNS)}"
    a, b = vias = clients(two_apiservers.servers)
    try:
        one, _ = await setup(a, ns)
        assert (await a.post(quotas(ns), json=quota("cpu", {CPU: "4"}))).status_code == 201
        codes = await asyncio.gather(*(created(vias[i % 2].post(machines(ns), json=machine(f"m{i}", one)))
                                       for i in range(24)))
        assert codes.count(201) == 4
        names = {m["metadata"]["name"] for m in (await b.get(machines(ns))).json()["items"]}
        assert len(names) == 4
        assert await tallied(two_apiservers, ns) == {one: 4}  # the key counts what exists
        await used_everywhere(vias, ns, "cpu", {CPU: "4"})
        # Deleting through one frees the room for a create through the other, and only that room.
        gone = sorted(names)[0]
        assert (await a.delete(f"{machines(ns)}/{gone}")).status_code == 200
        assert (await b.post(machines(ns), json=machine("late", one))).status_code == 201
        assert await created(a.post(machines(ns), json=machine("later", one))) == 403
        await used_everywhere(vias, ns, "cpu", {CPU: "4"})
    finally:
        for c in vias:
            await c.aclose()


async def test_a_quota_made_or_changed_through_one_apiserver_binds_the_other_at_once(
        two_apiservers: ControlPlane) -> None:
    ns = f"quota-new-{next(_RUNS)}"
    a, b = vias = clients(two_apiservers.servers)
    try:
        one, _ = await setup(a, ns)
        # b has written here already, before any quota: it knows the namespace had none.
        assert (await b.post(machines(ns), json=machine("m0", one))).status_code == 201
        assert (await a.post(quotas(ns), json=quota("cpu", {CPU: "1"}))).status_code == 201
        refused = await b.post(machines(ns), json=machine("m1", one))
        assert refused.status_code == 403, refused.text
        assert "used: requests.cpu=1, limited: requests.cpu=1" in refused.json()["message"]
        r = await b.patch(f"{quotas(ns)}/cpu", json={"spec": {"hard": {CPU: "2"}}}, headers=MERGE)
        assert r.status_code == 200, r.text
        assert (await a.post(machines(ns), json=machine("m1", one))).status_code == 201
        assert await created(a.post(machines(ns), json=machine("m2", one))) == 403
        # The quota gone through one, the other no longer limits the namespace either.
        assert (await a.delete(f"{quotas(ns)}/cpu")).status_code == 200
        assert (await b.post(machines(ns), json=machine("m2", one))).status_code == 201
    finally:
        for c in vias:
            await c.aclose()


async def test_resizes_racing_through_two_apiservers_never_pass_the_limit(
        two_apiservers: ControlPlane) -> None:
    ns = f"quota-grow-{next(_RUNS)}"
    a, b = vias = clients(two_apiservers.servers)
    try:
        _, grow = await setup(a, ns)
        assert (await a.post(quotas(ns), json=quota("disks", {STORAGE_REQ: "10Gi"}))).status_code == 201
        for name, via in (("v1", a), ("v2", b)):
            assert (await via.post(volumes(ns), json=volume(name, "4Gi", grow))).status_code == 201
        grown = {"spec": {"resources": {"storage": "6Gi"}}}
        first, second = await asyncio.gather(a.patch(f"{volumes(ns)}/v1", json=grown, headers=MERGE),
                                             b.patch(f"{volumes(ns)}/v2", json=grown, headers=MERGE))
        assert sorted([first.status_code, second.status_code]) == [200, 403], (first.text, second.text)
        await used_everywhere(vias, ns, "disks", {STORAGE_REQ: "10Gi"})
    finally:
        for c in vias:
            await c.aclose()
