"""The OpenKCM API groups served as aliases of IronCore's, against a real ``ironpool apiserver`` process
over HTTP: discovery and OpenAPI list both, one stored object answers through either group in the
group asked, lists and watches through either see the same objects, bodies name the path's group (its
case folded), errors name the group asked, and RBAC matches rules per group."""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ApiServer, start_apiserver, stop_apiserver

IRONCORE = "/apis/compute.ironcore.dev/v1alpha1"
OPENKCM = "/apis/compute.openkcm.dev/v1alpha1"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
IC, KCM = "compute.ironcore.dev/v1alpha1", "compute.openkcm.dev/v1alpha1"  # the apiVersions answered
WRITTEN = "compute.OpenKCM.dev/v1alpha1"  # as OpenKCM's manifests spell it
POOL_USER = "compute.ironcore.dev:system:machinepool:rack-1"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    tmp = tmp_path_factory.mktemp("aliases")
    pool_token = secrets.token_hex(16)
    (tmp / "pool-token").write_text(pool_token)
    (tmp / "tokens.csv").write_text(
        f'{secrets.token_hex(16)},admin,1,"system:masters"\n{secrets.token_hex(16)},alice,2,"developers"\n'
        f'{pool_token},{POOL_USER},3,"compute.ironcore.dev:system:machinepools"\n')
    running = start_apiserver(tmp)
    try:
        yield running
    finally:
        stop_apiserver(running)


@pytest.fixture
def admin(server: ApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as c:
        yield c


def machine_class(name: str, api_version: str = WRITTEN, cpu: str = "1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "MachineClass", "metadata": {"name": name},
            "capabilities": {"cpu": cpu, "memory": "1Gi"}}


def machine(name: str, api_version: str = WRITTEN) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "Machine", "metadata": {"name": name, "labels": {"v": "1"}},
            "spec": {"machineClassRef": {"name": "small"}}}


def ok(response: httpx.Response, code: int = 200) -> dict[str, Any]:
    assert response.status_code == code, response.text
    return dict(response.json())


def stored_keys(server: ApiServer, like: str) -> list[tuple[str, str]]:
    """The store's own rows (key, the stored object's apiVersion) whose key matches ``like``."""
    with sqlite3.connect(f"file:{server.db_path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT key, value FROM objects WHERE key LIKE ? ORDER BY key", (like,)).fetchall()
    return [(key, json.loads(value)["apiVersion"]) for key, value in rows]


def test_discovery_lists_both_groups_with_the_same_resources(admin: httpx.Client) -> None:
    groups = [g["name"] for g in ok(admin.get("/apis"))["groups"]]
    for alias, home in (("compute.openkcm.dev", "compute.ironcore.dev"), ("storage.openkcm.dev",
                        "storage.ironcore.dev"), ("networking.openkcm.dev", "networking.ironcore.dev"),
                        ("ipam.openkcm.dev", "ipam.ironcore.dev"), ("core.openkcm.dev", "core.ironcore.dev")):
        # IronCore's group first: kubectl resolves a plain name (``machines``) to the first group.
        assert groups.index(home) < groups.index(alias), groups
        ours = ok(admin.get(f"/apis/{home}/v1alpha1"))["resources"]
        theirs = ok(admin.get(f"/apis/{alias}/v1alpha1"))["resources"]
        assert [(r["name"], r["kind"], r["namespaced"]) for r in theirs] == [
            (r["name"], r["kind"], r["namespaced"]) for r in ours]
        # Short names stay with IronCore's group: ``kubectl get ma`` has one answer.
        assert all(r.get("shortNames", []) == [] for r in theirs)
    assert "machines/status" in {r["name"] for r in ok(admin.get(f"{OPENKCM}"))["resources"]}


