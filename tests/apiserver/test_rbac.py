"""RBAC on an in-process apiserver over SQLite: the kinds, their validation, the default roles, the
authorizer's answers (403 in Kubernetes' words), SelfSubjectAccessReview and ``ironpool auth can-i``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.apiserver.options import ServerOptions
from ironpool.cli.main import cli
from ironpool.store.sqlite import SQLiteStore

from tests.conftest import ApiServer, start_apiserver, stop_apiserver
from tests.helpers.wait import eventually, wait_until

RBAC = "/apis/rbac.authorization.k8s.io/v1"
COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
MERGE = {"Content-Type": "application/merge-patch+json"}
TOKENS = ('admin,admin,1,"system:masters"\nalice,alice,2,"developers"\nbob,bob,3\n'
          'carol,carol,4,"auditors"\n')


def machines(ns: str) -> str:
    return f"{COMPUTE}/namespaces/{ns}/machines"


def machine(name: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine", "metadata": {"name": name},
            "spec": {"machineClassRef": {"name": "small"}}}


def binding(name: str, role: str, subject: tuple[str, str], kind: str = "ClusterRole") -> dict[str, Any]:
    return {"metadata": {"name": name}, "subjects": [{"kind": subject[0], "name": subject[1]}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role}}


def code(r: httpx.Response, expected: int) -> dict[str, Any]:
    assert r.status_code == expected, r.text
    return r.json()


class Api:
    """One httpx client per user over the same in-process app."""

    def __init__(self, transport: httpx.ASGITransport) -> None:
        self.transport = transport
        self.clients: dict[str, httpx.AsyncClient] = {}

    def __call__(self, who: str) -> httpx.AsyncClient:
        if who not in self.clients:
            self.clients[who] = httpx.AsyncClient(transport=self.transport, base_url="http://test",
                                                  headers={"Authorization": f"Bearer {who}"})
        return self.clients[who]


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    store = SQLiteStore(str(tmp_path / "rbac.db"))
    app = build_app(store, Authenticator(parse_token_file(TOKENS)))
    a = Api(httpx.ASGITransport(app=app))
    admin = a("admin")
    for ns in ("a", "b"):
        code(await admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}}), 201)
    code(await admin.post(f"{COMPUTE}/machineclasses", json={
        "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}), 201)
    yield a
    for c in a.clients.values():
        await c.aclose()
    await app.state.apiserver.authorize.stop()
    await store.close()


async def test_default_roles_are_served_and_shown(api: Api) -> None:
    roles = code(await api("admin").get(f"{RBAC}/clusterroles"), 200)
    assert {"cluster-admin", "admin", "edit", "view", "system:discovery"} <= {
        r["metadata"]["name"] for r in roles["items"]}
    table = code(await api("admin").get(f"{RBAC}/clusterrolebindings", headers={
        "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}), 200)
    assert [c["name"] for c in table["columnDefinitions"]][:2] == ["NAME", "ROLE"]
    rows = {r["cells"][0]: r["cells"][1] for r in table["rows"]}
    assert rows["cluster-admin"] == "ClusterRole/cluster-admin"
    edit = code(await api("admin").get(f"{RBAC}/clusterroles/edit"), 200)
    assert edit["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] == "true"


async def test_edit_in_one_namespace(api: Api) -> None:
    alice = api("alice")
    denied = code(await alice.get(machines("a")), 403)
    assert denied["message"] == (
        'machines.compute.ironcore.dev is forbidden: User "alice" cannot list resource "machines" '
        'in API group '
        '"compute.ironcore.dev" in the namespace "a"')
    code(await api("admin").post(f"{RBAC}/namespaces/a/rolebindings",
                                 json=binding("alice-edit", "edit", ("User", "alice"))), 201)
    # the binding counts from the next request on (the index hears of this apiserver's commits at once)
    code(await alice.post(machines("a"), json=machine("web")), 201)
    assert [m["metadata"]["name"] for m in code(await alice.get(machines("a")), 200)["items"]] == ["web"]
    code(await alice.patch(f"{machines('a')}/web", headers=MERGE,
                           json={"metadata": {"labels": {"tier": "web"}}}), 200)
    code(await alice.post("/api/v1/namespaces/a/secrets", json={
        "metadata": {"name": "ign"}, "type": "Opaque", "stringData": {"ignition": "{}"}}), 201)
    # not the status (the poollets' business), not another namespace, not pools
    code(await alice.patch(f"{machines('a')}/web/status", headers=MERGE,
                           json={"status": {"state": "Running"}}),
         403)
    msg = code(await alice.post(machines("b"), json=machine("web")), 403)["message"]
    assert msg.endswith('cannot create resource "machines" in API group "compute.ironcore.dev" '
                        'in the namespace "b"'), msg
    code(await alice.get(machines("b")), 403)
    msg = code(await alice.get(f"{COMPUTE}/machinepools"), 403)["message"]
    assert msg == ('machinepools.compute.ironcore.dev is forbidden: User "alice" cannot list resource '
                   '"machinepools" in API group "compute.ironcore.dev" at the cluster scope')
    code(await alice.post(f"{COMPUTE}/machinepools", json={"metadata": {"name": "p"}}), 403)
    code(await alice.post(f"{RBAC}/namespaces/a/rolebindings",  # edit does not grant RBAC objects
                          json=binding("self", "admin", ("User", "alice"))), 403)
    code(await alice.delete(f"{machines('a')}/web"), 200)
    # the binding gone: nothing again (the cached rules are dropped)
    code(await api("admin").delete(f"{RBAC}/namespaces/a/rolebindings/alice-edit"), 200)
    code(await alice.get(machines("a")), 403)


async def test_view_reads_and_cannot_write(api: Api) -> None:
    admin, carol = api("admin"), api("carol")
    code(await admin.post(machines("a"), json=machine("db")), 201)
    code(await admin.post("/api/v1/namespaces/a/secrets", json={
        "metadata": {"name": "s"}, "type": "Opaque", "stringData": {"k": "v"}}), 201)
    # a Group subject, and a ClusterRoleBinding: every namespace
    code(await admin.post(f"{RBAC}/clusterrolebindings",
                          json=binding("auditors", "view", ("Group", "auditors"))),
         201)
    assert code(await carol.get(f"{machines('a')}/db"), 200)["metadata"]["name"] == "db"
    code(await carol.get(machines("b")), 200)
    code(await carol.get(f"{COMPUTE}/machines"), 200)  # all namespaces: the cluster-wide binding
    code(await carol.post(machines("a"), json=machine("x")), 403)
    code(await carol.patch(f"{machines('a')}/db", headers=MERGE,
                           json={"metadata": {"labels": {"x": "y"}}}), 403)
    code(await carol.delete(f"{machines('a')}/db"), 403)
    code(await carol.get("/api/v1/namespaces/a/secrets/s"), 403)  # view leaves Secrets out


async def test_roles_with_names_subresources_and_rolebinding_to_a_role(api: Api) -> None:
    admin, bob = api("admin"), api("bob")
    for name in ("one", "two"):
        code(await admin.post(machines("a"), json=machine(name)), 201)
    code(await admin.post(f"{RBAC}/namespaces/a/roles", json={"metadata": {"name": "power-one"}, "rules": [
        {"verbs": ["get", "patch"], "apiGroups": ["compute.ironcore.dev"], "resources": ["machines"],
         "resourceNames": ["one"]},
        {"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/status"]},
    ]}), 201)
    code(await admin.post(f"{RBAC}/namespaces/a/rolebindings",
                          json=binding("bob-power", "power-one", ("User", "bob"), kind="Role")), 201)
    code(await bob.get(f"{machines('a')}/one"), 200)
    code(await bob.patch(f"{machines('a')}/one", headers=MERGE, json={"spec": {"power": "Off"}}), 200)
    code(await bob.get(f"{machines('a')}/two"), 403)
    code(await bob.get(machines("a")), 403)  # resourceNames never grant a list
    code(await bob.get(f"{machines('a')}/two/status"), 200)  # */status
    code(await bob.get(f"{machines('b')}/one"), 403)  # a Role binds in its namespace only


async def test_validation_and_immutable_role_ref(api: Api) -> None:
    admin = api("admin")
    bad_role = {"metadata": {"name": "bad"}, "rules": [
        {"verbs": [], "apiGroups": [""], "resources": ["secrets"]},
        {"verbs": ["get"], "nonResourceURLs": ["/version"]},
        {"verbs": ["get"], "resources": ["machines"]},
    ]}
    causes = {c["field"]: c["message"] for c in code(
        await admin.post(f"{RBAC}/namespaces/a/roles", json=bad_role), 422)["details"]["causes"]}
    assert "verbs must contain at least one value" in causes["rules[0].verbs"]
    assert "namespaced rules cannot apply to non-resource URLs" in causes["rules[1].nonResourceURLs"]
    assert "resource rules must supply at least one api group" in causes["rules[2].apiGroups"]
    bad_binding = binding("x", "edit", ("ServiceAccount", "robot"), kind="Role")
    bad_binding["roleRef"]["apiGroup"] = "rbac"
    causes = {c["field"]: c["message"] for c in code(
        await admin.post(f"{RBAC}/clusterrolebindings", json=bad_binding), 422)["details"]["causes"]}
    assert set(causes) == {"roleRef.apiGroup", "roleRef.kind", "subjects[0].kind"}, causes
    code(await admin.post(f"{RBAC}/namespaces/a/rolebindings",
                          json=binding("b", "view", ("User", "bob"))), 201)
    status = code(await admin.patch(f"{RBAC}/namespaces/a/rolebindings/b", headers=MERGE,
                                    json={"roleRef": {"name": "admin"}}), 422)
    assert "roleRef" in status["message"] and "cannot change roleRef" in status["message"]
    stored = code(await admin.get(f"{RBAC}/namespaces/a/rolebindings/b"), 200)
    assert stored["roleRef"]["name"] == "view"
    assert stored["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"  # defaulted
    code(await admin.patch(f"{RBAC}/namespaces/a/rolebindings/b", headers=MERGE,  # subjects may change
                           json={"subjects": [{"kind": "Group", "name": "g"}]}), 200)


async def test_self_subject_access_review(api: Api) -> None:
    code(await api("admin").post(f"{RBAC}/namespaces/a/rolebindings",
                                 json=binding("alice-edit", "edit", ("User", "alice"))), 201)

    async def allowed(who: str, spec: dict[str, Any]) -> bool:
        review = code(await api(who).post(SSAR, json={"apiVersion": "authorization.k8s.io/v1",
                                                     "kind": "SelfSubjectAccessReview", "spec": spec}), 201)
        assert review["kind"] == "SelfSubjectAccessReview"
        return bool(review["status"]["allowed"])

    def res(verb: str, resource: str, ns: str | None = "a") -> dict[str, Any]:
        return {"resourceAttributes": {"verb": verb, "group": "compute.ironcore.dev", "resource": resource,
                                       "namespace": ns}}

    assert await allowed("alice", res("create", "machines"))
    assert not await allowed("alice", res("create", "machines", "b"))
    assert not await allowed("alice", res("list", "machinepools", None))
    assert not await allowed("bob", res("get", "machines"))
    assert await allowed("admin", res("delete", "machinepools", None))
    discovery = {"nonResourceAttributes": {"verb": "get", "path": "/apis"}}
    assert await allowed("bob", discovery)  # system:discovery, bound to system:authenticated
    assert not await allowed("bob", {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}})
    proto = {"Content-Type": "application/vnd.kubernetes.protobuf"}  # what kubectl sends (tests/kubectl)
    for junk in (b"junk", b"k8s\x00\x12\x05ab", b"k8s\x00\x12\x03\x12\x01\x0a"):
        code(await api("alice").post(SSAR, content=junk, headers=proto), 400)
    bad = code(await api("alice").post(SSAR, json={"spec": {}}), 422)
    assert bad["details"]["causes"][0]["field"] == "spec"
    code(await httpx.AsyncClient(transport=api.transport, base_url="http://test").post(SSAR, json={}), 401)


async def test_a_review_as_the_first_request_sees_the_bindings(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "first.db"))
    for _ in range(2):  # the second app over the same file asks before anything else
        app = build_app(store, Authenticator(parse_token_file(TOKENS)))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test",
                                     headers={"Authorization": "Bearer carol"}) as carol:
            spec = {"resourceAttributes": {"verb": "list", "group": "compute.ironcore.dev",
                                           "resource": "machines", "namespace": "default"}}
            review = code(await carol.post(SSAR, json={"spec": spec}), 201)
            if not review["status"]["allowed"]:
                code(await carol.post(f"{RBAC}/clusterrolebindings", json=binding("auditors", "view", (
                    "Group", "auditors")), headers={"Authorization": "Bearer admin"}), 201)
        await app.state.apiserver.authorize.stop()
    assert review["status"]["allowed"] is True
    await store.close()


async def test_always_allow_mode(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "allow.db"))
    app = build_app(store, Authenticator(parse_token_file(TOKENS)), options=ServerOptions(
        authorization_mode="AlwaysAllow"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test",
                                 headers={"Authorization": "Bearer bob"}) as bob:
        code(await bob.post(f"{COMPUTE}/machinepools", json={"metadata": {"name": "p"}}), 201)
        review = code(await bob.post(SSAR, json={"spec": {"resourceAttributes": {
            "verb": "delete", "group": "compute.ironcore.dev", "resource": "machinepools"}}}), 201)
        assert review["status"]["allowed"] is True
    await app.state.apiserver.authorize.stop()
    await store.close()


# -- over a real apiserver process: ironpool token create, the reloaded token file, auth can-i --------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    api = start_apiserver(tmp_path_factory.mktemp("rbac-cli"))
    try:
        yield api
    finally:
        stop_apiserver(api)


def ironpool(*args: str, token: str | None = None, server: ApiServer | None = None) -> Result:
    """The ``ironpool`` command, run in this process (click's runner: the real command, no fork)."""
    conn = ["--server", server.url, "--token", token] if server is not None and token is not None else []
    return CliRunner().invoke(cli, [*args, *conn])


def test_token_create_and_can_i(server: ApiServer) -> None:
    made = ironpool("token", "create", "dave", "--group", "team-a", "--token-file", str(server.token_file))
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    assert f"{token},dave," in server.token_file.read_text() and '"team-a"' in server.token_file.read_text()

    def can_i(*args: str) -> tuple[int, str]:
        r = ironpool("auth", "can-i", *args, token=token, server=server)
        return r.exit_code, r.stdout.strip()

    # the apiserver reads the token file again: dave is known without a restart, and may nothing yet
    wait_until(lambda: can_i("list", "machines", "-n", "a") == (1, "no"), timeout=10,
               message="dave authenticated (and refused)")
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=10) as admin:
        code(admin.post("/api/v1/namespaces", json={"metadata": {"name": "a"}}), 201)
        code(admin.post(f"{RBAC}/namespaces/a/rolebindings", json=binding("team-a-edit", "edit",
                                                                          ("Group", "team-a"))), 201)
    assert can_i("create", "machines", "-n", "a") == (0, "yes")
    assert can_i("create", "machine", "web", "-n", "a") == (0, "yes")
    assert can_i("create", "machines", "-n", "default") == (1, "no")
    assert can_i("delete", "machinepools") == (1, "no")
    assert can_i("patch", "machines/status", "-n", "a") == (1, "no")
    assert can_i("get", "/version") == (0, "yes")
    bad = ironpool("token", "create", "x,y", "--token-file", str(server.token_file))
    assert bad.exit_code == 2 and "USER" in bad.output


