"""Capacity admission against a real apiserver process: binds past a pool's allocatable are 409s."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from tests.conftest import ApiServer

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
STORAGE = "/apis/storage.ironcore.dev/v1alpha1"
MACHINES = f"{COMPUTE}/namespaces/default/machines"
VOLUMES = f"{STORAGE}/namespaces/default/volumes"
MERGE = {"Content-Type": "application/merge-patch+json"}


def _fixtures(server: ApiServer) -> dict[str, Any]:
    """The shared conftest's globals (several conftest modules share the module name)."""
    return type(server).headers.__globals__


def machine_class(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
            "metadata": {"name": name}, "capabilities": {"cpu": cpu, "memory": memory}}


def machine(name: str, cls: str = "small", pool: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineClassRef": {"name": cls}}
    if pool:
        spec["machinePoolRef"] = {"name": pool}
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def volume(name: str, storage: str, pool: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"volumeClassRef": {"name": "fast"}, "resources": {"storage": storage}}
    if pool:
        spec["volumePoolRef"] = {"name": pool}
    return {"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "Volume",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def make_pool(c: httpx.Client, plural: str, name: str, allocatable: dict[str, str],
              capacity: dict[str, str] | None = None) -> None:
    group = COMPUTE if plural == "machinepools" else STORAGE
    kind = "MachinePool" if plural == "machinepools" else "VolumePool"
    api_version = group.removeprefix("/apis/")
    r = c.post(f"{group}/{plural}", json={"apiVersion": api_version, "kind": kind,
                                           "metadata": {"name": name}})
    assert r.status_code == 201, r.text
    status = {"allocatable": allocatable, "capacity": capacity or allocatable}
    r = c.patch(f"{group}/{plural}/{name}/status", json={"status": status}, headers=MERGE)
    assert r.status_code == 200, r.text


def bind(c: httpx.Client, name: str, pool: str, *, dry_run: bool = False) -> httpx.Response:
    rv = c.get(f"{MACHINES}/{name}").json()["metadata"]["resourceVersion"]
    patch = {"metadata": {"resourceVersion": rv}, "spec": {"machinePoolRef": {"name": pool}}}
    return c.patch(f"{MACHINES}/{name}", json=patch, headers=MERGE,
                   params={"dryRun": "All"} if dry_run else None)


def client(server: ApiServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=server.headers(), timeout=10)


def setup_compute(c: httpx.Client, cpu: str = "8", memory: str = "64Gi") -> None:
    assert c.post(f"{COMPUTE}/machineclasses", json=machine_class("small", "2", "1Gi")).status_code == 201
    make_pool(c, "machinepools", "host-1", {"cpu": cpu, "memory": memory, "class/machine.small": "4"})


def test_bind_past_capacity_is_a_conflict_naming_pool_resource_need_and_free(
    apiserver: ApiServer,
) -> None:
    with client(apiserver) as c:
        setup_compute(c, cpu="5")
        for i in range(3):
            assert c.post(MACHINES, json=machine(f"web-{i}")).status_code == 201
        assert bind(c, "web-0", "host-1").status_code == 200
        assert bind(c, "web-1", "host-1").status_code == 200
        r = bind(c, "web-2", "host-1")
        assert r.status_code == 409, r.text
        status = r.json()
        assert status["reason"] == "Conflict"
        assert status["message"] == (
            'machinepool "host-1" has too little cpu for machine "web-2": needs 2, 1 free of 5'
        )
        assert "machinePoolRef" not in c.get(f"{MACHINES}/web-2").json()["spec"]
        # created already bound: checked too
        r = c.post(MACHINES, json=machine("web-3", pool="host-1"))
        assert r.status_code == 409 and 'machine "web-3"' in r.json()["message"]
        assert c.get(f"{MACHINES}/web-3").status_code == 404
        # the class keys (class/machine.small) are informational: "4" would have allowed web-2


def test_unknown_class_unoffered_resource_and_missing_pool(apiserver: ApiServer) -> None:
    with client(apiserver) as c:
        setup_compute(c)
        r = c.post(MACHINES, json=machine("ghost", cls="nope", pool="host-1"))
        assert r.status_code == 409
        assert 'machineclass "nope" does not exist' in r.json()["message"]
        gpu = machine_class("gpu", "1", "1Gi")
        gpu["capabilities"]["nvidia.com/gpu"] = "1"
        assert c.post(f"{COMPUTE}/machineclasses", json=gpu).status_code == 201
        r = c.post(MACHINES, json=machine("g", cls="gpu", pool="host-1"))
        assert r.status_code == 409
        assert r.json()["message"] == (
            'machinepool "host-1" does not offer nvidia.com/gpu for machine "g": needs 1'
        )
        # a pool that is not registered yet accepts binds (IronCore lets objects name it early) ...
        for i in range(5):
            assert c.post(MACHINES, json=machine(f"early-{i}", pool="host-2")).status_code == 201
        # ... and once it registers, what is already bound counts: 5 x 2 cpu of 10 leaves 0
        make_pool(c, "machinepools", "host-2", {"cpu": "10", "memory": "64Gi"})
        r = c.post(MACHINES, json=machine("late", pool="host-2"))
        assert r.status_code == 409
        assert "needs 2, 0 free of 10" in r.json()["message"]
        # a registered pool whose poollet has not reported capacity yet is treated the same way
        r = c.post(f"{COMPUTE}/machinepools", json={"metadata": {"name": "host-3"}})
        assert r.status_code == 201
        assert c.post(MACHINES, json=machine("quick", pool="host-3")).status_code == 201
        r = c.patch(f"{COMPUTE}/machinepools/host-3/status", headers=MERGE,
                    json={"status": {"allocatable": {"cpu": "3", "memory": "8Gi"}}})
        assert r.status_code == 200
        r = c.post(MACHINES, json=machine("slow", pool="host-3"))
        assert r.status_code == 409 and "needs 2, 1 free of 3" in r.json()["message"]


def test_memory_falls_back_on_capacity_and_messages_use_its_units(apiserver: ApiServer) -> None:
    with client(apiserver) as c:
        assert c.post(f"{COMPUTE}/machineclasses",
                      json=machine_class("big", "1", "3Gi")).status_code == 201
        make_pool(c, "machinepools", "host-1", {"cpu": "16"}, capacity={"cpu": "32", "memory": "4Gi"})
        assert c.post(MACHINES, json=machine("a", cls="big", pool="host-1")).status_code == 201
        r = c.post(MACHINES, json=machine("b", cls="big", pool="host-1"))
        assert r.status_code == 409
        assert r.json()["message"] == (
            'machinepool "host-1" has too little memory for machine "b": needs 3Gi, 1Gi free of 4Gi'
        )


async def test_concurrent_binds_never_exceed_the_pool(apiserver: ApiServer) -> None:
    with client(apiserver) as c:
        setup_compute(c, cpu="10")  # room for 5 machines of 2 cpu
        for i in range(50):
            assert c.post(MACHINES, json=machine(f"m-{i}")).status_code == 201
        rvs = {i: c.get(f"{MACHINES}/m-{i}").json()["metadata"]["resourceVersion"] for i in range(50)}

    async def race(ac: httpx.AsyncClient, i: int) -> int:
        patch = {"metadata": {"resourceVersion": rvs[i]}, "spec": {"machinePoolRef": {"name": "host-1"}}}
        r = await ac.patch(f"{MACHINES}/m-{i}", json=patch, headers=MERGE)
        assert r.status_code in (200, 409), r.text
        return r.status_code

    clients = [httpx.AsyncClient(base_url=apiserver.url, headers=apiserver.headers(), timeout=30)
               for _ in range(10)]
    try:
        codes = await asyncio.gather(*(race(clients[i % 10], i) for i in range(50)))
    finally:
        for ac in clients:
            await ac.aclose()
    assert codes.count(200) == 5
    with client(apiserver) as c:
        items = c.get(MACHINES).json()["items"]
        bound = [m for m in items if (m["spec"].get("machinePoolRef") or {}).get("name") == "host-1"]
        assert len(bound) == 5


def test_deleting_frees_room_but_terminating_machines_still_count(apiserver: ApiServer) -> None:
    with client(apiserver) as c:
        setup_compute(c, cpu="4")
        held = machine("a", pool="host-1")
        held["metadata"]["finalizers"] = ["example.com/hold"]
        assert c.post(MACHINES, json=held).status_code == 201
        assert c.post(MACHINES, json=machine("b", pool="host-1")).status_code == 201
        assert c.post(MACHINES, json=machine("c")).status_code == 201
        assert bind(c, "c", "host-1").status_code == 409
        assert c.delete(f"{MACHINES}/a").status_code == 200  # terminating: the domain still runs
        assert c.get(f"{MACHINES}/a").json()["metadata"]["deletionTimestamp"]
        assert bind(c, "c", "host-1").status_code == 409
        r = c.patch(f"{MACHINES}/a", json={"metadata": {"finalizers": None}}, headers=MERGE)
        assert r.status_code == 200, r.text
        assert c.get(f"{MACHINES}/a").status_code == 404
        assert bind(c, "c", "host-1").status_code == 200
        assert c.delete(f"{MACHINES}/b").status_code == 200
        assert c.post(MACHINES, json=machine("d", pool="host-1")).status_code == 201


def test_dry_run_binds_are_checked_and_change_nothing(apiserver: ApiServer) -> None:
    with client(apiserver) as c:
        setup_compute(c, cpu="2")
        assert c.post(MACHINES, json=machine("a")).status_code == 201
        assert c.post(MACHINES, json=machine("b")).status_code == 201
        before = c.get(f"{MACHINES}/a").json()["metadata"]["resourceVersion"]
        assert bind(c, "a", "host-1", dry_run=True).status_code == 200
        assert c.get(f"{MACHINES}/a").json()["metadata"]["resourceVersion"] == before
        # the dry run reserved nothing: b can still take the whole pool
        assert bind(c, "b", "host-1").status_code == 200
        r = bind(c, "a", "host-1", dry_run=True)
        assert r.status_code == 409 and "0 free of 2" in r.json()["message"]
        r = c.post(MACHINES, json=machine("x", pool="host-1"), params={"dryRun": "All"})
        assert r.status_code == 409
        assert c.get(f"{MACHINES}/x").status_code == 404


def test_restart_rebuilds_the_index(apiserver: ApiServer, tmp_path: Path) -> None:
    fx = _fixtures(apiserver)
    with client(apiserver) as c:
        setup_compute(c, cpu="4")
        assert c.post(MACHINES, json=machine("a", pool="host-1")).status_code == 201
        assert c.post(MACHINES, json=machine("b", pool="host-1")).status_code == 201
    fx["stop_apiserver"](apiserver)
    again = fx["start_apiserver"](tmp_path, db_path=apiserver.db_path)
    try:
        with client(again) as c:
            r = c.post(MACHINES, json=machine("c", pool="host-1"))
            assert r.status_code == 409, r.text
            assert "needs 2, 0 free of 4" in r.json()["message"]
            assert c.delete(f"{MACHINES}/a").status_code == 200
            assert c.post(MACHINES, json=machine("c", pool="host-1")).status_code == 201
    finally:
        fx["stop_apiserver"](again)


def test_volumes_are_checked_by_storage_including_growth(apiserver: ApiServer) -> None:
    with client(apiserver) as c:
        # Volumes of the class may grow (its resize policy; a Static class refuses any growth first).
        made = c.post(f"{STORAGE}/volumeclasses", json={
            "apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "VolumeClass",
            "metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "1000"},
            "resizePolicy": "ExpandOnly"})
        assert made.status_code == 201, made.text
        make_pool(c, "volumepools", "disk-1", {"storage": "10Gi", "class/volume.fast": "3"})
        assert c.post(VOLUMES, json=volume("v1", "6Gi", pool="disk-1")).status_code == 201
        r = c.post(VOLUMES, json=volume("v2", "6Gi", pool="disk-1"))
        assert r.status_code == 409
        assert r.json()["message"] == (
            'volumepool "disk-1" has too little storage for volume "v2": needs 6Gi, 4Gi free of 10Gi'
        )
        assert c.post(VOLUMES, json=volume("v3", "4Gi")).status_code == 201
        rv = c.get(f"{VOLUMES}/v3").json()["metadata"]["resourceVersion"]
        patch = {"metadata": {"resourceVersion": rv}, "spec": {"volumePoolRef": {"name": "disk-1"}}}
        assert c.patch(f"{VOLUMES}/v3", json=patch, headers=MERGE).status_code == 200
        # growing a bound volume past the pool is refused too
        r = c.patch(f"{VOLUMES}/v1", json={"spec": {"resources": {"storage": "7Gi"}}}, headers=MERGE)
        assert r.status_code == 409, r.text
        assert "needs 1Gi, 0 free of 10Gi" in r.json()["message"]
