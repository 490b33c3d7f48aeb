"""IP address management with two apiservers over one etcd: NetworkInterface creates racing through
both never share an address or a MAC and fill a /24 exactly; what one apiserver allocated the other
refuses to hand out again; a Machine created through one and deleted through the other takes its
ephemeral NIC with it."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx

from tests.conftest import ApiServer
from tests.ha.conftest import ControlPlane
from tests.helpers.wait import eventually

_RUNS = itertools.count()
ALLOCATABLE = 253  # a /24 without its network, gateway and broadcast addresses


def clients(servers: list[ApiServer]) -> list[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=100)
    return [httpx.AsyncClient(base_url=s.url, headers=s.headers(), timeout=60, limits=limits)
            for s in servers]


def paths(ns: str) -> dict[str, str]:
    return {"networks": f"/apis/networking.ironcore.dev/v1alpha1/namespaces/{ns}/networks",
            "nics": f"/apis/networking.ironcore.dev/v1alpha1/namespaces/{ns}/networkinterfaces",
            "prefixes": f"/apis/ipam.ironcore.dev/v1alpha1/namespaces/{ns}/prefixes",
            "machines": f"/apis/compute.ironcore.dev/v1alpha1/namespaces/{ns}/machines"}


def nic(name: str, ip: dict[str, Any] | None = None) -> dict[str, Any]:
    source = ip or {"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "lab-v4"}}}}}
    return {"metadata": {"name": name}, "spec": {"networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"],
                                                 "ips": [source]}}


async def setup(c: httpx.AsyncClient) -> dict[str, str]:
    ns = f"ipam-{next(_RUNS)}"
    p = paths(ns)
    for path, body in (("/api/v1/namespaces", {"metadata": {"name": ns}}),
                       (p["networks"], {"metadata": {"name": "lab"}}),
                       (p["prefixes"], {"metadata": {"name": "lab-v4"}, "spec": {"prefix": "10.0.0.0/24"}})):
        r = await c.post(path, json=body)
        assert r.status_code == 201, r.text
    return p


async def test_creates_racing_through_two_apiservers_fill_a_prefix_exactly(
    two_apiservers: ControlPlane,
) -> None:
    a, b = clients(two_apiservers.servers)
    async with a, b:
        p = await setup(a)
        racing = [(a if i % 2 else b).post(p["nics"], json=nic(f"n{i}")) for i in range(ALLOCATABLE + 20)]
        results = await asyncio.gather(*racing)
        created = [r.json() for r in results if r.status_code == 201]
        refused = [r for r in results if r.status_code != 201]
        assert {r.status_code for r in refused} == {409}, [r.text for r in refused[:3]]
        assert "no free address" in refused[0].text
        ips = [n["status"]["ips"][0] for n in created]
        assert len(created) == ALLOCATABLE and len(set(ips)) == ALLOCATABLE
        assert len({n["spec"]["macAddress"] for n in created}) == ALLOCATABLE
        # Freed through one apiserver, reused through the other once its watch brought the deletion
        # (until then it still counts the /24 full, and says so).
        assert (await a.delete(f"{p['nics']}/{created[0]['metadata']['name']}")).status_code == 200

        async def reused() -> Any:
            r = await b.post(p["nics"], json=nic("again"))
            assert r.status_code in (201, 409), r.text
            return r.json() if r.status_code == 201 else None

        again = await eventually(reused, 30, "the freed address to be handed out through the other apiserver")
        assert again["status"]["ips"] == [ips[0]]


async def test_what_one_apiserver_allocated_the_other_refuses(two_apiservers: ControlPlane) -> None:
    a, b = clients(two_apiservers.servers)
    async with a, b:
        p = await setup(a)
        first = await a.post(p["nics"], json=nic("web", {"value": "10.0.0.7"}))
        assert first.status_code == 201, first.text
        taken = await b.post(p["nics"], json=nic("db", {"value": "10.0.0.7"}))
        assert taken.status_code == 409
        assert taken.json()["details"]["causes"][0]["field"] == "spec.ips[0].value"
        same_mac = nic("db")
        same_mac["spec"]["macAddress"] = first.json()["spec"]["macAddress"]
        r = await b.post(p["nics"], json=same_mac)
        assert r.status_code == 409 and "spec.macAddress" in r.text
        big = {"metadata": {"name": "big"}, "spec": {"prefix": "10.0.0.0/16"}}
        overlap = await b.post(p["prefixes"], json=big)
        assert overlap.status_code == 409 and "overlaps" in overlap.text


async def test_a_machine_made_through_one_and_deleted_through_the_other_takes_its_nic(
    two_apiservers: ControlPlane,
) -> None:
    a, b = clients(two_apiservers.servers)
    async with a, b:
        p = await setup(a)
        template = {"spec": nic("x")["spec"]}
        nics = [{"name": "primary", "ephemeral": {"networkInterfaceTemplate": template}}]
        body = {"metadata": {"name": "web"},
                "spec": {"machineClassRef": {"name": "small"}, "networkInterfaces": nics}}
        assert (await a.post(p["machines"], json=body)).status_code == 201

        async def made() -> bool:
            return (await b.get(f"{p['nics']}/web-primary")).status_code == 200

        await eventually(made, 20, "the ephemeral NIC, seen through the other apiserver")
        assert (await b.delete(f"{p['machines']}/web")).status_code == 200

        async def gone() -> bool:
            return (await a.get(f"{p['nics']}/web-primary")).status_code == 404

        await eventually(gone, 20, "the NIC to go with the Machine")
