"""VolumeSnapshotSource admission: a Volume restored from a snapshot is bound to the pool holding the
snapshot, and a request that would put it elsewhere, or nowhere, is refused naming the field, with
nothing stored."""

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


@pytest.fixture
async def admin(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = SQLiteStore(str(tmp_path / "restore.db"))
    app = build_app(store, Authenticator(parse_token_file('admin,admin,1,"system:masters"\n')))
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test",
                               headers={"Authorization": "Bearer admin"})
    try:
        for name, labels in (("held", {VOLUME_POOL_LABEL: "vpool-a"}), ("unheld", {})):
            r = await client.post(SNAPSHOTS, json={"metadata": {"name": name, "labels": labels},
                                                   "spec": {"volumeRef": {"name": "src"}}})
            assert r.status_code == 201, r.text
        yield client
    finally:
        await client.aclose()
        await app.state.apiserver.authorize.stop()
        await store.close()


def restored(name: str, snapshot: str, pool: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"volumeClassRef": {"name": "fast"}, "resources": {"storage": "1Gi"},
                            "dataSource": {"volumeSnapshotRef": {"name": snapshot}}}
    if pool is not None:
        spec["volumePoolRef"] = {"name": pool}
    return {"metadata": {"name": name}, "spec": spec}


async def refused(admin: httpx.AsyncClient, body: dict[str, Any], field: str, words: str) -> None:
    r = await admin.post(VOLUMES, json=body)
    assert r.status_code == 422, r.text
    assert [c["field"] for c in r.json()["details"]["causes"]] == [field]
    assert words in r.json()["message"]
    assert (await admin.get(f"{VOLUMES}/{body['metadata']['name']}")).status_code == 404


async def test_restored_volume_is_bound_to_its_snapshots_pool(admin: httpx.AsyncClient) -> None:
    r = await admin.post(VOLUMES, json=restored("r1", "held"))
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["volumePoolRef"] == {"name": "vpool-a"}
    r = await admin.post(VOLUMES, json=restored("r2", "held", pool="vpool-a"))
    assert r.status_code == 201, r.text


async def test_a_restore_elsewhere_or_nowhere_is_refused_naming_the_field(admin: httpx.AsyncClient) -> None:
    await refused(admin, restored("r3", "held", pool="vpool-b"), "spec.volumePoolRef.name",
                  'held by volume pool "vpool-a"')
    await refused(admin, restored("r4", "unheld"), "spec.dataSource.volumeSnapshotRef.name",
                  "is not held by a volume pool yet")
    await refused(admin, restored("r5", "missing"), "spec.dataSource.volumeSnapshotRef.name",
                  'VolumeSnapshot "missing" does not exist')


async def test_a_chosen_pool_may_wait_for_its_snapshot(admin: httpx.AsyncClient) -> None:
    for name, snapshot in (("r6", "missing"), ("r7", "unheld")):
        r = await admin.post(VOLUMES, json=restored(name, snapshot, pool="vpool-b"))
        assert r.status_code == 201, r.text
        assert r.json()["spec"]["volumePoolRef"] == {"name": "vpool-b"}