def test_openapi_describes_the_alias_groups(admin: httpx.Client) -> None:
    listed = ok(admin.get("/openapi/v3"))["paths"]
    assert {"apis/compute.ironcore.dev/v1alpha1", "apis/compute.openkcm.dev/v1alpha1",
            "apis/ipam.openkcm.dev/v1alpha1"} <= set(listed)
    doc = ok(admin.get(listed["apis/compute.openkcm.dev/v1alpha1"]["serverRelativeURL"]))
    assert doc["paths"] and all(p.startswith("/apis/compute.openkcm.dev/v1alpha1/") for p in doc["paths"])
    patch = doc["paths"]["/apis/compute.openkcm.dev/v1alpha1/namespaces/{namespace}/machines/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "compute.openkcm.dev", "version": "v1alpha1",
                                                        "kind": "Machine"}
    schema = next(s for s in doc["components"]["schemas"].values()
                  if {"group": "compute.openkcm.dev", "version": "v1alpha1", "kind": "Machine"}
                  in s.get("x-kubernetes-group-version-kind", []))
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "compute.openkcm.dev", "version": "v1alpha1", "kind": "Machine"}]
    assert {"spec", "status", "apiVersion"} <= set(schema["properties"])
    # The document of every path names both groups of one schema.
    whole = ok(admin.get("/openapi.json"))
    gvks = [s["x-kubernetes-group-version-kind"] for s in whole["components"]["schemas"].values()
            if any(g["kind"] == "Machine" for g in s.get("x-kubernetes-group-version-kind", []))]
    assert gvks == [[{"group": "compute.ironcore.dev", "version": "v1alpha1", "kind": "Machine"},
                     {"group": "compute.openkcm.dev", "version": "v1alpha1", "kind": "Machine"}]]
    assert f"{OPENKCM}/namespaces/{{namespace}}/machines/{{name}}/status" in whole["paths"]