def test_token_create_needs_a_token_file(tmp_path: Path) -> None:
    r = ironpool("token", "create", "erin", "--data-dir", str(tmp_path / "nothing"))
    assert r.exit_code == 2 and "no token file" in r.output


async def test_no_escalation_through_roles_and_bindings(api: Api) -> None:
    """The admin of a namespace hands out edit and view there, but cannot grant what it does not hold."""
    admin, alice = api("admin"), api("alice")
    code(await admin.post(f"{RBAC}/namespaces/a/rolebindings",
                          json=binding("alice-admin", "admin", ("User", "alice"))), 201)
    code(await alice.post(f"{RBAC}/namespaces/a/rolebindings",
                          json=binding("bob-edit", "edit", ("User", "bob"))), 201)
    refused = code(await alice.post(f"{RBAC}/namespaces/a/rolebindings",
                                    json=binding("bob-all", "cluster-admin", ("User", "bob"))),
                   403)["message"]
    assert 'user "alice" is attempting to grant RBAC permissions not currently held' in refused, refused
    too_much = {"metadata": {"name": "pools"}, "rules": [
        {"verbs": ["get"], "apiGroups": ["compute.ironcore.dev"], "resources": ["machines"]},
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]}
    code(await alice.post(f"{RBAC}/namespaces/a/roles", json=too_much), 403)
    too_much["rules"] = too_much["rules"][:1]
    code(await alice.post(f"{RBAC}/namespaces/a/roles", json=too_much), 201)  # held: allowed
    code(await alice.post(f"{RBAC}/namespaces/b/rolebindings",
                          json=binding("x", "view", ("User", "bob"))), 403)
    assert [b["metadata"]["name"] for b in code(await admin.get(f"{RBAC}/namespaces/a/rolebindings"), 200)[
        "items"]] == ["alice-admin", "bob-edit"]


