"""The networking controller in-process over a real SQLite store: a Machine's ephemeral NICs come and
go with it, the Prefixes showing ephemeral addresses follow their NICs, parents report their usage,
and a Machine whose NIC cannot be made yet gets an Event and its NIC once an address is free."""

from __future__ import annotations

from typing import Any

import pytest
from ironpool.api import errors
from ironpool.api.resources import resolve
from ironpool.apiserver.controllers.networking import NetworkingController
from ironpool.apiserver.registry.generic import Registry
from ironpool.store.sqlite import SQLiteStore

from tests.helpers.wait import eventually

NETWORKS, NICS, PREFIXES = resolve("network"), resolve("networkinterface"), resolve("prefix")
MACHINES, CLASSES, EVENTS = resolve("machine"), resolve("machineclass"), resolve("event")
NS = "default"
TIMEOUT = 10.0


async def seeded(store: SQLiteStore) -> Registry:
    reg = Registry(store)
    await reg.create(NETWORKS, NS, {"metadata": {"name": "lab"}})
    await reg.create(PREFIXES, NS, {"metadata": {"name": "lab-v4"}, "spec": {"prefix": "10.0.0.0/24"}})
    return reg


@pytest.fixture
async def reg(store: SQLiteStore) -> Registry:
    registry = await seeded(store)
    await NetworkingController(registry).resume()
    return registry


def template(*ips: dict[str, Any], network: str = "lab", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "web"}},
            "spec": {"networkRef": {"name": network}, "ipFamilies": ["IPv4"], "ips": list(ips), **spec}}


EPHEMERAL = {"ephemeral": {"prefixTemplate": {"metadata": {"labels": {"kind": "nic"}},
                                              "spec": {"parentRef": {"name": "lab-v4"}}}}}


