"""The second round of hostile findings, replayed against a real apiserver process over real sockets:
each probe that once succeeded (or failed wrongly) now gets its refusal or its right answer, and
nothing refused changes what is stored."""

from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.hardening.harness import (
    ADMIN,
    MACHINES,
    POOL,
    POOL_USER,
    SECRETS,
    USER,
    USER_NAMESPACE,
    Server,
    grant_edit,
    snapshot,
    start_server,
    stop_server,
)
from tests.helpers.wait import wait_for

MIB = 1024 * 1024

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
STORAGE = "/apis/storage.ironcore.dev/v1alpha1"
VOLUMES = f"{STORAGE}/namespaces/default/volumes"
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}


def status_of(response: httpx.Response, code: int) -> dict[str, Any]:
    assert response.status_code == code, (response.status_code, response.text[:500])
    body: dict[str, Any] = response.json()
    if code >= 400:
        assert body["kind"] == "Status" and body["code"] == code
    return body


def ensure(c: httpx.Client, path: str, body: dict[str, Any]) -> None:
    r = c.post(path, json=body)
    assert r.status_code in (201, 409), r.text


# -- 3: server-side apply judges canonical values --------------------------------------------------


def test_apply_of_values_as_written_after_a_create_of_canonical_ones(server: Server) -> None:
    """``ironpool up`` creates its classes with an ordinary create (values stored canonical: ``1k``);
    a server-side apply of the manifest as written (``iops: "1000"``) by another manager is no
    conflict, and neither is one manager after another applying the same quantities."""
    vc = {"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "VolumeClass",
          "metadata": {"name": "canonical"}, "capabilities": {"tps": "100Mi", "iops": "1000"}}
    mc = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
          "metadata": {"name": "canonical"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}
    with server.client() as c:
        seeded = {"fieldManager": "ironpool-client"}
        status_of(c.post(f"{STORAGE}/volumeclasses", json=vc, params=seeded), 201)
        status_of(c.post(f"{COMPUTE}/machineclasses", json=mc, params=seeded), 201)
        stored = status_of(c.get(f"{STORAGE}/volumeclasses/canonical"), 200)
        assert stored["capabilities"]["iops"] == "1k"
        for manager in ("a", "b"):
            status_of(c.patch(f"{STORAGE}/volumeclasses/canonical", content=orjson.dumps(vc), headers=APPLY,
                              params={"fieldManager": manager}), 200)
        as_written = {**mc, "capabilities": {"cpu": "1000m", "memory": "1024Mi"}}
        applied = status_of(c.patch(f"{COMPUTE}/machineclasses/canonical", content=orjson.dumps(as_written),
                                    headers=APPLY, params={"fieldManager": "kubectl"}), 200)
        assert applied["capabilities"] == {"cpu": "1", "memory": "1Gi"}


# -- 5: a pool's writes follow its graph -----------------------------------------------------------


