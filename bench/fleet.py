#!/usr/bin/env python3
"""Fleet health benchmark: what a heartbeat costs, and what a pool lifecycle pass costs; one JSON line.

    python bench/fleet.py [--pools 1000] [--beats 2000] [--clients 16]

On an ``ironpool apiserver`` (SQLite) with ``--pools`` MachinePools that each carry a realistic
status (conditions, 20 classes, capacity, allocatable), it measures, interleaved A B A B:

- ``lease``: a poollet heartbeat as it is now, ``PoolHeartbeat.renew_once`` (an update of the pool's
  Lease, a few hundred bytes);
- ``status``: the heartbeat as it was, a merge patch of the pool's whole status with a new
  ``lastUpdateTime``;

each as renewals per second with ``--clients`` concurrent heartbeating pools, and the apiserver's CPU
time per renewal (``server_cpu_us``, steadier than rates on a shared machine). Then it starts the pool
lifecycle controller's informers on the same apiserver and times ``monitor_once`` over every pool
(all healthy: nothing is written), the controller's CPU per pass.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from ironpool.api import MachinePool
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.fleet.lifecycle import LifecycleOptions, PoolLifecycleController
from ironpool.poollet.heartbeat import LEASES, PoolHeartbeat

MP = resource_for_model(MachinePool)


def load_apiserver_bench() -> ModuleType:
    """``bench/apiserver.py`` (its apiserver process and CPU accounting), beside this script."""
    path = Path(__file__).resolve().parent / "apiserver.py"
    spec = importlib.util.spec_from_file_location("bench_apiserver", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def pool_status(stamp: str) -> dict[str, Any]:
    classes = [{"name": f"class-{i}"} for i in range(20)]
    since = "2026-01-01T00:00:00Z"
    return {"state": "Ready", "availableMachineClasses": classes,
            "conditions": [{"type": "Ready", "status": "True", "reason": "HeartbeatReceived",
                            "message": "machine runtime status probe succeeded",
                            "lastTransitionTime": since, "lastUpdateTime": stamp},
                           {"type": "GarbageCollection", "status": "True", "reason": "Clean",
                            "message": "0 collected since start", "lastTransitionTime": since}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "capacity": {"cpu": "64", "memory": "256Gi",
                         **{f"class/machine.class-{i}": "8" for i in range(20)}},
            "allocatable": {"cpu": "60", "memory": "240Gi",
                            **{f"class/machine.class-{i}": "7" for i in range(20)}}}


async def phase(kind: str, client: AsyncClient, pools: list[str], beats: int, clients: int, pid: int,
                cpu_seconds: Any, hearts: dict[str, PoolHeartbeat]) -> dict[str, float]:
    todo = iter(range(beats))

    async def worker(w: int) -> None:
        for i in todo:
            pool = pools[(i * clients + w) % len(pools)]
            if kind == "lease":
                await hearts[pool].renew_once()
            else:
                stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) + str(i)[-1:]
                await client.patch_raw(MP, pool, {"status": pool_status(stamp[:20])}, subresource="status")

    start, cpu = time.perf_counter(), cpu_seconds(pid)
    await asyncio.gather(*(worker(w) for w in range(clients)))
    elapsed, used = time.perf_counter() - start, cpu_seconds(pid) - cpu
    return {"per_s": round(beats / elapsed, 1), "server_cpu_us": round(used / beats * 1e6, 1), "n": beats}


async def run(args: argparse.Namespace, url: str, token: str, pid: int, cpu_seconds: Any) -> dict[str, Any]:
    client = AsyncClient(ClientConfig(server=url, token=token))
    pools = [f"pool-{i:05d}" for i in range(args.pools)]
    sem = asyncio.Semaphore(32)

    async def make(name: str) -> None:
        async with sem:
            await client.create_raw(MP, {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachinePool",
                                         "metadata": {"name": name}, "spec": {}})
            await client.patch_raw(MP, name, {"status": pool_status("2026-01-01T00:00:00Z")},
                                   subresource="status")

    await asyncio.gather(*(make(p) for p in pools))
    hearts = {p: PoolHeartbeat(client, "MachinePool", p, p) for p in pools}

    async def first_beat(h: PoolHeartbeat) -> None:
        async with sem:
            await h.renew_once()

    await asyncio.gather(*(first_beat(h) for h in hearts.values()))  # each pool's Lease exists
    runs: dict[str, list[dict[str, float]]] = {"lease": [], "status": []}
    for kind in ("lease", "status", "lease", "status"):
        runs[kind].append(await phase(kind, client, pools, args.beats // 2, args.clients, pid, cpu_seconds,
                                      hearts))
    result: dict[str, Any] = {}
    for kind, rs in runs.items():
        result[kind] = {"per_s": round(sum(r["per_s"] for r in rs) / len(rs), 1),
                        "server_cpu_us": round(sum(r["server_cpu_us"] for r in rs) / len(rs), 1)}
    lease = await client.get_raw(LEASES, pools[0], hearts[pools[0]].namespace)
    result["lease"]["body_bytes"] = len(json.dumps(lease))
    result["status"]["body_bytes"] = len(json.dumps({"status": pool_status("2026-01-01T00:00:00Z")}))

    controller = PoolLifecycleController(client, LifecycleOptions(grace=3600, monitor_period=3600))
    for inf in controller.informers():
        inf.start()
    await asyncio.gather(*(inf.wait_for_sync(120) for inf in controller.informers()))
    passes = []
    for _ in range(5):
        cpu, start = time.process_time(), time.perf_counter()
        report = await controller.monitor_once()
        passes.append((time.perf_counter() - start, time.process_time() - cpu))
        assert not (report.unknown or report.tainted or report.evicted), report
    for inf in controller.informers():
        await inf.stop()
    await client.aclose()
    best = min(passes)
    result["monitor_pass"] = {"pools": args.pools, "ms": round(best[0] * 1000, 2),
                              "cpu_ms": round(min(p[1] for p in passes) * 1000, 2)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pools", type=int, default=1000)
    parser.add_argument("--beats", type=int, default=2000, help="renewals per kind (split in two runs)")
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    bench = load_apiserver_bench()
    with bench.serving() as (url, target):
        result = asyncio.run(run(args, url, target.token, target.pid, bench.cpu_seconds))
    print(json.dumps({"bench": "fleet", "pools": args.pools, "clients": args.clients,
                      "cores": os.cpu_count(), **result}))


if __name__ == "__main__":
    sys.exit(main())