async def test_non_resource_urls(api: Api) -> None:
    """Discovery and OpenAPI for every authenticated user (system:discovery); /metrics only by grant."""
    bob = api("bob")
    for path in ("/version", "/api", "/apis", f"{COMPUTE}", "/openapi/v3"):
        code(await bob.get(path), 200)
    refused = code(await bob.get("/metrics"), 403)["message"]
    assert refused == 'forbidden: User "bob" cannot get path "/metrics"'
    assert (await api("admin").get("/metrics")).status_code == 200
    code(await api("admin").post(f"{RBAC}/clusterroles", json={
        "metadata": {"name": "metrics-reader"},
        "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]}), 201)
    code(await api("admin").post(f"{RBAC}/clusterrolebindings",
                                 json=binding("bob-metrics", "metrics-reader", ("User", "bob"))), 201)
    assert (await bob.get("/metrics")).status_code == 200
    code(await httpx.AsyncClient(transport=api.transport, base_url="http://test").get("/apis"), 401)


def test_aggregation_gathers_selected_roles_in_chains() -> None:
    from ironpool.apiserver.auth.rbac.aggregation import aggregated_rules

    read = {"verbs": ["get"], "apiGroups": [""], "resources": ["events"]}
    write = {"verbs": ["create"], "apiGroups": [""], "resources": ["events"]}
    roles = {
        "top": {"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to": "top"}}]}},
        "mid": {"metadata": {"labels": {"to": "top"}},
                "aggregationRule": {"clusterRoleSelectors": [
                    {"matchExpressions": [{"key": "to", "operator": "In", "values": ["mid"]}]}]}},
        "a": {"metadata": {"labels": {"to": "mid"}}, "rules": [read]},
        "b": {"metadata": {"labels": {"to": "mid"}}, "rules": [read, write]},  # read only once
        "c": {"metadata": {"labels": {"to": "top"}}, "rules": [write]},
        "other": {"rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]},
    }
    assert aggregated_rules(roles) == {"mid": [read, write], "top": [write, read]}  # c, then mid


