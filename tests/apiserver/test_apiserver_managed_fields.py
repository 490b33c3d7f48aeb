"""Field ownership under pressure, on the registry over SQLite: server-side apply judged on canonical
values, the caps on managedFields entries, managedFields a write sets itself, and JSON Patch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from ironpool.api import errors
from ironpool.api.resources import resolve
from ironpool.apiserver.registry.generic import Registry
from ironpool.apiserver.registry.managed_fields import (
    ANCIENT_CHANGES,
    MAX_APPLY_MANAGERS,
    MAX_UPDATE_MANAGERS,
)
from ironpool.apiserver.registry.objectmeta import RequestEntityTooLarge
from ironpool.store.sqlite import SQLiteStore

MACHINES = resolve("machines")
CLASSES = resolve("machineclasses")
VOLUME_CLASSES = resolve("volumeclasses")


@pytest.fixture
async def registry(tmp_path: Path) -> AsyncIterator[Registry]:
    store = SQLiteStore(str(tmp_path / "s.db"))
    reg = Registry(store)
    await reg.create(resolve("namespaces"), None, {"metadata": {"name": "default"}})
    yield reg
    await store.close()


def machine_class(cpu: Any, memory: str = "1Gi") -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
            "metadata": {"name": "small"}, "capabilities": {"cpu": cpu, "memory": memory}}


def operations(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", [])]


async def test_apply_of_the_same_quantity_in_another_spelling_is_no_conflict(registry: Registry) -> None:
    # As `ironpool up` seeds its classes (an ordinary create, canonical values stored) and kubectl
    # then applies the manifests with the values as written.
    created = await registry.create(CLASSES, None, machine_class("1", "1024Mi"), manager="ironpool-client")
    assert created["capabilities"] == {"cpu": "1", "memory": "1Gi"}
    applied = await registry.apply(CLASSES, None, "small", machine_class("1000m", "1Gi"), manager="kubectl")
    assert applied["capabilities"] == created["capabilities"]
    assert ("kubectl", "Apply") in operations(applied)
    volume_class = {"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "VolumeClass",
                    "metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "1000"}}
    await registry.apply(VOLUME_CLASSES, None, "fast", volume_class, manager="a")
    shared = await registry.apply(VOLUME_CLASSES, None, "fast", volume_class, manager="b")
    assert {("a", "Apply"), ("b", "Apply")} <= set(operations(shared))
    # A value that differs once canonical still conflicts.
    def with_disk(size: str) -> dict[str, Any]:
        return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
                "metadata": {"name": "m", "namespace": "default"},
                "spec": {"machineClassRef": {"name": "small"},
                         "volumes": [{"name": "scratch", "emptyDisk": {"sizeLimit": size}}]}}

    await registry.apply(MACHINES, "default", "m", with_disk("1Gi"), manager="a")
    await registry.apply(MACHINES, "default", "m", with_disk("1024Mi"), manager="b")
    with pytest.raises(errors.Conflict, match=r'conflict with "a": \.spec\.volumes\[name="scratch"\]'):
        await registry.apply(MACHINES, "default", "m", with_disk("2Gi"), manager="b")


async def test_update_managers_are_capped_oldest_merged(registry: Registry) -> None:
    await registry.create(CLASSES, None, machine_class("1"), manager="creator")
    for i in range(MAX_UPDATE_MANAGERS + 5):
        obj = await registry.patch(CLASSES, None, "small", {"metadata": {"labels": {f"l{i}": "x"}}},
                                   manager=f"writer-{i}")
    ops = operations(obj)
    assert len(ops) == MAX_UPDATE_MANAGERS
    assert (ANCIENT_CHANGES, "Update") in ops and ("creator", "Update") not in ops
    assert ("writer-14", "Update") in ops and ("writer-0", "Update") not in ops
    ancient = next(e for e in obj["metadata"]["managedFields"] if e["manager"] == ANCIENT_CHANGES)
    # The merged managers' fields are still owned, by the bucket.
    assert "f:cpu" in ancient["fieldsV1"]["f:capabilities"] and "f:l0" in ancient["fieldsV1"]["f:metadata"][
        "f:labels"]


async def test_apply_managers_are_bounded(registry: Registry) -> None:
    await registry.create(CLASSES, None, machine_class("1"))
    config = machine_class("1")
    for i in range(MAX_APPLY_MANAGERS):
        obj = await registry.apply(CLASSES, None, "small", config, manager=f"applier-{i}")
    assert len(operations(obj)) == MAX_APPLY_MANAGERS
    with pytest.raises(errors.Invalid, match=f"at most {MAX_APPLY_MANAGERS} apply managers") as caught:
        await registry.apply(CLASSES, None, "small", config, manager="one-too-many")
    assert caught.value.causes[0].field == "metadata.managedFields"
    # One that applies nothing any more leaves, and makes room.
    await registry.apply(CLASSES, None, "small", {"apiVersion": config["apiVersion"], "kind": "MachineClass",
                                                  "metadata": {"name": "small"}}, manager="applier-0")
    obj = await registry.apply(CLASSES, None, "small", config, manager="one-too-many")
    assert ("one-too-many", "Apply") in operations(obj) and ("applier-0", "Apply") not in operations(obj)


async def test_a_write_may_replace_or_clear_managed_fields(registry: Registry) -> None:
    created = await registry.create(CLASSES, None, machine_class("1"), manager="kubectl-client-side-apply")
    entry = created["metadata"]["managedFields"][0]
    moved = {**entry, "manager": "kubectl", "operation": "Apply"}
    patch = [{"op": "replace", "path": "/metadata/managedFields", "value": [moved]},
             {"op": "replace", "path": "/metadata/resourceVersion",
              "value": created["metadata"]["resourceVersion"]}]
    migrated = await registry.patch(CLASSES, None, "small", patch, kind="json", manager="kubectl")
    assert operations(migrated) == [("kubectl", "Apply")]
    # The patch's resourceVersion is a precondition: a stale one is a conflict.
    with pytest.raises(errors.Conflict):
        await registry.patch(CLASSES, None, "small", patch, kind="json", manager="kubectl")
    cleared = await registry.patch(CLASSES, None, "small", {"metadata": {"managedFields": [{}]}},
                                   manager="x")
    assert "managedFields" not in cleared["metadata"]
    bad = {"metadata": {"managedFields": [{"manager": "m", "operation": "Delete", "fieldsV1": {}}]}}
    with pytest.raises(errors.Invalid) as caught:
        await registry.patch(CLASSES, None, "small", bad, manager="x")
    assert caught.value.causes[0].field == "metadata.managedFields[0].operation"
    many = [{"manager": f"m{i}", "operation": "Apply", "fieldsV1": {"f:capabilities": {}}}
            for i in range(MAX_APPLY_MANAGERS + 1)]
    with pytest.raises(errors.Invalid, match="apply managers"):
        await registry.patch(CLASSES, None, "small", {"metadata": {"managedFields": many}}, manager="x")


async def test_json_patch(registry: Registry) -> None:
    await registry.create(CLASSES, None, machine_class("1"))
    await registry.create(MACHINES, "default", {"metadata": {"name": "m"}, "spec": {
        "machineClassRef": {"name": "small"}, "power": "On"}})
    patched = await registry.patch(MACHINES, "default", "m", [
        {"op": "test", "path": "/spec/power", "value": "On"},
        {"op": "replace", "path": "/spec/power", "value": "Off"},
        {"op": "add", "path": "/metadata/labels", "value": {"a/b": "c"}},
        {"op": "copy", "from": "/metadata/labels/a~1b", "path": "/metadata/labels/d"},
    ], kind="json", manager="patcher")
    assert patched["spec"]["power"] == "Off" and patched["metadata"]["labels"] == {"a/b": "c", "d": "c"}
    assert ("patcher", "Update") in operations(patched)
    before = patched["metadata"]["resourceVersion"]
    for ops, error in (
        ([{"op": "test", "path": "/spec/power", "value": "On"}], errors.Invalid),
        ([{"op": "remove", "path": "/spec/nothing"}], errors.Invalid),
        ({"op": "add"}, errors.BadRequest),
        ([{"op": "frobnicate", "path": "/a"}], errors.BadRequest),
        ([{"op": "add", "path": "no-slash", "value": 1}], errors.BadRequest),
    ):
        with pytest.raises(error):
            await registry.patch(MACHINES, "default", "m", ops, kind="json")
    # Copies that double the object each time are stopped long before they add up.
    bomb = [{"op": "add", "path": "/metadata/annotations", "value": {"a": "x" * 1000}}]
    bomb += [{"op": "copy", "from": "/metadata/annotations", "path": f"/metadata/annotations/{i}"}
             for i in range(40)]
    with pytest.raises(RequestEntityTooLarge, match="copies more than"):
        await registry.patch(MACHINES, "default", "m", bomb, kind="json")
    current = await registry.get_raw(MACHINES, "default", "m")
    assert f'"resourceVersion":"{before}"'.encode() in current