def test_one_object_read_and_written_through_either_group(server: ApiServer, admin: httpx.Client) -> None:
    made = ok(admin.post(f"{OPENKCM}/machineclasses", json=machine_class("one")), 201)
    assert made["apiVersion"] == KCM  # the capitals folded, the group asked
    seen = ok(admin.get(f"{IRONCORE}/machineclasses/one"))
    assert seen["apiVersion"] == IC
    assert seen["metadata"] == made["metadata"]
    # One object: stored once, under IronCore's group, with IronCore's apiVersion.
    assert stored_keys(server, "%/machineclasses/_/one") == [
        ("/registry/compute.ironcore.dev/machineclasses/_/one", IC)]
    taken = admin.post(f"{IRONCORE}/machineclasses", json=machine_class("one", IC))
    assert taken.status_code == 409
    assert taken.json()["message"] == 'machineclasses.compute.ironcore.dev "one" already exists'
    again = admin.post(f"{OPENKCM}/machineclasses", json=machine_class("one"))
    assert again.status_code == 409
    assert again.json()["message"] == 'machineclasses.compute.openkcm.dev "one" already exists'
    assert again.json()["details"]["group"] == "compute.openkcm.dev"

    # An update through IronCore's group is read through OpenKCM's, and the other way round.
    seen["metadata"]["labels"] = {"written-through": "ironcore"}
    updated = ok(admin.put(f"{IRONCORE}/machineclasses/one", json=seen))
    alias_view = ok(admin.get(f"{OPENKCM}/machineclasses/one"))
    assert alias_view["metadata"]["labels"] == {"written-through": "ironcore"}
    assert alias_view["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]
    alias_view["metadata"]["labels"] = {"written-through": "openkcm"}
    put = ok(admin.put(f"{OPENKCM}/machineclasses/one", json=alias_view))
    assert put["apiVersion"] == KCM
    labels = ok(admin.get(f"{IRONCORE}/machineclasses/one"))["metadata"]["labels"]
    assert labels == {"written-through": "openkcm"}
    stale = admin.put(f"{OPENKCM}/machineclasses/one", json=alias_view)  # its resourceVersion is old now
    assert stale.status_code == 409 and stale.json()["message"].startswith(
        'Operation cannot be fulfilled on machineclasses.compute.openkcm.dev "one"')

    # A merge patch and a server-side apply through the alias, with the group spelt as OpenKCM does.
    merged = ok(admin.patch(f"{OPENKCM}/machineclasses/one", headers=MERGE,
                            json={"apiVersion": WRITTEN, "metadata": {"labels": {"tier": "gold"}}}))
    assert merged["apiVersion"] == KCM and merged["metadata"]["labels"]["tier"] == "gold"
    applied = ok(admin.patch(f"{OPENKCM}/machineclasses/applied?fieldManager=kcm",
                             headers={"Content-Type": "application/apply-patch+yaml"},
                             content=json.dumps(machine_class("applied"))))
    assert applied["apiVersion"] == KCM
    # Field sets are the same in either group; they are tracked in the version the object is stored in.
    assert [(e["manager"], e["apiVersion"]) for e in applied["metadata"]["managedFields"]] == [
        ("kcm", IC)]
    stored = ok(admin.get(f"{IRONCORE}/machineclasses/applied"))
    assert stored["metadata"]["uid"] == applied["metadata"]["uid"]

    gone = ok(admin.delete(f"{OPENKCM}/machineclasses/one"))
    assert gone["apiVersion"] == KCM
    assert admin.get(f"{IRONCORE}/machineclasses/one").status_code == 404
    assert stored_keys(server, "%/machineclasses/_/one") == []


def test_lists_tables_and_subresources_answer_in_the_group_asked(admin: httpx.Client) -> None:
    ok(admin.post(f"{IRONCORE}/namespaces/default/machines", json=machine("a", IC)),
       201)
    ok(admin.post(f"{OPENKCM}/namespaces/default/machines", json=machine("b")), 201)
    lists = {}
    for path, api_version in ((IRONCORE, IC), (OPENKCM, KCM)):
        page = ok(admin.get(f"{path}/namespaces/default/machines", params={"labelSelector": "v=1"}))
        assert (page["apiVersion"], page["kind"]) == (api_version, "MachineList")
        assert {i["apiVersion"] for i in page["items"]} == {api_version}
        lists[path] = [(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in page["items"]]
        unfiltered = ok(admin.get(f"{path}/machines", params={"limit": "1"}))  # paged, every namespace
        assert unfiltered["items"][0]["apiVersion"] == api_version and unfiltered["metadata"]["continue"]
    assert lists[IRONCORE] == lists[OPENKCM] and [n for n, _ in lists[OPENKCM]] == ["a", "b"]

    table = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    rows = ok(admin.get(f"{OPENKCM}/namespaces/default/machines?includeObject=Object", headers=table))["rows"]
    assert [r["object"]["apiVersion"] for r in rows] == [KCM] * 2
    one = ok(admin.get(f"{OPENKCM}/namespaces/default/machines/a", headers=table))
    assert one["rows"][0]["object"]["kind"] == "PartialObjectMetadata" and one["rows"][0]["cells"][0] == "a"
    status = ok(admin.get(f"{OPENKCM}/namespaces/default/machines/a/status"))
    assert status["apiVersion"] == KCM
    status.setdefault("status", {})["state"] = "Pending"
    written = ok(admin.put(f"{OPENKCM}/namespaces/default/machines/a/status", json=status))
    assert written["apiVersion"] == KCM
    assert ok(admin.get(f"{IRONCORE}/namespaces/default/machines/a"))["status"]["state"] == "Pending"


def watch(admin: httpx.Client, path: str, count: int, headers: dict[str, str] | None = None,
          **params: str) -> list[dict[str, Any]]:
    """The first ``count`` events of a watch of ``path`` (the server ends it after 10 s at the latest)."""
    events: list[dict[str, Any]] = []
    query = {"watch": "true", "timeoutSeconds": "10", **params}
    with admin.stream("GET", path, params=query, headers=headers) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            events.append(json.loads(line))
            if len(events) == count:
                break
    return events


def test_watches_through_either_group_see_writes_through_the_other(admin: httpx.Client) -> None:
    start = ok(admin.get(f"{IRONCORE}/namespaces/default/machines"))["metadata"]["resourceVersion"]
    ok(admin.post(f"{OPENKCM}/namespaces/default/machines", json=machine("w")), 201)
    ok(admin.patch(f"{IRONCORE}/namespaces/default/machines/w", json={"metadata": {"labels": {"x": "y"}}},
                   headers=MERGE))
    ok(admin.delete(f"{OPENKCM}/namespaces/default/machines/w"))
    for path, api_version in ((OPENKCM, KCM), (IRONCORE, IC)):
        events = watch(admin, f"{path}/namespaces/default/machines", 3, resourceVersion=start)
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
        assert {e["object"]["apiVersion"] for e in events} == {api_version}
    # kubectl's watch: Tables of one row, the object in the group asked.
    tables = watch(admin, f"{OPENKCM}/namespaces/default/machines", 3, resourceVersion=start,
                   includeObject="Object", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert [e["object"]["kind"] for e in tables] == ["Table"] * 3
    assert [e["object"]["rows"][0]["object"]["apiVersion"] for e in tables] == [KCM] * 3
    # A streaming list through the alias: the current objects, then the bookmark that ends them.
    ok(admin.post(f"{IRONCORE}/machineclasses", json=machine_class("streamed", IC)),
       201)
    events = watch(admin, f"{OPENKCM}/machineclasses", 2, sendInitialEvents="true",
                   allowWatchBookmarks="true", resourceVersionMatch="NotOlderThan",
                   fieldSelector="metadata.name=streamed")
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert {e["object"]["apiVersion"] for e in events} == {KCM}
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_bodies_name_the_group_of_the_path_in_any_case(server: ApiServer, admin: httpx.Client) -> None:
    wrong = admin.post(f"{OPENKCM}/machineclasses", json=machine_class("w1", IC))
    assert wrong.status_code == 400, wrong.text
    assert wrong.json()["message"] == ("the body is compute.ironcore.dev/v1alpha1/MachineClass but the path "
                                       "is for compute.openkcm.dev/v1alpha1/MachineClass")
    other_kind = {**machine_class("w1"), "kind": "MachinePool"}
    assert admin.post(f"{OPENKCM}/machineclasses", json=other_kind).status_code == 400
    # IronCore's group in capitals is folded too; a path is matched exactly, as Kubernetes does.
    capitals = machine_class("w2", "Compute.IronCore.dev/v1alpha1")
    made = ok(admin.post(f"{IRONCORE}/machineclasses", json=capitals), 201)
    assert made["apiVersion"] == IC
    upper = admin.get("/apis/compute.OpenKCM.dev/v1alpha1/machineclasses/w2")
    assert upper.status_code == 404 and upper.json()["reason"] == "NotFound"
    # Bodies that are no object, or name no apiVersion, or a JSON patch: refused or stored, never a 500.
    not_a_string = admin.post(f"{OPENKCM}/machineclasses", json={**machine_class("w3"), "apiVersion": 5})
    assert not_a_string.status_code == 400 and "the path is for " + KCM in not_a_string.json()["message"]
    assert admin.post(f"{OPENKCM}/machineclasses", json=[machine_class("w3")]).status_code == 400
    bare = {k: v for k, v in machine_class("w3").items() if k not in ("apiVersion", "kind")}
    assert ok(admin.post(f"{OPENKCM}/machineclasses", json=bare), 201)["apiVersion"] == KCM
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"patched": "json"}}]
    patched = ok(admin.patch(f"{OPENKCM}/machineclasses/w3", json=ops,
                             headers={"Content-Type": "application/json-patch+json"}))
    assert patched["apiVersion"] == KCM and patched["metadata"]["labels"] == {"patched": "json"}
    strategic = ok(admin.patch(f"{OPENKCM}/machineclasses/w3", json={"metadata": {"labels": {"s": "1"}}},
                               headers={"Content-Type": "application/strategic-merge-patch+json"}))
    assert strategic["apiVersion"] == KCM and strategic["metadata"]["labels"] == {"patched": "json", "s": "1"}
    assert stored_keys(server, "%/machineclasses/_/w3") == [
        ("/registry/compute.ironcore.dev/machineclasses/_/w3", IC)]
    unserved = admin.get("/apis/compute.openkcm.dev/v1beta1")  # a version the group does not serve
    assert unserved.status_code == 404 and unserved.json()["reason"] == "NotFound"


