"""ResourceQuota against a real apiserver process over SQLite: Machines and Volumes within a
namespace's quota, refusals in Kubernetes' words (403), ``status.used`` kept by the apiserver,
validation naming the field, the default roles, and VolumeClass resize policies.

One apiserver serves the module (starting one costs seconds on a loaded machine); every test works
in a namespace of its own.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ApiServer, start_apiserver, stop_apiserver
from tests.helpers.wait import wait_for

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
STORAGE = "/apis/storage.ironcore.dev/v1alpha1"
QUOTA_API = "/apis/core.ironcore.dev/v1alpha1"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
MERGE = {"Content-Type": "application/merge-patch+json"}
CPU, MEMORY, STORAGE_REQ = "requests.cpu", "requests.memory", "requests.storage"
MACHINES_COUNT, VOLUMES_COUNT = "count/machines.compute.ironcore.dev", "count/volumes.storage.ironcore.dev"
_NAMESPACES = itertools.count()

# The classes every test may use: cpu and memory per Machine, resize policy per Volume.
MACHINE_CLASSES = {"q-one": ("1", "1Gi"), "q-two": ("2", "2Gi")}
VOLUME_CLASSES = {"q-fixed": "Static", "q-grow": "ExpandOnly"}


def machines(ns: str) -> str:
    return f"{COMPUTE}/namespaces/{ns}/machines"


def volumes(ns: str) -> str:
    return f"{STORAGE}/namespaces/{ns}/volumes"


def quotas(ns: str) -> str:
    return f"{QUOTA_API}/namespaces/{ns}/resourcequotas"


def machine(name: str, cls: str = "q-two") -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine", "metadata": {"name": name},
            "spec": {"machineClassRef": {"name": cls}}}


def volume(name: str, storage: str, cls: str = "q-grow") -> dict[str, Any]:
    return {"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "Volume", "metadata": {"name": name},
            "spec": {"volumeClassRef": {"name": cls}, "resources": {"storage": storage}}}


def quota(name: str, hard: dict[str, str], scopes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"hard": hard}
    if scopes:
        spec["scopeSelector"] = {"matchExpressions": scopes}
    return {"apiVersion": "core.ironcore.dev/v1alpha1", "kind": "ResourceQuota", "metadata": {"name": name},
            "spec": spec}


def ok(r: httpx.Response, code: int = 201) -> dict[str, Any]:
    assert r.status_code == code, r.text
    return r.json()  # type: ignore[no-any-return]


def forbidden(r: httpx.Response) -> str:
    """The message of a 403 Forbidden Status."""
    assert r.status_code == 403, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["reason"] == "Forbidden", body
    return str(body["message"])


def setup_classes(c: httpx.Client) -> None:
    """The module's classes (a 409 means an earlier run on this server made them)."""
    for name, (cpu, memory) in MACHINE_CLASSES.items():
        r = c.post(f"{COMPUTE}/machineclasses", json={
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass", "metadata": {"name": name},
            "capabilities": {"cpu": cpu, "memory": memory}})
        assert r.status_code in (201, 409), r.text
    for name, policy in VOLUME_CLASSES.items():
        r = c.post(f"{STORAGE}/volumeclasses", json={
            "apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "VolumeClass", "metadata": {"name": name},
            "capabilities": {"tps": "100Mi", "iops": "1000"}, "resizePolicy": policy})
        assert r.status_code in (201, 409), r.text


