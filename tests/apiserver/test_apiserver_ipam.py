"""IPAM admission in-process over a real SQLite store: NIC addresses and MACs, Prefix ranges, the
refusals naming the field, deletes that free, deletes refused while in use, and an index rebuilt
from the store after a restart."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ironpool.api import errors
from ironpool.api.resources import resolve
from ironpool.apiserver.registry.generic import Registry
from ironpool.store.sqlite import SQLiteStore

NETWORKS, NICS, PREFIXES = resolve("network"), resolve("networkinterface"), resolve("prefix")
NS = "default"


@pytest.fixture
async def reg(store: SQLiteStore) -> Registry:
    registry = Registry(store)
    await registry.create(NETWORKS, NS, {"metadata": {"name": "lab"}})
    await registry.create(PREFIXES, NS, {"metadata": {"name": "lab-v4", "labels": {"net": "lab"}},
                                         "spec": {"prefix": "10.0.0.0/24"}})
    return registry


def ephemeral(parent: str = "lab-v4", **spec: Any) -> dict[str, Any]:
    return {"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": parent}, **spec}}}}


def nic_body(name: str, *ips: dict[str, Any], network: str = "lab", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"networkRef": {"name": network}, "ipFamilies": ["IPv4"],
                                                 "ips": list(ips), **spec}}


async def refused(call: Any) -> errors.ApiError:
    with pytest.raises(errors.ApiError) as exc:
        await call
    return exc.value


def fields(err: errors.ApiError) -> set[str]:
    return {c.field for c in err.causes}


async def test_a_nic_gets_an_address_a_mac_and_a_status(reg: Registry) -> None:
    nic = await reg.create(NICS, NS, nic_body("web", ephemeral()))
    assert nic["status"]["state"] == "Available"
    assert nic["status"]["ips"] == ["10.0.0.2"]  # .0 network, .1 gateway
    assert nic["status"]["addresses"] == ["10.0.0.2/24"]
    assert nic["spec"]["macAddress"].startswith("52:54:00:")
    literal = await reg.create(NICS, NS, nic_body("db", {"value": "10.0.0.3"}))
    assert literal["status"]["ips"] == ["10.0.0.3"] and literal["status"]["addresses"] == ["10.0.0.3/24"]
    third = await reg.create(NICS, NS, nic_body("cache", ephemeral()))
    assert third["status"]["ips"] == ["10.0.0.4"]  # skips the literal on the same network
    # The status is the allocation's: a client's status write does not change it.
    written = await reg.patch(NICS, NS, "web", {"status": {"ips": ["1.2.3.4"], "state": "Error"}},
                              subresource="status")
    assert written["status"]["ips"] == ["10.0.0.2"] and written["status"]["state"] == "Available"


async def test_taken_addresses_and_macs_are_409_naming_the_field(reg: Registry) -> None:
    web = await reg.create(NICS, NS, nic_body("web", ephemeral()))
    err = await refused(reg.create(NICS, NS, nic_body("x", {"value": "10.0.0.2"})))
    assert isinstance(err, errors.Conflict) and fields(err) == {"spec.ips[0].value"}
    assert 'in use by networkinterface "web" on network "lab"' in err.message
    err = await refused(reg.create(NICS, NS, nic_body("x", ephemeral(prefix="10.0.0.2/32"))))
    assert isinstance(err, errors.Conflict)
    assert fields(err) == {"spec.ips[0].ephemeral.prefixTemplate.spec.prefix"}
    err = await refused(reg.create(NICS, NS, nic_body("x", {"value": "10.0.0.9"},
                                                      macAddress=web["spec"]["macAddress"])))
    assert isinstance(err, errors.Conflict) and fields(err) == {"spec.macAddress"}
    assert "MAC in use" in err.message
    # Another network is another address space: the same literal and MAC are fine there.
    await reg.create(NETWORKS, NS, {"metadata": {"name": "other"}})
    await reg.create(NICS, NS, nic_body("x", {"value": "10.0.0.2"}, network="other",
                                        macAddress=web["spec"]["macAddress"]))
    assert await reg.store.get(NICS.key(NS, "x")) is not None


async def test_bad_references_and_ranges_are_422_and_store_nothing(reg: Registry) -> None:
    cases = {
        "spec.networkRef.name": nic_body("x", {"value": "10.0.0.9"}, network="nope"),
        "spec.ips[0].ephemeral.prefixTemplate.spec.parentRef.name": nic_body("x", ephemeral("nope")),
        "spec.ips[0].ephemeral.prefixTemplate.spec.prefix": nic_body("x", ephemeral(prefix="10.0.1.5/32")),
    }
    for field, body in cases.items():
        err = await refused(reg.create(NICS, NS, body))
        assert isinstance(err, errors.Invalid) and fields(err) == {field}, err.message
    gateway = await refused(reg.create(NICS, NS, nic_body("x", ephemeral(prefix="10.0.0.1/32"))))
    assert "is reserved: the gateway address" in gateway.message
    assert await reg.store.get(NICS.key(NS, "x")) is None


async def test_prefixes_nest_and_never_overlap(reg: Registry) -> None:
    big = {"metadata": {"name": "big"}, "spec": {"prefix": "10.0.0.0/16"}}
    err = await refused(reg.create(PREFIXES, NS, big))
    assert isinstance(err, errors.Conflict) and fields(err) == {"spec.prefix"}
    assert 'overlaps prefix "lab-v4" (10.0.0.0/24)' in err.message
    sub = await reg.create(PREFIXES, NS, {"metadata": {"name": "sub"}, "spec": {
        "ipFamily": "IPv4", "prefixLength": 28, "parentSelector": {"matchLabels": {"net": "lab"}}}})
    assert sub["spec"]["prefix"] == "10.0.0.0/28" and sub["spec"]["parentRef"] == {"name": "lab-v4"}
    assert sub["status"]["phase"] == "Allocated"
    second = await reg.create(PREFIXES, NS, {"metadata": {"name": "sub2"}, "spec": {
        "ipFamily": "IPv4", "prefixLength": 28, "parentRef": {"name": "lab-v4"}}})
    assert second["spec"]["prefix"] == "10.0.0.16/28"
    err = await refused(reg.create(PREFIXES, NS, {"metadata": {"name": "sub3"}, "spec": {
        "ipFamily": "IPv4", "prefix": "10.0.0.8/29", "parentRef": {"name": "lab-v4"}}}))
    assert isinstance(err, errors.Conflict) and 'overlaps prefix "sub"' in err.message
    outside = await refused(reg.create(PREFIXES, NS, {"metadata": {"name": "sub3"}, "spec": {
        "ipFamily": "IPv4", "prefix": "10.0.9.0/29", "parentRef": {"name": "lab-v4"}}}))
    assert isinstance(outside, errors.Invalid) and fields(outside) == {"spec.prefix"}
    # A NIC address from the parent avoids the children; one from a child lies inside it.
    nic = await reg.create(NICS, NS, nic_body("web", ephemeral()))
    assert nic["status"]["ips"] == ["10.0.0.32"] and nic["status"]["addresses"] == ["10.0.0.32/24"]
    inner = await reg.create(NICS, NS, nic_body("db", ephemeral("sub")))
    assert inner["status"]["ips"] == ["10.0.0.2"] and inner["status"]["addresses"] == ["10.0.0.2/28"]


async def test_exhaustion_is_refused_with_the_reason_and_deletes_free_addresses(reg: Registry) -> None:
    taken = set()
    for i in range(253):
        taken.add((await reg.create(NICS, NS, nic_body(f"n{i}", ephemeral())))["status"]["ips"][0])
    assert len(taken) == 253
    err = await refused(reg.create(NICS, NS, nic_body("one-too-many", ephemeral())))
    assert isinstance(err, errors.Conflict)
    assert fields(err) == {"spec.ips[0].ephemeral.prefixTemplate.spec.parentRef.name"}
    assert 'no free address in prefix "lab-v4" (10.0.0.0/24): all 253 allocatable addresses are taken' in (
        err.message)
    await reg.delete(NICS, NS, "n41")
    again = await reg.create(NICS, NS, nic_body("one-too-many", ephemeral()))
    assert again["status"]["ips"] == ["10.0.0.43"]  # n41 had .43; it is the only free one


async def test_concurrent_creates_never_share_an_address(reg: Registry) -> None:
    creates = (reg.create(NICS, NS, nic_body(f"c{i}", ephemeral())) for i in range(120))
    results = await asyncio.gather(*creates, return_exceptions=True)
    ips = [r["status"]["ips"][0] for r in results if isinstance(r, dict)]
    macs = {r["spec"]["macAddress"] for r in results if isinstance(r, dict)}
    assert len(ips) == 120 and len(set(ips)) == 120 and len(macs) == 120


async def test_changing_an_ip_source_allocates_anew_and_keeps_the_rest(reg: Registry) -> None:
    await reg.create(PREFIXES, NS, {"metadata": {"name": "lab-v6"}, "spec": {"prefix": "fd00::/64"}})
    body = nic_body("web", ephemeral(), ephemeral("lab-v6"))
    body["spec"]["ipFamilies"] = ["IPv4", "IPv6"]
    nic = await reg.create(NICS, NS, body)
    assert nic["status"]["ips"] == ["10.0.0.2", "fd00::2"]
    assert nic["status"]["addresses"] == ["10.0.0.2/24", "fd00::2/64"]
    ips = [{"value": "10.0.0.200"}, ephemeral("lab-v6")]
    patched = await reg.patch(NICS, NS, "web", {"spec": {"ips": ips}})
    assert patched["status"]["ips"] == ["10.0.0.200", "fd00::2"]
    reused = await reg.create(NICS, NS, nic_body("db", ephemeral()))
    assert reused["status"]["ips"] == ["10.0.0.2"]  # web let it go


async def test_deleting_what_is_in_use_is_refused_naming_the_users(reg: Registry) -> None:
    await reg.create(NICS, NS, nic_body("web", ephemeral()))
    await reg.create(PREFIXES, NS, {"metadata": {"name": "sub"}, "spec": {
        "ipFamily": "IPv4", "prefixLength": 28, "parentRef": {"name": "lab-v4"}}})
    err = await refused(reg.delete(NETWORKS, NS, "lab"))
    assert isinstance(err, errors.Conflict)
    assert err.message == 'network "lab" is in use by networkinterfaces "web": delete them first'
    err = await refused(reg.delete(PREFIXES, NS, "lab-v4"))
    assert err.message == ('prefix "lab-v4" has addresses allocated to prefixes "sub" and networkinterfaces '
                           '"web": delete them first')
    await reg.delete(NICS, NS, "web")
    await reg.delete(PREFIXES, NS, "sub")
    await reg.delete(PREFIXES, NS, "lab-v4")
    await reg.delete(NETWORKS, NS, "lab")
    err = await refused(reg.create(NICS, NS, nic_body("late", {"value": "10.0.0.2"})))
    assert fields(err) == {"spec.networkRef.name"}


async def test_dry_runs_allocate_nothing_and_a_restart_rebuilds_the_same_view(
    reg: Registry, store: SQLiteStore,
) -> None:
    dry = await reg.create(NICS, NS, nic_body("web", ephemeral()), dry_run=True)
    assert dry["status"]["ips"] == ["10.0.0.2"]
    first = await reg.create(NICS, NS, nic_body("web", ephemeral()))
    assert first["status"]["ips"] == ["10.0.0.2"]
    sub = await reg.create(PREFIXES, NS, {"metadata": {"name": "sub"}, "spec": {
        "ipFamily": "IPv4", "prefixLength": 28, "parentRef": {"name": "lab-v4"}}})
    assert sub["spec"]["prefix"] == "10.0.0.16/28"  # the first /28 holds web's address
    await store.close()  # a new process: a new index, built from the store
    reopened = SQLiteStore(store.path)
    restarted = Registry(reopened)
    second = await restarted.create(NICS, NS, nic_body("db", ephemeral()))
    assert second["status"]["ips"] == ["10.0.0.3"]
    err = await refused(restarted.create(NICS, NS, nic_body("x", {"value": "10.0.0.2"},
                                                            macAddress=first["spec"]["macAddress"])))
    assert fields(err) == {"spec.ips[0].value", "spec.macAddress"}
    err = await refused(restarted.create(PREFIXES, NS, {"metadata": {"name": "sub2"}, "spec": {
        "ipFamily": "IPv4", "prefix": "10.0.0.16/29", "parentRef": {"name": "lab-v4"}}}))
    assert 'overlaps prefix "sub" (10.0.0.16/28)' in err.message
    await reopened.close()


async def test_the_names_of_ephemeral_prefixes_are_kept_free(reg: Registry) -> None:
    await reg.create(NICS, NS, nic_body("web", ephemeral()))
    squatter = {"metadata": {"name": "web-0"}, "spec": {"prefix": "10.9.0.0/24"}}
    err = await refused(reg.create(PREFIXES, NS, squatter))
    assert isinstance(err, errors.Conflict) and fields(err) == {"metadata.name"}
    await reg.create(PREFIXES, NS, {"metadata": {"name": "db-0"}, "spec": {"prefix": "10.9.0.0/24"}})
    err = await refused(reg.create(NICS, NS, nic_body("db", ephemeral())))
    assert isinstance(err, errors.Conflict) and fields(err) == {"spec.ips[0]"}
    assert 'prefix "db-0" exists and is not this network interface\'s' in err.message
    await reg.create(NICS, NS, nic_body("db", {"value": "10.0.0.50"}))  # a literal needs no prefix
