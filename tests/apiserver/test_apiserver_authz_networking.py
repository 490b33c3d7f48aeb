"""What a machine pool identity may do with networking objects, against a real apiserver process:
read Networks, NICs and Prefixes; claim a NIC for its own Machine and write its providerID; nothing
else."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ApiServer, start_apiserver, stop_apiserver

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
NETWORKING = "/apis/networking.ironcore.dev/v1alpha1/namespaces/default"
PREFIXES = "/apis/ipam.ironcore.dev/v1alpha1/namespaces/default/prefixes"
NICS = f"{NETWORKING}/networkinterfaces"
MERGE = {"Content-Type": "application/merge-patch+json"}
POOLS = ("pool-a", "pool-b")


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[ApiServer, dict[str, str]]]:
    tokens = {p: secrets.token_hex(16) for p in POOLS}
    admin, alice = secrets.token_hex(16), secrets.token_hex(16)
    lines = [f'{admin},admin,1,"system:masters"', f'{alice},alice,2,"developers"']
    lines += [f"{tokens[p]},compute.ironcore.dev:system:machinepool:{p},{3 + i}" for i, p in enumerate(POOLS)]
    (tmp_path / "tokens.csv").write_text("\n".join(lines) + "\n")
    server = start_apiserver(tmp_path)
    try:
        yield server, tokens
    finally:
        stop_apiserver(server)


def ok(r: httpx.Response, code: int = 200) -> dict[str, Any]:
    assert r.status_code == code, r.text
    return r.json()  # type: ignore[no-any-return]


def forbidden(r: httpx.Response, words: str) -> None:
    assert r.status_code == 403, r.text
    assert words in r.json()["message"], r.json()["message"]


def nic(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"],
                                                 "ips": [{"ephemeral": {"prefixTemplate": {"spec": {
                                                     "parentRef": {"name": "lab-v4"}}}}}]}}


def test_machine_pool_reads_networking_and_claims_nics_only_for_its_machines(
    api: tuple[ApiServer, dict[str, str]],
) -> None:
    server, tokens = api
    admin = httpx.Client(base_url=server.url, headers=server.headers(), timeout=10)
    uids = {}
    with admin:
        ok(admin.post(f"{NETWORKING}/networks", json={"metadata": {"name": "lab"}}), 201)
        root = {"metadata": {"name": "lab-v4"}, "spec": {"prefix": "10.0.0.0/24"}}
        ok(admin.post(PREFIXES, json=root), 201)
        ok(admin.post(f"{COMPUTE}/machineclasses", json={
            "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}), 201)
        for name in ("nic-a", "nic-b"):
            ok(admin.post(NICS, json=nic(name)), 201)
        for name, pool, nic_name in (("ma", "pool-a", "nic-a"), ("mb", "pool-b", "nic-b")):
            body = {"metadata": {"name": name}, "spec": {
                "machineClassRef": {"name": "small"}, "machinePoolRef": {"name": pool},
                "networkInterfaces": [{"name": "primary", "networkInterfaceRef": {"name": nic_name}}]}}
            uids[name] = ok(admin.post(f"{COMPUTE}/namespaces/default/machines", json=body), 201)[
                "metadata"]["uid"]

    def pool(name: str) -> httpx.Client:
        return httpx.Client(base_url=server.url, headers=server.headers(tokens[name]), timeout=10)

    with pool("pool-a") as a, pool("pool-b") as b:
        for path in (f"{NETWORKING}/networks", NICS, PREFIXES, f"{NETWORKING}/networks/lab"):
            ok(a.get(path))
        forbidden(a.get(f"{NICS}/nic-b"), 'no machine bound to machine pool "pool-a" references it')
        # Its own machine, but a NIC that machine does not reference: the graph refuses the claim too.
        forbidden(a.patch(f"{NICS}/nic-b", headers=MERGE,
                          json={"spec": {"machineRef": {"name": "ma", "uid": uids["ma"]}}}),
                  'machine "ma" is not a live machine bound to pool "pool-a" that references this network '
                  "interface")
        claim = {"spec": {"machineRef": {"name": "ma", "uid": uids["ma"]}}}
        claimed = ok(a.patch(f"{NICS}/nic-a", headers=MERGE, json=claim))
        assert claimed["spec"]["machineRef"]["name"] == "ma"
        ok(a.patch(f"{NICS}/nic-a", headers=MERGE, json={"spec": {"providerID": "libvirt://nic-a"},
                                                        "metadata": {"finalizers": ["pool.io/nic"]}}))
        forbidden(a.patch(f"{NICS}/nic-b", headers=MERGE,
                          json={"spec": {"machineRef": {"name": "mb", "uid": uids["mb"]}}}),
                  'machine "mb" is not a live machine bound to pool "pool-a"')
        forbidden(a.patch(f"{NICS}/nic-b", headers=MERGE, json={"spec": {"providerID": "x"}}),
                  'not claimed by a machine bound to pool "pool-a"')
        forbidden(a.patch(f"{NICS}/nic-a", headers=MERGE, json={"spec": {"ips": [{"value": "10.0.0.9"}]}}),
                  "may change only spec.machineRef, spec.providerID")
        forbidden(a.patch(f"{NICS}/nic-a/status", headers=MERGE, json={"status": {"state": "Error"}}),
                  "cannot patch")
        forbidden(a.delete(f"{NICS}/nic-a"), "cannot delete")
        forbidden(a.post(f"{NETWORKING}/networks", json={"metadata": {"name": "x"}}), "cannot create")
        forbidden(b.patch(f"{NICS}/nic-a", headers=MERGE, json={"spec": {"machineRef": None}}),
                  'claimed by machine "ma" of another pool')
        forbidden(b.patch(f"{NICS}/nic-a", headers=MERGE, json={"spec": {"providerID": "stolen"}}),
                  'not claimed by a machine bound to pool "pool-b"')
        released = ok(a.patch(f"{NICS}/nic-a", headers=MERGE, json={"spec": {"machineRef": None,
                                                                               "providerID": None}}))
        assert "machineRef" not in released["spec"] and released["status"]["ips"] == ["10.0.0.2"]