def new_namespace(c: httpx.Client, prefix: str = "quota") -> str:
    ns = f"{prefix}-{next(_NAMESPACES)}"
    ok(c.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    return ns


def used_becomes(c: httpx.Client, ns: str, name: str, used: dict[str, str],
                 timeout: float = 10) -> dict[str, Any]:
    """Wait until the quota's ``status.used`` is ``used``; the quota."""

    def current() -> dict[str, Any] | None:
        doc = ok(c.get(f"{quotas(ns)}/{name}"), 200)
        return doc if (doc.get("status") or {}).get("used") == used else None

    return wait_for(current, timeout, f"quota {ns}/{name} to show used {used}")


async def _write_status(db: Path, ns: str, name: str, status: dict[str, Any]) -> None:
    """Write a quota's status straight into the store (no apiserver running)."""
    from ironpool.api.resources import resolve
    from ironpool.store.sqlite import SQLiteStore

    store = SQLiteStore(str(db))
    try:
        key = resolve("resourcequota").key(ns, name)
        doc = await store.get(key)
        assert doc is not None
        await store.update(key, {**doc, "status": status})
    finally:
        await store.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    running = start_apiserver(tmp_path_factory.mktemp("quota"))
    try:
        with httpx.Client(base_url=running.url, headers=running.headers(), timeout=30) as c:
            setup_classes(c)
        yield running
    finally:
        stop_apiserver(running)


@pytest.fixture
def c(server: ApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as client:
        yield client


def test_machines_fill_a_cpu_quota_and_the_next_is_refused_naming_resource_limit_and_use(
        c: httpx.Client) -> None:
    ns = new_namespace(c)
    ok(c.post(quotas(ns), json=quota("compute", {CPU: "4"})))
    ok(c.post(machines(ns), json=machine("a")))
    ok(c.post(machines(ns), json=machine("b")))
    message = forbidden(c.post(machines(ns), json=machine("c")))
    assert message == ('machines.compute.ironcore.dev "c" is forbidden: exceeded quota: compute, '
                       "requested: requests.cpu=2, used: requests.cpu=4, limited: requests.cpu=4")
    assert c.get(f"{machines(ns)}/c").status_code == 404  # nothing half-made
    # A smaller one does not fit either; a dry run is judged alike and charges nothing.
    assert "requested: requests.cpu=1, used: requests.cpu=4" in forbidden(
        c.post(machines(ns), json=machine("d", "q-one")))
    # Deleting frees what the Machine was charged.
    ok(c.delete(f"{machines(ns)}/a"), 200)
    ok(c.post(machines(ns), json=machine("c"), params={"dryRun": "All"}))
    ok(c.post(machines(ns), json=machine("c")))
    forbidden(c.post(machines(ns), json=machine("e", "q-one")))


def test_status_shows_hard_and_follows_creates_and_deletes(c: httpx.Client) -> None:
    ns = new_namespace(c)
    ok(c.post(machines(ns), json=machine("before")))  # counted although it predates the quota
    ok(c.post(volumes(ns), json=volume("disk", "3Gi")))
    hard = {CPU: "10", MEMORY: "16Gi", MACHINES_COUNT: "5", STORAGE_REQ: "100Gi", VOLUMES_COUNT: "4"}
    ok(c.post(quotas(ns), json=quota("all", hard)))
    doc = used_becomes(c, ns, "all", {CPU: "2", MEMORY: "2Gi", MACHINES_COUNT: "1", STORAGE_REQ: "3Gi",
                                      VOLUMES_COUNT: "1"})
    assert doc["status"]["hard"] == hard
    ok(c.post(machines(ns), json=machine("one", "q-one")))
    used_becomes(c, ns, "all", {CPU: "3", MEMORY: "3Gi", MACHINES_COUNT: "2", STORAGE_REQ: "3Gi",
                                VOLUMES_COUNT: "1"})
    ok(c.delete(f"{machines(ns)}/before"), 200)
    ok(c.delete(f"{volumes(ns)}/disk"), 200)
    used_becomes(c, ns, "all", {CPU: "1", MEMORY: "1Gi", MACHINES_COUNT: "1", STORAGE_REQ: "0",
                                VOLUMES_COUNT: "0"})
    # A status written by hand (a cluster admin may) is put right with the next change.
    ok(c.patch(f"{quotas(ns)}/all/status", json={"status": {"used": {CPU: "9"}}}, headers=MERGE), 200)
    ok(c.post(machines(ns), json=machine("two", "q-one")))
    used_becomes(c, ns, "all", {CPU: "2", MEMORY: "2Gi", MACHINES_COUNT: "2", STORAGE_REQ: "0",
                                VOLUMES_COUNT: "0"})


async def test_concurrent_creates_admit_exactly_the_limit(server: ApiServer) -> None:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=30) as c:
        ns = new_namespace(c)
        ok(c.post(quotas(ns), json=quota("cpu", {CPU: "5"})))
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers(), timeout=60) as a:
        codes = [r.status_code for r in await asyncio.gather(
            *(a.post(machines(ns), json=machine(f"m{i}", "q-one")) for i in range(16)))]
        assert sorted(codes) == [201] * 5 + [403] * 11
        assert len((await a.get(machines(ns))).json()["items"]) == 5


