"""The registry's store semantics, the admission chain and the namespace controller, in-process over
a real SQLite store (the HTTP face is tested against a real process in test_apiserver_rest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from ironpool.api import errors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import resolve
from ironpool.apiserver.admission import AdmissionChain, AdmissionPlugin, Attributes, default_chain
from ironpool.apiserver.controllers.namespace import NamespaceController
from ironpool.apiserver.namespaces import NAMESPACES
from ironpool.apiserver.registry.generic import Registry
from ironpool.store.interface import Document, Store
from ironpool.store.sqlite import SQLiteStore

from tests.helpers.wait import eventually

COMPUTE = "compute.ironcore.dev/v1alpha1"
MACHINES, CLASSES, SECRETS = resolve("machines"), resolve("machineclasses"), resolve("secrets")


def machine(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": COMPUTE, "kind": "Machine", "metadata": {"name": name, **meta},
            "spec": {"machineClassRef": {"name": "small"}}}


async def test_server_owned_fields_are_the_servers(store: SQLiteStore) -> None:
    reg = Registry(store)
    long_ago = "2001-01-01T00:00:00Z"
    sent = machine("m1", uid="mine", generation=7, resourceVersion="99", creationTimestamp=long_ago,
                   deletionTimestamp=long_ago)
    sent["status"] = {"state": "Running"}
    created = await reg.create(MACHINES, "default", sent)
    m = created["metadata"]
    assert m["uid"] != "mine" and m["generation"] == 1 and not m.get("deletionTimestamp")
    assert m["creationTimestamp"] != long_ago and "status" not in created

    forged = {**created, "metadata": {**m, "uid": "other", "generation": 40, "labels": {"a": "b"}},
              "status": {"state": "Running"}}
    updated = await reg.update(MACHINES, "default", "m1", forged)
    assert updated["metadata"]["uid"] == m["uid"] and updated["metadata"]["generation"] == 1
    assert updated["metadata"]["labels"] == {"a": "b"} and "status" not in updated

    both = {"status": {"state": "Running"}, "spec": {"power": "Off"}}
    status = await reg.patch(MACHINES, "default", "m1", both, subresource="status")
    assert status["status"] == {"state": "Running"} and status["spec"] == updated["spec"]
    spec = await reg.patch(MACHINES, "default", "m1", {"spec": {"power": "Off"}})
    assert spec["metadata"]["generation"] == 2 and spec["status"] == {"state": "Running"}
    same = await reg.patch(MACHINES, "default", "m1", {"spec": {"power": "Off"}})
    assert same["metadata"]["resourceVersion"] == spec["metadata"]["resourceVersion"]  # no write


async def test_the_read_modify_write_loop_retries_a_lost_race_unless_pinned(store: SQLiteStore) -> None:
    reg = Registry(store)
    await reg.create(MACHINES, "default", machine("m1"))
    races = 0

    async def concurrent_writer(old: Document | None, new: Document | None, s: Store) -> None:
        """Another client writes between this request's read and its write, twice."""
        nonlocal races
        if races < 2:
            races += 1
            assert old is not None
            key = MACHINES.key("default", "m1")
            labels = {"race": str(races)}
            await s.update(key, {**old, "metadata": {**old["metadata"], "labels": labels}})

    patched = await reg.patch(MACHINES, "default", "m1", {"metadata": {"annotations": {"a": "b"}}},
                              check=concurrent_writer)
    assert races == 2
    assert patched["metadata"]["labels"] == {"race": "2"} and patched["metadata"]["annotations"] == {"a": "b"}

    races = 0
    pinned = {"metadata": {"resourceVersion": patched["metadata"]["resourceVersion"], "labels": {"x": "y"}}}
    with pytest.raises(errors.Conflict, match="has been modified"):
        await reg.patch(MACHINES, "default", "m1", pinned, check=concurrent_writer)
    races = 0
    deleted = await reg.delete(MACHINES, "default", "m1", check=concurrent_writer)
    assert races == 2 and deleted["metadata"]["labels"] == {"race": "2"}
    assert await store.get(MACHINES.key("default", "m1")) is None


async def test_finalizers_hold_the_object_until_the_last_one_goes(store: SQLiteStore) -> None:
    reg = Registry(store)
    await reg.create(MACHINES, "default", machine("m1", finalizers=["example.com/a"]))
    marked = await reg.delete(MACHINES, "default", "m1")
    assert marked["metadata"]["deletionTimestamp"]
    with pytest.raises(errors.Invalid) as exc:
        more = {"metadata": {"finalizers": ["example.com/a", "example.com/b"]}}
        await reg.patch(MACHINES, "default", "m1", more)
    assert [c.field for c in exc.value.causes] == ["metadata.finalizers"]
    await reg.patch(MACHINES, "default", "m1", {"metadata": {"finalizers": None}})
    assert await store.get(MACHINES.key("default", "m1")) is None


class Recorder(AdmissionPlugin):
    """Records what the chain shows it; refuses Secrets named ``refused``."""

    name: ClassVar[str] = "Recorder"
    kinds: ClassVar[frozenset[str] | None] = frozenset({"Secret"})

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bool, bool]] = []
        self.commits: list[tuple[str, bool]] = []

    async def admit(self, attrs: Attributes) -> None:
        self.seen.append(("admit", attrs.operation, attrs.old is not None, attrs.new is not None))

    def validate(self, attrs: Attributes) -> None:
        self.seen.append(("validate", attrs.operation, attrs.old is not None, attrs.new is not None))
        if attrs.name == "refused":
            raise errors.Forbidden("refused by Recorder")

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        self.commits.append((info.kind, doc is not None))


