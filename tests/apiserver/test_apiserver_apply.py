"""Field ownership, server-side apply and strategic merge patch, on the registry over SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ironpool.api import errors
from ironpool.api.resources import resolve
from ironpool.apiserver.registry.fieldmanager import field_set
from ironpool.apiserver.registry.generic import Registry
from ironpool.apiserver.registry.managed_fields import from_fields_v1, to_fields_v1
from ironpool.apiserver.registry.schemas import drop_unknown_fields, shape_of
from ironpool.apiserver.registry.strategic_patch import apply_strategic_patch
from ironpool.store.sqlite import SQLiteStore

MACHINES = resolve("machines")
CLASSES = resolve("machineclasses")
SECRETS = resolve("secrets")


@pytest.fixture
async def registry(tmp_path: Path) -> AsyncIterator[Registry]:
    store = SQLiteStore(str(tmp_path / "s.db"))
    reg = Registry(store)
    await reg.create(resolve("namespaces"), None, {"metadata": {"name": "default"}})
    small = {"metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}
    await reg.create(CLASSES, None, small)
    yield reg
    await store.close()


def machine(power: str = "On", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": "m", "labels": {"team": "a"}},
            "spec": {"machineClassRef": {"name": "small"}, "power": power, **spec}}


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"].get("managedFields", [])}


def test_field_sets_in_fieldsv1_form() -> None:
    obj = machine(volumes=[{"name": "root", "emptyDisk": {"sizeLimit": "1Gi"}}])
    obj["metadata"]["finalizers"] = ["x/y"]
    fields = field_set(obj, MACHINES)
    tree = to_fields_v1(fields)
    assert tree["f:spec"]["f:volumes"]['k:{"name":"root"}'] == {".": {}, "f:emptyDisk": {"f:sizeLimit": {}},
                                                                 "f:name": {}}
    assert tree["f:metadata"] == {"f:finalizers": {'v:"x/y"': {}}, "f:labels": {"f:team": {}}}
    assert "f:apiVersion" not in tree and "f:name" not in tree["f:metadata"]
    assert from_fields_v1(tree) == fields


async def test_apply_creates_then_conflicts_then_forces(registry: Registry) -> None:
    created = await registry.apply(MACHINES, "default", "m", machine(), manager="alice")
    assert managers(created)[("alice", "Apply")]["f:spec"]["f:power"] == {}
    # Same value: shared ownership, no conflict.
    await registry.apply(MACHINES, "default", "m", machine(), manager="bob")
    with pytest.raises(errors.Conflict) as caught:
        await registry.apply(MACHINES, "default", "m", machine("Off"), manager="bob")
    assert 'Apply failed with 1 conflict: conflict with "alice": .spec.power' in caught.value.message
    assert [(c.field, c.reason) for c in caught.value.causes] == [(".spec.power", "FieldManagerConflict")]
    forced = await registry.apply(MACHINES, "default", "m", machine("Off"), manager="bob", force=True)
    assert forced["spec"]["power"] == "Off"
    owners = managers(forced)
    assert "f:power" in owners[("bob", "Apply")]["f:spec"]
    assert "f:power" not in owners[("alice", "Apply")]["f:spec"]


async def test_apply_removes_what_the_manager_stopped_applying(registry: Registry) -> None:
    with_selector = machine(machinePoolSelector={"zone": "a"})
    await registry.apply(MACHINES, "default", "m", with_selector, manager="alice")
    config = machine()
    config["metadata"]["labels"] = {}
    result = await registry.apply(MACHINES, "default", "m", config, manager="alice")
    assert "machinePoolSelector" not in result["spec"] and not result["metadata"].get("labels")
    # A field another manager also owns stays when one of them lets it go.
    await registry.apply(MACHINES, "default", "m", machine(), manager="alice")
    await registry.patch(MACHINES, "default", "m", {"metadata": {"labels": {"team": "a"}}}, manager="ops")
    result = await registry.apply(MACHINES, "default", "m", config, manager="alice")
    assert result["metadata"]["labels"] == {"team": "a"}


async def test_ordinary_writes_move_ownership(registry: Registry) -> None:
    created = await registry.create(MACHINES, "default", machine(), manager="kubectl-create")
    assert ("kubectl-create", "Update") in managers(created)
    patched = await registry.patch(MACHINES, "default", "m", {"spec": {"power": "Off"}}, manager="editor")
    owners = managers(patched)
    assert owners[("editor", "Update")] == {"f:spec": {"f:power": {}}}
    assert "f:power" not in owners[("kubectl-create", "Update")]["f:spec"]
    # An apply of the old value now conflicts with the editor's update.
    with pytest.raises(errors.Conflict, match=r'with "editor" using compute\.ironcore\.dev/v1alpha1'):
        await registry.apply(MACHINES, "default", "m", machine("On"), manager="alice")
    # A write that changes nothing writes nothing, managedFields included.
    again = await registry.patch(MACHINES, "default", "m", {"spec": {"power": "Off"}}, manager="editor")
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


async def test_status_is_tracked_on_its_subresource(registry: Registry) -> None:
    await registry.create(MACHINES, "default", machine(), manager="user")
    status = {**machine(), "status": {"state": "Running"}}
    updated = await registry.update(MACHINES, "default", "m", status, subresource="status", manager="poollet")
    entry = next(e for e in updated["metadata"]["managedFields"] if e["manager"] == "poollet")
    assert entry["subresource"] == "status" and entry["fieldsV1"] == {"f:status": {"f:state": {}}}


async def test_strategic_merge_patch_merges_keyed_lists(registry: Registry) -> None:
    await registry.create(MACHINES, "default", machine(volumes=[
        {"name": "root", "emptyDisk": {"sizeLimit": "1Gi"}}, {"name": "data", "emptyDisk": {}}]))
    patch = {"spec": {"volumes": [{"name": "data", "$patch": "delete"}, {"name": "extra", "emptyDisk": {}}],
                      "$setElementOrder/volumes": [{"name": "extra"}, {"name": "root"}]},
             "metadata": {"finalizers": ["a/b"]}}
    result = await registry.patch(MACHINES, "default", "m", patch, kind="strategic")
    assert [v["name"] for v in result["spec"]["volumes"]] == ["extra", "root"]
    assert result["spec"]["volumes"][1]["device"] == "oda"  # the server's default is kept
    assert result["metadata"]["finalizers"] == ["a/b"]


def test_strategic_patch_directives_on_plain_objects() -> None:
    shape = shape_of(SECRETS)
    obj = {"metadata": {"name": "s", "labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
           "data": {"k": "dg=="}}
    patch = {"metadata": {"labels": {"a": None}, "$deleteFromPrimitiveList/finalizers": ["x"]},
             "data": {"$patch": "replace", "n": "bg=="}}
    out = apply_strategic_patch(obj, patch, shape)
    assert out["metadata"]["labels"] == {"b": "2"} and out["metadata"]["finalizers"] == ["y"]
    assert out["data"] == {"n": "bg=="} and obj["data"] == {"k": "dg=="}
    with pytest.raises(errors.BadRequest, match="unknown \\$patch directive"):
        apply_strategic_patch(obj, {"data": {"$patch": "bogus"}}, shape)


def test_unknown_fields_are_dropped_for_warn_and_ignore() -> None:
    obj = machine(colour="blue", volumes=[{"name": "root", "emptyDisk": {}, "size": 3}])
    obj["metadata"]["bogus"] = 1
    dropped = drop_unknown_fields(obj, shape_of(MACHINES))
    assert sorted(dropped) == ["metadata.bogus", "spec.colour", "spec.volumes[0].size"]
    assert "colour" not in obj["spec"] and obj["spec"]["volumes"] == [{"name": "root", "emptyDisk": {}}]


async def test_apply_that_creates_needs_the_right_to_create(tmp_path: Path) -> None:
    import httpx
    from ironpool.apiserver.app import build_app
    from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file

    store = SQLiteStore(str(tmp_path / "http.db"))
    tokens = ('a,admin,1,"system:masters"\n'
              'p,compute.ironcore.dev:system:machinepool:p1,2,"compute.ironcore.dev:system:machinepools"\n')
    app = build_app(store, Authenticator(parse_token_file(tokens)))
    pool = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachinePool",
            "metadata": {"name": "p2", "labels": {"zone": "a"}}}
    path = "/apis/compute.ironcore.dev/v1alpha1/machinepools/p2"
    apply = {"Content-Type": "application/apply-patch+yaml"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        r = await c.patch(path, params={"fieldManager": "x"}, json=pool,
                          headers={**apply, "Authorization": "Bearer p"})
        assert r.status_code == 403, r.text  # pool p1 may not create pool p2
        r = await c.patch(path, json=pool, headers={**apply, "Authorization": "Bearer a"})
        assert r.status_code == 400 and "fieldManager" in r.json()["message"]
        admin = {**apply, "Authorization": "Bearer a"}
        r = await c.patch(path, params={"fieldManager": "x"}, json=pool, headers=admin)
        assert r.status_code == 200, r.text
        assert r.json()["metadata"]["managedFields"][0]["operation"] == "Apply"
    await store.close()