def test_volume_storage_quota_counts_creates_and_growth(c: httpx.Client) -> None:
    ns = new_namespace(c)
    ok(c.post(quotas(ns), json=quota("disks", {STORAGE_REQ: "10Gi", VOLUMES_COUNT: "3"})))
    ok(c.post(volumes(ns), json=volume("a", "4Gi")))
    ok(c.post(volumes(ns), json=volume("b", "4Gi")))
    assert forbidden(c.post(volumes(ns), json=volume("c", "4Gi"))) == (
        'volumes.storage.ironcore.dev "c" is forbidden: exceeded quota: disks, '
        "requested: requests.storage=4Gi, used: requests.storage=8Gi, limited: requests.storage=10Gi")
    # Growing a Volume needs what it grows by.
    ok(c.patch(f"{volumes(ns)}/a", json={"spec": {"resources": {"storage": "6Gi"}}}, headers=MERGE), 200)
    assert "requested: requests.storage=1Gi, used: requests.storage=10Gi" in forbidden(
        c.patch(f"{volumes(ns)}/b", json={"spec": {"resources": {"storage": "5Gi"}}}, headers=MERGE))
    assert ok(c.get(f"{volumes(ns)}/b"), 200)["spec"]["resources"]["storage"] == "4Gi"
    used_becomes(c, ns, "disks", {STORAGE_REQ: "10Gi", VOLUMES_COUNT: "2"})
    # The count limits too: a third Volume fits the storage left by deleting b, a fourth no count.
    ok(c.delete(f"{volumes(ns)}/b"), 200)
    ok(c.post(volumes(ns), json=volume("c", "1Gi")))
    ok(c.post(volumes(ns), json=volume("d", "1Gi")))
    assert "requested: count/volumes.storage.ironcore.dev=1, used: count/volumes.storage.ironcore.dev=3" in \
        forbidden(c.post(volumes(ns), json=volume("e", "1Gi")))


def test_scope_selector_counts_only_the_classes_it_names(c: httpx.Client) -> None:
    ns = new_namespace(c)
    scope = [{"scopeName": "MachineClass", "operator": "In", "values": ["q-two"]}]
    ok(c.post(quotas(ns), json=quota("big", {CPU: "2"}, scope)))
    for i in range(3):
        ok(c.post(machines(ns), json=machine(f"small-{i}", "q-one")))  # not counted
    ok(c.post(machines(ns), json=machine("big-0")))
    assert "exceeded quota: big" in forbidden(c.post(machines(ns), json=machine("big-1")))
    used_becomes(c, ns, "big", {CPU: "2"})
    # A VolumeClass scope counts Volumes only (and no Machine).
    fixed = [{"scopeName": "VolumeClass", "operator": "In", "values": ["q-fixed"]}]
    ok(c.post(quotas(ns), json=quota("fixed-disks", {VOLUMES_COUNT: "1", CPU: "0"}, fixed)))
    ok(c.post(machines(ns), json=machine("small-3", "q-one")))
    ok(c.post(volumes(ns), json=volume("grow-0", "1Gi", "q-grow")))
    ok(c.post(volumes(ns), json=volume("fixed-0", "1Gi", "q-fixed")))
    refused = c.post(volumes(ns), json=volume("fixed-1", "1Gi", "q-fixed"))
    assert "exceeded quota: fixed-disks" in forbidden(refused)


