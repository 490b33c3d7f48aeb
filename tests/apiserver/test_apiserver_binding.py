"""The binding subresource of Machines and Volumes (Kubernetes' pods/binding) against a real apiserver."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.conftest import ApiServer, start_apiserver, stop_apiserver

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
STORAGE = "/apis/storage.ironcore.dev/v1alpha1"
MACHINES = f"{COMPUTE}/namespaces/default/machines"
MERGE = {"Content-Type": "application/merge-patch+json"}


def binding(pool: str, kind: str = "MachinePool", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta, "target": {"kind": kind, "name": pool}}


def setup(c: httpx.Client, cpu: str = "4") -> None:
    r = c.post(f"{COMPUTE}/machineclasses", json={
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass", "metadata": {"name": "small"},
        "capabilities": {"cpu": "2", "memory": "1Gi"}})
    assert r.status_code == 201, r.text
    pool = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachinePool", "metadata": {"name": "p1"}}
    assert c.post(f"{COMPUTE}/machinepools", json=pool).status_code == 201
    room = {"cpu": cpu, "memory": "8Gi"}
    r = c.patch(f"{COMPUTE}/machinepools/p1/status", json={"status": {"allocatable": room, "capacity": room}},
                headers=MERGE)
    assert r.status_code == 200, r.text
    for name in ("a", "b", "c"):
        spec = {"machineClassRef": {"name": "small"}}
        r = c.post(MACHINES, json={"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
                                   "metadata": {"name": name}, "spec": spec})
        assert r.status_code == 201, r.text


def test_binding_sets_the_pool_once_with_preconditions_and_capacity(apiserver: ApiServer) -> None:
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(), timeout=10) as c:
        setup(c)
        a = c.get(f"{MACHINES}/a").json()
        rv = a["metadata"]["resourceVersion"]
        r = c.post(f"{MACHINES}/a/binding", json=binding("p1", name="a", resourceVersion=rv))
        assert r.status_code == 201, r.text
        status = r.json()
        assert (status["kind"], status["status"], status["code"]) == ("Status", "Success", 201)
        stored = c.get(f"{MACHINES}/a").json()
        assert stored["spec"]["machinePoolRef"] == {"name": "p1"}
        assert status["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        assert stored["metadata"]["generation"] == a["metadata"]["generation"] + 1
        # The binding says so in the same write, as Kubernetes sets PodScheduled.
        [cond] = [c for c in stored["status"]["conditions"] if c["type"] == "Scheduled"]
        assert (cond["status"], cond["reason"]) == ("True", "Scheduled")
        assert cond["message"] == "Successfully assigned default/a to p1"
        # Bound once: a second binding is a conflict, as Kubernetes says of an assigned pod.
        r = c.post(f"{MACHINES}/a/binding", json=binding("p1"))
        assert r.status_code == 409 and "already bound" in r.json()["message"]
        # Preconditions: a stale resourceVersion, another uid.
        b = c.get(f"{MACHINES}/b").json()
        c.patch(f"{MACHINES}/b", json={"metadata": {"labels": {"x": "y"}}}, headers=MERGE)
        stale = b["metadata"]["resourceVersion"]
        r = c.post(f"{MACHINES}/b/binding", json=binding("p1", resourceVersion=stale))
        assert r.status_code == 409, r.text
        assert c.post(f"{MACHINES}/b/binding", json=binding("p1", uid="other")).status_code == 409
        # A dry run is checked and changes nothing; then the pool (4 cpu) is full after b.
        r = c.post(f"{MACHINES}/b/binding", json=binding("p1"), params={"dryRun": "All"})
        assert r.status_code == 201, r.text
        assert "machinePoolRef" not in c.get(f"{MACHINES}/b").json()["spec"]
        assert c.post(f"{MACHINES}/b/binding", json=binding("p1")).status_code == 201
        r = c.post(f"{MACHINES}/c/binding", json=binding("p1"))
        assert r.status_code == 409
        assert r.json()["message"] == (
            'machinepool "p1" has too little cpu for machine "c": needs 2, 0 free of 4')


def test_bad_bindings_name_the_field(apiserver: ApiServer) -> None:
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(), timeout=10) as c:
        setup(c)
        r = c.post(f"{MACHINES}/a/binding", json={"apiVersion": "v1", "kind": "Binding", "metadata": {}})
        assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "target"
        r = c.post(f"{MACHINES}/a/binding", json=binding("p1", kind="VolumePool"))
        assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "target.kind"
        r = c.post(f"{MACHINES}/a/binding", json=binding(""))
        assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "target.name"
        r = c.post(f"{MACHINES}/a/binding", json={**binding("p1"), "apiVersion": "storage.ironcore.dev/v1"})
        assert r.status_code == 400
        assert c.post(f"{MACHINES}/a/binding", json=binding("p1", name="b")).status_code == 400
        assert c.post(f"{MACHINES}/nope/binding", json=binding("p1")).status_code == 404
        assert c.get(f"{MACHINES}/a/binding").status_code == 405
        assert c.patch(f"{MACHINES}/a/binding", json={}, headers=MERGE).status_code == 405
        assert c.post(f"{COMPUTE}/machineclasses/small/binding", json=binding("p1")).status_code == 404
        # Only what the binding changes is validated, in the object's own terms.
        r = c.post(f"{MACHINES}/a/binding", json=binding("No_Such"))
        assert r.status_code == 422, r.text
        assert r.json()["details"]["causes"][0]["field"] == "spec.machinePoolRef.name"
        assert r.json()["message"].startswith('Machine.compute.ironcore.dev "a" is invalid')
        assert "machinePoolRef" not in c.get(f"{MACHINES}/a").json()["spec"]


def test_volumes_bind_and_pools_may_not(tmp_path: Path) -> None:
    (tmp_path / "tokens.csv").write_text(
        'admin-token,admin,1,"system:masters"\n'
        'pool-token,compute.ironcore.dev:system:machinepool:p1,2,"compute.ironcore.dev:system:machinepools"\n')
    server = start_apiserver(tmp_path)
    try:
        with httpx.Client(base_url=server.url, headers=server.headers("admin-token"), timeout=10) as c:
            setup(c)
            as_pool = {"Authorization": "Bearer pool-token"}
            r = c.post(f"{MACHINES}/a/binding", json=binding("p1"), headers=as_pool)
            assert r.status_code == 403, r.text
            storage = "storage.ironcore.dev/v1alpha1"
            assert c.post(f"{STORAGE}/volumeclasses", json={
                "apiVersion": storage, "kind": "VolumeClass", "metadata": {"name": "fast"},
                "capabilities": {"tps": "1Mi", "iops": "10"}}).status_code == 201
            r = c.post(f"{STORAGE}/namespaces/default/volumes", json={
                "apiVersion": storage, "kind": "Volume", "metadata": {"name": "v"},
                "spec": {"volumeClassRef": {"name": "fast"}, "resources": {"storage": "1Gi"}}})
            assert r.status_code == 201, r.text
            r = c.post(f"{STORAGE}/namespaces/default/volumes/v/binding",
                       json=binding("disk", kind="VolumePool"))
            assert r.status_code == 201, r.text
            volume = c.get(f"{STORAGE}/namespaces/default/volumes/v").json()
            assert volume["spec"]["volumePoolRef"] == {"name": "disk"}
            # A Volume without a class takes no pool, bound or not.
            r = c.post(f"{STORAGE}/namespaces/default/volumes", json={
                "apiVersion": storage, "kind": "Volume", "metadata": {"name": "bare"}, "spec": {}})
            assert r.status_code == 201, r.text
            r = c.post(f"{STORAGE}/namespaces/default/volumes/bare/binding",
                       json=binding("disk", kind="VolumePool"))
            assert r.status_code == 422, r.text
            assert r.json()["details"]["causes"][0]["field"] == "spec.volumePoolRef"
    finally:
        stop_apiserver(server)