def machine(name: str, *nics: tuple[str, dict[str, Any]], finalizer: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if finalizer:
        meta["finalizers"] = ["test.ironpool.dev/hold"]
    return {"metadata": meta, "spec": {"machineClassRef": {"name": "small"}, "networkInterfaces": [
        {"name": n, "ephemeral": {"networkInterfaceTemplate": t}} for n, t in nics]}}


async def get(reg: Registry, info: Any, name: str) -> dict[str, Any] | None:
    return await reg.store.get(info.key(NS, name))


async def absent(reg: Registry, nic: str) -> bool:
    """Neither the NIC nor the prefix of its first ephemeral address exists."""
    return await get(reg, NICS, nic) is None and await get(reg, PREFIXES, f"{nic}-0") is None


async def used(reg: Registry) -> list[str]:
    parent = await get(reg, PREFIXES, "lab-v4")
    assert parent is not None
    return list((parent.get("status") or {}).get("used") or [])


async def test_an_ephemeral_nic_lives_and_dies_with_its_machine(reg: Registry) -> None:
    created = await reg.create(MACHINES, NS, machine("web", ("primary", template(EPHEMERAL)), finalizer=True))
    nic = await eventually(lambda: get(reg, NICS, "web-primary"), TIMEOUT, "the ephemeral NIC")
    m = created["metadata"]
    assert nic["spec"]["machineRef"] == {"name": "web", "uid": m["uid"]}
    [owner] = nic["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Machine", "web", m["uid"])
    assert owner["controller"]
    assert nic["metadata"]["labels"] == {"app": "web"}
    assert nic["metadata"]["annotations"]["common.ironcore.dev/ephemeral-managed-by"] == "ephemeral-manager"
    assert nic["status"]["ips"] == ["10.0.0.2"]
    view = await eventually(lambda: get(reg, PREFIXES, "web-primary-0"), TIMEOUT, "the ephemeral prefix")
    assert view["spec"] == {"ipFamily": "IPv4", "prefix": "10.0.0.2/32", "parentRef": {"name": "lab-v4"}}
    assert view["metadata"]["labels"] == {"kind": "nic"} and view["status"]["phase"] == "Allocated"
    assert view["metadata"]["ownerReferences"][0]["kind"] == "NetworkInterface"
    await eventually(lambda: used(reg), TIMEOUT, "the parent's status.used")
    assert await used(reg) == ["10.0.0.2/32"]

    await reg.delete(MACHINES, NS, "web")  # held by its finalizer: the NIC stays while the domain may run
    assert await get(reg, NICS, "web-primary") is not None
    await reg.patch(MACHINES, NS, "web", {"metadata": {"finalizers": None}})

    await eventually(lambda: absent(reg, "web-primary"), TIMEOUT, "the NIC and prefix to go with the Machine")
    await eventually(lambda: _empty(reg), TIMEOUT, "the parent's status.used to empty")
    again = await reg.create(NICS, NS, {"metadata": {"name": "next"}, "spec": template(EPHEMERAL)["spec"]})
    assert again["status"]["ips"] == ["10.0.0.2"]  # released for reuse
    await reg.delete(NICS, NS, "next")
    await reg.delete(NETWORKS, NS, "lab")  # nothing uses it any more


async def _empty(reg: Registry) -> bool:
    return await used(reg) == []


async def test_nics_follow_the_machines_spec(reg: Registry) -> None:
    await reg.create(MACHINES, NS, machine("web", ("a", template(EPHEMERAL))))
    await eventually(lambda: get(reg, NICS, "web-a"), TIMEOUT, "NIC a")
    spec = (await get(reg, MACHINES, "web"))["spec"]  # type: ignore[index]
    spec["networkInterfaces"].append({"name": "b", "ephemeral": {
        "networkInterfaceTemplate": template({"value": "10.0.0.100"})}})
    await reg.patch(MACHINES, NS, "web", {"spec": {"networkInterfaces": spec["networkInterfaces"]}})
    b = await eventually(lambda: get(reg, NICS, "web-b"), TIMEOUT, "NIC b, added later")
    assert b["status"]["ips"] == ["10.0.0.100"]
    spec["networkInterfaces"][1]["ephemeral"]["networkInterfaceTemplate"] = template({"value": "10.0.0.101"})
    await reg.patch(MACHINES, NS, "web", {"spec": {"networkInterfaces": spec["networkInterfaces"]}})

    async def moved() -> bool:
        nic = await get(reg, NICS, "web-b")
        return nic is not None and nic["status"]["ips"] == ["10.0.0.101"] and nic["metadata"]["uid"] == (
            b["metadata"]["uid"])

    await eventually(moved, TIMEOUT, "NIC b's address to follow the template, in place")
    await reg.create(NETWORKS, NS, {"metadata": {"name": "other"}})
    spec["networkInterfaces"][1]["ephemeral"]["networkInterfaceTemplate"] = template(
        {"value": "10.0.0.101"}, network="other")
    await reg.patch(MACHINES, NS, "web", {"spec": {"networkInterfaces": spec["networkInterfaces"]}})

    async def replaced() -> bool:
        nic = await get(reg, NICS, "web-b")
        return nic is not None and nic["spec"]["networkRef"]["name"] == "other"

    await eventually(replaced, TIMEOUT, "NIC b to be replaced on another network")
    await reg.patch(MACHINES, NS, "web", {"spec": {"networkInterfaces": spec["networkInterfaces"][1:]}})

    await eventually(lambda: absent(reg, "web-a"), TIMEOUT, "NIC a to go when its template goes")


async def test_a_machine_whose_nics_cannot_be_made_is_refused_naming_the_field(reg: Registry) -> None:
    tp = "spec.networkInterfaces[0].ephemeral.networkInterfaceTemplate.spec"
    await reg.create(NICS, NS, {"metadata": {"name": "web-primary"},
                                "spec": template({"value": "10.0.0.7"})["spec"]})
    cases = [
        (machine("db", ("primary", template(EPHEMERAL, network="nope"))), errors.Invalid,
         f"{tp}.networkRef.name"),
        (machine("db", ("primary", template({"value": "10.0.0.7"}))), errors.Conflict, f"{tp}.ips[0].value"),
        (machine("web", ("primary", template(EPHEMERAL))), errors.Conflict, "spec.networkInterfaces[0].name"),
    ]
    for body, kind, field in cases:
        with pytest.raises(kind) as exc:
            await reg.create(MACHINES, NS, body)
        assert {c.field for c in exc.value.causes} == {field}, exc.value.message
    assert await get(reg, MACHINES, "db") is None and await get(reg, MACHINES, "web") is None


async def test_a_nic_that_cannot_be_made_yet_is_reported_and_made_once_possible(store: SQLiteStore) -> None:
    reg = await seeded(store)
    await reg.create(PREFIXES, NS, {"metadata": {"name": "tiny"}, "spec": {"prefix": "10.1.0.0/30"}})
    tiny = {"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "tiny"}}}}}
    # Committed while no controller runs (a crash right after), and its one address taken since.
    await reg.create(MACHINES, NS, machine("web", ("primary", template(tiny))))
    await reg.create(NICS, NS, {"metadata": {"name": "squatter"}, "spec": template(tiny)["spec"]})
    await NetworkingController(reg).resume()

    async def warned() -> Any:
        events = (await store.list(EVENTS.prefix(NS))).items
        return [e for e in events if e["involvedObject"]["name"] == "web"]

    [event] = await eventually(warned, TIMEOUT, "an Event on the Machine")
    assert event["type"] == "Warning" and event["reason"] == "FailedCreateNetworkInterface"
    assert 'no free address in prefix "tiny" (10.1.0.0/30)' in event["message"]
    await reg.delete(NICS, NS, "squatter")
    nic = await eventually(lambda: get(reg, NICS, "web-primary"), TIMEOUT, "the NIC once an address is free")
    assert nic["status"]["ips"] == ["10.1.0.2"]


async def test_resume_collects_what_gone_owners_left(store: SQLiteStore) -> None:
    reg = await seeded(store)
    first = NetworkingController(reg)
    await first.resume()
    await reg.create(MACHINES, NS, machine("web", ("primary", template(EPHEMERAL))))
    await eventually(lambda: get(reg, PREFIXES, "web-primary-0"), TIMEOUT, "the ephemeral prefix")
    first.index.watchers.remove(first.committed)  # the controller stops (a crash) ...
    await reg.delete(MACHINES, NS, "web")  # ... and misses the Machine's removal
    assert await get(reg, NICS, "web-primary") is not None
    await NetworkingController(reg).resume()  # the next process

    await eventually(lambda: absent(reg, "web-primary"), TIMEOUT, "the gone Machine's NIC and prefix to go")


async def test_only_a_machine_that_wants_or_owns_nics_is_reconciled(store: SQLiteStore) -> None:
    registry = await seeded(store)
    controller = NetworkingController(registry)
    await controller.resume()
    plain = await registry.create(MACHINES, NS, {"metadata": {"name": "plain"},
                                                 "spec": {"machineClassRef": {"name": "small"}}})
    # A bind or a status update of a Machine without NICs: nothing to do, no read of it from the store.
    controller.committed(MACHINES, MACHINES.key(NS, "plain"), plain)
    controller.committed(MACHINES, MACHINES.key(NS, "plain"), None)
    assert ("machine", NS, "plain") not in controller._queue
    web = await registry.create(MACHINES, NS, machine("web", ("a", template(EPHEMERAL))))
    await eventually(lambda: get(registry, NICS, "web-a"), TIMEOUT, "NIC a")
    # It no longer asks for the NIC, but owns it: reconciled (the NIC goes).
    without = {**web, "spec": {"machineClassRef": {"name": "small"}}}
    controller.committed(MACHINES, MACHINES.key(NS, "web"), without)
    assert ("machine", NS, "web") in controller._queue