def test_limits_change_at_once_and_a_lowered_one_refuses_only_growth(c: httpx.Client) -> None:
    ns = new_namespace(c)
    ok(c.post(quotas(ns), json=quota("q", {MACHINES_COUNT: "3"})))
    ok(c.post(machines(ns), json=machine("a", "q-one")))
    ok(c.post(machines(ns), json=machine("b", "q-one")))
    ok(c.patch(f"{quotas(ns)}/q", json={"spec": {"hard": {MACHINES_COUNT: "1"}}}, headers=MERGE), 200)
    assert "used: count/machines.compute.ironcore.dev=2, limited: count/machines.compute.ironcore.dev=1" in \
        forbidden(c.post(machines(ns), json=machine("c", "q-one")))
    used_becomes(c, ns, "q", {MACHINES_COUNT: "2"})  # over the limit: shown as it is
    ok(c.delete(f"{machines(ns)}/a"), 200)  # what does not grow is never refused
    ok(c.patch(f"{quotas(ns)}/q", json={"spec": {"hard": {MACHINES_COUNT: "2"}}}, headers=MERGE), 200)
    ok(c.post(machines(ns), json=machine("c", "q-one")))
    # The last quota gone, nothing limits the namespace.
    ok(c.delete(f"{quotas(ns)}/q"), 200)
    for i in range(3):
        ok(c.post(machines(ns), json=machine(f"free-{i}", "q-one")))


def test_a_machine_of_a_missing_class_is_refused_while_a_quota_limits_cpu(c: httpx.Client) -> None:
    ns = new_namespace(c)
    ok(c.post(quotas(ns), json=quota("count", {MACHINES_COUNT: "5"})))
    ok(c.post(machines(ns), json=machine("unknown-0", "q-nowhere")))  # only counted: fine
    ok(c.post(quotas(ns), json=quota("cpu", {CPU: "8"})))
    message = forbidden(c.post(machines(ns), json=machine("unknown-1", "q-nowhere")))
    assert 'machineclass "q-nowhere" does not exist' in message and "quota: cpu" in message


def test_bad_quotas_are_refused_naming_the_field(c: httpx.Client) -> None:
    ns = new_namespace(c)
    bad = quota("bad", {CPU: "four", "cpu": "2", MEMORY: "-1Gi", MACHINES_COUNT: "1.5"},
                [{"scopeName": "MachineClass", "operator": "In"}])
    r = c.post(quotas(ns), json=bad)
    assert r.status_code == 422, r.text
    causes = {cause["field"]: cause["message"] for cause in r.json()["details"]["causes"]}
    assert set(causes) == {"spec.hard[requests.cpu]", "spec.hard.cpu", "spec.hard[requests.memory]",
                           f"spec.hard[{MACHINES_COUNT}]", "spec.scopeSelector.matchExpressions[0].values"}
    assert "a quota limits cpu as requests.cpu" in causes["spec.hard.cpu"]
    assert "must be greater than or equal to 0" in causes["spec.hard[requests.memory]"]
    assert "whole number" in causes[f"spec.hard[{MACHINES_COUNT}]"]
    r = c.post(quotas(ns), json=quota("scope", {CPU: "1"}, [{"scopeName": "Pod", "operator": "Exists"}]))
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == \
        "spec.scopeSelector.matchExpressions[0].scopeName", r.text
    assert c.get(f"{quotas(ns)}/bad").status_code == 404


