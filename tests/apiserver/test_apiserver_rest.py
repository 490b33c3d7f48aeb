"""The REST API over plain HTTP against a real ``ironpool apiserver`` process (the issue's done-when list)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tests.helpers.wait import wait_until

if TYPE_CHECKING:
    from tests.conftest import ApiServer

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
MACHINES = f"{COMPUTE}/namespaces/default/machines"
CLASSES = f"{COMPUTE}/machineclasses"
POOLS = f"{COMPUTE}/machinepools"
NAMESPACES = "/api/v1/namespaces"


@pytest.fixture
def client(apiserver: ApiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(), timeout=10) as c:
        yield c


def machine(name: str, cls: str | None = "small", **spec: Any) -> dict[str, Any]:
    if cls is not None:
        spec["machineClassRef"] = {"name": cls}
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1",
        "kind": "Machine",
        "metadata": {"name": name},
        "spec": spec,
    }


def machine_class(name: str = "small") -> dict[str, Any]:
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": name},
        "capabilities": {"cpu": "1", "memory": "1Gi"},
    }


def revision(client: httpx.Client) -> int:
    """The store's global revision (a list's resourceVersion is the revision it was read at)."""
    r = client.get(NAMESPACES)
    assert r.status_code == 200, r.text
    return int(r.json()["metadata"]["resourceVersion"])


def create(client: httpx.Client, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    r = client.post(path, json=obj)
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def assert_status(r: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code and body["reason"] == reason, body
    return body  # type: ignore[no-any-return]


def test_machine_without_class_ref_is_invalid(client: httpx.Client) -> None:
    before = revision(client)
    r = client.post(MACHINES, json=machine("m1", cls=None))
    body = assert_status(r, 422, "Invalid")
    assert "spec.machineClassRef" in [c["field"] for c in body["details"]["causes"]]
    assert revision(client) == before
    assert client.get(f"{MACHINES}/m1").status_code == 404


def test_stale_put_conflicts(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    created = create(client, MACHINES, machine("m1"))
    changed = {**created, "metadata": {**created["metadata"], "labels": {"a": "b"}}}
    r = client.put(f"{MACHINES}/m1", json=changed)
    assert r.status_code == 200, r.text
    before = revision(client)
    stale = {**created, "metadata": {**created["metadata"], "labels": {"a": "c"}}}
    assert_status(client.put(f"{MACHINES}/m1", json=stale), 409, "Conflict")
    patch = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"], "labels": {"x": "y"}}}
    r = client.patch(
        f"{MACHINES}/m1", content=json.dumps(patch), headers={"Content-Type": "application/merge-patch+json"}
    )
    assert_status(r, 409, "Conflict")
    assert_status(
        client.request(
            "DELETE",
            f"{MACHINES}/m1",
            json={"preconditions": {"resourceVersion": created["metadata"]["resourceVersion"]}},
        ),
        409,
        "Conflict",
    )
    assert revision(client) == before
    assert client.get(f"{MACHINES}/m1").json()["metadata"]["labels"] == {"a": "b"}


def test_changing_machine_class_ref_is_invalid(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    created = create(client, MACHINES, machine("m1"))
    before = revision(client)
    changed = {**created, "spec": {**created["spec"], "machineClassRef": {"name": "large"}}}
    body = assert_status(client.put(f"{MACHINES}/m1", json=changed), 422, "Invalid")
    assert "spec.machineClassRef" in [c["field"] for c in body["details"]["causes"]]
    r = client.patch(
        f"{MACHINES}/m1",
        content=b'{"spec":{"machineClassRef":{"name":"large"}}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert_status(r, 422, "Invalid")
    assert revision(client) == before
    assert client.get(f"{MACHINES}/m1").json()["spec"]["machineClassRef"] == {"name": "small"}


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH"])
def test_malformed_json_is_bad_request(client: httpx.Client, method: str) -> None:
    create(client, CLASSES, machine_class())
    create(client, MACHINES, machine("m1"))
    before = revision(client)
    path = MACHINES if method == "POST" else f"{MACHINES}/m1"
    ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
    r = client.request(method, path, content=b'{"metadata": {"name": "m1",', headers={"Content-Type": ctype})
    assert_status(r, 400, "BadRequest")
    assert revision(client) == before


@pytest.mark.parametrize(
    "path",
    [
        f"{COMPUTE}/widgets",
        f"{COMPUTE}/namespaces/default/widgets/w1",
        "/apis/nothing.example.com/v1/things",
        "/api/v2/secrets",
        f"{MACHINES}/m1/scale",
        f"{CLASSES}/small/status",  # classes have no status subresource
        "/nothing/at/all",
    ],
)
def test_unknown_paths_are_not_found(client: httpx.Client, path: str) -> None:
    before = revision(client)
    assert_status(client.get(path), 404, "NotFound")
    assert_status(client.post(path, json=machine_class()), 404, "NotFound")
    assert revision(client) == before


def test_missing_or_wrong_token_is_unauthorized(apiserver: ApiServer, client: httpx.Client) -> None:
    before = revision(client)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic YWRtaW46YWRtaW4="}):
        with httpx.Client(base_url=apiserver.url, headers=headers, timeout=10) as anon:
            assert_status(anon.get(MACHINES), 401, "Unauthorized")
            assert_status(anon.post(CLASSES, json=machine_class()), 401, "Unauthorized")
            assert_status(anon.get("/apis"), 401, "Unauthorized")
    assert revision(client) == before
    assert client.get(f"{CLASSES}/small").status_code == 404
    # A non-admin user from the token file is authenticated, and RBAC grants it nothing unbound.
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(apiserver.user_token)) as user:
        assert_status(user.post(CLASSES, json=machine_class()), 403, "Forbidden")


def test_health_is_public_metrics_and_openapi_need_a_token(apiserver: ApiServer) -> None:
    assert httpx.get(f"{apiserver.url}/healthz").text == "ok"
    assert httpx.get(f"{apiserver.url}/readyz").status_code == 200
    protected = ("/metrics", "/openapi.json", "/openapi/v3", "/openapi/v3/apis/compute.ironcore.dev/v1alpha1")
    for path in protected:
        assert_status(httpx.get(f"{apiserver.url}{path}"), 401, "Unauthorized")
    auth = apiserver.headers()
    metrics = httpx.get(f"{apiserver.url}/metrics", headers=auth)
    assert "ironpool_store_revision" in metrics.text and "ironpool_apiserver_watchers" in metrics.text
    doc = httpx.get(f"{apiserver.url}/openapi.json", headers=auth).json()
    assert doc["openapi"].startswith("3.")
    assert f"{MACHINES.replace('default', '{namespace}')}/{{name}}/status" in doc["paths"]
    assert "dev.ironcore.compute.v1alpha1.Machine" in doc["components"]["schemas"]
    discovery = httpx.get(f"{apiserver.url}/openapi/v3", headers=auth).json()
    url = discovery["paths"]["apis/compute.ironcore.dev/v1alpha1"]["serverRelativeURL"]
    group_doc = httpx.get(f"{apiserver.url}{url}", headers=auth).json()
    assert "dev.ironcore.compute.v1alpha1.Machine" in group_doc["components"]["schemas"]


def test_metrics_count_requests(apiserver: ApiServer, client: httpx.Client) -> None:
    client.get(f"{MACHINES}/nope")
    text = httpx.get(f"{apiserver.url}/metrics", headers=apiserver.headers()).text
    assert 'ironpool_apiserver_requests_total{code="404",resource="machines",verb="GET"} 1.0' in text


def test_generation_and_status_subresource(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    created = create(client, MACHINES, {**machine("m1"), "status": {"state": "Running"}})
    assert created["metadata"]["generation"] == 1
    assert "status" not in created or created["status"].get("state") != "Running"  # status ignored on create
    merge = {"Content-Type": "application/merge-patch+json"}
    # Metadata-only change: no generation bump.
    r = client.patch(f"{MACHINES}/m1", content=b'{"metadata":{"labels":{"a":"b"}}}', headers=merge)
    assert r.status_code == 200 and r.json()["metadata"]["generation"] == 1
    # Status written through the main resource is ignored.
    r = client.patch(f"{MACHINES}/m1", content=b'{"status":{"state":"Running"}}', headers=merge)
    assert r.status_code == 200 and r.json().get("status", {}).get("state") != "Running"
    # Status subresource: changes status only, no generation bump, spec changes ignored.
    r = client.patch(
        f"{MACHINES}/m1/status",
        headers=merge,
        content=b'{"status":{"state":"Running"},"spec":{"power":"Off"}}',
    )
    assert r.status_code == 200, r.text
    obj = r.json()
    assert obj["status"]["state"] == "Running" and obj["metadata"]["generation"] == 1
    assert obj["spec"].get("power") != "Off"
    # Spec change: generation + 1, status kept.
    r = client.patch(f"{MACHINES}/m1", content=b'{"spec":{"power":"Off"}}', headers=merge)
    obj = r.json()
    assert r.status_code == 200 and obj["metadata"]["generation"] == 2 and obj["status"]["state"] == "Running"
    # A no-op write does not create a revision.
    before = revision(client)
    assert client.put(f"{MACHINES}/m1", json=obj).status_code == 200
    assert revision(client) == before


def test_patch_types(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    r = client.patch(f"{CLASSES}/small", content=b'{"metadata":{"labels":{"tier":"gold"}}}',
                     headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert r.status_code == 200 and r.json()["metadata"]["labels"] == {"tier": "gold"}, r.text
    json_patch = {"Content-Type": "application/json-patch+json"}
    ops = (b'[{"op":"add","path":"/metadata/labels/zone","value":"a"},'
           b'{"op":"remove","path":"/metadata/labels/tier"}]')
    r = client.patch(f"{CLASSES}/small", content=ops, headers=json_patch)
    assert r.status_code == 200 and r.json()["metadata"]["labels"] == {"zone": "a"}, r.text
    r = client.patch(f"{CLASSES}/small", content=b"[]", headers={"Content-Type": "application/xml"})
    body = assert_status(r, 415, "UnsupportedMediaType")
    assert "merge-patch+json" in body["message"] and "json-patch+json" in body["message"]


def test_finalizers_delay_removal(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    obj = machine("m1")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    create(client, MACHINES, obj)
    r = client.delete(f"{MACHINES}/m1")
    assert r.status_code == 200
    deleting = r.json()
    assert deleting["metadata"]["deletionTimestamp"]
    assert client.get(f"{MACHINES}/m1").json()["metadata"]["deletionTimestamp"]
    # No new finalizers while deleting.
    added = {**deleting, "metadata": {**deleting["metadata"], "finalizers": ["example.com/hold", "b/c"]}}
    assert_status(client.put(f"{MACHINES}/m1", json=added), 422, "Invalid")
    r = client.patch(
        f"{MACHINES}/m1",
        content=b'{"metadata":{"finalizers":null}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    assert client.get(f"{MACHINES}/m1").status_code == 404
    assert_status(client.delete(f"{MACHINES}/m1"), 404, "NotFound")


def test_namespaces_generate_name_and_dry_run(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    assert_status(client.post(f"{COMPUTE}/namespaces/team-a/machines", json=machine("m1")), 404, "NotFound")
    create(client, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    created = create(client, f"{COMPUTE}/namespaces/team-a/machines", machine("m1"))
    assert created["metadata"]["namespace"] == "team-a" and created["metadata"]["uid"]
    assert_status(
        client.post(f"{COMPUTE}/namespaces/team-a/machines", json=machine("m1")), 409, "AlreadyExists"
    )
    mismatch = machine("m2")
    mismatch["metadata"]["namespace"] = "default"
    assert_status(client.post(f"{COMPUTE}/namespaces/team-a/machines", json=mismatch), 400, "BadRequest")
    generated = machine("")
    generated["metadata"] = {"generateName": "web-"}
    name = create(client, MACHINES, generated)["metadata"]["name"]
    assert name.startswith("web-") and len(name) == len("web-") + 5
    before = revision(client)
    r = client.post(MACHINES, params={"dryRun": "All"}, json=machine("dry"))
    assert r.status_code == 201 and r.json()["metadata"]["name"] == "dry"
    assert_status(
        client.post(MACHINES, params={"dryRun": "All"}, json=machine("x", cls=None)), 422, "Invalid"
    )
    assert revision(client) == before
    assert client.get(f"{MACHINES}/dry").status_code == 404


def test_list_selectors_and_pagination(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    for i in range(7):
        obj = machine(f"m{i}")
        obj["metadata"]["labels"] = {"parity": "even" if i % 2 == 0 else "odd"}
        create(client, MACHINES, obj)
    merge = {"Content-Type": "application/merge-patch+json"}
    r = client.patch(
        f"{MACHINES}/m3", content=b'{"spec":{"machinePoolRef":{"name":"pool-a"}}}', headers=merge
    )
    assert r.status_code == 200, r.text

    def names(params: dict[str, Any], path: str = MACHINES) -> list[str]:
        r = client.get(path, params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["kind"] == "MachineList" and body["apiVersion"] == "compute.ironcore.dev/v1alpha1"
        return [o["metadata"]["name"] for o in body["items"]]

    assert names({"labelSelector": "parity=even"}) == ["m0", "m2", "m4", "m6"]
    assert names({"labelSelector": "parity in (odd),parity!=even"}) == ["m1", "m3", "m5"]
    assert names({"fieldSelector": "spec.machinePoolRef.name="}) == ["m0", "m1", "m2", "m4", "m5", "m6"]
    assert names({"fieldSelector": "spec.machinePoolRef.name=pool-a"}) == ["m3"]
    assert names({}, f"{COMPUTE}/machines") == [f"m{i}" for i in range(7)]  # all namespaces

    collected: list[str] = []
    params: dict[str, Any] = {"limit": 3, "labelSelector": "parity=even"}
    pages = 0
    while True:
        body = client.get(MACHINES, params=params).json()
        collected += [o["metadata"]["name"] for o in body["items"]]
        pages += 1
        if pages == 1:
            create(
                client, MACHINES, {**machine("m8"), "metadata": {"name": "m8", "labels": {"parity": "even"}}}
            )
        token = body["metadata"].get("continue")
        if not token:
            break
        params = {"limit": 3, "labelSelector": "parity=even", "continue": token}
    assert collected == ["m0", "m2", "m4", "m6"] and pages == 2  # m8 came after the list's revision
    # Without selectors too (the server splices stored JSON), across a concurrent delete.
    everything: list[str] = []
    params = {"limit": 2}
    while True:
        body = client.get(MACHINES, params=params).json()
        everything += [o["metadata"]["name"] for o in body["items"]]
        if len(everything) == 2:
            assert client.delete(f"{MACHINES}/m5").status_code == 200
        if not body["metadata"].get("continue"):
            break
        params = {"limit": 2, "continue": body["metadata"]["continue"]}
    # m5 is still there: later pages read at the first page's revision.
    assert everything == ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m8"]
    assert_status(client.get(MACHINES, params={"continue": "garbage!"}), 400, "BadRequest")
    assert_status(client.get(MACHINES, params={"labelSelector": "a in (b"}), 400, "BadRequest")


class Watch:
    """A watch stream read line by line (each read bounded by the client's timeout)."""

    def __init__(self, client: httpx.Client, path: str, **params: Any) -> None:
        self._cm = client.stream("GET", path, params={"watch": "true", **params})
        self.response = self._cm.__enter__()
        assert self.response.status_code == 200
        self._lines = self.response.iter_lines()

    def next(self) -> dict[str, Any]:
        while True:
            line = next(self._lines)
            if line.strip():
                return json.loads(line)  # type: ignore[no-any-return]

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


def test_watch_sees_every_change_in_order_across_reconnects(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    start = revision(client)
    merge = {"Content-Type": "application/merge-patch+json"}
    watch = Watch(client, MACHINES, resourceVersion=str(start))
    expected: list[tuple[str, str, int]] = []

    def write(i: int) -> None:
        create(client, MACHINES, machine(f"m{i}"))
        r = client.patch(f"{MACHINES}/m{i}", content=b'{"metadata":{"labels":{"x":"y"}}}', headers=merge)
        assert r.status_code == 200
        expected.append(("ADDED", f"m{i}", 0))
        expected.append(("MODIFIED", f"m{i}", 0))

    seen: list[dict[str, Any]] = []
    for i in range(5):
        write(i)
    for _ in range(6):
        seen.append(watch.next())
    watch.close()
    # Writes while the client is away are delivered after it reconnects at its last revision.
    for i in range(5, 10):
        write(i)
    client.delete(f"{MACHINES}/m0")
    expected.append(("DELETED", "m0", 0))
    last = seen[-1]["object"]["metadata"]["resourceVersion"]
    watch = Watch(client, MACHINES, resourceVersion=last)
    while len(seen) < len(expected):
        seen.append(watch.next())
    watch.close()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [(t, n) for t, n, _ in expected]
    revisions = [int(e["object"]["metadata"]["resourceVersion"]) for e in seen]
    assert revisions == sorted(revisions) and len(set(revisions)) == len(revisions) and revisions[0] > start


def test_watch_without_revision_starts_with_current_objects(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class("a"))
    create(client, CLASSES, machine_class("b"))
    watch = Watch(client, CLASSES)
    first = [watch.next(), watch.next()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in first] == [("ADDED", "a"), ("ADDED", "b")]
    client.delete(f"{CLASSES}/a")
    event = watch.next()
    assert event["type"] == "DELETED" and event["object"]["metadata"]["name"] == "a"
    watch.close()


def test_watch_with_field_selector_reports_objects_leaving_the_selection(client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    create(client, MACHINES, machine("m1"))
    start = revision(client)
    watch = Watch(client, MACHINES, resourceVersion=str(start), fieldSelector="spec.machinePoolRef.name=")
    create(client, MACHINES, machine("m2"))
    assert (e := watch.next())["type"] == "ADDED" and e["object"]["metadata"]["name"] == "m2"
    r = client.patch(
        f"{MACHINES}/m1",
        content=b'{"spec":{"machinePoolRef":{"name":"p"}}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200
    assert (e := watch.next())["type"] == "DELETED" and e["object"]["metadata"]["name"] == "m1"
    watch.close()


def test_watch_timeout_ends_the_stream(client: httpx.Client) -> None:
    watch = Watch(client, CLASSES, resourceVersion=str(revision(client)), timeoutSeconds="1")
    with pytest.raises(StopIteration):
        watch.next()
    watch.close()


def test_slow_watcher_does_not_block_writes(apiserver: ApiServer, client: httpx.Client) -> None:
    create(client, CLASSES, machine_class())
    start = revision(client)
    # This watcher reads nothing while ~4 MB of events pile up, far beyond the socket buffers.
    watch = Watch(client, MACHINES, resourceVersion=str(start))
    padding = "x" * 2000
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(), timeout=5) as writer:
        for i in range(2000):
            obj = machine(f"m{i:04d}")
            obj["metadata"]["annotations"] = {"padding": padding}
            r = writer.post(MACHINES, json=obj)
            assert r.status_code == 201, r.text
    names = [watch.next()["object"]["metadata"]["name"] for _ in range(2000)]
    watch.close()
    assert names == [f"m{i:04d}" for i in range(2000)]


def test_concurrent_patches_from_many_clients_lose_nothing(
    apiserver: ApiServer, client: httpx.Client
) -> None:
    create(client, CLASSES, machine_class())
    create(client, MACHINES, machine("m1"))

    async def patch_labels() -> None:
        async with httpx.AsyncClient(base_url=apiserver.url, headers=apiserver.headers(), timeout=10) as c:

            async def one(worker: int) -> None:
                for i in range(10):
                    r = await c.patch(
                        f"{MACHINES}/m1",
                        content=json.dumps({"metadata": {"labels": {f"w{worker}-{i}": "1"}}}).encode(),
                        headers={"Content-Type": "application/merge-patch+json"},
                    )
                    assert r.status_code == 200, r.text

            await asyncio.gather(*(one(w) for w in range(10)))

    asyncio.run(patch_labels())
    labels = client.get(f"{MACHINES}/m1").json()["metadata"]["labels"]
    assert len(labels) == 100


def test_yaml_bodies_core_group_and_oversized_requests(client: httpx.Client) -> None:
    manifest = (
        b"apiVersion: v1\nkind: Secret\nmetadata:\n  name: ignition\nstringData:\n  ignition.yaml: 'x: 1'\n"
    )
    r = client.post(
        "/api/v1/namespaces/default/secrets", content=manifest, headers={"Content-Type": "application/yaml"}
    )
    assert r.status_code == 201, r.text
    assert client.get("/api/v1/namespaces/default/secrets/ignition").json()["metadata"]["name"] == "ignition"
    before = revision(client)
    huge = {
        **machine_class("huge"),
        "metadata": {"name": "huge", "annotations": {"a": "x" * (4 * 1024 * 1024)}},
    }
    assert_status(client.post(CLASSES, json=huge), 413, "RequestEntityTooLarge")
    assert_status(
        client.post(CLASSES, content=b"{}", headers={"Content-Type": "text/plain"}),
        415,
        "UnsupportedMediaType",
    )
    assert revision(client) == before


def test_discovery(client: httpx.Client) -> None:
    groups = client.get("/apis").json()
    assert "compute.ironcore.dev" in [g["name"] for g in groups["groups"]]
    resources = client.get(COMPUTE).json()["resources"]
    assert {"machines", "machines/status", "machineclasses"} <= {r["name"] for r in resources}
    assert "secrets" in [r["name"] for r in client.get("/api/v1").json()["resources"]]
    # Each group lists its own resources only (after volumes/binding, whose body is a core Binding,
    # the core resources once leaked into storage.ironcore.dev: kubectl warned "ns" was ambiguous).
    storage = {r["name"] for r in client.get("/apis/storage.ironcore.dev/v1alpha1").json()["resources"]}
    assert "volumes/binding" in storage and not {"namespaces", "secrets", "events"} & storage
    # The reviews kubectl asks for are discoverable.
    for gv, names in (("authorization.k8s.io/v1", {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}),
                      ("authentication.k8s.io/v1", {"selfsubjectreviews"})):
        assert gv in [v["groupVersion"] for g in groups["groups"] for v in g["versions"]]
        listed = client.get(f"/apis/{gv}").json()["resources"]
        assert {r["name"] for r in listed} == names and all(r["verbs"] == ["create"] for r in listed)


def test_deleting_a_namespace_deletes_its_content_first(client: httpx.Client) -> None:
    """DELETE marks the namespace Terminating; the namespace controller deletes its content, then it."""

    def gone(path: str) -> bool:
        return client.get(path).status_code == 404

    create(client, CLASSES, machine_class())
    create(client, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}})
    ns_machines = f"{COMPUTE}/namespaces/team-b/machines"
    held = machine("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    create(client, ns_machines, held)
    create(client, ns_machines, machine("free"))
    create(client, "/api/v1/namespaces/team-b/secrets", {"metadata": {"name": "s"}, "data": {}})
    create(client, MACHINES, machine("elsewhere"))

    assert_status(client.delete(f"{NAMESPACES}/default"), 403, "Forbidden")
    r = client.delete(f"{NAMESPACES}/team-b")
    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Terminating" and r.json()["metadata"]["deletionTimestamp"]
    assert_status(client.post(ns_machines, json=machine("new")), 403, "Forbidden")
    wait_until(lambda: gone(f"{ns_machines}/free") and gone("/api/v1/namespaces/team-b/secrets/s"),
               timeout=10, message="the namespace controller deleting team-b's content")
    assert [o["metadata"]["name"] for o in client.get(ns_machines).json()["items"]] == ["held"]
    assert client.get("/api/v1/namespaces/team-b/secrets").json()["items"] == []
    assert client.get(f"{ns_machines}/held").json()["metadata"]["deletionTimestamp"]
    assert client.get(f"{NAMESPACES}/team-b").json()["status"]["phase"] == "Terminating"
    # The namespace goes once its last object is gone.
    r = client.patch(
        f"{ns_machines}/held",
        content=b'{"metadata":{"finalizers":null}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text
    wait_until(lambda: gone(f"{NAMESPACES}/team-b"), timeout=10, message="namespace team-b removed")
    assert client.get(f"{MACHINES}/elsewhere").status_code == 200
    # An empty namespace goes right away.
    create(client, NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c"}})
    assert client.delete(f"{NAMESPACES}/team-c").status_code == 200
    wait_until(lambda: gone(f"{NAMESPACES}/team-c"), timeout=10, message="namespace team-c removed")