def test_errors_name_the_group_asked(admin: httpx.Client) -> None:
    missing = admin.get(f"{OPENKCM}/namespaces/default/machines/nope")
    assert missing.status_code == 404
    assert missing.json()["message"] == 'machines.compute.openkcm.dev "nope" not found'
    assert missing.json()["details"] == {"name": "nope", "group": "compute.openkcm.dev", "kind": "machines"}
    invalid = admin.post(f"{OPENKCM}/machineclasses", json=machine_class("bad", cpu="lots"))
    assert invalid.status_code == 422
    assert invalid.json()["message"].startswith('MachineClass.compute.openkcm.dev "bad" is invalid: ')
    assert invalid.json()["details"]["group"] == "compute.openkcm.dev"
    assert [c["field"] for c in invalid.json()["details"]["causes"]] == ["capabilities.cpu"]
    ironcore = admin.get(f"{IRONCORE}/namespaces/default/machines/nope")
    assert ironcore.json()["message"] == 'machines.compute.ironcore.dev "nope" not found'


def as_user(server: ApiServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=server.headers(token), timeout=10)


def can_i(client: httpx.Client, verb: str, group: str, resource: str, namespace: str) -> bool:
    attributes = {"verb": verb, "group": group, "resource": resource, "namespace": namespace}
    spec = {"resourceAttributes": attributes}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec}
    return bool(ok(client.post(SSAR, json=review), 201)["status"]["allowed"])


