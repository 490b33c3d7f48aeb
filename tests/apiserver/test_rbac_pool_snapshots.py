"""What a volume pool identity may do with VolumeSnapshots: read all of them (its informer), and write
only those it holds: the finalizers, its own pool label and the status of a snapshot of a Volume bound
to it, or labelled with its pool; never the spec, never another pool's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ironpool.api.storage import VOLUME_POOL_LABEL
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.store.sqlite import SQLiteStore

STORAGE = "/apis/storage.ironcore.dev/v1alpha1"
VOLUMES = f"{STORAGE}/namespaces/default/volumes"
SNAPSHOTS = f"{STORAGE}/namespaces/default/volumesnapshots"
MERGE = {"Content-Type": "application/merge-patch+json"}
VP = "storage.ironcore.dev:system:volumepool:"
TOKENS = (f'admin,admin,1,"system:masters"\n'
          f'vpool-a,{VP}vpool-a,2,"storage.ironcore.dev:system:volumepools"\n'
          f'vpool-b,{VP}vpool-b,3,"storage.ironcore.dev:system:volumepools"\n')


def code(r: httpx.Response, expected: int) -> dict[str, Any]:
    assert r.status_code == expected, r.text
    return r.json()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    store = SQLiteStore(str(tmp_path / "snap.db"))
    app = build_app(store, Authenticator(parse_token_file(TOKENS)))
    transport = httpx.ASGITransport(app=app)
    clients = {who: httpx.AsyncClient(transport=transport, base_url="http://test",
                                      headers={"Authorization": f"Bearer {who}"})
               for who in ("admin", "vpool-a", "vpool-b")}
    try:
        admin = clients["admin"]
        code(await admin.post(f"{STORAGE}/volumeclasses", json={
            "metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "100"}}), 201)
        for name, pool in (("vol-a", "vpool-a"), ("vol-b", "vpool-b")):
            code(await admin.post(VOLUMES, json={"metadata": {"name": name}, "spec": {
                "volumeClassRef": {"name": "fast"}, "volumePoolRef": {"name": pool},
                "resources": {"storage": "1Gi"}}}), 201)
            code(await admin.post(SNAPSHOTS, json={"metadata": {"name": f"snap-{name}"},
                                                   "spec": {"volumeRef": {"name": name}}}), 201)
        yield clients
    finally:
        for c in clients.values():
            await c.aclose()
        await app.state.apiserver.authorize.stop()
        await store.close()


async def patch(c: httpx.AsyncClient, name: str, body: dict[str, Any]) -> httpx.Response:
    """A merge patch of ``name`` (``snap-x`` or ``snap-x/status``) in the default namespace."""
    return await c.patch(f"{SNAPSHOTS}/{name}", headers=MERGE, json=body)


def refused(r: httpx.Response, words: str) -> None:
    assert code(r, 403)["message"].find(words) >= 0, r.text


async def test_a_volume_pool_reads_every_snapshot(api: dict[str, httpx.AsyncClient]) -> None:
    listed = code(await api["vpool-a"].get(f"{STORAGE}/volumesnapshots"), 200)
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["snap-vol-a", "snap-vol-b"]
    code(await api["vpool-a"].get(f"{SNAPSHOTS}/snap-vol-b"), 200)
    refused(await api["vpool-a"].delete(f"{SNAPSHOTS}/snap-vol-a"), "volumesnapshots")
    refused(await api["vpool-a"].post(SNAPSHOTS, json={"metadata": {"name": "x"},
                                                       "spec": {"volumeRef": {"name": "vol-a"}}}),
            "volumesnapshots")


async def test_a_volume_pool_finalizes_labels_and_reports_only_what_it_holds(
        api: dict[str, httpx.AsyncClient]) -> None:
    a = api["vpool-a"]
    mine = {"metadata": {"finalizers": ["volumepoollet.ironcore.dev/volume-snapshot"],
                         "labels": {VOLUME_POOL_LABEL: "vpool-a"}}}
    code(await patch(a, "snap-vol-a", mine), 200)
    report = {"status": {"state": "Ready", "snapshotID": "iri://1", "size": "1Gi"}}
    code(await patch(a, "snap-vol-a/status", report), 200)
    # Another pool's snapshot, by its source Volume; and a label that would hand it over.
    refused(await patch(a, "snap-vol-b", mine), 'not held by volume pool "vpool-a"')
    refused(await patch(a, "snap-vol-b/status", {"status": {"state": "Ready"}}),
            'not held by volume pool "vpool-a"')
    refused(await patch(a, "snap-vol-a", {"metadata": {"labels": {VOLUME_POOL_LABEL: "vpool-b"}}}),
            "only with its own pool")
    refused(await patch(a, "snap-vol-a", {"spec": {"volumeRef": {"name": "x"}}}),
            "only the finalizers, labels and annotations")


async def test_the_pool_label_keeps_a_snapshot_with_its_pool_after_its_source_goes(
        api: dict[str, httpx.AsyncClient]) -> None:
    admin, a, b = api["admin"], api["vpool-a"], api["vpool-b"]
    code(await patch(a, "snap-vol-a", {"metadata": {"labels": {VOLUME_POOL_LABEL: "vpool-a"}}}), 200)
    code(await admin.delete(f"{VOLUMES}/vol-a"), 200)
    code(await patch(a, "snap-vol-a/status", {"status": {"state": "Ready"}}), 200)
    refused(await patch(b, "snap-vol-a/status", {"status": {"state": "Failed"}}),
            'not held by volume pool "vpool-b"')