async def test_view_reads_the_fleet_cluster_wide_only_and_aggregates_labelled_roles(api: Api) -> None:
    admin, bob, carol = api("admin"), api("bob"), api("carol")
    fleet = [f"{COMPUTE}/machinepools", "/apis/storage.ironcore.dev/v1alpha1/volumepools",
             f"{COMPUTE}/machineclasses", "/apis/storage.ironcore.dev/v1alpha1/volumeclasses"]
    code(await admin.post(f"{RBAC}/clusterrolebindings",
                          json=binding("auditors", "view", ("Group", "auditors"))), 201)
    code(await admin.post(f"{RBAC}/namespaces/a/rolebindings",
                          json=binding("bob-view", "view", ("User", "bob"))), 201)
    for path in fleet:
        code(await carol.get(path), 200)  # view through a ClusterRoleBinding: the fleet
        code(await bob.get(path), 403)  # through a RoleBinding: nothing cluster-scoped
    code(await bob.get(machines("a")), 200)
    # A ClusterRole labelled aggregate-to-view extends view, and through it edit and admin.
    code(await bob.get("/api/v1/namespaces/a/secrets"), 403)
    code(await admin.post(f"{RBAC}/clusterroles", json={
        "metadata": {"name": "secret-lister",
                     "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["secrets"]}]}), 201)

    async def granted(role: str) -> bool:
        rules = code(await admin.get(f"{RBAC}/clusterroles/{role}"), 200)["rules"]
        return any(r.get("resources") == ["secrets"] and r["verbs"] == ["list"] for r in rules)

    for role in ("view", "edit", "admin"):
        await eventually(lambda role=role: granted(role), 10, f"{role} to gather secret-lister's rule")
    code(await bob.get("/api/v1/namespaces/a/secrets"), 200)  # the authorizer answers from the rules
    code(await admin.delete(f"{RBAC}/clusterroles/secret-lister"), 200)

    async def dropped() -> bool:
        return not await granted("view")

    await eventually(dropped, 10, "view to drop the deleted role's rule")
    code(await bob.get("/api/v1/namespaces/a/secrets"), 403)


async def test_an_aggregated_role_needs_every_permission(api: Api) -> None:
    admin, bob = api("admin"), api("bob")
    code(await admin.post(f"{RBAC}/clusterroles", json={"metadata": {"name": "role-writer"}, "rules": [
        {"verbs": ["create"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"]}]}),
         201)
    code(await admin.post(f"{RBAC}/clusterrolebindings",
                          json=binding("bob-writes", "role-writer", ("User", "bob"))), 201)
    # An empty selector picks every ClusterRole, cluster-admin's too: only who holds all may write it.
    denied = code(await bob.post(f"{RBAC}/clusterroles", json={
        "metadata": {"name": "everything"}, "aggregationRule": {"clusterRoleSelectors": [{}]}}), 403)
    assert "not currently held" in denied["message"], denied
    code(await bob.post(f"{RBAC}/clusterroles", json={"metadata": {"name": "nothing"}}), 201)
    code(await admin.post(f"{RBAC}/clusterroles", json={
        "metadata": {"name": "everything"}, "aggregationRule": {"clusterRoleSelectors": [{}]}}), 201)


async def test_a_restart_makes_an_older_view_aggregated(tmp_path: Path) -> None:
    # An installation from before aggregation: view has rules of its own and no aggregationRule.
    store = SQLiteStore(str(tmp_path / "old.db"))
    first = build_app(store, Authenticator(parse_token_file(TOKENS)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=first), base_url="http://test",
                                 headers={"Authorization": "Bearer admin"}) as admin:
        old = [{"verbs": ["get"], "apiGroups": [""], "resources": ["events"]}]
        code(await admin.patch(f"{RBAC}/clusterroles/view", headers=MERGE,
                               json={"aggregationRule": None, "rules": old}), 200)
        code(await admin.post(f"{RBAC}/clusterrolebindings",
                              json=binding("auditors", "view", ("Group", "auditors"))), 201)
    await first.state.apiserver.authorize.stop()
    again = build_app(store, Authenticator(parse_token_file(TOKENS)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=again), base_url="http://test",
                                 headers={"Authorization": "Bearer carol"}) as carol:
        async def fleet_read() -> bool:
            return (await carol.get(f"{COMPUTE}/machinepools")).status_code == 200

        await eventually(fleet_read, 10, "view, aggregated again at the restart, to read the pools")
    await again.state.apiserver.authorize.stop()
    await store.close()