def test_rbac_rules_are_matched_per_group(server: ApiServer, admin: httpx.Client) -> None:
    ok(admin.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": "team"}}), 201)
    rules = [{"verbs": ["get", "list"], "apiGroups": ["compute.ironcore.dev"], "resources": ["machines"]}]
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "ironcore-reader"}, "rules": rules}
    ok(admin.post(f"{RBAC}/namespaces/team/roles", json=role), 201)
    bind = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice-reads"}, "subjects": [{"kind": "User", "name": "alice"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ironcore-reader"}}
    ok(admin.post(f"{RBAC}/namespaces/team/rolebindings", json=bind), 201)
    with as_user(server, server.user_token) as alice:
        assert alice.get(f"{IRONCORE}/namespaces/team/machines").status_code == 200
        refused = alice.get(f"{OPENKCM}/namespaces/team/machines")
        assert refused.status_code == 403
        assert refused.json()["message"] == (
            'machines.compute.openkcm.dev is forbidden: User "alice" cannot list resource "machines" in API '
            'group "compute.openkcm.dev" in the namespace "team"')
        assert can_i(alice, "list", "compute.ironcore.dev", "machines", "team")
        assert not can_i(alice, "list", "compute.openkcm.dev", "machines", "team")

        # The default roles name both groups: edit lets alice work through either.
        edit = {**bind, "metadata": {"name": "alice-edits"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}}
        ok(admin.post(f"{RBAC}/namespaces/team/rolebindings", json=edit), 201)
        for group in ("compute.ironcore.dev", "compute.openkcm.dev"):
            assert can_i(alice, "create", group, "machines", "team")
            assert can_i(alice, "create", group, "machines/eviction", "team")
            assert not can_i(alice, "create", group, "machinepools", "team")
        assert can_i(alice, "delete", "networking.openkcm.dev", "networkinterfaces", "team")
        made = ok(alice.post(f"{OPENKCM}/namespaces/team/machines", json=machine("by-alice")), 201)
        assert made["apiVersion"] == KCM
        ok(alice.delete(f"{IRONCORE}/namespaces/team/machines/by-alice"))
    view = ok(admin.get(f"{RBAC}/clusterroles/view"))
    assert ["compute.ironcore.dev", "compute.openkcm.dev"] in [r["apiGroups"] for r in view["rules"]]


def test_a_pool_identity_speaks_ironcore_groups_only(server: ApiServer, admin: httpx.Client) -> None:
    pool = {"apiVersion": IC, "kind": "MachinePool",
            "metadata": {"name": "rack-1"}, "spec": {"providerID": "ironpool://rack-1"}}
    ok(admin.post(f"{IRONCORE}/machinepools", json=pool), 201)
    token = (Path(server.token_file).parent / "pool-token").read_text()
    with as_user(server, token) as poollet:
        assert ok(poollet.get(f"{IRONCORE}/machinepools/rack-1"))["metadata"]["name"] == "rack-1"
        refused = poollet.get(f"{OPENKCM}/machinepools/rack-1")
        assert refused.status_code == 403
        assert 'in API group "compute.openkcm.dev"' in refused.json()["message"]
        assert not can_i(poollet, "get", "compute.openkcm.dev", "machinepools", "")
