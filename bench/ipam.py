"""Benchmark of IP address management in ``ironpool apiserver`` on SQLite: allocations/s.

Starts the apiserver as a subprocess on a fresh SQLite file (a Network, a /16 root Prefix) and drives
it with ``--clients`` keep-alive HTTP connections (the lean client of ``bench/apiserver.py``), each
sending one request at a time. Phases:

- ``allocate``: NetworkInterface creates, each allocating an ephemeral address and a MAC from the /16
  (the apiserver's controller also writes the ``<nic>-0`` Prefix and the parent's ``status.used``
  meanwhile, as it does in use);
- ``literal``: creates with literal addresses (checked for uniqueness, nothing allocated from a prefix);
- ``release``: deletes of half the allocated NICs; ``reallocate``: as many creates again, into the
  holes they left;
- ``baseline_create``: Secret creates, the same write path without IPAM, for comparison;
- ``machine_to_nic``: a Machine with one ephemeral NIC template, one at a time: POST until its
  NetworkInterface exists with its address (the control-plane part of create -> SSH reachable).

Prints one JSON line; rates are per second, latencies in ms, ``server_cpu_us`` is the apiserver's CPU
time per request.

    .venv/bin/python bench/ipam.py [--clients 8] [--nics 5000] [--machines 50]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx

NETWORKING = "/apis/networking.ironcore.dev/v1alpha1/namespaces/default"
NICS = f"{NETWORKING}/networkinterfaces"
PREFIXES = "/apis/ipam.ironcore.dev/v1alpha1/namespaces/default/prefixes"
MACHINES = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"
SECRETS = "/api/v1/namespaces/default/secrets"


def _sibling(name: str) -> ModuleType:
    """A module beside this file (the HTTP client and phase runner of bench/apiserver.py)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it is executing
    spec.loader.exec_module(module)
    return module


apiserver = _sibling("apiserver")


def nic(name: str, ip: dict[str, object]) -> bytes:
    return json.dumps({"metadata": {"name": name}, "spec": {
        "networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"], "ips": [ip]}}).encode()


EPHEMERAL = {"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "lab-v4"}}}}}


def literal(i: int) -> dict[str, object]:
    return {"value": f"10.99.{i // 250}.{i % 250 + 1}"}  # outside the /16: no prefix involved


async def machine_to_nic(url: str, token: str, count: int) -> dict[str, float]:
    """Machine POST -> its ephemeral NIC readable with an address, one Machine at a time."""
    template = {"spec": {"networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"], "ips": [EPHEMERAL]}}
    lags: list[float] = []
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
        for i in range(count):
            name = f"vm{i:05d}"
            nics = [{"name": "primary", "ephemeral": {"networkInterfaceTemplate": template}}]
            body = {"metadata": {"name": name},
                    "spec": {"machineClassRef": {"name": "small"}, "networkInterfaces": nics}}
            t0 = time.perf_counter()
            (await c.post(MACHINES, json=body)).raise_for_status()
            while True:
                r = await c.get(f"{NICS}/{name}-primary")
                if r.status_code == 200 and r.json().get("status", {}).get("ips"):
                    break
                if time.perf_counter() - t0 > 30:
                    raise SystemExit(f"machine {name}: no NetworkInterface {name}-primary after 30 s")
                await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t0)
    return {"p50_ms": round(apiserver.pct(lags, 0.5), 2), "p99_ms": round(apiserver.pct(lags, 0.99), 2),
            "n": count}


async def bench(args: argparse.Namespace, url: str, target: Any) -> dict[str, object]:
    clients, n, token = args.clients, args.nics, target.token
    result: dict[str, object] = {"clients": clients, "store": "sqlite", "cores": os.cpu_count(),
                                 "prefix": "10.0.0.0/16"}
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
        for path, body in ((f"{NETWORKING}/networks", {"metadata": {"name": "lab"}}),
                           (PREFIXES, {"metadata": {"name": "lab-v4"}, "spec": {"prefix": "10.0.0.0/16"}}),
                           ("/apis/compute.ironcore.dev/v1alpha1/machineclasses",
                            {"metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}})):
            (await c.post(path, json=body)).raise_for_status()

    def phase(total: int, make: Callable[[int], tuple[str, str, bytes]], expect: int) -> Any:
        return apiserver.run_phase(target, clients, total, make, expect)

    result["allocate"] = await phase(n, lambda i: ("POST", NICS, nic(f"e{i:06d}", EPHEMERAL)), 201)
    result["literal"] = await phase(n, lambda i: ("POST", NICS, nic(f"l{i:06d}", literal(i))), 201)
    result["release"] = await phase(n // 2, lambda i: ("DELETE", f"{NICS}/e{2 * i:06d}", b""), 200)
    result["reallocate"] = await phase(n // 2, lambda i: ("POST", NICS, nic(f"r{i:06d}", EPHEMERAL)), 201)

    def secret(i: int) -> bytes:
        body = {"metadata": {"name": f"s{i:06d}"}, "type": "Opaque", "data": {"k": "YQ=="}}
        return json.dumps(body).encode()

    result["baseline_create"] = await phase(n, lambda i: ("POST", SECRETS, secret(i)), 201)
    result["machine_to_nic"] = await machine_to_nic(url, token, args.machines)
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
        nics = (await c.get(NICS)).json()["items"]
        ips = [i["status"]["ips"][0] for i in nics]
        assert len(ips) == 2 * n + args.machines, f"{len(ips)} NICs, expected {2 * n + args.machines}"
        assert len(set(ips)) == len(ips), "an address was handed out twice"
    result["distinct_addresses"] = len(ips)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--nics", type=int, default=5000)
    parser.add_argument("--machines", type=int, default=50)
    args = parser.parse_args()
    with apiserver.serving() as (url, target):
        result = asyncio.run(bench(args, url, target))
    result["note"] = "load generator is a separate process on the same cores as the apiserver"
    print(json.dumps(result))

if __name__ == "__main__":
    main()
