#!/usr/bin/env python3
"""Web console benchmark: how long the fleet page takes to render in a real browser with thousands of
pools, and how smooth it stays while they change; prints one JSON line.

    python bench/ui_fleet.py [--pools 5000] [--volume-pools 0] [--loads 5] [--churn-seconds 10]
                             [--churn-rate 200] [--seed 1]

It starts ``ironpool apiserver`` on SQLite (bench/scheduler.py's), makes ``--pools`` MachinePools from
the scheduler benchmark's seeded workload (bench/workload.py: three host sizes in three zones, each
pool with its capacity and classes) with a seeded share of each already allocated, a few cordoned and
a few not ready, plus ``--volume-pools`` VolumePools. Then headless Chromium (Debian's ``chromium``
and ``chromium-driver``, through selenium) signs in and loads ``/ui/#/fleet`` ``--loads`` times:

- ``render_ms``: from the start of navigation until the page has drawn every pool (the heat map and
  the tables, after both lists and their first frame: ``window.ipFleetRenderedAt``), median and max;
- while ``--churn-rate`` pools a second change their allocatable for ``--churn-seconds`` (status
  patches, so the page's watches deliver them), the gaps between animation frames in the browser
  (``frame_gap_ms`` p50/p99/max) and the long tasks (> 50 ms) the page ran; afterwards it checks that
  the rows shown carry each changed pool's last allocatable (the watches missed nothing);
- ``load_avg``: the machine's 1/5/15-minute load averages at the end (figures from a busy machine
  are slower than its idle ones).

The page loads the pools as Tables of their printer columns (``Accept: application/json;as=Table;
v=v1;g=meta.k8s.io`` with ``includeObject=None``, as kubectl asks): the first load of every run is
also the apiserver's first rendering of those rows.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
UNSCHEDULABLE = "pool.ironpool.dev/unschedulable"


def _load(name: str) -> ModuleType:
    path = HERE / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def machine_pools(sched: ModuleType, workload: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """The workload's hosts as MachinePools, a seeded share of each allocated, 1% cordoned, 1% not ready."""
    names = sorted(workload["classes"])
    pools = []
    for host in workload["hosts"]:
        doc = sched.pool_doc(host, names)
        used = rng.random()
        doc["status"]["allocatable"] = {"cpu": str(int(host["vcpu"] * (1 - used))),
                                        "memory": f"{int(host['memory_mib'] * (1 - used))}Mi"}
        if rng.random() < 0.01:
            doc["spec"]["taints"] = [{"key": UNSCHEDULABLE, "effect": "NoSchedule"}]
        if rng.random() < 0.01:
            doc["status"]["state"] = "Offline"
        pools.append(doc)
    return pools


def volume_pool(i: int, rng: random.Random) -> dict[str, Any]:
    total = 4000
    return {"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "VolumePool",
            "metadata": {"name": f"vpool-{i:05d}"}, "spec": {},
            "status": {"state": "Available", "availableVolumeClasses": [{"name": "standard"}],
                       "capacity": {"storage": f"{total}Gi"},
                       "allocatable": {"storage": f"{int(total * (1 - rng.random()))}Gi"}}}


async def make_pools(url: str, token: str, docs: list[dict[str, Any]], concurrency: int = 16) -> None:
    from ironpool.api import MachinePool, VolumePool
    from ironpool.client.config import ClientConfig
    from ironpool.client.rest import AsyncClient
    from ironpool.client.wire import resource_for_model

    kinds = {"MachinePool": resource_for_model(MachinePool), "VolumePool": resource_for_model(VolumePool)}
    sem = asyncio.Semaphore(concurrency)

    async def make(doc: dict[str, Any]) -> None:
        async with sem:
            doc = dict(doc)
            status = doc.pop("status")
            await client.create_raw(kinds[doc["kind"]], doc)
            await client.patch_raw(kinds[doc["kind"]], doc["metadata"]["name"], {"status": status},
                                   subresource="status")

    async with AsyncClient(ClientConfig(server=url, token=token)) as client:
        await asyncio.gather(*(make(d) for d in docs))


async def churn(url: str, token: str, pools: list[dict[str, Any]], rate: int, seconds: float,
                rng: random.Random) -> tuple[int, dict[str, int]]:
    """Change ``rate`` pools' allocatable a second for ``seconds``; how many patches were made, and
    each changed pool's last allocatable cpu."""
    from ironpool.api import MachinePool
    from ironpool.client.config import ClientConfig
    from ironpool.client.rest import AsyncClient
    from ironpool.client.wire import resource_for_model

    mp = resource_for_model(MachinePool)
    done, last = 0, {}
    async with AsyncClient(ClientConfig(server=url, token=token)) as client:

        async def patch(doc: dict[str, Any]) -> None:
            cap = doc["status"]["capacity"]
            used = rng.random()
            alloc = {"cpu": str(int(int(cap["cpu"]) * (1 - used))),
                     "memory": f"{int(int(cap['memory'][:-2]) * (1 - used))}Mi"}
            last[doc["metadata"]["name"]] = int(alloc["cpu"])
            await client.patch_raw(mp, doc["metadata"]["name"], {"status": {"allocatable": alloc}},
                                   subresource="status")

        end = time.monotonic() + seconds
        while time.monotonic() < end:
            tick = time.monotonic()
            batch = rng.sample(pools, min(rate, len(pools)))
            await asyncio.gather(*(patch(d) for d in batch))
            done += len(batch)
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    return done, last


