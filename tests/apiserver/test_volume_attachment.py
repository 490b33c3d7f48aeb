"""A Volume's one attachment (``status.attachment``) against a real apiserver process: admission's
``ExclusiveVolumeAttachment`` (never taken from its holder, even by an admin; two writers on one
revision: one wins) and what a machine pool identity may record or clear."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiserver import test_apiserver_authz as authz
from tests.apiserver.test_apiserver_authz import MACHINES, MERGE, VOLUMES, Server, ok, refused, seed


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Server]:
    """The authorization tests' apiserver: tokens for admin and the pool identities pool-a, pool-b."""
    yield from authz.server.__wrapped__(tmp_path)  # type: ignore[attr-defined]


def attachment(machine: str, uid: str, pool: str) -> dict[str, Any]:
    return {"machineRef": {"name": machine, "uid": uid}, "pool": pool, "since": "2026-11-28T03:00:00Z"}


def set_attachment(c: httpx.Client, volume: str, held: dict[str, Any] | None,
                   version: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"status": {"attachment": held}}
    if version:
        body["metadata"] = {"resourceVersion": version}
    return c.patch(f"{VOLUMES}/{volume}/status", headers=MERGE, json=body)


def conflict(response: httpx.Response, message: str) -> None:
    assert response.status_code == 409, response.text
    assert response.json()["reason"] == "Conflict"
    assert message in response.json()["message"], response.json()["message"]


def test_a_volume_is_attached_to_one_machine_at_a_time(api: Server) -> None:
    server = api
    seed(server)
    with server.client("admin") as admin:
        ok(admin.post(VOLUMES, json={"metadata": {"name": "disk", "namespace": "default"}, "spec": {}}), 201)
        for name in ("ma", "mb"):
            ok(admin.patch(f"{MACHINES}/{name}", headers=MERGE, json={"spec": {"volumes": [
                {"name": "data", "volumeRef": {"name": "disk"}}]}}))
        uid = {n: ok(admin.get(f"{MACHINES}/{n}"))["metadata"]["uid"] for n in ("ma", "mb")}
        before = ok(admin.get(f"{VOLUMES}/disk"))["metadata"]["resourceVersion"]
    with server.client("pool-a") as a, server.client("pool-b") as b:
        # Another pool's machine, or one of its own that does not reference the volume: refused.
        refused(set_attachment(a, "disk", attachment("mb", uid["mb"], "pool-b")),
                'volumes.storage.ironcore.dev "disk" is forbidden')
        refused(set_attachment(a, "disk", attachment("ma", uid["ma"], "pool-b")),
                'volumes.storage.ironcore.dev "disk" is forbidden')
        refused(a.patch(f"{VOLUMES}/disk/status", headers=MERGE, json={"status": {"state": "Available"}}),
                'volumes.storage.ironcore.dev "disk" is forbidden')
        # Both saw it free at one revision: the first records it, the second gets 409.
        held = ok(set_attachment(a, "disk", attachment("ma", uid["ma"], "pool-a"), before))
        assert held["status"]["attachment"]["machineRef"] == {"name": "ma", "uid": uid["ma"]}
        assert set_attachment(b, "disk", attachment("mb", uid["mb"], "pool-b"), before).status_code == 409
        # Without a revision it is judged on the stored volume: held by ma on pool-a, which another
        # pool may neither take nor clear.
        for held_by_b in (attachment("mb", uid["mb"], "pool-b"), None):
            status = refused(set_attachment(b, "disk", held_by_b), 'volumes.storage.ironcore.dev "disk"')
            assert status["message"].endswith('the volume is attached on pool "pool-a", not "pool-b"')
        ok(set_attachment(a, "disk", attachment("ma", uid["ma"], "pool-a")))  # the holder again: fine
    with server.client("admin") as admin:  # not even an admin takes it over: it is released first
        conflict(set_attachment(admin, "disk", attachment("mb", uid["mb"], "pool-b")),
                 f'the volume is attached to machine "ma" (uid {uid["ma"]}) on pool "pool-a" since '
                 "2026-11-28T03:00:00Z; it is attached to one running domain at a time")
        bad = set_attachment(admin, "free-of-fields", None)
        assert bad.status_code == 404
    with server.client("pool-a") as a, server.client("pool-b") as b:
        ok(set_attachment(a, "disk", None))
        got = ok(set_attachment(b, "disk", attachment("mb", uid["mb"], "pool-b")))
        assert got["status"]["attachment"]["pool"] == "pool-b"


def test_an_attachment_names_its_machine_and_pool(api: Server) -> None:
    server = api
    with server.client("admin") as admin:
        ok(admin.post(VOLUMES, json={"metadata": {"name": "disk", "namespace": "default"}, "spec": {}}), 201)
        r = set_attachment(admin, "disk", {"machineRef": {"name": "m"}, "pool": ""})
        assert r.status_code == 422, r.text
        fields = {c["field"] for c in r.json()["details"]["causes"]}
        assert fields == {"status.attachment.machineRef.uid", "status.attachment.pool"}