def test_static_class_refuses_growth_expand_only_allows_it_and_nothing_shrinks(c: httpx.Client) -> None:
    ns = new_namespace(c)
    ok(c.post(volumes(ns), json=volume("fixed", "1Gi", "q-fixed")))
    ok(c.post(volumes(ns), json=volume("grow", "1Gi", "q-grow")))

    def resize(name: str, size: str) -> httpx.Response:
        body = {"spec": {"resources": {"storage": size}}}
        return c.patch(f"{volumes(ns)}/{name}", json=body, headers=MERGE)

    def invalid(r: httpx.Response) -> str:
        assert r.status_code == 422, r.text
        (cause,) = r.json()["details"]["causes"]
        assert cause["field"] == "spec.resources.storage", cause
        return str(cause["message"])

    assert "resize policy Static" in invalid(resize("fixed", "2Gi"))
    assert "resize policy Static" in invalid(resize("fixed", "512Mi"))
    assert ok(resize("grow", "3Gi"), 200)["spec"]["resources"]["storage"] == "3Gi"
    assert "cannot shrink from 3Gi to 2Gi" in invalid(resize("grow", "2Gi"))
    assert ok(c.get(f"{volumes(ns)}/fixed"), 200)["spec"]["resources"]["storage"] == "1Gi"
    # Other changes of a Volume of a Static class go through.
    ok(c.patch(f"{volumes(ns)}/fixed", json={"metadata": {"labels": {"tier": "a"}}}, headers=MERGE), 200)


def test_users_of_a_namespace_read_its_quota_and_only_cluster_admins_change_it(
        server: ApiServer, c: httpx.Client) -> None:
    ns = new_namespace(c)
    ok(c.post(quotas(ns), json=quota("q", {CPU: "1"})))
    alice = httpx.Client(base_url=server.url, headers=server.headers(server.user_token), timeout=30)
    with alice:
        assert alice.get(quotas(ns)).status_code == 403
        for role in ("view", "edit", "admin"):  # each alone
            bindings = f"{RBAC}/namespaces/{ns}/rolebindings"
            ok(c.post(bindings, json={
                "metadata": {"name": "developers"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "Group", "name": "developers"}]}))
            wait_for(lambda: alice.get(f"{quotas(ns)}/q").status_code == 200, 10, f"{role} to read the quota")
            assert ok(alice.get(quotas(ns)), 200)["items"][0]["metadata"]["name"] == "q"
            assert "cannot patch resource" in forbidden(alice.patch(
                f"{quotas(ns)}/q", json={"spec": {"hard": {CPU: "100"}}}, headers=MERGE))
            mine = quota("mine", {CPU: "9"})
            assert "cannot create resource" in forbidden(alice.post(quotas(ns), json=mine))
            assert "cannot delete resource" in forbidden(alice.delete(f"{quotas(ns)}/q"))
            if role == "edit":
                # What the quota refuses is refused to them too, in the quota's words.
                ok(alice.post(machines(ns), json=machine("a", "q-one")))
                assert "exceeded quota: q" in forbidden(alice.post(machines(ns), json=machine("b", "q-one")))
            ok(c.delete(f"{bindings}/developers"), 200)
            wait_for(lambda: alice.get(f"{quotas(ns)}/q").status_code == 403, 10, f"{role} to be gone")


def test_the_state_survives_a_restart_and_the_status_is_recomputed(tmp_path: Path) -> None:
    first = start_apiserver(tmp_path)
    try:
        with httpx.Client(base_url=first.url, headers=first.headers(), timeout=30) as c:
            setup_classes(c)
            ns = new_namespace(c, "restart")
            ok(c.post(quotas(ns), json=quota("q", {CPU: "3"})))
            ok(c.post(machines(ns), json=machine("a")))
            used_becomes(c, ns, "q", {CPU: "2"})
    finally:
        stop_apiserver(first)
    asyncio.run(_write_status(first.db_path, ns, "q", {"hard": {CPU: "3"}, "used": {CPU: "0"}}))
    again = start_apiserver(tmp_path, db_path=first.db_path)
    try:
        with httpx.Client(base_url=again.url, headers=again.headers(), timeout=30) as c:
            # A status written wrong while no apiserver ran is put right at start-up, and what was
            # admitted before still counts.
            used_becomes(c, ns, "q", {CPU: "2"})
            assert "used: requests.cpu=2, limited: requests.cpu=3" in forbidden(
                c.post(machines(ns), json=machine("b")))
            ok(c.post(machines(ns), json=machine("c", "q-one")))
            used_becomes(c, ns, "q", {CPU: "3"})
    finally:
        stop_apiserver(again)