def wait_js(driver: Any, script: str, timeout: float, *args: Any) -> Any:
    deadline = time.monotonic() + timeout
    while (value := driver.execute_script(script, *args)) is None:
        if time.monotonic() > deadline:
            page = driver.execute_script("return document.getElementById('main').innerText")[:1000]
            raise SystemExit(f"the page did not answer {script!r} within {timeout}s; it shows: {page}")
        time.sleep(0.02)
    return value


FRAMES_JS = """
window.ipGaps = []; window.ipLong = [];
new PerformanceObserver((l) => l.getEntries().forEach((e) => window.ipLong.push(e.duration)))
  .observe({type: "longtask", buffered: false});
let last = performance.now();
(function tick(now) { window.ipGaps.push(now - last); last = now; requestAnimationFrame(tick); })(last);
"""

LIVE_JS = """
const last = arguments[0];
const rows = [...document.querySelectorAll('#machinepools tbody tr[data-pool]')];
const shows = (text, cpu) => (cpu === 0 ? text.includes("none offered") : text.includes(` of ${cpu} core`));
const stale = rows.filter((r) => r.dataset.pool in last
  && !shows(r.cells[2].innerText, last[r.dataset.pool]));
return rows.length && !stale.length ? true : null;
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", type=int, default=5000)
    ap.add_argument("--volume-pools", type=int, default=0)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--churn-seconds", type=float, default=10.0)
    ap.add_argument("--churn-rate", type=int, default=200, help="pools changed per second")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    sched, wl = _load("scheduler"), _load("workload")
    rng = random.Random(args.seed)
    workload = wl.generate(args.pools, 0, args.seed)
    pools = machine_pools(sched, workload, rng)
    docs = pools + [volume_pool(i, rng) for i in range(args.volume_pools)]
    tmp = Path(tempfile.mkdtemp(prefix="ironpool-ui-bench-"))
    proc, url, token_file = sched._start_apiserver(tmp)
    token = token_file.read_text().split(",")[0]
    sys.path.insert(0, str(HERE.parent))
    from tests.helpers.browser import headless_chromium

    try:
        t0 = time.perf_counter()
        asyncio.run(make_pools(url, token, docs))
        made_s = time.perf_counter() - t0
        with headless_chromium() as driver:
            measured = measure(driver, url, token, pools, len(docs), args, rng, wl)
        print(json.dumps({"pools": len(docs), "machine_pools": len(pools), "volume_pools": args.volume_pools,
                          "pools_made_s": round(made_s, 1), **measured,
                          "load_avg": [round(x, 2) for x in os.getloadavg()]}))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


def measure(driver: Any, url: str, token: str, pools: list[dict[str, Any]], total: int,
            args: argparse.Namespace, rng: random.Random, wl: ModuleType) -> dict[str, Any]:
    """Load the fleet page ``args.loads`` times, then watch its frames while pools change."""
    driver.get(f"{url}/ui/")
    # Signed in as the login page would: once it shows (its own check of no token is over), the token
    # is kept for the tab and every page load after uses it.
    wait_js(driver, "return document.getElementById('token') ? true : null", 30)
    driver.execute_script("sessionStorage.setItem('ironpool.token', arguments[0])", token)
    renders = []
    for _ in range(args.loads):
        driver.get(f"{url}/ui/?{time.monotonic_ns()}#/fleet")  # a fresh document each time
        renders.append(wait_js(driver, "return window.ipFleetRenderedAt || null", 60))
        shown = driver.execute_script("return Number(document.getElementById('heat').dataset.count)")
        if shown != total:
            raise SystemExit(f"the heat map shows {shown} pools, not {total}")
    driver.execute_script(FRAMES_JS)
    patched, last = asyncio.run(churn(url, token, pools, args.churn_rate, args.churn_seconds, rng))
    gaps = sorted(driver.execute_script("return window.ipGaps.slice(1)"))
    long_tasks = driver.execute_script("return window.ipLong")
    # The watches carried every change: the rows shown (the first by name) end with each changed
    # pool's last allocatable.
    wait_js(driver, LIVE_JS, 30, last)
    return {
        "render_ms": {"median": round(statistics.median(renders)), "max": round(max(renders)),
                      "all": [round(r) for r in renders]},
        "churn": {"pools_changed": patched, "seconds": args.churn_seconds,
                  "frame_gap_ms": {"p50": round(wl.percentile(gaps, 0.50) or 0, 1),
                                   "p99": round(wl.percentile(gaps, 0.99) or 0, 1),
                                   "max": round(max(gaps, default=0), 1)},
                  "long_tasks": len(long_tasks), "long_task_ms_max": round(max(long_tasks, default=0), 1)},
    }


if __name__ == "__main__":
    main()