def test_pool_cannot_claim_a_volume_none_of_its_machines_references(server: Server) -> None:
    pool = POOL_USER.rsplit(":", 1)[1]
    with server.client() as c:
        ensure(c, f"{COMPUTE}/machineclasses", {"metadata": {"name": "small"},
                                                 "capabilities": {"cpu": "1", "memory": "1Gi"}})
        ensure(c, f"{COMPUTE}/machinepools", {"metadata": {"name": pool}})
        status_of(c.patch(f"{COMPUTE}/machinepools/{pool}/status", headers=MERGE,
                          json={"status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}}), 200)
        ensure(c, MACHINES, {"metadata": {"name": "pooled"}, "spec": {
            "machineClassRef": {"name": "small"}, "machinePoolRef": {"name": pool}}})
        ensure(c, VOLUMES, {"metadata": {"name": "unclaimed"}, "spec": {}})
        uid = status_of(c.get(f"{MACHINES}/pooled"), 200)["metadata"]["uid"]
    before = snapshot(server)
    with server.client(POOL) as p:
        status_of(p.get(f"{VOLUMES}/unclaimed"), 403)
        refused = status_of(p.patch(f"{VOLUMES}/unclaimed", headers=MERGE,
                                    json={"spec": {"claimRef": {"name": "pooled", "uid": uid}}}), 403)
        assert "references this volume" in refused["message"]
    assert snapshot(server) == before
    with server.client() as c:
        assert "claimRef" not in status_of(c.get(f"{VOLUMES}/unclaimed"), 200)["spec"]


# -- 6: managedFields stay bounded -----------------------------------------------------------------


def test_thousands_of_field_managers_leave_managed_fields_bounded(server: Server) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "managers", "labels": {"shared": "by-all"}}}
    body = orjson.dumps(secret)
    refused = 0
    with server.client() as c:
        for i in range(200):
            r = c.patch(f"{SECRETS}/managers", content=body, headers=APPLY, params={"fieldManager": f"m{i}"})
            if r.status_code == 422:
                refused += 1
                assert "apply managers" in r.json()["message"]
            else:
                assert r.status_code in (200, 201), r.text
        for i in range(200):
            label = {"metadata": {"labels": {f"l{i}": "x"}}}  # each owns a field of its own
            status_of(c.patch(f"{SECRETS}/managers", headers=MERGE, json=label,
                              params={"fieldManager": f"u{i}"}), 200)
        entries = status_of(c.get(f"{SECRETS}/managers"), 200)["metadata"]["managedFields"]
    appliers = [e for e in entries if e["operation"] == "Apply"]
    updaters = [e for e in entries if e["operation"] == "Update"]
    assert refused == 200 - len(appliers) > 0
    assert len(appliers) == 64 and len(updaters) <= 10
    assert any(e["manager"] == "ancient-changes" for e in updaters)
    assert len(orjson.dumps(entries)) < 64 * 1024


# -- 7: LIST honours resourceVersion and resourceVersionMatch --------------------------------------


def test_list_resource_version_semantics(server: Server) -> None:
    with server.client() as c:
        ensure(c, SECRETS, {"metadata": {"name": "versioned"}, "stringData": {"round": "1"}})
        first = status_of(c.get(f"{SECRETS}/versioned"), 200)["metadata"]["resourceVersion"]
        status_of(c.patch(f"{SECRETS}/versioned", headers=MERGE, json={"stringData": {"round": "2"}}), 200)
        current = int(status_of(c.get(SECRETS), 200)["metadata"]["resourceVersion"])

        status_of(c.get(SECRETS, params={"resourceVersion": "abc"}), 400)
        # Exact: the list as it was at that revision.
        exact = {"resourceVersion": first, "resourceVersionMatch": "Exact"}
        old = status_of(c.get(SECRETS, params=exact), 200)
        assert old["metadata"]["resourceVersion"] == first
        item = next(i for i in old["items"] if i["metadata"]["name"] == "versioned")
        assert item["metadata"]["resourceVersion"] == first
        # NotOlderThan (and a bare resourceVersion): at least that new.
        newer = status_of(c.get(SECRETS, params={"resourceVersion": first,
                                                 "resourceVersionMatch": "NotOlderThan"}), 200)
        assert int(newer["metadata"]["resourceVersion"]) >= current
        ahead = status_of(c.get(SECRETS, params={"resourceVersion": str(current + 1000)}), 504)
        assert "Too large resource version" in ahead["message"]
        for params, field in (
            ({"resourceVersionMatch": "Exact"}, "resourceVersionMatch"),
            ({"resourceVersion": "0", "resourceVersionMatch": "Exact"}, "resourceVersionMatch"),
            ({"resourceVersion": first, "resourceVersionMatch": "Newest"}, "resourceVersionMatch"),
            ({"sendInitialEvents": "true"}, "sendInitialEvents"),
            ({"watch": "1", "sendInitialEvents": "true"}, "resourceVersionMatch"),
            ({"watch": "1", "sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"},
             "allowWatchBookmarks"),
            ({"watch": "1", "resourceVersionMatch": "NotOlderThan"}, "resourceVersionMatch"),
        ):
            invalid = status_of(c.get(SECRETS, params=params), 422)
            assert field in [cause["field"] for cause in invalid["details"]["causes"]], (params, invalid)
        # What client-go's streaming list sends is accepted: the objects, then the bookmark.
        streaming = {"watch": "1", "sendInitialEvents": "true", "allowWatchBookmarks": "true",
                     "resourceVersionMatch": "NotOlderThan", "timeoutSeconds": "5"}
        with c.stream("GET", SECRETS, params=streaming) as watch:
            assert watch.status_code == 200
            for line in watch.iter_lines():
                event = orjson.loads(line)
                if event["type"] == "BOOKMARK":
                    assert event["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
                    break


# -- 8: the decoded size is the document's, not an overestimate ------------------------------------


def test_many_tiny_objects_are_not_taken_for_an_expanded_body(server: Server) -> None:
    """1.6 MB of JSON holding 200,000 tiny objects is within the 3 MiB limit decoded, as on the wire
    (the field is unknown: with fieldValidation=Ignore it is dropped and the Secret made)."""
    body = b'{"metadata":{"name":"tiny"},"tiny":[' + b",".join([b'{"a":1}'] * 200_000) + b"]}"
    assert 1.5e6 < len(body) < 1.7e6
    with server.client() as c:
        made = status_of(c.post(SECRETS, content=body, params={"fieldValidation": "Ignore"},
                                headers={"Content-Type": "application/json"}), 201)
        assert "tiny" not in made
        status_of(c.delete(f"{SECRETS}/tiny"), 200)


# -- 9: a burst of large writes leaves neither a large WAL nor a high-water mark -------------------


def test_after_a_burst_of_large_writes_wal_and_memory_come_back(tmp_path: Path) -> None:
    """80 writes of 1.4 MB from 16 clients at once: once they stop, the WAL file is truncated and the
    resident size falls back near where it began (the watch ring, 4 MiB here, is all it keeps)."""
    small_ring = start_server(tmp_path, store_query="?ring-bytes=4194304")
    data = {f"key-{i:04d}": base64.b64encode(b"%0500d" % i).decode() for i in range(2_000)}
    wal = tmp_path / "store.db-wal"
    try:
        with small_ring.client() as c:  # warm: what every request loads is loaded
            status_of(c.post(SECRETS, json={"metadata": {"name": "warm"}, "data": data}), 201)
        before = small_ring.rss()

        def write(i: int) -> None:
            with small_ring.client(timeout=120) as c:
                for j in range(5):  # 16 writers: within the large-body queue, none is told 429
                    r = c.post(SECRETS, json={"metadata": {"name": f"b{i}-{j}"}, "data": data})
                    assert r.status_code == 201, r.text[:300]

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(write, range(16)))
        peak = small_ring.status("VmHWM")
        wait_for(lambda: wal.stat().st_size == 0 and small_ring.rss() < before + 48 * MIB, 30,
                 "the WAL truncated and memory given back")
        print(f"RSS {before / MIB:.0f} MiB before, peak {peak / MIB:.0f}, after {small_ring.rss() / MIB:.0f}")
        assert peak > before + 64 * MIB  # the burst did take memory
        assert small_ring.alive()
    finally:
        stop_server(small_ring)


@pytest.fixture(scope="module", autouse=True)
def _user(server: Server) -> None:
    grant_edit(server)
    with server.client(USER) as u:
        assert u.get(f"/api/v1/namespaces/{USER_NAMESPACE}/secrets").status_code == 200
    assert ADMIN
