"""Networking against a real apiserver process over HTTP: 200 concurrent NetworkInterface creates on
a /24 get 200 distinct addresses, the /24 runs out with a clear 409, deletes free addresses for reuse,
and refusals arrive as Kubernetes Status objects naming the field."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx

from tests.helpers.wait import eventually

if TYPE_CHECKING:
    from tests.conftest import ApiServer

NETWORKING = "/apis/networking.ironcore.dev/v1alpha1/namespaces/default"
NICS = f"{NETWORKING}/networkinterfaces"
PREFIXES = "/apis/ipam.ironcore.dev/v1alpha1/namespaces/default/prefixes"
ALLOCATABLE = 253  # a /24 without its network, gateway and broadcast addresses


async def setup(c: httpx.AsyncClient) -> None:
    """The Network "lab" and its /24 "lab-v4"."""
    for path, body in ((f"{NETWORKING}/networks", {"metadata": {"name": "lab"}}),
                       (PREFIXES, {"metadata": {"name": "lab-v4"}, "spec": {"prefix": "10.0.0.0/24"}})):
        r = await c.post(path, json=body)
        assert r.status_code == 201, r.text


def nic(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"],
                                                 "ips": [{"ephemeral": {"prefixTemplate": {"spec": {
                                                     "parentRef": {"name": "lab-v4"}}}}}]}}


async def test_concurrent_creates_get_distinct_addresses_until_the_prefix_is_full(
    apiserver: ApiServer,
) -> None:
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(base_url=apiserver.url, headers=apiserver.headers(), timeout=60,
                                 limits=limits) as c:
        await setup(c)

        first = await asyncio.gather(*(c.post(NICS, json=nic(f"a{i}")) for i in range(200)))
        assert [r.status_code for r in first] == [201] * 200
        ips = [r.json()["status"]["ips"][0] for r in first]
        assert len(set(ips)) == 200
        assert len({r.json()["spec"]["macAddress"] for r in first}) == 200

        # The rest of the /24, concurrently again, and more than fits: exactly 53 more succeed.
        rest = await asyncio.gather(*(c.post(NICS, json=nic(f"b{i}")) for i in range(60)))
        created = [r for r in rest if r.status_code == 201]
        refused = [r for r in rest if r.status_code != 201]
        assert len(created) == ALLOCATABLE - 200 and {r.status_code for r in refused} == {409}
        status = refused[0].json()
        assert (status["kind"], status["reason"]) == ("Status", "Conflict")
        [cause] = status["details"]["causes"]
        assert cause["field"] == "spec.ips[0].ephemeral.prefixTemplate.spec.parentRef.name"
        assert cause["message"] == ('no free address in prefix "lab-v4" (10.0.0.0/24): all 253 allocatable '
                                    "addresses are taken")
        everything = ips + [r.json()["status"]["ips"][0] for r in created]
        assert len(set(everything)) == ALLOCATABLE
        assert not {"10.0.0.0", "10.0.0.1", "10.0.0.255"} & set(everything)

        # Deleting frees: as many new NICs fit again, on exactly the freed addresses.
        freed = ips[:20]
        deletes = await asyncio.gather(*(c.delete(f"{NICS}/a{i}") for i in range(20)))
        assert {r.status_code for r in deletes} == {200}
        again = await asyncio.gather(*(c.post(NICS, json=nic(f"c{i}")) for i in range(21)))
        assert sorted(r.status_code for r in again) == [201] * 20 + [409]
        assert {r.json()["status"]["ips"][0] for r in again if r.status_code == 201} == set(freed)

        async def counted() -> bool:
            parent = (await c.get(f"{PREFIXES}/lab-v4")).json()
            return len(parent["status"].get("used") or []) == ALLOCATABLE

        await eventually(counted, 10, "the parent's status.used to count every address")
        r = await c.delete(f"{NETWORKING}/networks/lab")
        assert r.status_code == 409, r.text
        assert r.json()["message"] == ('network "lab" is in use by networkinterfaces "a100", "a101", "a102", '
                                       '"a103", "a104" and 248 more: delete them first')


async def test_a_machines_ephemeral_nic_comes_and_goes_with_it(apiserver: ApiServer) -> None:
    machines = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"

    def machine(name: str, network: str = "lab") -> dict[str, Any]:
        spec = {**nic(name)["spec"], "networkRef": {"name": network}}
        nics = [{"name": "primary", "ephemeral": {"networkInterfaceTemplate": {"spec": spec}}}]
        return {"metadata": {"name": name},
                "spec": {"machineClassRef": {"name": "small"}, "networkInterfaces": nics}}

    async with httpx.AsyncClient(base_url=apiserver.url, headers=apiserver.headers(), timeout=30) as c:
        await setup(c)
        r = await c.post(machines, json=machine("web", network="nope"))
        assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == (
            "spec.networkInterfaces[0].ephemeral.networkInterfaceTemplate.spec.networkRef.name")
        assert (await c.post(machines, json=machine("web"))).status_code == 201

        async def made() -> Any:
            r = await c.get(f"{NICS}/web-primary")
            return r.json() if r.status_code == 200 else None

        created = await eventually(made, 10, "the Machine's ephemeral NIC")
        assert created["status"]["ips"] == ["10.0.0.2"]
        r = await c.delete(f"{NETWORKING}/networks/lab")
        assert r.status_code == 409
        assert r.json()["message"] == ('network "lab" is in use by networkinterfaces "web-primary" and '
                                       'machines "web": delete them first')
        assert (await c.delete(f"{machines}/web")).status_code == 200

        async def gone() -> bool:
            return (await c.get(f"{NICS}/web-primary")).status_code == 404

        await eventually(gone, 10, "the NIC to go with the Machine")
        r = await c.post(NICS, json=nic("next"))
        assert r.status_code == 201 and r.json()["status"]["ips"] == ["10.0.0.2"]  # released for reuse
        assert (await c.delete(f"{NICS}/next")).status_code == 200
        assert (await c.delete(f"{NETWORKING}/networks/lab")).status_code == 200