async def test_admission_chain_order_kinds_and_commits(store: SQLiteStore) -> None:
    recorder = Recorder()
    reg = Registry(store, AdmissionChain([*default_chain(store).plugins, recorder]))
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {}}
    await reg.create(SECRETS, "default", secret)
    await reg.patch(SECRETS, "default", "s", {"metadata": {"labels": {"a": "b"}}})
    await reg.delete(SECRETS, "default", "s")
    assert recorder.seen == [
        ("admit", "CREATE", False, True), ("validate", "CREATE", False, True),
        ("admit", "UPDATE", True, True), ("validate", "UPDATE", True, True),
        ("admit", "DELETE", False, False), ("validate", "DELETE", True, False),
    ]
    assert recorder.commits == [("Secret", True), ("Secret", True), ("Secret", False)]
    with pytest.raises(errors.Forbidden, match="refused by Recorder"):
        await reg.create(SECRETS, "default", {**secret, "metadata": {"name": "refused"}})
    assert await store.get(SECRETS.key("default", "refused")) is None
    recorder.seen.clear()
    await reg.create(MACHINES, "default", machine("m1"))  # not a kind the plugin declared
    assert recorder.seen == [] and recorder.commits[-1] == ("Machine", True)


async def test_namespace_lifecycle_admission(store: SQLiteStore) -> None:
    reg = Registry(store)
    with pytest.raises(errors.NotFound, match='namespaces "team-a" not found'):
        await reg.create(MACHINES, "team-a", machine("m1"))
    await reg.create(NAMESPACES, None, {"metadata": {"name": "kube-system"}})
    for name in ("default", "kube-system"):
        with pytest.raises(errors.Forbidden, match="may not be deleted"):
            await reg.delete(NAMESPACES, None, name)


async def test_namespace_controller_deletes_content_then_the_namespace(store: SQLiteStore) -> None:
    reg = Registry(store)
    NamespaceController(reg)
    await reg.create(NAMESPACES, None, {"metadata": {"name": "team-a"}})
    await reg.create(MACHINES, "team-a", machine("held", finalizers=["example.com/hold"]))
    await reg.create(MACHINES, "team-a", machine("free"))
    await reg.create(SECRETS, "team-a", {"metadata": {"name": "s"}, "data": {}})
    await reg.create(MACHINES, "default", machine("elsewhere"))

    marked = await reg.delete(NAMESPACES, None, "team-a")
    assert marked["status"]["phase"] == "Terminating"
    with pytest.raises(errors.Forbidden, match="being terminated"):
        await reg.create(MACHINES, "team-a", machine("late"))

    async def only_held_left() -> bool:
        names = [d["metadata"]["name"] for d in (await store.list("/registry/")).items
                 if d["metadata"].get("namespace") == "team-a"]
        return names == ["held"]

    await eventually(only_held_left, message="team-a's content deleted")
    held = await store.get(MACHINES.key("team-a", "held"))
    assert held is not None and held["metadata"]["deletionTimestamp"]
    assert await store.get(NAMESPACES.key(None, "team-a")) is not None  # still holding "held"
    await reg.patch(MACHINES, "team-a", "held", {"metadata": {"finalizers": None}})
    await eventually(lambda: _absent(store, NAMESPACES.key(None, "team-a")), message="team-a removed")
    assert await store.get(MACHINES.key("default", "elsewhere")) is not None


async def test_namespace_controller_resumes_what_an_earlier_process_left(store: SQLiteStore) -> None:
    first = Registry(store)  # no controller: the process stopped before it ran
    await first.create(NAMESPACES, None, {"metadata": {"name": "team-b"}})
    await first.create(SECRETS, "team-b", {"metadata": {"name": "s"}, "data": {}})
    await first.delete(NAMESPACES, None, "team-b")
    assert await store.get(SECRETS.key("team-b", "s")) is not None

    controller = NamespaceController(Registry(store))
    await controller.resume()
    await eventually(lambda: _absent(store, NAMESPACES.key(None, "team-b")), message="team-b removed")
    assert await store.get(SECRETS.key("team-b", "s")) is None


async def _absent(store: Store, key: str) -> bool:
    return await store.get(key) is None


async def test_the_apiserver_of_ironpool_up_runs_the_namespace_controller(tmp_path: Path) -> None:
    """``ironpool up`` hosts the apiserver through ApiServerRunner; its namespaces get deleted too."""
    import httpx
    from ironpool.allinone.servers import ApiServerRunner

    (tmp_path / "tokens.csv").write_text('t0k3n,admin,1,"system:masters"\n')
    runner = ApiServerRunner(f"sqlite:///{tmp_path / 'up.db'}", tmp_path / "tokens.csv", "127.0.0.1", 0)
    await runner.start()
    try:
        async with httpx.AsyncClient(base_url=runner.url, headers={"Authorization": "Bearer t0k3n"}) as c:
            ns = "/api/v1/namespaces"
            assert (await c.post(ns, json={"metadata": {"name": "team-up"}})).status_code == 201
            secret = {"metadata": {"name": "s"}, "data": {}}
            assert (await c.post(f"{ns}/team-up/secrets", json=secret)).status_code == 201
            assert (await c.delete(f"{ns}/team-up")).status_code == 200

            async def gone() -> bool:
                return (await c.get(f"{ns}/team-up")).status_code == 404

            await eventually(gone, message="namespace team-up removed by the controller")
            assert (await c.get(f"{ns}/team-up/secrets/s")).status_code == 404
    finally:
        await runner.stop()
